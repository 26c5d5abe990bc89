#!/usr/bin/env bash
# The stream-path hook benchmark (bench/bench_stream_hooks.c) runs and meets its target: median
# begin + end, a clock change requested before every computation, under 2 us. Sanitizer builds
# only check that it runs (their slowdown is not the hooks').
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
[[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || { echo "no fake driver"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-bench-hooks-XXXXXX")
trap 'rm -rf "$dir"' EXIT
rc=0
PRS_FAKE_GPU_DIR=$dir "$bin/bench/bench_stream_hooks" 2000 "$PRS_FAKE_CUDA" "$PRS_FAKE_NVML" \
  >"$dir/out" 2>&1 || rc=$?
cat "$dir/out"
grep -q "clock failures 0" "$dir/out"
grep -q "^target: median begin + end < 2 us" "$dir/out"
if grep -q 'libasan\|libubsan' <<<"$(ldd "$bin/bench/bench_stream_hooks")"; then exit 0; fi
exit "$rc"
