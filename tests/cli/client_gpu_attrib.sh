#!/usr/bin/env bash
# The read-only attribution probe (bench/gpu_attrib.c) on the fake drivers set up as the H100 was
# probed (an energy counter refreshed every 100 ms, 3 ms a read). The fake GPU draws one power for
# every kernel, 0.8 times that for a memset, and the preset's blocking power between them, at the
# model's instants whatever the machine's load: exactly the linear model the client fits, so each
# fitted power must meet its steady reference within its own figure: 2 % for the two kinds of
# work (20 % apart: a mix-up shows), 5 % for the blocked power, or 4 standard errors of the fit
# where the run measured a wider one (fewer usable readings on a loaded machine). It must change
# no clock, and bad usage is refused with status 2.
set -euo pipefail
source "$(dirname "$0")/lib.bash"
bin="${PRS_BIN_DIR:?}"
[[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || skip_input "no fake driver"
probe="$bin/bench/gpu_attrib"
[[ -x $probe ]] || skip_input "no $probe (benchmarks not built)"
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-gpu-attrib-XXXXXX")
trap 'rm -rf "$dir"' EXIT
export PRS_FAKE_GPU_DIR=$dir PRS_FAKE_NVML_REFRESH_MS=100 PRS_FAKE_NVML_READ_MS=3
export PRS_NVML_LIBRARY=$PRS_FAKE_NVML PRS_FAKE_NVML_STATE=$dir/clocks
# "fit-steady" and the standard error in percent of the steady power, on the first row named
# what (the first fit: as the client fits).
row() { sed -n "s/^  $1  *\([0-9.]*\) W  *[0-9.]* W  *\([0-9.]*\) W  *\([-+][0-9.]*\) %$/\1 \2 \3/p" "$dir/out" | head -1; }
"$probe" --cuda "$PRS_FAKE_CUDA" --seconds 8 --ref-seconds 1.5 --mib 4096 >"$dir/out" 2>&1 || {
  cat "$dir/out"
  echo "FAIL: gpu_attrib exited with an error"
  exit 1
}
cat "$dir/out"
for name in "fma" "memset" "blocked"; do
  base=2
  [[ $name == blocked ]] && base=5
  read -r st se g <<<"$(row "$name")"
  [[ -n ${g:-} ]] || { echo "FAIL: no row for $name"; exit 1; }
  limit=$(awk -v b="$base" -v st="$st" -v se="$se" 'BEGIN { l = 400 * se / st; printf "%.2f", (l > b ? l : b) }')
  awk -v x="$g" -v m="$limit" 'BEGIN { exit !(x >= -m && x <= m) }' ||
    { echo "FAIL: $name fitted $g % off its steady power (limit $limit %: $base % or 4 standard errors)"; exit 1; }
  echo "$name: fitted $g % off its steady power (limit $limit %)"
done
steady() { sed -n "s/^  $1  *\([0-9.]*\) W .*/\1/p" "$dir/out" | head -1; }
awk -v f="$(steady fma)" -v m="$(steady memset)" 'BEGIN { exit !(m / f > 0.78 && m / f < 0.82) }' ||
  { echo "FAIL: steady memset $(steady memset) W, fma $(steady fma) W: not 0.8 apart"; exit 1; }
period=$(sed -n 's/.*refresh fit period \([0-9.]*\) ms.*/\1/p' "$dir/out")
awk -v p="$period" 'BEGIN { exit !(p >= 99.5 && p <= 100.5) }' || { echo "FAIL: period $period"; exit 1; }
grep -q "fit with the first 1.0 ms apart: " "$dir/out"
[[ ! -e $dir/clocks ]] || { echo "FAIL: the probe changed a clock: $(cat "$dir/clocks")"; exit 1; }

# Energy read on one GPU, work on another: refused, naming the GPU to read.
mkdir -p "$dir/two"
rc=0
PRS_FAKE_GPU_DIR=$dir/two PRS_FAKE_NVML_DEVICES=2 "$probe" --cuda "$PRS_FAKE_CUDA" --gpu nvml:1 \
  --seconds 1 --ref-seconds 1 >"$dir/two.out" 2>&1 || rc=$?
if ((rc != 1)) || ! grep -q "is not CUDA device 0's (GPU-.*): use --gpu nvml:uuid=GPU-" "$dir/two.out"; then
  cat "$dir/two.out"
  echo "FAIL: a counter of another GPU was not refused (exit $rc)"
  exit 1
fi

for bad in "--seconds 0" "--min-ms 5 --max-ms 2" "--head-ms 3" "--bogus 1" "--seed" \
  "--seed -1" "--mib 4294967297"; do
  rc=0
  # shellcheck disable=SC2086
  "$probe" $bad >/dev/null 2>"$dir/err" || rc=$?
  ((rc == 2)) || { echo "FAIL: '$bad' exited $rc, not 2"; exit 1; }
  grep -q "usage: gpu_attrib" "$dir/err"
done
echo "gpu_attrib: ok"
