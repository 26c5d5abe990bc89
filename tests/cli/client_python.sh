#!/usr/bin/env bash
# The Python package (python/perseus, ctypes) end to end: perseusd + 4 sim ranks through
# profiling -> planning -> running (python/tests/e2e_sim.py). Skipped (77) without /usr/bin/python3
# or when libperseus.so is built with the sanitizers (Python would need libasan preloaded).
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
py=/usr/bin/python3
[[ -x $py ]] || { echo "no $py"; exit 77; }
[[ -f $bin/libperseus.so ]] || { echo "no libperseus.so"; exit 77; }
# ldd's output is taken whole before grep looks at it: with pipefail, `ldd | grep -q` fails
# whenever grep exits on the match before ldd has finished writing (SIGPIPE).
if grep -q 'libasan\|libubsan' <<<"$(ldd "$bin/libperseus.so")"; then echo "sanitizer build"; exit 77; fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-client-py-XXXXXX")
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
"$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$dir" --port-file "$dir/port" \
  2>"$dir/perseusd.log" &
pid=$!
for _ in $(seq 300); do [[ -s $dir/port ]] && break; sleep 0.05; done
[[ -s $dir/port ]] || { echo "perseusd did not start"; cat "$dir/perseusd.log"; exit 1; }
PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" timeout 120 "$py" "$src/python/tests/e2e_sim.py" \
  "http://127.0.0.1:$(cat "$dir/port")"
