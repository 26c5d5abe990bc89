#!/usr/bin/env bash
# End-to-end tests of `perseus infer emulate --cluster` (a fixed cluster read from a router
# configuration) on a small synthetic trace written here:
#   - the table and the JSON: every request served or rejected, the SLO attainment, energy, every
#     instance with its pool, TP, batch and clocks; the configured clocks unchanged without
#     --instance-level, chosen by the instance level with it (clock changes, a lower mean clock,
#     less energy on an idle-heavy trace);
#   - the same cluster with a lower clock spends more time per request;
#   - bad cluster files exit 2 naming the file and the field; options of the policies are refused
#     beside --cluster, and --instance-level without it.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

# 40 requests over 20 s: short and long prompts, outputs of 20 to 400 tokens
$py - "$tmp/trace.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    for i in range(40):
        t = i * 0.5
        f.write("2023-11-16 18:00:%02d.%d,%d,%d\n" % (int(t), int(10 * (t % 1)),
                [120, 600, 2000, 3000][i % 4], [20, 150, 400, 60][i % 4]))
PY
cluster() { # MHZ MAX_RUNNING: 2 x TP 2 in pool short, 2 x TP 4 in pool long
  cat <<JSON
{"model": "llama2-70b", "cost_model": {"model": "llama2-70b", "gpu": "h100"},
 "pools": [
  {"name": "short", "classes": ["SS", "SM", "SL", "MS", "MM", "ML"],
   "instances": [{"name": "s1", "url": "http://127.0.0.1:9001", "tp": 2, "mhz": $1, "max_running": $2},
                 {"name": "s2", "url": "http://127.0.0.1:9002", "tp": 2, "mhz": $1, "max_running": $2}]},
  {"name": "long", "classes": ["LS", "LM", "LL"],
   "instances": [{"name": "l1", "url": "http://127.0.0.1:9003", "tp": 4, "mhz": $1, "max_running": $2},
                 {"name": "l2", "url": "http://127.0.0.1:9004", "tp": 4, "mhz": $1, "max_running": $2}]}]}
JSON
}
cluster 1980 16 >"$tmp/top.json"
cluster 990 16 >"$tmp/low.json"
cluster 1980 1 >"$tmp/one.json"
em() { "$bin" infer emulate --trace "$tmp/trace.csv" "$@"; }

# --- the table ---
em --cluster "$tmp/top.json" >"$tmp/table" || fail "table"
cat "$tmp/table"
grep -q '^clocks: as configured' "$tmp/table" || fail "no clocks line"
grep -qE '^requests +40 \(rejected 0, re-routed 0\)' "$tmp/table" || fail "requests"
grep -qE '^SLO attainment +[0-9.]+ %' "$tmp/table" || fail "SLO"
grep -qE '^energy \(kJ\) +[0-9.]+' "$tmp/table" || fail "energy"
[[ $(grep -cE '^  [sl][12] \(pool (short|long), TP [24], batch 16\): [0-9]+, [0-9.]+, 1980 / 1980 / 1980$' \
  "$tmp/table") == 4 ]] || fail "per-instance lines"

# --- JSON: configured clocks, the instance level, a lower clock, one request at a time ---
em --cluster "$tmp/top.json" --json >"$tmp/top.out" || fail "json"
em --cluster "$tmp/top.json" --json --instance-level 1 --instance-headroom 0.5 >"$tmp/il.out" ||
  fail "json, instance level"
em --cluster "$tmp/low.json" --json >"$tmp/low.out" || fail "json, low clock"
em --cluster "$tmp/one.json" --json >"$tmp/one.out" || fail "json, batch 1"
$py - "$tmp" <<'PY' || fail "JSON checks"
import json, sys
d = sys.argv[1]
top, il, low, one = (json.load(open(f"{d}/{n}.out")) for n in ("top", "il", "low", "one"))
for r in (top, il, low):
    assert r["requests"] == 40 and r["rejected"] == 0, r
    assert sum(i["served"] for i in r["instances"]) == 40
    assert 0 <= r["slo_attainment"] <= 1 and r["energy_j"] > 0 and r["duration_s"] >= 19.5
    assert abs(sum(i["energy_j"] for i in r["instances"]) - r["energy_j"]) < 1e-6 * r["energy_j"]
    assert [i["name"] for i in r["instances"]] == ["s1", "s2", "l1", "l2"]
    assert [i["pool"] for i in r["instances"]] == ["short", "short", "long", "long"]
assert top["clock_changes"] == 0 and all(i["mhz_min"] == i["mhz_max"] == 1980 for i in top["instances"])
assert all(i["mhz_min"] == i["mhz_max"] == 990 for i in low["instances"])
assert low["ttft_p50_s"] > top["ttft_p50_s"], (low["ttft_p50_s"], top["ttft_p50_s"])
assert il["instance_period_s"] == 1 and il["headroom"] == 0.5 and il["clock_changes"] > 0
assert all(i["mhz_min"] < 1980 for i in il["instances"])
assert il["energy_j"] < top["energy_j"], (il["energy_j"], top["energy_j"])
# one request at a time per instance: what arrives while all four are busy is rejected
assert one["rejected"] > 0 and one["rejected"] + sum(i["served"] for i in one["instances"]) == 40
assert one["slo_attainment"] <= (40 - one["rejected"]) / 40
print("json ok")
PY

# --- bad input ---
sed 's/"tp": 4, "mhz": 1980/"tp": 0, "mhz": 1980/' "$tmp/top.json" >"$tmp/bad-tp.json"
expect_error 2 "bad-tp.json: pools\\[1\\].instances\\[0\\].tp" em --cluster "$tmp/bad-tp.json"
sed 's/"tp": 2/"tp": 1/' "$tmp/top.json" >"$tmp/tp1.json" # the weights leave no room at TP 1
expect_error 2 "tp1.json: pools\\[0\\].instances\\[0\\].tp: llama2-70b does not fit" em --cluster "$tmp/tp1.json"
sed 's/"max_running": 16/"max_running": 0/' "$tmp/top.json" >"$tmp/bad-mr.json"
expect_error 2 "bad-mr.json: pools\\[0\\].instances\\[0\\].max_running" em --cluster "$tmp/bad-mr.json"
sed 's/"mhz": 1980/"mhz": 5000/' "$tmp/top.json" >"$tmp/bad-mhz.json"
expect_error 2 "bad-mhz.json: pools\\[0\\].instances\\[0\\].mhz" em --cluster "$tmp/bad-mhz.json"
sed 's/"SS", //' "$tmp/top.json" >"$tmp/bad-class.json"
expect_error 2 "bad-class.json" em --cluster "$tmp/bad-class.json"
echo '{"model": ' >"$tmp/bad-json.json"
expect_error 2 "bad-json.json" em --cluster "$tmp/bad-json.json"
expect_error 2 "no-such.json" em --cluster "$tmp/no-such.json"
expect_error 2 "--cluster excludes '--profile'" em --cluster "$tmp/top.json" --profile x.csv
expect_error 2 "--cluster excludes '--policy'" em --cluster "$tmp/top.json" --policy clock
expect_error 2 "need --cluster" em --profile x.csv --instance-level 1
expect_error 2 "--instance-level" em --cluster "$tmp/top.json" --instance-level 0
echo ok
