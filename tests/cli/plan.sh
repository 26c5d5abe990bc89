#!/usr/bin/env bash
# End-to-end tests of `perseus plan` and `perseus plan export`, run as a user would.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
src=${PRS_SOURCE_DIR:?}
data=${PRS_SHARED_DIR:-}/data/sosp24
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

ex=$src/examples/a100-8stage.csv
common=(--stages 8 --microbatches 12 --unit-time 0.001 --blocking-power 83.64)

# --- usage errors ---
"$bin" plan --help >"$tmp/help"
grep -q -- "--cost-model" "$tmp/help" || fail "plan --help"
# The help is printed as is, not as a format: percentages read "5%", never "5%%".
grep -q "5% noise" "$tmp/help" || fail "plan --help lacks '5% noise'"
! grep -q "%%" "$tmp/help" || fail "plan --help prints a literal %%"
# Every option is in the synopsis as well as in the list.
sed -n '/^usage:/,/^$/p' "$tmp/help" | grep -q -- "--virtual-stages V" ||
  fail "plan --help: --virtual-stages missing from the synopsis"
grep -q -- "^  --virtual-stages V" "$tmp/help" || fail "plan --help: --virtual-stages not described"
"$bin" plan export --help | grep -q -- "--format" || fail "plan export --help"
"$bin" --help | grep -q "plan" || fail "--help"
expect_error 2 "missing required option '--out'" "$bin" plan --profile "$ex" "${common[@]}"
expect_error 2 "missing required option '--profile'" "$bin" plan "${common[@]}" --out "$tmp/x"
expect_error 2 "--stages: expected an integer >= 1, got '0'" "$bin" plan --profile "$ex" --stages 0
expect_error 2 "--microbatches: expected an integer >= 1, got 'x'" "$bin" plan --microbatches x
expect_error 2 "--unit-time: expected a number > 0, got 'abc'" "$bin" plan --unit-time abc
expect_error 2 "--unit-time: expected a number > 0, got '-1'" "$bin" plan --unit-time -1
expect_error 2 "--blocking-power: expected a number from 0 to 100000 \\(W\\), got 'nan'" "$bin" plan \
  --blocking-power nan
# beyond any GPU: its energies would overflow to inf/nan in frontier.csv and plans.prs
expect_error 2 "--blocking-power: expected a number from 0 to 100000 \\(W\\), got '1e308'" "$bin" plan \
  --blocking-power 1e308
expect_error 2 "--cost-model: expected exp or hull, got 'cubic'" "$bin" plan --cost-model cubic
expect_error 2 "unknown option '--bogus'" "$bin" plan --bogus
expect_error 2 "--frontier: expected auto, raw or clean, got 'tidy'" "$bin" plan --frontier tidy
expect_error 2 "--max-points: expected an integer >= 1, got '0'" "$bin" plan --max-points 0
expect_error 2 "--max-points: expected an integer >= 1, got 'many'" "$bin" plan --max-points many
expect_error 2 "--threads: expected an integer from 0 to 256, got '257'" "$bin" plan --threads 257
expect_error 2 "--threads: expected an integer from 0 to 256, got 'all'" "$bin" plan --threads all
expect_error 2 "unknown command 'plna' \\(did you mean 'plan'\\?\\)" "$bin" plna
expect_error 2 "unknown command 'xyzzy' \\(try 'perseus --help'\\)" "$bin" xyzzy
expect_error 2 "unknown option '--proflie' \\(did you mean '--profile'\\?\\)" "$bin" plan --proflie x
expect_error 2 "unknown option '--microbatchs=4' \\(did you mean '--microbatches'\\?\\)" \
  "$bin" plan --microbatchs=4
expect_error 2 "stage 8 has no forward rows" "$bin" plan --profile "$ex" --stages 9 \
  --microbatches 4 --unit-time 0.001 --blocking-power 83.64 --out "$tmp/x"

# --- bad profiles: one line naming file and line, exit 2 ---
hdr="stage,instruction,frequency,time,energy"
good_rows() { for f in 1410 1300 1200 1100 1000; do
  echo "0,forward,$f,0.0$((f / 100)),2$((f / 100))"; echo "0,backward,$f,0.0$((f / 50)),4$((f / 100))"; done; }
check_bad() { # name pattern content
  printf '%s' "$3" >"$tmp/$1.csv"
  expect_error 2 "$2" "$bin" plan --profile "$tmp/$1.csv" --stages 1 --microbatches 2 \
    --unit-time 0.001 --blocking-power 50 --out "$tmp/o-$1"
  [[ ! -e $tmp/o-$1 ]] || fail "output directory created for bad profile $1"
}
check_bad empty "empty.csv" ""
# finite but beyond one computation (1e6 s, 1e12 J): sums of them overflowed to inf/nan
check_bad huge_time "huge_time.csv:2: column 'time': 1e300 s is more than one computation may take" \
  "$hdr"$'\n'"0,forward,1410,1e300,20"$'\n'"0,backward,1410,0.03,40"$'\n'
check_bad huge_energy "huge_energy.csv:3: column 'energy': 1e308 J is more than one computation may take" \
  "$hdr"$'\n'"0,forward,1410,0.01,20"$'\n'"0,backward,1410,0.03,1e308"$'\n'
check_bad header_only "header_only.csv" "$hdr"$'\n'
check_bad unknown_col "unknown_col.csv:1:.*power" "stage,instruction,frequency,time,energy,power"$'\n'
check_bad missing_col "missing_col.csv:1:.*energy" "stage,instruction,frequency,time"$'\n'"0,forward,1410,0.1"$'\n'
check_bad nonnum "nonnum.csv:3:.*time" "$hdr"$'\n'"0,forward,1410,0.05,20"$'\n'"0,forward,1300,abc,20"$'\n'
check_bad negative "negative.csv:2:.*energy" "$hdr"$'\n'"0,forward,1410,0.05,-2"$'\n'
check_bad zero "zero.csv:2:.*time" "$hdr"$'\n'"0,forward,1410,0,2"$'\n'
check_bad nan "nan.csv:2:.*energy" "$hdr"$'\n'"0,forward,1410,0.05,nan"$'\n'
check_bad dup "dup.csv:3:.*(duplicate|line 2)" "$hdr"$'\n'"0,forward,1410,0.05,2"$'\n'"0,forward,1410,0.05,2"$'\n'
check_bad instr "instr.csv:2:.*instruction" "$hdr"$'\n'"0,sideways,1410,0.05,2"$'\n'
check_bad no_backward "no_backward.csv: stage 0 has no backward rows" "$hdr"$'\n'"0,forward,1410,0.05,2"$'\n'
check_bad fields "fields.csv:2:" "$hdr"$'\n'"0,forward,1410,0.05"$'\n'

# --- fewer than 4 usable options: falls back to hull for that computation, with a warning ---
{ echo "$hdr"; good_rows; } | grep -v "forward,1[023]00" >"$tmp/few.csv"
"$bin" plan --profile "$tmp/few.csv" --stages 1 --microbatches 2 --unit-time 0.001 \
  --blocking-power 50 --out "$tmp/few" 2>"$tmp/err" || fail "fallback profile: $(cat "$tmp/err")"
grep -q "stage 0 forward: .*using the hull cost model" "$tmp/err" || fail "no fallback warning"
[[ -s $tmp/few/frontier.csv ]] || fail "fallback: no frontier"

# --- one achievable time (one clock everywhere): a one-plan frontier, exit 0 ---
{ echo "$hdr"; for s in 0 1; do echo "$s,forward,1410,0.05,20"; echo "$s,backward,1410,0.1,40"; done; } >"$tmp/one.csv"
for m in exp hull; do
  "$bin" plan --profile "$tmp/one.csv" --stages 2 --microbatches 2 --unit-time 0.001 \
    --blocking-power 50 --cost-model $m --out "$tmp/one-$m" 2>"$tmp/err" || fail "one clock, $m: $(cat "$tmp/err")"
  [[ $(wc -l <"$tmp/one-$m/frontier.csv") -eq 2 ]] || fail "one clock, $m: want one plan"
  "$bin" plan export "$tmp/one-$m" --index 0 >/dev/null || fail "one clock, $m: export"
done

# --- --threads: the same files from one thread and from three ---
for t in 1 3; do
  "$bin" plan --profile "$ex" "${common[@]}" --cost-model hull --threads "$t" --quiet \
    --out "$tmp/thr$t"
done
for f in frontier.csv frontier-detail.csv plans.prs; do
  cmp -s "$tmp/thr1/$f" "$tmp/thr3/$f" || fail "$f depends on --threads"
done

# --- frontier length: refused before planning, naming the unit that fits; no overflow ---
expect_error 2 "would have 1162 points at a unit time of 0.001 s, more than the limit of 100: use a unit time of 0.02 s" \
  "$bin" plan --profile "$ex" "${common[@]}" --max-points 100 --out "$tmp/lim"
[[ ! -e $tmp/lim ]] || fail "output directory created for a refused plan"
"$bin" plan --profile "$ex" "${common[@]}" --quiet --unit-time 0.02 --max-points 100 --out "$tmp/lim"
(($(wc -l <"$tmp/lim/frontier.csv") <= 101)) || fail "--max-points 100 at the unit named"
expect_error 2 "more than the limit of 1000000: use a unit time of 2e-06 s" \
  "$bin" plan --profile "$ex" "${common[@]}" --cost-model hull --unit-time 1e-7 --out "$tmp/lim2"
# times x 1e4: ~15 million points; refused at once (it used to run for minutes): as a profile
# whose times are no computation's, and with --force-units by the frontier's size
awk -F, 'NR == 1 {print; next} {printf "%s,%s,%s,%s,%s\n", $1, $2, $3, $4 * 1e4, $5}' "$ex" >"$tmp/x1e4.csv"
expect_error 2 "x1e4.csv: times look like milliseconds, not seconds .*--force-units" \
  "$bin" plan --profile "$tmp/x1e4.csv" "${common[@]}" --quiet --out "$tmp/x1e4"
expect_error 2 "would have 14957152 points .* use a unit time of 0.02 s" \
  "$bin" plan --profile "$tmp/x1e4.csv" "${common[@]}" --quiet --out "$tmp/x1e4" --force-units
# times of ~1e298 units (a profile refuses times x 1e300, so the unit shrinks instead)
expect_error 2 "stage 0 .* too many units of 1e-300 s to count; use a larger unit time" \
  "$bin" plan --profile "$ex" "${common[@]}" --unit-time 1e-300 --out "$tmp/huge"

# --- the example profile, both models; export by index and time ---
"$bin" plan --profile "$ex" "${common[@]}" --quiet --out "$tmp/ex"
"$bin" plan --profile "$ex" "${common[@]}" --quiet --cost-model hull --out "$tmp/exh"
for d in ex exh; do
  for f in frontier.csv frontier-detail.csv plans.prs; do [[ -s $tmp/$d/$f ]] || fail "$d/$f"; done
  [[ $(head -1 "$tmp/$d/frontier.csv") == "time,energy" ]] || fail "frontier header"
done
n=$(($(wc -l <"$tmp/ex/frontier.csv") - 1))

# --- inputs read within bounds, and plans.prs read back only when it is one the writer makes ---
expect_error 2 "/dev/zero: larger than 16777216 bytes \\(a profile's limit\\)" \
  timeout 10 "$bin" plan --profile /dev/zero "${common[@]}" --out "$tmp/zero"
mkdir "$tmp/badp"
cp "$tmp/ex/frontier.csv" "$tmp/ex/frontier-detail.csv" "$tmp/badp/"
ln -s /dev/zero "$tmp/badp/plans.prs"
expect_error 2 "badp/plans.prs:1: embedded NUL byte" timeout 10 "$bin" plan export "$tmp/badp" --index 0
bad_plans() { # pattern sed-script
  rm -f "$tmp/badp/plans.prs"
  sed -e "$2" "$tmp/ex/plans.prs" >"$tmp/badp/plans.prs"
  expect_error 2 "$1" "$bin" plan export "$tmp/badp" --index 0
}
bad_plans "plans.prs:9: points 0: a plans file holds at least one plan" 's/^points .*/points 0/'
bad_plans "plans.prs:11: time units outside 0..2\\^62" '11s/^p [0-9]* /p 9223372036854775807 /'
bad_plans "plans.prs:11: time units outside" '11s/^p [0-9]* /p -9223372036854775807 /'
bad_plans "plans.prs:11: energy is not a finite number >= 0" '11s/^p \([0-9]*\) [^ ]* /p \1 -5 /'
bad_plans "plans.prs:11: evaluated time is not a whole number" \
  '11s/^p \([0-9]*\) \([^ ]*\) \([^ ]*\) [^ ]* /p \1 \2 \3 3.9785 /'
# --- polishing: --polish runs (hull's default) changes only the fastest point of the files, where it
# is no costlier than --polish none; every hull row has its LP bound (last column, below the
# energy), exp rows none; plan export shows the bound and the gap; a bad kind is refused ---
expect_error 2 "--polish: expected auto, none, runs or all, got 'some'" "$bin" plan --polish some
"$bin" synth --gpu a40 --stages 4 --irregular --seed 3 --out "$tmp/irr.csv"
irr=(--stages 4 --microbatches 6 --unit-time 0.0005 --blocking-power 70.38 --cost-model hull --quiet)
"$bin" plan --profile "$tmp/irr.csv" "${irr[@]}" --polish none --out "$tmp/pn"
"$bin" plan --profile "$tmp/irr.csv" "${irr[@]:0:10}" --out "$tmp/pr" 2>"$tmp/pr.err"
grep -qE "fastest plan evaluates to .* J \([0-9.]+ % over the LP bound\)" "$tmp/pr.err" ||
  fail "plan: no certified gap in the summary: $(cat "$tmp/pr.err")"
/usr/bin/python3 - "$tmp/pn/frontier-detail.csv" "$tmp/pr/frontier-detail.csv" "$tmp/ex/frontier-detail.csv" \
  "$tmp/pn/frontier.csv" "$tmp/pr/frontier.csv" <<'PY' ||
import csv, sys
none, runs, exp = ([r for r in csv.DictReader(open(p))] for p in sys.argv[1:4])
fn, fr = (open(p).read().splitlines() for p in sys.argv[4:6])
assert list(runs[0])[-1] == "bound", list(runs[0])
assert all(float(r["bound"]) <= float(r["eval_energy"]) * (1 + 1e-12) for r in runs)
assert all(r["bound"] == "" for r in exp)
# the same rows but the fastest, and the slower ones the polished fastest plan now dominates
key = lambda r: [v for k, v in r.items() if k != "index"]
n = len(runs) - 1
assert [key(r) for r in runs[:n]] == [key(r) for r in none[:n]], "rows before the fastest changed"
assert fr[:n + 1] == fn[:n + 1], "frontier.csv changed before the fastest"
a, b, bw = none[-1], runs[-1], 4 * 70.38
assert float(b["eval_time"]) <= float(a["eval_time"]) and float(b["eval_energy"]) <= float(a["eval_energy"])
assert float(b["eval_energy"]) < float(a["eval_energy"]), "the fastest plan did not get cheaper"
for r in none[n:-1]:
    assert float(b["eval_energy"]) + bw * (float(r["eval_time"]) - float(b["eval_time"])) <= float(r["eval_energy"])
PY
  fail "polished frontier-detail.csv"
"$bin" plan export "$tmp/pr" --index 0 >"$tmp/pr.json"
grep -q '"bound_j"' "$tmp/pr.json" && grep -q '"gap_pct"' "$tmp/pr.json" || fail "plan export: no bound"
"$bin" plan export "$tmp/ex" --index 0 >"$tmp/ex0.json"
! grep -q '"bound_j"' "$tmp/ex0.json" || fail "plan export: exp plan with a bound"
"$bin" plan --profile "$tmp/irr.csv" "${irr[@]}" --polish all --out "$tmp/pa"
[[ $(head -1 "$tmp/pa/frontier-detail.csv") == *,bound ]] || fail "--polish all: no bound column"

# hull's frontier is clean by default: evaluated times strictly falling, no plan dominated by a
# faster one plus blocking power over the gap; --frontier raw keeps every iteration
"$bin" plan --profile "$ex" "${common[@]}" --quiet --cost-model hull --frontier raw --out "$tmp/exr"
for d in exh exr; do
  /usr/bin/python3 - "$tmp/$d/frontier-detail.csv" 8 83.64 >"$tmp/$d.faults" <<'PY'
import csv, sys
rows = [(float(r["eval_time"]), float(r["eval_energy"])) for r in csv.DictReader(open(sys.argv[1]))]
bw = int(sys.argv[2]) * float(sys.argv[3])
dom = sum(any(a[0] < b[0] and a[1] + bw * (b[0] - a[0]) <= b[1] for a in rows) for b in rows)
rev = sum(rows[k][0] >= rows[k - 1][0] for k in range(1, len(rows)))
print(len(rows), dom, rev)
PY
done
read -r nh dh rh <"$tmp/exh.faults"
read -r nr dr rr <"$tmp/exr.faults"
[[ $dh == 0 && $rh == 0 ]] || fail "hull frontier not clean: $dh dominated, $rh reversals"
((nh < nr && rr > 0)) || fail "hull raw frontier ($nr points, $rr reversals) vs clean ($nh)"
"$bin" plan --profile "$ex" "${common[@]}" --quiet --frontier clean --out "$tmp/exc"
(($(wc -l <"$tmp/exc/frontier.csv") - 1 < n)) || fail "exp --frontier clean keeps every point"
"$bin" plan export "$tmp/ex" --index 0 >"$tmp/p0.json"
/usr/bin/python3 - "$tmp/p0.json" "$tmp/ex/frontier-detail.csv" <<'PY'
import csv, json, sys
plan = json.load(open(sys.argv[1]))
row = next(csv.DictReader(open(sys.argv[2])))
assert plan["index"] == 0 and plan["stages"] == 8 and plan["microbatches"] == 12, plan
assert len(plan["plan"]) == 8 and all(len(s["clocks_mhz"]) == 24 for s in plan["plan"])
assert plan["plan"][0]["ops"][:5] == ["F0", "F1", "F2", "F3", "F4"], plan["plan"][0]["ops"]
assert plan["plan"][7]["ops"][:4] == ["F0", "B0", "F1", "B1"]
assert abs(plan["eval_energy_j"] - float(row["eval_energy"])) < 1e-9
PY
"$bin" plan export "$tmp/ex" --index $((n - 1)) --format lowtime >"$tmp/last.txt"
grep -qE '^\[\[[0-9]+(, [0-9]+){23}\](, \[[0-9]+(, [0-9]+){23}\]){7}\]$' "$tmp/last.txt" || fail "lowtime format"
expect_error 2 "--index: expected 0\.\.$((n - 1)), got '$n'" "$bin" plan export "$tmp/ex" --index $n
expect_error 2 "give exactly one of --index K or --time SEC" "$bin" plan export "$tmp/ex"
expect_error 2 "no plan meets 0.1 s" "$bin" plan export "$tmp/ex" --time 0.1
expect_error 2 "plans.prs: cannot open" "$bin" plan export "$tmp/nowhere" --index 0
# --time picks the least evaluated energy among plans no slower than the target
t=$(awk -F, 'NR==2{print $6}' "$tmp/exh/frontier-detail.csv")
want=$(awk -F, -v t="$t" 'NR>1 && $6<=t+1e-9 && (best=="" || $7<best) {best=$7; k=$1} END{print k}' "$tmp/exh/frontier-detail.csv")
got=$("$bin" plan export "$tmp/exh" --time "$t" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["index"])')
[[ $got == "$want" ]] || fail "--time $t picked $got, want $want"
# a corrupted plans file is an error naming the line
sed -i '3s/.*/microbatches lots/' "$tmp/ex/plans.prs"
expect_error 2 "plans.prs:3: expected 'microbatches N'" "$bin" plan export "$tmp/ex" --index 0

# --- progress: a bar on a terminal only ---
if command -v script >/dev/null; then
  script -qec "$bin plan --profile $ex ${common[*]} --out $tmp/tty" /dev/null >"$tmp/tty.txt" </dev/null
  grep -q "planning \[" "$tmp/tty.txt" || fail "no progress bar on a terminal"
fi
t0=$(date +%s%N)
"$bin" plan --profile "$ex" "${common[@]}" --out "$tmp/notty" 2>"$tmp/err"
ms=$((($(date +%s%N) - t0) / 1000000))
! grep -q "planning \[" "$tmp/err" || fail "progress bar written to a non-terminal"
((ms >= 1000)) || ! grep -q "planning [0-9]" "$tmp/err" || fail "progress lines from a $ms ms run"
"$bin" plan --profile "$ex" "${common[@]}" --quiet --out "$tmp/quiet" 2>"$tmp/err"
[[ ! -s $tmp/err ]] || fail "--quiet wrote to stderr: $(cat "$tmp/err")"

# --- on a log, a line per tenth of the planning once it has taken a second. A 0.1 ms
# A40-class frontier plans for seconds here. The run's wall time includes loading and writing,
# so the lines are required only when it took 4 s, and refused when it took under 1 s. ---
"$bin" synth --gpu a40 --stages 8 --out "$tmp/a40.csv"
t0=$(date +%s%N)
"$bin" plan --profile "$tmp/a40.csv" --stages 8 --microbatches 24 --unit-time 0.0001 \
  --blocking-power 70 --out "$tmp/long" 2>"$tmp/err"
ms=$((($(date +%s%N) - t0) / 1000000))
grep "planning [0-9]" "$tmp/err" >"$tmp/lines" || true
line_re='^perseus plan: planning [0-9]+% \([0-9]+ of [0-9]+ steps, [0-9.]+ s\)$'
lines=$(wc -l <"$tmp/lines")
((ms < 4000 || lines >= 1)) || fail "no progress lines on a log from a $ms ms run: $(cat "$tmp/err")"
((ms >= 1000 || lines == 0)) || fail "progress lines from a $ms ms run"
((lines <= 11)) || fail "more than one progress line per tenth: $lines"
if ((lines > 0)); then
  ! grep -Evq "$line_re" "$tmp/lines" || fail "malformed progress line: $(cat "$tmp/lines")"
  tail -n 1 "$tmp/lines" | grep -q "planning 100% " || fail "progress lines stop short of 100%"
  sed 's/.*planning \([0-9]*\)%.*/\1/' "$tmp/lines" | sort -nc || fail "progress goes back"
fi

# --- the published frontiers through the CLI (without the shared data: exit 77, skipped) ---
if [[ -f $data/stage_profile/gpt3-175b+a100_sxm_bf16.csv ]]; then
  for model in gpt3-175b bloom; do
    "$bin" plan --profile "$data/stage_profile/$model+a100_sxm_bf16.csv" "${common[@]}" --quiet \
      --out "$tmp/g-$model"
    paste -d, "$tmp/g-$model/frontier.csv" "$data/frontier/${model}+a100_sxm_bf16_mb12.csv" |
      awk -F, 'NR==1 {next} $1 != $3 {print "time differs on row " NR; bad=1}
               { r = ($2 - $4) / $4; if (r < 0) r = -r; if (r > 1e-6) {print "energy differs on row " NR; bad=1} }
               END {exit bad}' || fail "$model frontier differs from the published one"
    [[ $(wc -l <"$tmp/g-$model/frontier.csv") -eq $(wc -l <"$data/frontier/${model}+a100_sxm_bf16_mb12.csv") ]] ||
      fail "$model row count"
  done
else
  skip_input "plan CLI tests passed, but the shared data was not found: published-frontier checks skipped"
fi
echo "plan CLI tests passed"
