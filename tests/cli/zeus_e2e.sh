#!/usr/bin/env bash
# perseusd --zeus-compat end to end. The artifact's dialect: 4 client processes (one per stage of
# a simulated GPU, tests/cli/zeus_client.py) register, warm up, profile every clock, train on
# while the job plans, run its plan, and stop at [profiling-done] once the job is completed; the
# profile the v1 job measured is the simulated truth. Master's dialect: 4 ranks get, from one
# blocking schedule, the fastest plan of the profile perseusd was given.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
src=${PRS_SOURCE_DIR:?}
tmp=$(mktemp -d)
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
py=/usr/bin/python3
[[ -x $py ]] || { echo "no $py"; exit 77; }
client="$py $src/tests/cli/zeus_client.py"

start_zeusd() { # start_zeusd DIR OPTIONS...: perseusd with the Zeus routes; sets $url
  local d=$1
  shift
  mkdir -p "$d"
  "$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$d" --port-file "$d/port" --zeus-compat "$@" \
    2>"$d/perseusd.log" &
  echo $! >"$d/pid"
  wait_until 30 test -s "$d/port" || { cat "$d/perseusd.log"; fail "perseusd did not start"; }
  url="http://127.0.0.1:$(cat "$d/port")"
}
stop_zeusd() { kill "$(cat "$1/pid")" 2>/dev/null || true; rm -f "$1/pid"; }
cleanup() {
  local p
  for p in "$tmp"/*/pid; do
    [[ -f $p ]] && { kill "$(cat "$p")" 2>/dev/null || true; }
  done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

get() { curl -sf -H "Authorization: Bearer $token" "$url$1"; }

# ---- the artifact's dialect: profiling, planning, running, done ----
start_zeusd "$tmp/a" --zeus-min-clock 1200
mkdir -p "$tmp/a/state"
pids=()
for r in 0 1 2 3; do
  $client artifact "$url" $r "$tmp/a/state" >"$tmp/a/rank$r.out" 2>&1 &
  pids+=($!)
done
wait_until 60 test -s "$tmp/a/state/job" || fail "no job registered"
job=$(cat "$tmp/a/state/job")
v1_running() {
  local info
  info=$(curl -sf "$url/v1_job/$job") || return 1
  v1=$($py -c 'import json,sys; print(json.load(sys.stdin)["v1_job_id"] or "")' <<<"$info")
  token=$($py -c 'import json,sys; print(json.load(sys.stdin)["token"] or "")' <<<"$info")
  [[ -n $v1 ]] && [[ $(get "/v1/jobs/$v1" | $py -c 'import json,sys; print(json.load(sys.stdin)["phase"])') == running ]]
}
wait_until 180 v1_running || { cat "$tmp/a/perseusd.log"; fail "the job never ran its plan"; }
# Every rank gets its plan in the round after the switch: its last two schedules have it.
check_rank() { # check_rank R: the rank's last two schedules gave its computations the plan's clocks
  local r=$1 want
  want=$(get "/v1/jobs/$v1/schedule?rank=$r" |
    $py -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["clocks_mhz"])))')
  $py - "$src/tests/cli" "$tmp/a/state/rank$r.clocks" "$r" "$want" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import zeus_client as z
sched = z.pipe_schedule(int(sys.argv[3]))
want = list(map(int, sys.argv[4].split()))
rounds = [list(map(int, l.split())) for l in open(sys.argv[2]) if l.strip()]
got = [[c for e, c in zip(sched, r) if e in ("forward", "backward")] for r in rounds[-2:]]
sys.exit(0 if len(got) == 2 and all(g == want for g in got) else 1)
PY
}
all_on_plan() { for r in 0 1 2 3; do check_rank $r || return 1; done; }
wait_until 60 all_on_plan || fail "the ranks did not get the plan's clocks"
# The plan slows something down (Perseus's fastest plan already slows what is off the critical
# path), so the clocks really came from the planner, not from the profiling's highest clock.
for r in 0 1 2 3; do tail -1 "$tmp/a/state/rank$r.clocks"; done | tr ' ' '\n' | sort -u |
  grep -qv '^1410$' || fail "the plan runs every computation at the highest clock"

# The profile measured through the Zeus routes is the simulated truth (zeus_client.truth).
get "/v1/jobs/$v1/profile" >"$tmp/a/profile.csv"
$py - "$src/tests/cli" "$tmp/a/profile.csv" <<'PY' || fail "the measured profile is not the truth"
import csv, sys
sys.path.insert(0, sys.argv[1])
import zeus_client as z
rows = list(csv.DictReader(open(sys.argv[2])))
clocks = {int(r["frequency"]) for r in rows}
assert clocks == set(range(1410, 1199, -15)), sorted(clocks)
assert len(rows) == 4 * 2 * len(clocks), len(rows)
worst = 0
for r in rows:
    t, e = z.truth(int(r["stage"]), r["instruction"], int(r["frequency"]))
    worst = max(worst, abs(float(r["time"]) / t - 1), abs(float(r["energy"]) / e - 1))
print(f"profile: {len(rows)} rows, largest relative error {worst:.2e}")
assert worst < 1e-6, worst
PY
# The blocking power the job measured is the simulated one (90 W outside the computations).
get "/v1/jobs/$v1" | $py -c '
import json, sys
s = json.load(sys.stdin)
bp = s["blocking_power"]
v = bp.get("measured_w") if isinstance(bp, dict) else bp
print("blocking power", bp)
assert v is not None and abs(v - 90.0) < 0.5, bp' || fail "measured blocking power"

# Completing the v1 job ends the Zeus job: every client sees [profiling-done] and exits 0.
curl -sf -X POST -H "Authorization: Bearer $token" "$url/v1/jobs/$v1/complete" >/dev/null ||
  fail "complete"
for i in 0 1 2 3; do
  wait "${pids[$i]}" || { cat "$tmp/a/rank$i.out"; fail "rank $i did not end cleanly"; }
done
stop_zeusd "$tmp/a"

# ---- master's dialect: the fastest plan of an uploaded profile ----
$py - "$src/examples/a100-8stage.csv" "$tmp/four.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if int(r["stage"]) < 4]
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
PY
start_zeusd "$tmp/m" --zeus-microbatches 4 --zeus-profile "$tmp/four.csv" \
  --zeus-blocking-power 83.64
job=$(curl -sf -X POST -H 'Content-Type: application/json' "$url/register_job" \
  -d '{"job_id": "", "pp_degree": 4, "dp_degree": 1, "tp_degree": 1, "world_size": 4,
       "job_metadata": "e2e"}' | $py -c 'import json,sys; print(json.load(sys.stdin))')
pids=()
for r in 0 1 2 3; do
  $client master "$url" $r "$job" >"$tmp/m/rank$r.json" 2>"$tmp/m/rank$r.err" &
  pids+=($!)
done
for i in 0 1 2 3; do
  wait "${pids[$i]}" || { cat "$tmp/m/rank$i.err"; fail "master rank $i"; }
done
info=$(curl -sf "$url/v1_job/$job")
v1=$($py -c 'import json,sys; print(json.load(sys.stdin)["v1_job_id"])' <<<"$info")
token=$($py -c 'import json,sys; print(json.load(sys.stdin)["token"])' <<<"$info")
fastest=$(get "/v1/jobs/$v1/frontier" | $py -c 'import json,sys; print(json.load(sys.stdin)["fastest"])')
for r in 0 1 2 3; do
  get "/v1/jobs/$v1/schedule?rank=$r" >"$tmp/m/v1-$r.json"
  $py - "$src/tests/cli" "$tmp/m/rank$r.json" "$tmp/m/v1-$r.json" "$r" "$fastest" <<'PY' ||
import json, sys
sys.path.insert(0, sys.argv[1])
import zeus_client as z
got = json.load(open(sys.argv[2]))
v1 = json.load(open(sys.argv[3]))
r = int(sys.argv[4])
assert got["rank"] == r
names = [n for n in z.pipe_schedule(r) if n in ("forward", "backward")]
assert [f[0] for f in got["frequencies"]] == names, got
assert [f[1] for f in got["frequencies"]] == v1["clocks_mhz"], (got, v1)
assert v1["plan_id"] == int(sys.argv[5]), (v1["plan_id"], sys.argv[5])
PY
    fail "master rank $r did not get the fastest plan"
done
echo "ok: artifact dialect profiled, planned, ran and ended; master's got the fastest plan"
