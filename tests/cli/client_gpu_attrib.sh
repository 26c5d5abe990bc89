#!/usr/bin/env bash
# The read-only attribution probe (bench/gpu_attrib.c) on the fake drivers set up as the H100 was
# probed (an energy counter refreshed every 100 ms, 3 ms a read). The fake GPU draws one power for
# every kernel, 0.8 times that for a memset, and the preset's blocking power between them: exactly
# the linear model the client fits, so the fitted powers must meet the steady references, each
# kind within 2 % (the two kinds 20 % apart: a mix-up shows), the blocked power within 20 % (its
# standard error is some 3 % over 8 s, and the fake dates power changes by thread wake-ups: seen
# off by up to 11 % in 12 runs of 6 s). It must change no clock, and bad usage is refused with
# status 2.
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
# "fit-steady" in percent on the first row named what (the first fit: as the client fits).
gap() { sed -n "s/^  $1  .* \([-+][0-9.]*\) %$/\1/p" "$dir/out" | head -1; }
within() { awk -v x="$1" -v m="$2" 'BEGIN { exit !(x >= -m && x <= m) }'; }
# One run of the probe: exit 1 on a failure of its own, status 3 when only a fitted power misses
# its limit. The fake dates power changes by its threads' wake-ups, which a loaded machine (the
# sanitizer pass of the suite on two cores) delays: seen once in some 30 runs as a memset 8 %
# off. Such a miss is measured again, at most three runs in all; anything else fails at once.
attempt() {
  local rc=0 miss=0
  "$probe" --cuda "$PRS_FAKE_CUDA" --seconds 8 --ref-seconds 1.5 --mib 4096 >"$dir/out" 2>&1 || rc=$?
  cat "$dir/out"
  ((rc == 0)) || { echo "FAIL: gpu_attrib exited $rc"; exit 1; }
  for row in "fma" "memset" "blocked"; do
    limit=2
    [[ $row == blocked ]] && limit=20
    g=$(gap "$row")
    [[ -n $g ]] || { echo "FAIL: no row for $row"; exit 1; }
    within "$g" "$limit" || { echo "MISS: $row fitted $g % off its steady power (limit $limit %)"; miss=1; }
  done
  return $((miss ? 3 : 0))
}
for run in 1 2 3; do
  rc=0
  attempt || rc=$?
  ((rc == 0)) && break
  ((run < 3)) || { echo "FAIL: a fitted power missed its limit in 3 runs"; exit 1; }
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
