#!/usr/bin/env bash
# Python: perseus.pipelining.attach on stand-ins for torch.distributed.pipelining's schedules
# (python/tests/pipelining_standin.py). Skipped (77) without /usr/bin/python3 or with a sanitizer
# build.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" timeout 60 "$py" \
  "$src/python/tests/pipelining_standin.py"
