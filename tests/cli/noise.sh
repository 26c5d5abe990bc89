#!/usr/bin/env bash
# End-to-end tests of `perseus noise` on the example profile (a small pipeline, so it is quick):
#   - bad input: one line on stderr, exit status 2;
#   - without noise every plan is the true-profile plan: baseline overshoot and regret are 0;
#   - runs are reproducible (same seed, same JSON, on any number of threads) and noise does
#     change plans;
#   - the JSON's shape (schema, per level baseline and robust with the four figures), the table
#     and the SVG plot.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
src=${PRS_SOURCE_DIR:?}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

ex=$src/examples/a100-8stage.csv
job=(--profile "$ex" --stages 4 --microbatches 4 --unit-time 0.001 --blocking-power 83.64)

"$bin" noise --help | grep -q -- "--jitter" || fail "noise --help"
# a unit coarser than every computation: refused as plan and emulate refuse it (it printed -nan
# tables and exited 0), with a message (lookups on an empty frontier printed an empty one)
expect_error 1 "perseus noise: unit time 1 s is coarser than the computations: every time rounds to 0 units" \
  "$bin" noise "${job[@]}" --unit-time 1 --jitter 0.01 --repeats 1 --seeds 2 --quiet
awk -F, 'NR == 1 {print; next} {printf "%s,%s,%s,%g,%s\n", $1, $2, $3, $4 * 1e-297, $5}' "$ex" \
  >"$tmp/tiny.csv"
expect_error 2 "tiny.csv: energy over time gives a median power of .* W, no GPU's.*--force-units" \
  "$bin" noise "${job[@]}" --profile "$tmp/tiny.csv" --jitter 0.01 --repeats 1 --seeds 2 --quiet
expect_error 1 "unit time 0.001 s is coarser than the computations" "$bin" noise "${job[@]}" \
  --profile "$tmp/tiny.csv" --jitter 0.01 --repeats 1 --seeds 2 --quiet --json --force-units
expect_error 2 "missing required option '--jitter'" "$bin" noise "${job[@]}" --repeats 1 --seeds 2
expect_error 2 "missing required option '--seeds'" "$bin" noise "${job[@]}" --jitter 0.01 --repeats 1
expect_error 2 "missing required option '--profile'" "$bin" noise --stages 4
expect_error 2 "--jitter: expected fractions in \[0, 0.2\], got '0.5'" \
  "$bin" noise "${job[@]}" --jitter 0.01,0.5 --repeats 1 --seeds 2
expect_error 2 "--jitter: expected fractions in \[0, 0.2\], got 'x'" \
  "$bin" noise "${job[@]}" --jitter x --repeats 1 --seeds 2
expect_error 2 "--repeats: expected an integer >= 1, got '0'" \
  "$bin" noise "${job[@]}" --jitter 0.01 --repeats 0 --seeds 2
expect_error 2 "--bias: expected a number in \[0, 0.2\], got '-1'" \
  "$bin" noise "${job[@]}" --jitter 0.01 --repeats 1 --seeds 2 --bias -1
expect_error 2 "--straggler: expected a number >= 1, got '0.5'" \
  "$bin" noise "${job[@]}" --jitter 0.01 --repeats 1 --seeds 2 --straggler 0.5
expect_error 2 "--margin: expected a number in \[0, 100\], got 'x'" \
  "$bin" noise "${job[@]}" --jitter 0.01 --repeats 1 --seeds 2 --margin x
expect_error 2 "--budget: expected a number in \[0, 0.1\], got '0.5'" \
  "$bin" noise "${job[@]}" --jitter 0.01 --repeats 1 --seeds 2 --budget 0.5
expect_error 2 "unknown option '--jiter' \(did you mean '--jitter'\?\)" \
  "$bin" noise "${job[@]}" --jiter 0.01 --repeats 1 --seeds 2
expect_error 2 "stage 8 has no forward rows" "$bin" noise --profile "$ex" --stages 9 --microbatches 4 \
  --unit-time 0.001 --blocking-power 83.64 --jitter 0.01 --repeats 1 --seeds 1

run=("$bin" noise "${job[@]}" --jitter 0,0.03 --repeats 2 --seeds 5 --json)
"${run[@]}" >"$tmp/a.json"
"${run[@]}" >"$tmp/b.json"
cmp -s "$tmp/a.json" "$tmp/b.json" || fail "two runs with the same seeds differ"
# the same figures on any number of threads (5 seeds over 1, 2 and 3: uneven shares)
for j in 1 2 3; do
  "${run[@]}" --jobs $j >"$tmp/j$j.json"
  cmp -s "$tmp/a.json" "$tmp/j$j.json" || fail "--jobs $j changes the figures"
done
expect_error 2 "--jobs: at most 256" "${run[@]}" --jobs 257
expect_error 2 "--jobs: expected an integer >= 1, got '0'" "${run[@]}" --jobs 0
$py - "$tmp/a.json" <<'PY' || fail "noise JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "perseus.noise/1", d["schema"]
assert d["robust_margin_sd"] == 0.5 and d["robust_budget_max"] == 0.003, d
lv = d["levels"]
assert [(l["cost_model"], l["jitter"]) for l in lv] == [
    ("exp", 0), ("exp", 0.03), ("hull", 0), ("hull", 0.03)], lv
for l in lv:
    for k in ("baseline", "robust"):
        s = l[k]
        for f in ("overshoot_median_pct", "overshoot_max_pct", "regret_median_pct",
                  "regret_max_pct"):
            assert isinstance(s[f], float), (k, f)
        assert len(s["seeds"]) == 5
        assert s["overshoot_max_pct"] >= s["overshoot_median_pct"]
        assert s["regret_max_pct"] >= s["regret_median_pct"]
        assert s["waste_max_pct"] >= s["waste_median_pct"]
        # waste compares with the truth frontier's best plan within the plan's own time (or
        # T_min), of which the fastest plan, the regret's yardstick, is one: never less
        for r in s["seeds"]:
            assert r["waste_pct"] >= r["regret_pct"] - 1e-9, r
    if l["jitter"] == 0:  # the noisy profile is the truth: the same plans, no loss
        for r in l["baseline"]["seeds"]:
            assert r["overshoot_pct"] == 0 and r["regret_pct"] == 0, r
            assert r["waste_pct"] == 0, r
            assert abs(r["promised_saving_pct"] - l["saving_pct"]) < 1e-9, r
    else:  # noise moves the plans: the five seeds do not all land on the truth's
        b = l["baseline"]["seeds"]
        assert any(r["overshoot_pct"] != 0 or r["regret_pct"] != 0 for r in b), b
        assert len({r["regret_pct"] for r in b}) > 1, b
PY

"$bin" noise "${job[@]}" --jitter 0.02 --repeats 1 --seeds 3 --cost-model hull \
  --svg "$tmp/n.svg" >"$tmp/table"
grep -q "^hull" "$tmp/table" || fail "table lacks the hull row: $(cat "$tmp/table")"
grep -q "robust" "$tmp/table" || fail "table lacks the robust row"
! grep -q "^exp" "$tmp/table" || fail "--cost-model hull printed exp rows"
$py -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); assert d.documentElement.tagName == "svg"' \
  "$tmp/n.svg" || fail "noise SVG does not parse"
grep -q "energy regret" "$tmp/n.svg" || fail "noise SVG lacks the regret panel"

# The robust planner's settings reach it: no margin and no budget change its plans.
tune=("$bin" noise "${job[@]}" --jitter 0.05 --repeats 1 --seeds 4 --cost-model exp --json)
"${tune[@]}" >"$tmp/d.json"
"${tune[@]}" --margin 0 --budget 0 >"$tmp/z.json"
$py - "$tmp/d.json" "$tmp/z.json" <<'PY' || fail "--margin/--budget"
import json, sys
d, z = (json.load(open(f)) for f in sys.argv[1:])
assert z["robust_margin_sd"] == 0 and z["robust_budget_max"] == 0, z
rs = lambda x: [r["regret_pct"] for r in x["levels"][0]["robust"]["seeds"]]
bs = lambda x: [r["regret_pct"] for r in x["levels"][0]["baseline"]["seeds"]]
assert bs(d) == bs(z), "the baseline must not change"
assert rs(d) != rs(z), "the robust planner ignored --margin/--budget"
PY
# --truth-unit: plans judged on the truth at a finer unit than they were planned at
expect_error 2 "--truth-unit: at most --unit-time" "${tune[@]}" --truth-unit 0.002
expect_error 2 "--truth-unit: expected a number > 0, got '0'" "${tune[@]}" --truth-unit 0
fine=("$bin" noise "${job[@]}" --jitter 0,0.05 --repeats 1 --seeds 4 --cost-model exp --json)
"${fine[@]}" >"$tmp/q.json"
"${fine[@]}" --truth-unit 1e-6 >"$tmp/f.json"
$py - "$tmp/q.json" "$tmp/f.json" <<'PY' || fail "--truth-unit"
import json, sys
q, f = (json.load(open(x)) for x in sys.argv[1:])
assert q["truth_unit_s"] == 0.001 and f["truth_unit_s"] == 1e-6, (q["truth_unit_s"], f["truth_unit_s"])
# planned the same way: the promised savings are the same; judged otherwise: T_min differs
promised = lambda x: [r["promised_saving_pct"] for l in x["levels"] for r in l["robust"]["seeds"]]
assert promised(q) == promised(f), "the truth's unit changed the planning"
assert q["levels"][0]["t_min_s"] != f["levels"][0]["t_min_s"], "T_min judged at the planning unit"
# without noise the plans are the truth's, at any unit: no overshoot, no regret
for r in f["levels"][0]["baseline"]["seeds"]:
    assert r["overshoot_pct"] == 0 and r["regret_pct"] == 0, r
PY
# --oracle: plans on the shape oracle (the truth up to one scale error per group of identical
# types): without jitter the truth itself; with jitter closer to the truth than measuring is
expect_error 2 "--oracle-margin: needs '--oracle'" "${tune[@]}" --oracle-margin 0.01
expect_error 2 "--oracle: models jitter only, not '--bias'" "${tune[@]}" --oracle --bias 0.01
expect_error 2 "--oracle-margin: expected a number in \[0, 0.1\], got '0.5'" \
  "${tune[@]}" --oracle --oracle-margin 0.5
orc=("$bin" noise "${job[@]}" --jitter 0,0.05 --repeats 1 --seeds 4 --cost-model exp --json --oracle)
"${orc[@]}" >"$tmp/o.json"
"${orc[@]}" --oracle-margin 0.02 >"$tmp/om.json"
"${orc[@]}" >"$tmp/o2.json"
cmp -s "$tmp/o.json" "$tmp/o2.json" || fail "two oracle runs with the same seeds differ"
$py - "$tmp/q.json" "$tmp/o.json" "$tmp/om.json" <<'PY' || fail "--oracle"
import json, sys
q, o, om = (json.load(open(x)) for x in sys.argv[1:])
assert o["oracle"] is True and q["oracle"] is False and om["oracle_margin"] == 0.02, o
for r in o["levels"][0]["baseline"]["seeds"]:  # no jitter: the truth's plans
    assert r["overshoot_pct"] == 0 and r["regret_pct"] == 0, r
pr = lambda x: [r["promised_saving_pct"] for r in x["levels"][1]["baseline"]["seeds"]]
assert pr(o) != pr(q), "the oracle drew the measured profile"
assert pr(o) != pr(om), "--oracle-margin did not reach the oracle"
PY
"$bin" noise "${job[@]}" --jitter 0.05 --repeats 1 --seeds 2 --cost-model exp --oracle \
  --oracle-margin 0.01 | grep -q "^oracle .*margin 0.01" || fail "table lacks the oracle line"
echo "noise: ok"
