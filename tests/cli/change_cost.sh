#!/usr/bin/env bash
# End-to-end tests of --change-cost-us (docs/planner.md, 'Clock changes'), run as a user would:
#   - bad input: negative, not a number, absurdly large: one line on stderr, exit status 2;
#   - cost 0 writes the same frontier files, byte for byte, as no option;
#   - with a cost: plans.prs keeps it, `plan export` shows the plan's changes, `evaluate` of a
#     frontier point gives the figures the planner recorded (costs included), and a frontier
#     read with a different --change-cost-us is refused.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
src=${PRS_SOURCE_DIR:?}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

ex=$src/examples/a100-8stage.csv
pipe=(--stages 4 --microbatches 4 --unit-time 0.001 --blocking-power 83.64)

# --- bad input ---
for bad in -5 abc 1e9 100001 nan; do
  expect_error 2 "--change-cost-us: expected a number of microseconds from 0 to 100000, got '$bad'" \
    "$bin" plan --profile "$ex" "${pipe[@]}" --change-cost-us "$bad" --out "$tmp/x"
done
expect_error 2 "--change-cost-us: expected a number of microseconds" \
  "$bin" evaluate --profile "$ex" "${pipe[@]}" --change-cost-us -1 --all-max

# --- cost 0: the files of no option ---
for m in exp hull; do
  "$bin" plan --profile "$ex" "${pipe[@]}" --cost-model $m --quiet --out "$tmp/$m-none"
  "$bin" plan --profile "$ex" "${pipe[@]}" --cost-model $m --change-cost-us 0 --quiet \
    --out "$tmp/$m-0"
  for f in frontier.csv frontier-detail.csv plans.prs; do
    cmp -s "$tmp/$m-none/$f" "$tmp/$m-0/$f" || fail "$m: --change-cost-us 0 changed $f"
  done
  grep -q change_cost "$tmp/$m-0/plans.prs" && fail "$m: cost 0 wrote a change_cost line"
done

# --- with a cost ---
"$bin" plan --profile "$ex" "${pipe[@]}" --cost-model hull --change-cost-us 500 --quiet \
  --out "$tmp/h500"
grep -qx "change_cost 0.0005" "$tmp/h500/plans.prs" || fail "plans.prs lacks change_cost 0.0005"
"$bin" plan export "$tmp/h500" --index 0 >"$tmp/p.json"
$py - "$tmp/p.json" <<'EOF' || fail "plan export: change_cost_s / clock_changes"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["change_cost_s"] == 0.0005, d
assert isinstance(d["clock_changes"], int) and d["clock_changes"] >= 0, d
EOF
# every point evaluates, from the frontier directory (its cost read from plans.prs), to the
# figures the planner recorded
n=$(($(wc -l <"$tmp/h500/frontier-detail.csv") - 1))
for k in 0 $((n / 2)) $((n - 1)); do
  "$bin" evaluate --profile "$ex" --frontier "$tmp/h500" --index $k --json >"$tmp/e.json"
  $py - "$tmp/e.json" "$tmp/h500/frontier-detail.csv" $k <<'EOF' || fail "evaluate point $k"
import csv, json, sys
e = json.load(open(sys.argv[1]))
row = list(csv.DictReader(open(sys.argv[2])))[int(sys.argv[3])]
assert abs(e["time_s"] - float(row["eval_time"])) < 1e-9, (e["time_s"], row)
assert abs(e["energy_j"] - float(row["eval_energy"])) < 1e-6 * e["energy_j"], (e, row)
EOF
done
# a frontier planned with free changes is not judged with a cost
expect_error 2 "--change-cost-us 500 does not match the frontier's 0" \
  "$bin" evaluate --profile "$ex" --frontier "$tmp/hull-0" --index 0 --change-cost-us 500
echo "change_cost: ok"
