#!/usr/bin/env bash
# perseus demo end to end: embedded perseusd, sim ranks through profiling -> planning -> running
# -> straggler -> recovery; checks the JSON figures and that the plots are well-formed SVG, and
# that the demo is deterministic: it runs in simulated time in lockstep with the server, so five
# runs print the same JSON, byte for byte.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-demo-XXXXXX")
trap 'rm -rf "$dir"' EXIT
out=$(timeout 300 "$bin/perseus" demo --json --out "$dir/plots")
echo "$out"
num() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$out" "$1"; }
intrinsic=$(num intrinsic_saving_pct)
slowdown=$(num slowdown_pct)
straggler=$(num straggler_saving_pct)
awk -v i="$intrinsic" -v s="$slowdown" -v t="$straggler" 'BEGIN {
  if (!(i > 0)) { print "intrinsic saving not positive: " i; exit 1 }
  if (!(s <= 2)) { print "slowdown above 2 %: " s; exit 1 }
  if (!(t > i)) { print "straggler saving " t " not above intrinsic " i; exit 1 } }'
# The recovery is measured once the plan settled: the straggler-free plan's figures again.
[[ $(num recovered_time_s) == "$(num perseus_time_s)" ]] || { echo "recovered time differs"; exit 1; }
[[ $(num recovered_energy_j) == "$(num perseus_energy_j)" ]] ||
  { echo "recovered energy differs"; exit 1; }
# One entry per slowdown (1.05, 1.1, 1.2, 1.3, 1.5), the requested one's saving as reported.
[[ $(grep -o '"saving_pct"' <<<"$out" | wc -l) -eq 5 ]] || { echo "want 5 slowdowns"; exit 1; }
python3 -c 'import json, sys; j = json.loads(sys.argv[1])
assert [x["saving_pct"] for x in j["stragglers"] if x["slowdown"] == 1.2] == [j["straggler_saving_pct"]]' "$out" ||
  { echo "the 1.2x entry does not carry straggler_saving_pct $straggler"; exit 1; }
# Five runs, one output.
for i in 1 2 3 4 5; do
  timeout 300 "$bin/perseus" demo --json --no-plots >"$dir/run$i.json"
done
for i in 2 3 4 5; do
  cmp "$dir/run1.json" "$dir/run$i.json" || { echo "run $i differs:"; diff "$dir/run1.json" "$dir/run$i.json"; exit 1; }
done
# ... and the same figures as the run that wrote the plots
[[ $(sed 's/"plots": .*//' "$dir/run1.json") == "$(sed 's/"plots": .*//' <<<"$out")" ]] ||
  { echo "the run with plots differs"; exit 1; }
grep -q "energy of all 8 GPUs" "$dir/plots/frontier.svg" || { echo "frontier.svg unlabelled"; exit 1; }
# The frontier plot has the job's whole frontier (it once fetched the summary without points and
# drew the two measured baselines alone): frontier.csv holds every point, and the planned line
# has a vertex for every point at least 1 px apart, spanning the frontier's times.
python3 - "$dir/plots" <<'PY' || { echo "frontier plot lacks the frontier's points"; exit 1; }
import csv, sys, xml.dom.minidom
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/frontier.csv")))
assert len(rows) >= 20, f"{len(rows)} frontier points"
times = [float(r["time_s"]) for r in rows]
assert times == sorted(times, reverse=True), "points not slowest first"
doc = xml.dom.minidom.parse(d + "/frontier.svg")
lines = [p for p in doc.getElementsByTagName("polyline") if p.getAttribute("stroke") == "#0072B2"]
assert len(lines) == 1, f"{len(lines)} planned lines"
xs = [float(v.split(",")[0]) for v in lines[0].getAttribute("points").split()]
assert len(xs) >= min(len(rows), 100), f"{len(xs)} vertices for {len(rows)} points"
assert max(xs) - min(xs) > 300, f"planned line {max(xs) - min(xs):.0f} px wide"
PY
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
