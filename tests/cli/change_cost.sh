#!/usr/bin/env bash
# End-to-end tests of --change-cost-us (docs/planner.md, 'Clock changes'), run as a user would:
#   - bad input: negative, not a number, absurdly large: one line on stderr, exit status 2;
#   - cost 0 writes the same frontier files, byte for byte, as no option;
#   - with a cost: plans.prs keeps it, `plan export` shows the plan's changes, `evaluate` of a
#     frontier point gives the figures the planner recorded (costs included), and a frontier
#     read with a different --change-cost-us is refused;
#   - perseusd: a job without change_cost_us takes --change-cost-us, one with 0 keeps it, and the
#     server's fastest point is the one `perseus plan` finds with the same cost.
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
# --- bench_change_cost (docs/planner.md's figure): at cost 0 the planned and the free plan are
# one; with a cost the plan planned with it is no slower than the free plan charged ---
bench=${PRS_BIN_DIR}/bench/bench_change_cost
if [[ -x $bench ]]; then
  "$bench" "$ex" 4 4 0.001 83.64 hull 0,500 >"$tmp/bench.txt"
  $py - "$tmp/bench.txt" <<'EOF' || fail "bench_change_cost: $(cat "$tmp/bench.txt")"
import sys
rows = [l.replace("|", " ").split() for l in open(sys.argv[1]).read().splitlines()[2:]]
assert [r[0] for r in rows] == ["0", "500"], rows
z, c = rows
assert z[1:4] == z[4:7], z                   # cost 0: the same plan
assert float(c[2]) <= float(c[5]), c         # planned with the cost: no slower than the free plan
assert int(c[1]) < int(c[4]), c              # with fewer changes (6 against 28 here)
EOF
fi

# --- perseusd: the job spec's change_cost_us, and --change-cost-us for specs without one ---
rc=0
"${PRS_BIN_DIR}/perseusd" --change-cost-us -3 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--change-cost-us: expected microseconds from 0 to 100000, got '-3'" \
  "$tmp/err" || fail "perseusd --change-cost-us -3: exit $rc, $(cat "$tmp/err")"
"${PRS_BIN_DIR}/perseusd" --listen 127.0.0.1:0 --data-dir "$tmp/d" --port-file "$tmp/port" \
  --change-cost-us 300 2>"$tmp/log" &
srv=$!
trap 'kill "$srv" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
wait_until 30 test -s "$tmp/port" || fail "perseusd did not start: $(cat "$tmp/log")"
url="http://127.0.0.1:$(cat "$tmp/port")"
clocks=$($py -c 'import csv,sys; print(",".join(sorted({r["frequency"] for r in csv.DictReader(open(sys.argv[1]))}, key=int, reverse=True)))' "$ex")
create() { # create EXTRA: the job's id and token, one per line
  curl -sf -X POST -H 'Content-Type: application/json' "$url/v1/jobs" -d "{\"stages\":2,\
\"microbatches\":4,\"dp\":1,\"clocks_mhz\":[$clocks],\"blocking_power_w\":83.64,\
\"cost_model\":\"hull\"$1}" | $py -c 'import json,sys; d=json.load(sys.stdin); print(d["job_id"]); print(d["token"])'
}
frontier() { # frontier ID TOKEN: the fastest point and the spec's change_cost_us, when planned
  curl -sf -X POST -H "Authorization: Bearer $2" -H 'Content-Type: text/csv' \
    --data-binary "@$ex" "$url/v1/jobs/$1/profile" >/dev/null || fail "profile upload"
  wait_until 60 sh -c "curl -sf -H 'Authorization: Bearer $2' '$url/v1/jobs/$1/frontier' >/dev/null" ||
    fail "no frontier: $(curl -s -H "Authorization: Bearer $2" "$url/v1/jobs/$1")"
  curl -sf -H "Authorization: Bearer $2" "$url/v1/jobs/$1/frontier" >"$tmp/fr.json"
  curl -sf -H "Authorization: Bearer $2" "$url/v1/jobs/$1" >"$tmp/st.json"
  $py - "$tmp/fr.json" "$tmp/st.json" <<'EOF2'
import json, sys
f, st = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
p = f["fastest_point"]
print(p["eval_time_s"], p["eval_energy_j"], st["spec"].get("change_cost_us"))
EOF2
}
mapfile -t a < <(create "")
mapfile -t b < <(create ',"change_cost_us":0')
fa=$(frontier "${a[0]}" "${a[1]}") fb=$(frontier "${b[0]}" "${b[1]}")
echo "perseusd --change-cost-us 300: $fa; change_cost_us 0: $fb"
[[ $(cut -d' ' -f3 <<<"$fa") == 300.0 ]] || fail "the default cost is not the job's: $fa"
[[ $(cut -d' ' -f3 <<<"$fb") == 0.0 ]] || fail "the job's own cost 0 was not kept: $fb"
# the same planning from the command line: the server planned with the cost
"$bin" plan --profile "$ex" --stages 2 --microbatches 4 --unit-time 0.001 --blocking-power 83.64 \
  --cost-model hull --change-cost-us 300 --quiet --out "$tmp/s300"
"$bin" plan export "$tmp/s300" --index $(($(wc -l <"$tmp/s300/frontier-detail.csv") - 2)) >"$tmp/p.json"
want=$($py -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["eval_time_s"], d["eval_energy_j"])' "$tmp/p.json")
[[ $(cut -d' ' -f1,2 <<<"$fa") == "$want" ]] || fail "server's fastest point $fa, perseus plan's $want"
[[ $(cut -d' ' -f1,2 <<<"$fb") != "$want" ]] || fail "a job without the cost planned as one with it"
echo "change_cost: ok"
