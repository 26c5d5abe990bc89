#!/usr/bin/env bash
# Python: Client(stream="auto") takes the stream from torch.cuda.current_stream() of a stand-in
# torch package on the fake CUDA driver and NVML (python/tests/torch_auto.py). Skipped (77)
# without /usr/bin/python3, the fakes, or with a sanitizer build.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
[[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || skip_input "no fake driver"
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-client-torch-auto-XXXXXX")
trap 'rm -rf "$dir"' EXIT
PRS_FAKE_GPU_DIR="$dir" PRS_FAKE_NVML_DEVICES=2 PRS_FAKE_GPU_COUNT=2 PRS_FAKE_NVML_REFRESH_MS=10 \
  PRS_NVML_LIBRARY="$PRS_FAKE_NVML" PYTHONDONTWRITEBYTECODE=1 \
  PERSEUS_LIBRARY="$bin/libperseus.so" timeout 120 "$py" "$src/python/tests/torch_auto.py" \
  "$PRS_FAKE_CUDA"
