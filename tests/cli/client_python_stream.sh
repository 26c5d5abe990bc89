#!/usr/bin/env bash
# The Python package on the device-stream path: perseusd + one rank on the fake CUDA driver and
# NVML (python/tests/stream_fake.py). Skipped (77) without /usr/bin/python3, the fakes,
# or when libperseus.so is built with the sanitizers (Python would need libasan preloaded).
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
py=/usr/bin/python3
[[ -x $py ]] || { echo "no $py"; exit 77; }
[[ -f $bin/libperseus.so ]] || { echo "no libperseus.so"; exit 77; }
[[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || { echo "no fake driver"; exit 77; }
# ldd's output is taken whole before grep looks at it: with pipefail, `ldd | grep -q` fails
# whenever grep exits on the match before ldd has finished writing (SIGPIPE).
if grep -q 'libasan\|libubsan' <<<"$(ldd "$bin/libperseus.so")"; then echo "sanitizer build"; exit 77; fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-client-pystream-XXXXXX")
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
"$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$dir" --port-file "$dir/port" \
  2>"$dir/perseusd.log" &
pid=$!
for _ in $(seq 300); do [[ -s $dir/port ]] && break; sleep 0.05; done
[[ -s $dir/port ]] || { echo "perseusd did not start"; cat "$dir/perseusd.log"; exit 1; }
mkdir "$dir/gpus"
PRS_FAKE_GPU_DIR="$dir/gpus" PRS_FAKE_NVML_REFRESH_MS=10 PRS_FAKE_NVML_NOISE=0.05 \
  PRS_NVML_LIBRARY="$PRS_FAKE_NVML" PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" \
  timeout 180 "$py" "$src/python/tests/stream_fake.py" "http://127.0.0.1:$(cat "$dir/port")" \
  "$PRS_FAKE_CUDA"
