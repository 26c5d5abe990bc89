#!/usr/bin/env bash
# Python, unprivileged (python/tests/gpud_start.py): with the fake NVML refusing the trainer's
# own clock changes, Client(...) raises PerseusError without perseus-gpud and starts through a
# node daemon started here. Skipped (77) without /usr/bin/python3, the fake NVML, or with a
# sanitizer build of libperseus.so.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
[[ -n ${PRS_FAKE_NVML:-} ]] || { echo "no fake NVML"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-py-gpud-XXXXXX")
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
export PRS_FAKE_GPU_DIR=$dir PRS_NVML_LIBRARY=$PRS_FAKE_NVML
echo "# root only" >"$dir/gpud.conf"
"$bin/perseus-gpud" --socket "$dir/gpud.sock" --state-dir "$dir" --config "$dir/gpud.conf" \
  --log-level info 2>"$dir/gpud.log" &
pid=$!
for _ in $(seq 500); do grep -q "msg=serving" "$dir/gpud.log" && break; sleep 0.01; done
rc=0
PRS_FAKE_NVML_DENY=1 PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" \
  timeout 60 "$py" "$src/python/tests/gpud_start.py" "$dir/gpud.sock" || rc=$?
cat "$dir/gpud.log"
exit "$rc"
