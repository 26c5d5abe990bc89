#!/usr/bin/env bash
# End-to-end tests of `perseus infer emulate` and `perseus infer plan`, run as a user would, on a
# profile written by `perseus infer synth` (H100, Llama2-70B, TP 2/4/8):
#   - bad input: one line on stderr naming the option, the file and line, or the class;
#   - a 10-minute slice of each of Azure's 2023 traces scaled so that singlepool needs 80 % of 96
#     GPUs at its peak: every policy in the JSON with its keys, every request served, energies
#     positive, the lower bound below every policy, singlepool within its SLOs; the table names
#     every policy; --out writes the JSON and the power per second;
#   - plan: the pools' instances for a load, as a table and as JSON.
# Without the shared traces the trace checks fail under CI=true and are skipped (77) otherwise.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
data=${PRS_SHARED_DIR:-}/data/azure-llm-2023
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

prof=$tmp/h100.csv
"$bin" infer synth --gpu h100 --model llama2-70b --tp 2,4,8 --out "$prof" || fail "synth"
fast=(--probe-requests 200 --clocks 3)

# --- usage and bad input ---
# (grep reads the whole help: grep -q would leave the program a SIGPIPE past 4 KB of it)
"$bin" infer emulate --help | grep -- "--peak-share" >/dev/null || fail "emulate --help"
"$bin" infer plan --help | grep -- "--load" >/dev/null || fail "plan --help"
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:47,12,x\n' \
  >"$tmp/bad.csv"
expect_error 2 "bad.csv:3: bad GeneratedTokens 'x'" "$bin" infer emulate --trace "$tmp/bad.csv" \
  --profile "$prof"
expect_error 2 "missing --trace" "$bin" infer emulate --profile "$prof"
expect_error 2 "missing --profile" "$bin" infer emulate --trace "$tmp/bad.csv"
expect_error 2 "--policy: unknown policy 'fastest'" "$bin" infer emulate --trace "$tmp/bad.csv" \
  --profile "$prof" --policy singlepool,fastest
expect_error 2 "--scale and --peak-share exclude each other" "$bin" infer emulate \
  --trace "$tmp/bad.csv" --profile "$prof" --scale 2 --peak-share 0.5
expect_error 2 "--peak-share: expected a share in \(0, 1\]" "$bin" infer emulate \
  --trace "$tmp/bad.csv" --profile "$prof" --peak-share 1.5
expect_error 2 "--periods: expected C,P,I seconds" "$bin" infer emulate --trace "$tmp/bad.csv" \
  --profile "$prof" --periods 5,300,1800
expect_error 2 "unknown option '--gpux'" "$bin" infer emulate --trace "$tmp/bad.csv" \
  --profile "$prof" --gpux 8
expect_error 2 "--scale-shift: expected a number > 0, got '0'" "$bin" infer emulate \
  --trace "$tmp/bad.csv" --profile "$prof" --scale-shift 0
expect_error 2 "--load: expected CLASS=RATE" "$bin" infer plan --profile "$prof" --load XX=2
expect_error 2 "missing --load" "$bin" infer plan --profile "$prof"
expect_error 2 "above the budget of 1000 W" "$bin" infer plan --profile "$prof" --gpus 96 \
  --load SS=2,MM=1,LL=0.5 --power-cap 1000 "${fast[@]}"

# --- plan ---
"$bin" infer plan --profile "$prof" --gpus 96 --load SS=2,MM=1,LL=0.5 "${fast[@]}" >"$tmp/plan.txt"
grep -q "^cluster level:" "$tmp/plan.txt" || fail "plan table: $(cat "$tmp/plan.txt")"
"$bin" infer plan --profile "$prof" --gpus 96 --load SS=2,MM=1,LL=0.5 "${fast[@]}" --json \
  >"$tmp/plan.json"
"$py" - "$tmp/plan.json" <<'PY' || fail "plan JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "infer plan" and d["gpus"] == 96
pools = d["pools"]
assert set(pools) == {"SS", "SM", "SL", "MS", "MM", "ML", "LS", "LM", "LL"}
for name, load in (("SS", 2), ("MM", 1), ("LL", 0.5)):
    p = pools[name]
    assert p["load_rps"] == load and p["gpus"] > 0 and p["instances"], name
    assert sum(i["load_rps"] for i in p["instances"]) >= load - 1e-9, name
    assert sum(i["tp"] for i in p["instances"]) == p["gpus"], name
assert pools["SL"]["gpus"] == 0 and not pools["SL"]["instances"]
assert d["gpus_used"] == sum(p["gpus"] for p in pools.values()) <= 96
assert d["singlepool"]["gpus"] % 8 == 0 and d["singlepool"]["gpus"] > 0
PY

# --- the traces ---
if [[ ! -f $data/AzureLLMInferenceTrace_conv.csv ]]; then
  [[ -n ${CI:-} ]] && fail "no traces under $data (CI set)"
  echo "no traces under $data: skipped"
  exit 77
fi
expect_error 2 "singlepool needs [0-9]+ GPUs at the trace's peak" "$bin" infer emulate \
  --trace "$data/AzureLLMInferenceTrace_code.csv" --profile "$prof" --gpus 8 --scale 4 \
  --window 0,300 --policy singlepool "${fast[@]}"
for kind in code conv; do
  trace=$data/AzureLLMInferenceTrace_$kind.csv
  args=(--trace "$trace" --profile "$prof" --gpus 96 --peak-share 0.8 --window 0,600 "${fast[@]}")
  "$bin" infer emulate "${args[@]}" --json --out "$tmp/$kind" >"$tmp/$kind.json" ||
    fail "$kind: emulate --json"
  "$py" - "$tmp/$kind.json" <<'PY' || fail "$kind: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "infer emulate" and d["gpus"] == 96
n = d["trace"]["requests"]
assert n > 100 and d["trace"]["scale"] > 0
names = [p["policy"] for p in d["policies"]]
assert names == ["singlepool", "multipool", "instances", "tp", "clock", "dynamollm", "oracle",
                 "phase"]
lb = d["lower_bound"]["energy_j"]
for p in d["policies"]:
    assert p["latency"]["all"]["requests"] == n, p["policy"]
    assert sum(p["latency"][k]["requests"] for k in p["latency"] if k != "all") == n
    assert p["energy_j"] > 0 and abs(p["energy_kwh"] * 3.6e6 - p["energy_j"]) < 1e-3 * p["energy_j"]
    assert p["gpu_hours"] > 0 and p["peak_gpus"] > 0
    assert p["power_p99_w"] >= p["power_p50_w"] > 0
    assert 0 < lb < p["energy_j"], p["policy"]
    for k in ("start", "reshard", "stop", "clock", "skipped"):
        assert p["reconfigurations"][k] >= 0
    for k in ("ttft_p50_s", "ttft_p99_s", "tbt_p50_s", "tbt_p99_s", "slo_attainment"):
        assert k in p["latency"]["all"]
s = d["policies"][0]
assert s["saving_vs_singlepool"] == 0 and s["slo_attainment"] >= 0.99
# singlepool needs 80 % of the GPUs at the peak (TP 8 instances: 10 of 12, within a unit)
assert 72 <= s["peak_gpus"] <= 88, s["peak_gpus"]
for p in d["policies"][1:]:
    assert p["reconfigurations"]["start"] + p["reconfigurations"]["clock"] >= 0
static = [p for p in d["policies"] if p["policy"] in ("singlepool", "multipool")]
assert all(sum(p["reconfigurations"].values()) == 0 for p in static)
PY
  [[ -s $tmp/$kind/emulate.json && -s $tmp/$kind/power.csv ]] || fail "$kind: --out files"
  head -1 "$tmp/$kind/power.csv" | grep -q "^time_s,singlepool_w,multipool_w" ||
    fail "$kind: power.csv header"
  "$bin" infer emulate "${args[@]}" --policy singlepool,dynamollm >"$tmp/$kind.txt" ||
    fail "$kind: table"
  for p in singlepool dynamollm lowerbound; do
    grep -q "^$p " "$tmp/$kind.txt" || fail "$kind: table lacks $p: $(cat "$tmp/$kind.txt")"
  done
done
# A power budget: each policy beside its own replay without it; phase beside dynamollm.
capargs=(--trace "$data/AzureLLMInferenceTrace_conv.csv" --profile "$prof" --gpus 96
  --peak-share 0.8 --window 0,600 --policy multipool,dynamollm,phase "${fast[@]}")
"$bin" infer emulate "${capargs[@]}" --json >"$tmp/free.json" || fail "emulate (no budget)"
cap=$("$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(0.7*d["policies"][0]["power_p99_w"]))' "$tmp/free.json")
"$bin" infer emulate "${capargs[@]}" --power-cap "$cap" --json >"$tmp/cap.json" ||
  fail "emulate --power-cap"
"$py" - "$tmp/free.json" "$tmp/cap.json" "$cap" <<'PY' || fail "power budget JSON"
import json, sys
free, cap = (json.load(open(f)) for f in sys.argv[1:3])
w = float(sys.argv[3])
assert cap["power_cap_w"] == w and "power_cap_w" not in free
for f, c in zip(free["policies"], cap["policies"]):
    b = c["power_cap"]
    assert "power_cap" not in f
    # the replay without the budget is the run without --power-cap
    assert b["uncapped"]["energy_j"] == f["energy_j"], c["policy"]
    assert b["uncapped"]["late"] == f["late"]
    for k in ("over_cap_s", "over_cap_max_w", "cluster_short", "periods_unmet", "clock_steps_down"):
        assert b[k] >= 0, k
    assert c["power_p99_w"] <= f["power_p99_w"] * 1.001, c["policy"]
multi = cap["policies"][0]
assert multi["power_cap"]["clock_steps_down"] > 0 and multi["energy_j"] < free["policies"][0]["energy_j"]
PY
"$bin" infer emulate "${capargs[@]}" --power-cap "$cap" >"$tmp/cap.txt" || fail "cap table"
grep -q "^under a power budget of" "$tmp/cap.txt" || fail "cap table: $(cat "$tmp/cap.txt")"
grep -q "^phase against dynamollm: energy" "$tmp/cap.txt" || fail "phase line"
expect_error 2 "--power-cap: expected a number > 0" "$bin" infer emulate "${capargs[@]}" \
  --power-cap -5

# Plots: every file, one line per policy (pool, TP degree), the data drawn, the same bytes twice.
plotargs=(--trace "$data/AzureLLMInferenceTrace_conv.csv" --profile "$prof" --gpus 96
  --peak-share 0.8 --window 0,600 --policy singlepool,dynamollm "${fast[@]}")
"$bin" infer emulate "${plotargs[@]}" --json --plots "$tmp/plots" >"$tmp/plots.json" ||
  fail "emulate --plots"
"$bin" infer emulate "${plotargs[@]}" --plots "$tmp/plots2" >/dev/null || fail "emulate --plots again"
for f in "$tmp"/plots/*.svg; do
  cmp -s "$f" "$tmp/plots2/$(basename "$f")" || fail "plot $(basename "$f") differs between runs"
done
"$py" - "$tmp/plots" "$tmp/plots.json" <<'PY' || fail "plots"
import json, os, sys, xml.etree.ElementTree as ET
d, js = sys.argv[1], json.load(open(sys.argv[2]))
ns = "{http://www.w3.org/2000/svg}"
want = {"power.svg", "ttft-cdf.svg", "tbt-cdf.svg", "pools-singlepool.svg", "pools-dynamollm.svg",
        "tp-singlepool.svg", "tp-dynamollm.svg", "clocks-singlepool.svg", "clocks-dynamollm.svg"}
assert set(os.listdir(d)) == want, os.listdir(d)
def lines(name):
    root = ET.parse(os.path.join(d, name)).getroot()
    texts = {t.text for t in root.iter(ns + "text")}
    pts = [[tuple(map(float, p.split(","))) for p in e.get("points").split()]
           for e in root.iter(ns + "polyline")]
    return texts, pts
for name in ("power.svg", "ttft-cdf.svg", "tbt-cdf.svg"):
    texts, pts = lines(name)
    assert len(pts) == 2 and {"singlepool", "dynamollm"} <= texts, name
for name in ("ttft-cdf.svg", "tbt-cdf.svg"):
    for p in lines(name)[1]:  # a distribution: x rises, the share rises (pixel y falls)
        assert all(b[0] >= a[0] and b[1] <= a[1] for a, b in zip(p, p[1:])), name
ticks = int(js["trace"]["span_s"] // 5) + 1  # one configuration a 5-s instance period, from 0
for pol, pools in (("singlepool", 1), ("dynamollm", 9)):
    texts, pts = lines("pools-%s.svg" % pol)
    assert len(pts) == pools and all(len(p) == ticks for p in pts), (pol, [len(p) for p in pts])
    texts, tps = lines("tp-%s.svg" % pol)
    assert len(tps) == 3 and {"TP 2", "TP 4", "TP 8"} <= texts
    moved = any(len({y for _, y in p}) > 1 for p in pts + tps)
    r = next(p for p in js["policies"] if p["policy"] == pol)["reconfigurations"]
    assert moved == (r["start"] + r["reshard"] + r["stop"] > 0), pol
    # Clocks: one line per pool; they move when the policy changed a clock, and stay flat when
    # it reconfigured nothing.
    texts, cks = lines("clocks-%s.svg" % pol)
    assert len(cks) == pools and all(len(p) == ticks for p in cks), (pol, [len(p) for p in cks])
    ck_moved = any(len({y for _, y in p}) > 1 for p in cks)
    if r["clock"] > 0:
        assert ck_moved, (pol, r)
    if r["start"] + r["reshard"] + r["stop"] + r["clock"] == 0:
        assert not ck_moved, (pol, r)
PY

# Decode runs: one step at a time gives the same figures.
"$bin" infer emulate "${plotargs[@]}" --run-steps 1 --json >"$tmp/steps1.json" ||
  fail "emulate --run-steps 1"
"$py" - "$tmp/plots.json" "$tmp/steps1.json" <<'PY' || fail "--run-steps 1 differs"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
for p, q in zip(a["policies"], b["policies"]):
    assert abs(p["energy_j"] - q["energy_j"]) <= 1e-9 * p["energy_j"], p["policy"]
    assert p["latency"] == q["latency"] and p["late"] == q["late"], p["policy"]
    assert p["reconfigurations"] == q["reconfigurations"] and p["preemptions"] == q["preemptions"]
PY
expect_error 2 "--run-steps: expected at most 4096" "$bin" infer emulate "${plotargs[@]}" \
  --run-steps 5000

# Scaling by shifted copies keeps the count of duplication, in time order.
"$bin" infer emulate --trace "$data/AzureLLMInferenceTrace_conv.csv" --profile "$prof" --gpus 192 \
  --window 0,600 --scale 1.5 --scale-shift 300 --policy singlepool "${fast[@]}" --json \
  >"$tmp/shift.json" || fail "emulate --scale-shift"
"$bin" infer emulate --trace "$data/AzureLLMInferenceTrace_conv.csv" --profile "$prof" --gpus 192 \
  --window 0,600 --scale 1.5 --policy singlepool "${fast[@]}" --json >"$tmp/dup.json" ||
  fail "emulate --scale"
"$py" - "$tmp/shift.json" "$tmp/dup.json" <<'PY' || fail "shifted scaling"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
# floor(1.5 n) by duplication; one whole copy and about half a second by shifting
assert abs(a["trace"]["requests"] - b["trace"]["requests"]) < 0.05 * b["trace"]["requests"]
assert a["policies"][0]["latency"]["all"]["requests"] == a["trace"]["requests"]
PY

# Tiling: one day of a 5-minute slice with the diurnal swing, thinned.
"$bin" infer emulate --trace "$data/AzureLLMInferenceTrace_conv.csv" --profile "$prof" --gpus 96 \
  --window 0,300 --tile-days 1 --scale 0.05 --policy singlepool,dynamollm "${fast[@]}" --json \
  >"$tmp/tile.json" || fail "tiled emulate"
"$py" - "$tmp/tile.json" <<'PY' || fail "tiled JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert 86000 < d["trace"]["span_s"] < 86400, d["trace"]
s, y = d["policies"]
assert s["latency"]["all"]["requests"] == y["latency"]["all"]["requests"] == d["trace"]["requests"]
# over a day with a diurnal swing the dynamic policy spends less (at this small load its nine
# pools hold more GPUs than singlepool's one instance, at lower clocks and mostly TP 2)
assert y["energy_j"] < s["energy_j"]
assert abs(s["gpu_hours"] - 8 * s["duration_s"] / 3600) < 1e-6 * s["gpu_hours"]
PY
echo ok
