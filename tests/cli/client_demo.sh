#!/usr/bin/env bash
# perseus demo end to end: embedded perseusd, sim ranks through profiling -> planning -> running
# -> straggler -> recovery; checks the JSON figures and that the plots are well-formed SVG.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-demo-XXXXXX")
trap 'rm -rf "$dir"' EXIT
out=$(timeout 300 "$bin/perseus" demo --json --out "$dir/plots")
echo "$out"
num() { sed -n "s/.*\"$1\": \([-0-9.]*\).*/\1/p" <<<"$out"; }
intrinsic=$(num intrinsic_saving_pct)
slowdown=$(num slowdown_pct)
straggler=$(num straggler_saving_pct)
awk -v i="$intrinsic" -v s="$slowdown" -v t="$straggler" 'BEGIN {
  if (!(i > 0)) { print "intrinsic saving not positive: " i; exit 1 }
  if (!(s <= 2)) { print "slowdown above 2 %: " s; exit 1 }
  if (!(t > i)) { print "straggler saving " t " not above intrinsic " i; exit 1 } }'
for f in frontier savings; do
  [[ -s $dir/plots/$f.svg ]] || { echo "no $f.svg"; exit 1; }
  if command -v xmllint >/dev/null; then xmllint --noout "$dir/plots/$f.svg"; fi
done
# Bad usage is one line and status 2.
set +e
"$bin/perseus" demo --stages 1 2>"$dir/err"; st=$?
set -e
[[ $st -eq 2 ]] && grep -q -- '--stages' "$dir/err"
"$bin/perseus" demo --help | grep -q 'perseus demo'
