#!/usr/bin/env bash
# Writes docs/noise-table.md: what profile noise costs today's planner and the robust one on the
# SOSP'24 A100-SXM paper profiles (GPT-3 and Bloom, 8 stages, M = 12, tau = 1 ms, 83.64 W), for a
# time and energy jitter of 0.1, 0.5, 1, 2, 5 and 10 % with R = 1 and R = 3 repeats, over 20
# seeds, both cost models; then 5 % with R = 3 at M = 24. Every figure comes from `perseus noise --json`;
# nothing is typed.
# Then the ordering oracle (Bloom without its 1410 MHz rows), the 5 % / R = 3 studies judged to the
# microsecond, the robust planner's trade-off between its slack margin and time budget on
# GPT-3, the same trade-off judged to the microsecond on both profiles at M = 12 and 24, and the
# shape oracle.
# usage: scripts/noise-table.sh [BUILD_DIR [SHARED_DIR]]   (about 5.5 minutes of CPU time; the
# seeds run on every CPU)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-$here/build}/perseus
data=${2:-$here/../shared}/data/sosp24/stage_profile
seeds=${PRS_NOISE_SEEDS:-20}
out=$here/docs/noise-table.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[[ -x $bin ]] || { echo "no $bin: build first" >&2; exit 1; }
[[ -d $data ]] || { echo "no $data: the SOSP'24 profiles are needed" >&2; exit 1; }
# One study at 5 % jitter and R = 3: five PROFILE_CSV M [OPTION...] (the JSON on stdout).
five() {
  local csv=$1 m=$2
  shift 2
  "$bin" noise --profile "$csv" --stages 8 --microbatches "$m" --unit-time 0.001 \
    --blocking-power 83.64 --jitter 0.05 --repeats 3 --seeds "$seeds" --quiet --json "$@"
}
prof() { echo "$data/$1+a100_sxm_bf16.csv"; }
for model in gpt3-175b bloom; do
  for r in 1 3; do
    "$bin" noise --profile "$(prof $model)" --stages 8 --microbatches 12 \
      --unit-time 0.001 --blocking-power 83.64 --jitter 0.001,0.005,0.01,0.02,0.05,0.1 \
      --repeats "$r" --seeds "$seeds" --quiet --json >"$tmp/$model-r$r.json"
  done
  five "$(prof $model)" 24 >"$tmp/$model-m24.json"
done
# The ordering oracle: Bloom without its 1410 MHz rows. The true fastest plan runs no computation
# at 1410 MHz (1395 MHz is faster there), so T_min is unchanged; a planner measuring this profile
# is told that 1395 MHz is the fastest clock without having to measure it.
awk -F, 'NR == 1 || $3 != 1410' "$(prof bloom)" >"$tmp/bloom-oracle.csv"
for m in 12 24; do
  five "$tmp/bloom-oracle.csv" "$m" >"$tmp/oracle-m$m.json"
done
# The same 5 % / R = 3 studies with the plans judged on the truth to the microsecond instead of
# the planning unit (--truth-unit 1e-6; docs/noise.md, 'Judging at a finer unit').
for model in gpt3-175b bloom; do
  for m in 12 24; do
    five "$(prof $model)" "$m" --truth-unit 1e-6 >"$tmp/$model-m$m-us.json"
  done
done
# The robust planner's trade-off between a promised time that holds and energy: its slack margin
# (standard errors) and the cap of its time budget, on GPT-3 at 5 % jitter, R = 3.
tradeoffs="0:0 0:0.003 0.5:0 0.5:0.003 1:0 1:0.003 1.5:0.003"
for t in $tradeoffs; do
  for m in 12 24; do
    five "$(prof gpt3-175b)" "$m" --margin "${t%:*}" --budget "${t#*:}" >"$tmp/trade-$t-m$m.json"
  done
done
# The same trade-off judged to the microsecond, on both profiles at M = 12 and 24: is there a
# setting that meets the target (worst overshoot at most 0.5 %, median regret below 0.5 %)?
grid="0.5:0.001 0.5:0.002 0.5:0.003 1:0.001 1:0.002 1:0.003 1.5:0.001 1.5:0.002 1.5:0.003"
# The shape oracle (--oracle): the truth with one scale error per group of identical types, as
# small as all of the group's measurements allow, planned by today's planner with a slack margin
# of 0 to 0.4 %; judged to the microsecond and at the planning unit. What a planner that knew
# every curve's shape would reach with these measurements.
oracle="1e-6:0 1e-6:0.001 1e-6:0.002 1e-6:0.003 1e-6:0.004 0.001:0 0.001:0.002"
for model in gpt3-175b bloom; do
  for m in 12 24; do
    for t in $grid; do
      five "$(prof $model)" "$m" --margin "${t%:*}" --budget "${t#*:}" --truth-unit 1e-6 \
        >"$tmp/grid-$t-$model-m$m.json"
    done
    for t in $oracle; do
      five "$(prof $model)" "$m" --oracle --oracle-margin "${t#*:}" --truth-unit "${t%:*}" \
        >"$tmp/orc-$t-$model-m$m.json"
    done
  done
done
/usr/bin/python3 - "$tmp" "$seeds" "$tradeoffs" "$grid" "$oracle" >"$out" <<'PY'
import json, os, sys
tmp, seeds, tradeoffs, grid = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
oracle = sys.argv[5].split()


def mm(o, k):
    """Median / max of figure k ("overshoot", "regret") of a planner's summary o."""
    return f'{o[k + "_median_pct"]:.2f} / {o[k + "_max_pct"]:.2f}'


def load(name):
    return json.load(open(os.path.join(tmp, name)))


def level(d, cm, jitter=None):
    """The noise level of study d for cost model cm (and jitter, when given)."""
    return next(l for l in d["levels"] if l["cost_model"] == cm and (jitter is None or l["jitter"] == jitter))


def studies_5pct():
    """(profile, name, M, study) of the 5 % / R = 3 studies at M = 12 and 24."""
    for model, name in (("gpt3-175b", "GPT-3"), ("bloom", "Bloom")):
        for m, path in ((12, f"{model}-r3.json"), (24, f"{model}-m24.json")):
            yield model, name, m, load(path)


print("# What profile noise costs: today's planner against the robust one")
print()
print("<!-- Generated by scripts/noise-table.sh from `perseus noise --json`; do not edit. -->")
print()
print("Fastest plan of each frontier, judged on the true profile: overshoot over the true T_min")
print(f"and energy regret against the plan made on the truth, median and worst of {seeds} seeds,")
print("in percent. 8 stages, M = 12, τ = 1 ms, P_block = 83.64 W; jitter on time and energy.")
print()
print("| profile | model | jitter | R | overshoot baseline (med / max) | overshoot robust (med / max) | regret baseline (med / max) | regret robust (med / max) |")
print("|---|---|---|---|---|---|---|---|")
for model, name in (("gpt3-175b", "GPT-3"), ("bloom", "Bloom")):
    runs = {r: load(f"{model}-r{r}.json") for r in (1, 3)}
    for cm in ("exp", "hull"):
        for j in (0.001, 0.005, 0.01, 0.02, 0.05, 0.1):
            for r in (1, 3):
                lv = level(runs[r], cm, j)
                b, s = lv["baseline"], lv["robust"]
                print(f"| {name} | {cm} | {j * 100:g} % | {r} | {mm(b, 'overshoot')} | {mm(s, 'overshoot')} | {mm(b, 'regret')} | {mm(s, 'regret')} |")
print()
print("5 % jitter, R = 3, M = 12 and 24; also the intrinsic saving promised (median) and obtained")
print("(median, on the truth), the waste (the fastest plan's energy over the truth frontier's best")
print("plan within its time, docs/noise.md), and the plan looked up for a straggler at 1.2 T_min")
print("(worst overshoot past T', median regret).")
print()
print("| profile | M | model | planner | overshoot med / max | regret med / max | waste med / max | saving promised / obtained | straggler overshoot max / regret med |")
print("|---|---|---|---|---|---|---|---|---|")
for _, name, m, d in studies_5pct():
    for cm in ("exp", "hull"):
        lv = level(d, cm, 0.05)
        for pl in ("baseline", "robust"):
            o = lv[pl]
            st = o["straggler"]
            print(f"| {name} | {m} | {cm} | {pl} | {mm(o, 'overshoot')} | {mm(o, 'regret')} | {mm(o, 'waste')} | "
                  f"{o['promised_saving_median_pct']:.2f} / {o['obtained_saving_median_pct']:.2f} | "
                  f"{st['overshoot_max_pct']:.2f} / {st['regret_median_pct']:.2f} |")
print()
print("The ordering oracle: Bloom with its 1410 MHz rows removed, 5 % jitter, R = 3. Its true")
print("fastest plan runs nothing at 1410 MHz, so T_min is the same; the planner no longer has to")
print("tell 1395 MHz from 1410 MHz apart (docs/noise.md, 'What 3 repeats at 5 % cannot tell').")
print()
print("| M | model | overshoot robust (med / max) | regret robust (med / max) |")
print("|---|---|---|---|")
for m in (12, 24):
    d = load(f"oracle-m{m}.json")
    for cm in ("exp", "hull"):
        o = level(d, cm)["robust"]
        print(f"| {m} | {cm} | {mm(o, 'overshoot')} | {mm(o, 'regret')} |")
print()
print("The robust planner at 5 % jitter, R = 3, its fastest plan judged on the truth at the planning")
print("unit (1 ms) and to the microsecond (--truth-unit 1e-6): overshoot (median / max) and regret")
print("(median / max).")
print()
print("| profile | M | model | overshoot at 1 ms | overshoot at 1 µs | regret at 1 ms | regret at 1 µs |")
print("|---|---|---|---|---|---|---|")
for model, name, m, ms in studies_5pct():
    us = load(f"{model}-m{m}-us.json")
    assert us["truth_unit_s"] == 1e-6, us["truth_unit_s"]
    for cm in ("exp", "hull"):
        a, b = (level(d, cm, 0.05)["robust"] for d in (ms, us))
        print(f"| {name} | {m} | {cm} | {mm(a, 'overshoot')} | {mm(b, 'overshoot')} | {mm(a, 'regret')} | {mm(b, 'regret')} |")
print()
print("The robust planner's trade-off on GPT-3, 5 % jitter, R = 3: its slack margin (standard")
print("errors of the fitted times) and the cap of its time budget, against the robust fastest")
print("plan's overshoot (median / max) and regret (median / max). The default is 0.5 and 0.003.")
print()
print("| margin | budget | M | exp overshoot | exp regret | hull overshoot | hull regret |")
print("|---|---|---|---|---|---|---|")
for t in tradeoffs:
    for m in (12, 24):
        d = load(f"trade-{t}-m{m}.json")
        cells = []
        for cm in ("exp", "hull"):
            o = level(d, cm)["robust"]
            cells += [mm(o, "overshoot"), mm(o, "regret")]
        print(f"| {d['robust_margin_sd']:g} | {d['robust_budget_max']:g} | {m} | " + " | ".join(cells) + " |")
print()
print("The same trade-off judged to the microsecond (--truth-unit 1e-6), on both profiles at M = 12")
print("and 24, 5 % jitter, R = 3: per case the robust fastest plan's worst overshoot / median")
print("regret, in percent; ✓ where both halves of the target hold (worst overshoot at most 0.5 %,")
print("median regret below 0.5 %). The last column counts the cases that meet it, of 8.")
print()
cases = [(model, name, m) for model, name in (("gpt3-175b", "GPT-3"), ("bloom", "Bloom")) for m in (12, 24)]
head = [f"{name} {m} {cm}" for _, name, m in cases for cm in ("exp", "hull")]


def target_cells(prefix, planner, unit):
    """Per case of prefix-MODEL-mM.json (judged at unit): worst overshoot / median regret of the
    planner's fastest plan, ✓ where the target holds; the cells, how many hold, the last study."""
    cells, met = [], 0
    for model, _, m in cases:
        d = load(f"{prefix}-{model}-m{m}.json")
        assert d["truth_unit_s"] == unit, (d["truth_unit_s"], unit)
        for cm in ("exp", "hull"):
            o = level(d, cm)[planner]
            ok = o["overshoot_max_pct"] <= 0.5 and o["regret_median_pct"] < 0.5
            met += ok
            cells.append(f"{o['overshoot_max_pct']:.2f} / {o['regret_median_pct']:.2f}" + (" ✓" if ok else ""))
    return cells, met, d


print("| margin | budget | " + " | ".join(head) + " | met |")
print("|---|---|" + "---|" * len(head) + "---|")
for t in grid:
    cells, met, d = target_cells(f"grid-{t}", "robust", 1e-6)
    print(f"| {d['robust_margin_sd']:g} | {d['robust_budget_max']:g} | " + " | ".join(cells) + f" | {met} |")
print()
print("The shape oracle (`--oracle`, docs/noise.md 'What measuring can tell'): today's planner on")
print("the truth with one scale error per group of identical types, as small as all of the group's")
print("measurements allow (5 % jitter, R = 3), with a slack margin on every clock but a type's")
print("fastest; judged to the microsecond and at the 1 ms planning unit. Cells as above.")
print()
print("| judged at | oracle margin | " + " | ".join(head) + " | met |")
print("|---|---|" + "---|" * len(head) + "---|")
for t in oracle:
    cells, met, d = target_cells(f"orc-{t}", "baseline", float(t.split(":")[0]))
    assert d["oracle"] is True, d
    unit = "1 µs" if d["truth_unit_s"] < 1e-3 else "1 ms"
    print(f"| {unit} | {100 * d['oracle_margin']:g} % | " + " | ".join(cells) + f" | {met} |")
PY
echo "wrote $out"
