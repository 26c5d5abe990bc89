#!/usr/bin/env bash
# Python: the package checks the library's structure sizes at load and raises ErrorCode values
# (python/tests/abi.py). Skipped (77) without /usr/bin/python3 or with a sanitizer build.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" timeout 60 "$py" \
  "$src/python/tests/abi.py"
