#!/usr/bin/env bash
# First contact with a GPU, read-only: builds what it needs from this tree, then runs the
# measurement path against the GPU and writes one report (OUT/report.md, OUT/report.json):
#
#   probe    bench/gpu_probe: driver and GPU, the energy counter's refresh interval and read
#            cost, the power reading's interval, the client's sampler, CUDA event and
#            host-function costs
#   attrib   bench/gpu_attrib: the client's attribution of its own kernels against steady powers
#   stream   scripts/gpu_check_stream.py: the client measure-only on PyTorch's CUDA stream (hook
#            costs, a small model's forward/backward, matrix products and copies of known
#            duration against the energy counter over long windows)
#   power    scripts/gpu_check_power.py: which average NVML's power reading is (set against the
#            energy counter), and the SM clock at the default clock under bursts of matrix
#            products, one of them long enough to meet the power limit
#
# It changes no setting of the GPU: no clock, no power limit (nvidia-smi is only queried). On a
# GPU machine it takes about 4 minutes. Where the machine lacks jansson, cminpack, libmicrohttpd
# or SQLite development files, give it the folder scripts/gpu-sysroot.sh makes
# (PRS_GPU_SYSROOT, default build-gpu-sysroot when present); when the build fails there, its
# prebuilt programs are used.
#
# With --fake BIN_DIR it runs on the tests' fake drivers ($PRS_FAKE_CUDA, $PRS_FAKE_NVML, the
# programs and libperseus.so of BIN_DIR), the stream section on the fake CUDA driver through
# ctypes, all of it shorter (tests/cli/client_gpu_check.sh).
#
# --short halves the sections (about 2.5 minutes with the build), for a machine lent briefly.
#
# usage: scripts/gpu-check.sh [--out DIR] [--fake BIN_DIR] [--short]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/out-gpu-check
fake='' short=''
while (($#)); do
  case $1 in
  --out) out=$2; shift 2 ;;
  --fake) fake=$2; shift 2 ;;
  --short) short=1; shift ;;
  *) echo "usage: scripts/gpu-check.sh [--out DIR] [--fake BIN_DIR] [--short]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
declare -A status
t_start=$(date +%s)
log() { echo "gpu-check: $* ($(($(date +%s) - t_start)) s)"; }

# ---- what runs where ----
if [[ -n $fake ]]; then
  [[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || { echo "--fake needs PRS_FAKE_CUDA and PRS_FAKE_NVML" >&2; exit 2; }
  bin=$fake
  cuda=(--cuda "$PRS_FAKE_CUDA")
  export PRS_NVML_LIBRARY=$PRS_FAKE_NVML
  py=${PRS_PYTHON:-/usr/bin/python3}
  probe_args=(--seconds 3 --reps 80 --mib 1024)
  attrib_args=(--seconds 8 --ref-seconds 1.5 --mib 4096)
  stream_args=(--fake "$PRS_FAKE_CUDA" --seconds 30 --ref-seconds 2 --model-seconds 6)
  power_args=(--nvml "$PRS_FAKE_NVML" --seconds 2 --no-load)
  mode="fake drivers"
else
  sysroot=${PRS_GPU_SYSROOT:-$root/build-gpu-sysroot}
  if [[ -d $sysroot ]]; then
    export PKG_CONFIG_PATH=$sysroot/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LD_LIBRARY_PATH=$sysroot/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  bin=$root/build-gpu-check
  build() {
    cmake -S "$root" -B "$bin" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPRS_BUILD_TESTS=OFF \
      -DPRS_BUILD_FUZZ=OFF >"$out/build.log" 2>&1 &&
      nice cmake --build "$bin" --target perseus_shared gpu_probe gpu_attrib -j"$1" \
        >>"$out/build.log" 2>&1
  }
  log "building in $bin"
  if [[ -n $short && -x ${sysroot:-}/prebuilt/bench/gpu_probe ]]; then
    # Short: the sections run the prebuilt programs while the build is checked beside them.
    (build 4 && echo ok >"$out/build.status" || echo "failed (build.log)" >"$out/build.status") &
    build_pid=$!
    bin=$sysroot/prebuilt
    status[build]="prebuilt programs used; the build beside them: see build.status"
  elif build "$(nproc)"; then
    status[build]=ok
  elif [[ -x ${sysroot:-}/prebuilt/bench/gpu_probe ]]; then
    status[build]="failed (build.log): prebuilt programs used"
    bin=$sysroot/prebuilt
  else
    status[build]="failed (build.log)"
  fi
  [[ -f $out/build.log ]] && tail -3 "$out/build.log"
  cuda=()
  py=${PRS_PYTHON:-python3}
  probe_args=(--seconds 5 --reps 300 --mib 1024)
  attrib_args=(--seconds 30 --ref-seconds 3 --min-ms 20 --max-ms 100 --head-ms 10)
  stream_args=(--seconds 60 --ref-seconds 4 --model-seconds 20)
  power_args=(--seconds 10)
  mode="NVIDIA driver"
  if [[ -n $short ]]; then # about 2.5 minutes with the build
    probe_args=(--seconds 3 --reps 100 --mib 1024)
    attrib_args=(--seconds 15 --ref-seconds 2 --min-ms 20 --max-ms 100 --head-ms 10)
    stream_args=(--seconds 25 --ref-seconds 3 --model-seconds 8)
    power_args=(--seconds 6)
    mode="NVIDIA driver, short"
  fi
fi
export PERSEUS_LIBRARY=$bin/libperseus.so

smi() { # read-only queries
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.applications.graphics,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active \
    --format=csv 2>/dev/null || nvidia-smi 2>/dev/null | head -15
}
smi >"$out/smi-before.txt"

# ---- sections; each bounded, a failure is reported and the next runs ----
run() { # name limit_s command...
  local name=$1 limit=$2
  shift 2
  log "$name"
  timeout -k 10 "$limit" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  status[$name]=$([[ $rc == 0 ]] && echo ok || echo "exit $rc")
  tail -4 "$out/$name.txt"
}
run probe 120 "$bin/bench/gpu_probe" "${cuda[@]}" "${probe_args[@]}"
run attrib 120 "$bin/bench/gpu_attrib" "${cuda[@]}" "${attrib_args[@]}"
run stream 240 "$py" "$root/scripts/gpu_check_stream.py" "${stream_args[@]}" --json \
  "$out/stream.json"
run power 60 "$py" "$root/scripts/gpu_check_power.py" "${power_args[@]}" --json "$out/power.json" \
  --raw "$out/power.csv"
smi >"$out/smi-after.txt"
if [[ -n ${build_pid:-} ]]; then
  wait "$build_pid"
  status[build]="prebuilt programs used; the build beside them: $(cat "$out/build.status")"
fi

# ---- the report ----
driver='' gpu=''
if [[ -s $out/smi-before.txt ]] && grep -q driver_version "$out/smi-before.txt"; then
  IFS=, read -r gpu driver _ < <(sed -n 2p "$out/smi-before.txt")
  driver=${driver# }
fi
{
  printf '{"mode": "%s", "date": "%s", "gpu": "%s", "driver": "%s", "wall_s": %d, "status": {' \
    "$mode" "$(date -u +%Y-%m-%dT%H:%MZ)" "$gpu" "$driver" "$(($(date +%s) - t_start))"
  sep=
  for k in build probe attrib stream power; do
    [[ -n ${status[$k]:-} ]] || continue
    printf '%s"%s": "%s"' "$sep" "$k" "${status[$k]}"
    sep=", "
  done
  printf '}}\n'
} >"$out/meta.json"
"$py" "$root/scripts/gpu_check_report.py" "$out" || { echo "gpu-check: the report failed" >&2; exit 1; }
log "report: $out/report.md"
for k in probe attrib stream power; do [[ ${status[$k]} == ok ]] || exit 1; done
exit 0
