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
[[ -n ${PRS_FAKE_NVML:-} ]] || skip_input "no fake NVML"
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-py-gpud-XXXXXX")
start_gpud "$dir"
rc=0
PRS_FAKE_NVML_DENY=1 PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" \
  timeout 60 "$py" "$src/python/tests/gpud_start.py" "$gpud_sock" || rc=$?
cat "$dir/gpud.log"
exit "$rc"
