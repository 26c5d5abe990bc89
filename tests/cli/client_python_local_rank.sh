#!/usr/bin/env bash
# Python: perseus.local_rank() reads LOCAL_RANK, then SLURM_LOCALID, then
# OMPI_COMM_WORLD_LOCAL_RANK, as the C client does (python/tests/local_rank.py). Skipped (77)
# without /usr/bin/python3 or with a sanitizer build.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" timeout 60 "$py" \
  "$src/python/tests/local_rank.py"
