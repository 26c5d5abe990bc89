#!/usr/bin/env bash
# Python: perseus.Monitor (python/tests/monitor_sim.py) on simulated GPUs, checked against the
# blocking power `perseus show-env` reports for them. Skipped (77) without /usr/bin/python3 or with
# a sanitizer build.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
power() {
  "$bin/perseus" show-env --gpus "$1" | sed -n 's/.*idles at its blocking power, \(.*\) W$/\1/p'
}
a100=$(power sim:a100)
h100=$(power sim:h100)
[[ -n $a100 && -n $h100 ]] || fail "show-env gives no blocking power"
PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" timeout 60 "$py" \
  "$src/python/tests/monitor_sim.py" "$a100" "$h100"
