#!/usr/bin/env bash
# The emulator's prediction against a live replay (docs/router.md, "Prediction against a live
# replay"): 10 minutes of Azure's conversation trace replayed 5 times faster through
# perseus-router to 8 fake instances (perseus-fakeserve) in 2 pools (4 x TP 2 for the short
# classes, 4 x TP 4 for the long ones, each batching at most 16 requests), first at the highest
# clock, then under the instance level (perseus-instclock on every instance); beside each run,
# what `perseus infer emulate --cluster` predicts for the same slice on the router's own
# configuration. Prints the demo's summary and writes it to OUT (default
# replay-compare.txt). About 5 minutes of wall time; run it on an otherwise idle machine: every
# millisecond the host loses is 5 ms of model time in the latencies.
# usage: scripts/replay-compare.sh [BUILD_DIR [SHARED_DIR [OUT]]]
#   environment: PRS_REPLAY_FROM (0), PRS_REPLAY_DURATION (600), PRS_REPLAY_SCALE (5),
#   PRS_REPLAY_PER_POOL (4), PRS_REPLAY_MAX_RUNNING (16)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-$here/build}/perseus
trace=${2:-$here/../shared}/data/azure-llm-2023/AzureLLMInferenceTrace_conv.csv
out=${3:-replay-compare.txt}
[[ -x $bin ]] || { echo "no $bin: build first" >&2; exit 1; }
[[ -r $trace ]] || { echo "no $trace: Azure's conversation trace is needed" >&2; exit 1; }
"$bin" demo --inference --trace "$trace" --from "${PRS_REPLAY_FROM:-0}" \
  --duration "${PRS_REPLAY_DURATION:-600}" --time-scale "${PRS_REPLAY_SCALE:-5}" \
  --per-pool "${PRS_REPLAY_PER_POOL:-4}" --max-running "${PRS_REPLAY_MAX_RUNNING:-16}" \
  --compare --no-plots | tee "$out"
