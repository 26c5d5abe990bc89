#!/usr/bin/env bash
# The Python package (python/perseus, ctypes) end to end: perseusd + 4 sim ranks through
# profiling -> planning -> running (python/tests/e2e_sim.py). Skipped (77) without /usr/bin/python3
# or when libperseus.so is built with the sanitizers (Python would need libasan preloaded).
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-client-py-XXXXXX")
start_perseusd "$dir"
PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" timeout 120 "$py" "$src/python/tests/e2e_sim.py" \
  "$url"
