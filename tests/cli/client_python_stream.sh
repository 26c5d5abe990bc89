#!/usr/bin/env bash
# The Python package on the device-stream path: perseusd + one rank on the fake CUDA driver and
# NVML (python/tests/stream_fake.py). Skipped (77) without /usr/bin/python3, the fakes,
# or when libperseus.so is built with the sanitizers (Python would need libasan preloaded).
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
[[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || skip_input "no fake driver"
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-client-pystream-XXXXXX")
start_perseusd "$dir"
mkdir "$dir/gpus"
PRS_FAKE_GPU_DIR="$dir/gpus" PRS_FAKE_NVML_REFRESH_MS=10 PRS_FAKE_NVML_NOISE=0.05 \
  PRS_NVML_LIBRARY="$PRS_FAKE_NVML" PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" \
  timeout 180 "$py" "$src/python/tests/stream_fake.py" "$url" \
  "$PRS_FAKE_CUDA"
