#!/usr/bin/env bash
# End-to-end tests of `perseus evaluate`, run as a user would:
#   - bad input: one line on stderr, exit status 2 (plan sources, frontier mismatches, clocks
#     the profile lacks, bad schedules);
#   - per-GPU busy/idle time and energy add up to the iteration's, for all-max, uniform,
#     EnvPipe and frontier plans, under 1F1B, GPipe and interleaved schedules;
#   - frontier plans evaluate to the figures `perseus plan` recorded, all-max to the figures
#     recomputed here from the profile, EnvPipe no slower and no costlier than all-max;
#   - the SOSP'24 profiles (skipped without the shared data): all-max critical paths and the
#     exact figures docs/emulator.md and docs/planner.md ('Quality') quote.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
src=${PRS_SOURCE_DIR:?}
data=${PRS_SHARED_DIR:-}/data/sosp24
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

ex=$src/examples/a100-8stage.csv
pipe=(--stages 8 --microbatches 12 --unit-time 0.001 --blocking-power 83.64)
"$bin" plan --profile "$ex" "${pipe[@]}" --quiet --out "$tmp/f"

# --- usage and bad input ---
"$bin" evaluate --help | grep -q -- "--all-max" || fail "evaluate --help"
expect_error 2 "missing required option '--profile'" "$bin" evaluate "${pipe[@]}" --all-max
expect_error 2 "give exactly one plan" "$bin" evaluate --profile "$ex" "${pipe[@]}"
expect_error 2 "give exactly one plan" "$bin" evaluate --profile "$ex" "${pipe[@]}" --all-max --uniform 1410
expect_error 2 "--frontier needs exactly one of --index K or --time SEC" \
  "$bin" evaluate --profile "$ex" --frontier "$tmp/f"
expect_error 2 "--frontier needs exactly one of --index K or --time SEC" \
  "$bin" evaluate --profile "$ex" --frontier "$tmp/f" --index 1 --time 3
expect_error 2 "--index and --time select a point of a --frontier" \
  "$bin" evaluate --profile "$ex" "${pipe[@]}" --all-max --index 3
expect_error 2 "--uniform: expected a clock in MHz or 'auto', got 'fast'" \
  "$bin" evaluate --profile "$ex" "${pipe[@]}" --uniform fast
expect_error 2 "runs at 1234 MHz, which the profile has no row for" \
  "$bin" evaluate --profile "$ex" "${pipe[@]}" --uniform 1234
expect_error 2 "missing required option '--microbatches'" \
  "$bin" evaluate --profile "$ex" --stages 8 --unit-time 0.001 --blocking-power 83.64 --all-max
expect_error 2 "--stages: expected an integer >= 1, got '0'" "$bin" evaluate --profile "$ex" --stages 0
expect_error 2 "--schedule: expected 1f1b, gpipe or interleaved, got 'zigzag'" \
  "$bin" evaluate --profile "$ex" "${pipe[@]}" --schedule zigzag --all-max
expect_error 2 "microbatches to be a multiple of stages" "$bin" evaluate --profile "$ex" \
  --stages 4 --microbatches 6 --unit-time 0.001 --blocking-power 83.64 --schedule interleaved \
  --virtual-stages 2 --all-max
expect_error 2 "stage 8 has no forward rows" \
  "$bin" evaluate --profile "$ex" "${pipe[@]}" --stages 9 --all-max
expect_error 2 "--microbatches 24 does not match the frontier's 12" \
  "$bin" evaluate --profile "$ex" --frontier "$tmp/f" --index 0 --microbatches 24
expect_error 2 "--stages 4 does not match the frontier's 8" \
  "$bin" evaluate --profile "$ex" --frontier "$tmp/f" --index 0 --stages 4
expect_error 2 "--schedule gpipe does not match the frontier's 1f1b" \
  "$bin" evaluate --profile "$ex" --frontier "$tmp/f" --index 0 --schedule gpipe
expect_error 2 "--blocking-power 70.0 does not match the frontier's 83.64" \
  "$bin" evaluate --profile "$ex" --frontier "$tmp/f" --index 0 --blocking-power 70
expect_error 2 "--index: expected 0\.\." "$bin" evaluate --profile "$ex" --frontier "$tmp/f" --index 100000
expect_error 2 "--time: no plan meets 0.1 s" "$bin" evaluate --profile "$ex" --frontier "$tmp/f" --time 0.1
expect_error 2 "plans.prs: cannot open" "$bin" evaluate --profile "$ex" --frontier "$tmp/none" --index 0
expect_error 2 "unknown option '--bogus'" "$bin" evaluate --profile "$ex" --bogus

# --- plans on the example profile ---
"$bin" evaluate --profile "$ex" "${pipe[@]}" --all-max --json >"$tmp/allmax.json"
"$bin" evaluate --profile "$ex" "${pipe[@]}" --uniform 1410 --json >"$tmp/u1410.json"
"$bin" evaluate --profile "$ex" "${pipe[@]}" --uniform 1200 --json >"$tmp/u1200.json"
"$bin" evaluate --profile "$ex" "${pipe[@]}" --uniform auto --json >"$tmp/uauto.json"
"$bin" evaluate --profile "$ex" "${pipe[@]}" --envpipe --json >"$tmp/envpipe.json"
"$bin" evaluate --profile "$ex" "${pipe[@]}" --all-max >"$tmp/table.txt"
n=$(($(wc -l <"$tmp/f/frontier.csv") - 1))
"$bin" evaluate --profile "$ex" --frontier "$tmp/f" --index 0 --json >"$tmp/f0.json"
"$bin" evaluate --profile "$ex" --frontier "$tmp/f" --index $((n - 1)) "${pipe[@]}" --json >"$tmp/flast.json"
"$bin" evaluate --profile "$ex" --frontier "$tmp/f" --time 3.1 --json >"$tmp/ft.json"
"$bin" plan export "$tmp/f" --time 3.1 >"$tmp/export.json"
"$bin" synth --gpu a100 --stages 8 --out "$tmp/s8.csv"
"$bin" evaluate --profile "$tmp/s8.csv" --stages 4 --microbatches 8 --unit-time 0.001 \
  --blocking-power 83.64 --schedule interleaved --virtual-stages 2 --all-max --json >"$tmp/il.json"
"$bin" plan --profile "$tmp/s8.csv" --stages 4 --microbatches 8 --unit-time 0.001 \
  --blocking-power 83.64 --schedule interleaved --virtual-stages 2 --quiet --out "$tmp/fil"
"$bin" evaluate --profile "$tmp/s8.csv" --frontier "$tmp/fil" --index 5 --json >"$tmp/fil5.json"
"$bin" evaluate --profile "$ex" "${pipe[@]}" --schedule gpipe --envpipe --json >"$tmp/gp-env.json"
"$bin" evaluate --profile "$ex" "${pipe[@]}" --schedule gpipe --all-max --json >"$tmp/gp-am.json"

"$py" - "$tmp" "$ex" <<'PY'
import csv, json, math, os, sys
tmp, ex = sys.argv[1], sys.argv[2]
load = lambda n: json.load(open(os.path.join(tmp, n)))
def close(x, y, tol=1e-9):
    return abs(x - y) <= tol * (1 + abs(y))
def consistent(d):
    """per-GPU figures add up to the iteration's"""
    assert len(d["per_stage"]) == d["stages"], d
    tot = 0.0
    for st in d["per_stage"]:
        assert close(st["busy_time_s"] + st["idle_time_s"], d["time_s"]), st
        assert st["idle_time_s"] >= -1e-12 and st["busy_time_s"] > 0, st
        assert close(st["idle_energy_j"], d["blocking_power_w"] * st["idle_time_s"]), st
        tot += st["busy_energy_j"] + st["idle_energy_j"]
    assert close(tot, d["energy_j"]), (tot, d["energy_j"])
names = ["allmax", "u1410", "u1200", "uauto", "envpipe", "f0", "flast", "ft", "il", "fil5",
         "gp-env", "gp-am"]
docs = {n: load(n + ".json") for n in names}
for n, d in docs.items():
    consistent(d)
am = docs["allmax"]
assert am["plan"] == "all-max"
# all-max recomputed from the profile: quantized busy time, measured energies, blocking otherwise
rows = list(csv.DictReader(open(ex)))
fmax = max(int(r["frequency"]) for r in rows)
def q(t):  # Python's t // tau, as the planner quantizes
    return float(t) // 0.001
for s, st in enumerate(am["per_stage"]):
    fr = [r for r in rows if int(r["stage"]) == s and int(r["frequency"]) == fmax]
    busy = sum(12 * q(r["time"]) for r in fr) * 0.001
    energy = sum(12 * float(r["energy"]) for r in fr)
    assert close(st["busy_time_s"], busy), (s, st, busy)
    assert close(st["busy_energy_j"], energy), (s, st, energy)
# uniform at the top clock is all-max; a lower clock is slower; auto is no slower than all-max
u = docs["u1410"]
assert u["freq_mhz"] == 1410 and u["time_s"] == am["time_s"] and close(u["energy_j"], am["energy_j"])
assert docs["u1200"]["time_s"] > am["time_s"]
ua = docs["uauto"]
assert ua["plan"] == "uniform" and ua["time_s"] <= am["time_s"] + 1e-9 and ua["energy_j"] <= am["energy_j"]
# EnvPipe: never slower, never costlier; the last GPU untouched
ep = docs["envpipe"]
assert ep["time_s"] <= am["time_s"] + 1e-12 and ep["energy_j"] < am["energy_j"], (ep, am)
assert ep["per_stage"][-1] == am["per_stage"][-1]
gpe, gpa = docs["gp-env"], docs["gp-am"]
assert gpe["schedule"] == "gpipe" and gpe["time_s"] <= gpa["time_s"] + 1e-12 and gpe["energy_j"] <= gpa["energy_j"]
# frontier plans re-evaluate to what the planner recorded
detail = list(csv.DictReader(open(os.path.join(tmp, "f", "frontier-detail.csv"))))
for name, idx in (("f0", 0), ("flast", len(detail) - 1)):
    d, row = docs[name], detail[idx]
    assert d["plan"] == "frontier" and d["index"] == idx
    assert close(d["time_s"], float(row["eval_time"])) and close(d["energy_j"], float(row["eval_energy"])), (d, row)
    assert close(d["predicted_energy_j"], float(row["energy"]))
assert docs["flast"]["time_s"] <= am["time_s"] + 1e-12
exp = load("export.json")
assert docs["ft"]["index"] == exp["index"] and docs["ft"]["time_s"] <= 3.1
assert docs["il"]["schedule"] == "interleaved" and docs["il"]["virtual_stages"] == 2
assert docs["fil5"]["index"] == 5 and docs["fil5"]["schedule"] == "interleaved"
PY
grep -qE "^stage +busy \(s\) +idle \(s\) +busy energy \(J\) +idle energy \(J\) +energy \(J\)" "$tmp/table.txt" ||
  fail "table: no labelled columns"
grep -qE "^total " "$tmp/table.txt" || fail "table: no total row"

# --- the SOSP'24 profiles ---
if [[ ! -f $data/stage_profile/gpt3-175b+a100_sxm_bf16.csv ]]; then
  skip_input "shared data not found; SOSP'24 checks skipped"
fi
g=$data/stage_profile/gpt3-175b+a100_sxm_bf16.csv
b=$data/stage_profile/bloom+a100_sxm_bf16.csv
"$bin" evaluate --profile "$g" "${pipe[@]}" --all-max --json >"$tmp/g-am.json"
"$bin" evaluate --profile "$b" "${pipe[@]}" --all-max --json >"$tmp/b-am.json"
"$bin" plan --profile "$g" "${pipe[@]}" --quiet --out "$tmp/g"
"$bin" evaluate --profile "$g" --frontier "$tmp/g" --time 3.2 --json >"$tmp/g-min.json"
"$bin" evaluate --profile "$g" --frontier "$tmp/g" --time 2.818 --json >"$tmp/g-fast.json"
"$py" - "$tmp" <<'PY'
import json, os, sys
tmp = sys.argv[1]
load = lambda n: json.load(open(os.path.join(tmp, n)))
g, b = load("g-am.json"), load("b-am.json")
# all-f_max critical paths: GPT-3 2.818 s = its frontier's T_min; Bloom 2.818 s too, above its
# frontier's T_min of 2.797 s (docs/emulator.md, 'Quirks kept on purpose')
assert abs(g["time_s"] - 2.818) < 1e-9 and abs(b["time_s"] - 2.818) < 1e-9, (g["time_s"], b["time_s"])
# the exact least-energy plan: 5641.8 J at 3.171 s; the fastest: 6204.1 J
# (docs/planner.md, 'Quality')
m, f = load("g-min.json"), load("g-fast.json")
assert abs(m["time_s"] - 3.171) < 1e-9 and abs(m["energy_j"] - 5641.8) < 0.05, m
assert abs(f["time_s"] - 2.818) < 1e-9 and abs(f["energy_j"] - 6204.1) < 0.05, f
PY

# --- power (docs/power.md): average = energy / time, the steps integrate to the energy, the
# peak lies between the average and the largest step, and a window of many iterations gives
# the average back ---
expect_error 2 "--window" "$bin" evaluate --profile "$ex" "${pipe[@]}" --all-max --window 0
"$bin" evaluate --profile "$ex" "${pipe[@]}" --uniform 1200 --json --window 0.25 \
  --power-csv "$tmp/power.csv" > "$tmp/pw.json"
"$bin" evaluate --profile "$ex" "${pipe[@]}" --uniform 1200 --json --window 1000 > "$tmp/pw-long.json"
$py - "$tmp/pw.json" "$tmp/pw-long.json" "$tmp/power.csv" <<'PY' || fail "evaluate power figures"
import csv, json, sys
o = json.load(open(sys.argv[1])); lo = json.load(open(sys.argv[2]))
rows = list(csv.DictReader(open(sys.argv[3])))
assert abs(o["avg_power_w"] - o["energy_j"] / o["time_s"]) < 1e-9 * o["avg_power_w"]
assert o["window_s"] == 0.25
assert o["avg_power_w"] <= o["peak_power_w"] <= o["max_power_w"] + 1e-9
assert float(rows[0]["start_s"]) == 0 and abs(float(rows[-1]["end_s"]) - o["time_s"]) < 1e-12
e = sum(float(r["energy_j"]) for r in rows)
assert abs(e - o["energy_j"]) < 1e-9 * e, (e, o["energy_j"])
assert max(float(r["power_w"]) for r in rows) == o["max_power_w"]
assert abs(lo["peak_power_w"] - lo["avg_power_w"]) < 1e-3 * lo["avg_power_w"]
PY
# a window far shorter than any step peaks at the largest step (was above it, or below the
# average, from cancellation); one of 1e306 s is the average (was inf)
for w in 1e-16 1e-20 1e306; do
  "$bin" evaluate --profile "$ex" "${pipe[@]}" --uniform 1200 --json --window "$w" \
    > "$tmp/pw-$w.json" || fail "evaluate --window $w"
done
$py - "$tmp"/pw-1e-16.json "$tmp"/pw-1e-20.json "$tmp"/pw-1e306.json <<'PY' || fail "extreme windows"
import json, sys
for f in sys.argv[1:3]:
    o = json.load(open(f))
    assert abs(o["peak_power_w"] - o["max_power_w"]) <= 1e-12 * o["max_power_w"], (f, o)
o = json.load(open(sys.argv[3]))
assert abs(o["peak_power_w"] - o["avg_power_w"]) <= 1e-9 * o["avg_power_w"], o
PY
echo "evaluate.sh: OK"
