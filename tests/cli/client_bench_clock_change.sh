#!/usr/bin/env bash
# The clock-change benchmark (bench/bench_clock_change.c) runs on the fakes with a private
# perseus-gpud: every kind of iteration completes and no clock change fails. Its figures are a
# report (bench/README.md), not asserted here.
set -euo pipefail
source "$(dirname "$0")/lib.bash"
bin="${PRS_BIN_DIR:?}"
[[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || skip_input "no fake driver"
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-bench-clock-XXXXXX")
trap 'rm -rf "$dir"' EXIT
PRS_FAKE_GPU_DIR=$dir PRS_FAKE_GPU_COUNT=1 "$bin/bench/bench_clock_change" 100 "$PRS_FAKE_CUDA" \
  "$PRS_FAKE_NVML" >"$dir/out" 2>&1
cat "$dir/out"
grep -q "clock failures 0" "$dir/out"
grep -q "^  waiting change  median" "$dir/out"
