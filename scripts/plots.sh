#!/usr/bin/env bash
# Regenerate the example plots the README shows (docs/plots.md) from the example profile, with
# an already built perseus binary. Builds nothing.
#
#   scripts/plots.sh [BUILD_DIR [OUT_DIR]]     defaults: build, docs/img
#
# 8 stages and 8 microbatches of examples/a100-8stage.csv (A100: 1 ms planner unit, 83.64 W
# blocking power), 16 pipelines for the savings curves.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/docs/img}
bin=$build/perseus
[[ -x $bin ]] || { echo "plots.sh: no perseus binary at $bin (build first)" >&2; exit 2; }
profile=$root/examples/a100-8stage.csv
pipe=(--stages 8 --microbatches 8 --unit-time 0.001 --blocking-power 83.64)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

"$bin" plan --profile "$profile" "${pipe[@]}" --quiet --out "$tmp/frontier"
"$bin" plot frontier --frontier "$tmp/frontier" --profile "$profile" --out "$out/frontier.svg"
# The least-energy plan (T*): its clocks vary the most, which is what the timeline is for.
tstar=$(awk -F, 'NR > 1 && (best == "" || $7 < best) {best = $7; t = $6} END {print t}' \
  "$tmp/frontier/frontier-detail.csv")
"$bin" plot timeline --frontier "$tmp/frontier" --profile "$profile" --time "$tstar" \
  --out "$out/timeline.svg"
"$bin" plot savings --frontier "$tmp/frontier" --profile "$profile" --pipelines 16 \
  --straggler 1.00:1.50:0.01 --out "$out/savings.svg"
ls -l "$out"/frontier.svg "$out"/timeline.svg "$out"/savings.svg
