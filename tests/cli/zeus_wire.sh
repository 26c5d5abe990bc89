#!/usr/bin/env bash
# perseusd --zeus-compat against the recorded exchanges of Zeus's clients and servers
# ($PRS_SHARED_DIR/data/zeus-wire): every request of each, replayed in its order (a rank's blocking
# schedule in a thread of its own), gets the recorded status and an answer of the recorded shape
# (tests/cli/zeus_client.py replay; master's plans from a profile in Zeus master's format). Then
# bad input: each gets a 4xx with a message naming what is wrong, and the server stays up; the
# barrier holds no HTTP worker; HTTPS, the creation token, the loopback rule and the secret prefix.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
src=${PRS_SOURCE_DIR:?}
tmp=$(mktemp -d)
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
py=/usr/bin/python3
[[ -x $py ]] || { echo "no $py"; exit 77; }
wire=${PRS_SHARED_DIR:-}/data/zeus-wire
[[ -n ${PRS_SHARED_DIR:-} && -d $wire ]] || skip_input "no recorded exchanges (PRS_SHARED_DIR)"
client="$py $src/tests/cli/zeus_client.py"

cleanup() {
  local p
  for p in "$tmp"/*/pid; do
    [[ -f $p ]] && { kill "$(cat "$p")" 2>/dev/null || true; }
  done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
start() { # start NAME OPTIONS...: perseusd in $tmp/NAME; sets $url
  local d=$tmp/$1
  shift
  mkdir -p "$d"
  "$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$d" --port-file "$d/port" "$@" \
    2>"$d/perseusd.log" &
  echo $! >"$d/pid"
  wait_until 30 test -s "$d/port" || { cat "$d/perseusd.log"; fail "perseusd did not start"; }
  url="http://127.0.0.1:$(cat "$d/port")"
}
stop() { kill "$(cat "$tmp/$1/pid")"; wait "$(cat "$tmp/$1/pid")" || true; rm -f "$tmp/$1/pid"; }

# A 4-stage profile for master's dialect, in Zeus master's rank-level format (the example's first
# four stages, one rank each).
$py - "$src/examples/a100-8stage.csv" "$tmp/four.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if int(r["stage"]) < 4]
with open(sys.argv[2], "w") as f:
    f.write("rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n")
    for r in rows:
        s = r["stage"]
        f.write(f"{s},0,{s},0,{s},{r['instruction']},{r['frequency']},{r['time']},{r['energy']}\n")
PY

# The artifact's profiler: 2 warm-up rounds and 15 clocks (1410..1200 MHz), then [profiling-done].
start profiler --zeus-compat --zeus-min-clock 1200 --zeus-profile-only
$client replay "$wire/kronos-instructionprofiler.exchange.jsonl" "$url" || fail "profiler replay"
stop profiler
# The artifact's plan runner, 6 rounds: here 2 warm-up rounds and 4 clocks of profiling.
start points --zeus-compat --zeus-min-clock 1365 --zeus-profile-only
$client replay "$wire/kronos-pointsolution-perseus-plans.exchange.jsonl" "$url" ||
  fail "plan-runner replay"
stop points
# Zeus master's: no microbatch count on the wire, no results; the plan of an uploaded profile.
start master --zeus-compat --zeus-microbatches 4 --zeus-profile "$tmp/four.csv" \
  --zeus-blocking-power 83.64
$client replay "$wire/zeus-master-pfo-pointsolution.exchange.jsonl" "$url" || fail "master replay"

# ---- bad input: 4xx with a message ----
# want STATUS PATTERN METHOD PATH [BODY]
want() {
  local status=$1 pattern=$2 method=$3 path=$4 body=${5:-}
  local args=(-s -o "$tmp/ans" -w '%{http_code}' -X "$method" "$url$path")
  [[ -n $body ]] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
  local got
  got=$(curl "${args[@]}")
  [[ $got == "$status" ]] || fail "$method $path $body: status $got, want $status: $(cat "$tmp/ans")"
  $py -c 'import json,sys; d=json.load(open(sys.argv[1]))["detail"]; assert isinstance(d, str) and d' \
    "$tmp/ans" || fail "$method $path: no detail message: $(cat "$tmp/ans")"
  grep -qE -- "$pattern" "$tmp/ans" || fail "$method $path: '$(cat "$tmp/ans")' lacks /$pattern/"
}
job=$(curl -sf -X POST -H 'Content-Type: application/json' "$url/register_job" \
  -d '{"pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2, "num_microbatches": 2}' |
  $py -c 'import json,sys; print(json.load(sys.stdin))')
[[ $job == *+* ]] || fail "job id $job"
sched='["load","forward","forward","backward","backward","step"]'
want 400 'not JSON' POST /register_job '{"pp_degree": 4,'
want 400 'pp_degree: required' POST /register_job '{}'
want 400 'world_size' POST /register_job '{"pp_degree": 4, "dp_degree": 1, "tp_degree": 1, "world_size": 3}'
want 400 'dp_degree: expected an integer' POST /register_job '{"pp_degree": 4, "dp_degree": "1", "tp_degree": 1, "world_size": 4}'
want 405 'allowed: POST' GET /register_job
want 404 'no such job' POST /register_rank '{"job_id": "nope", "rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0, "pipe_schedule": ["forward"], "power_state_range": [1410]}'
want 400 'pipe_schedule.*1F1B' POST /register_rank "{\"job_id\": \"$job\", \"rank\": 1, \"dp_rank\": 0, \"pp_rank\": 1, \"tp_rank\": 0, \"pipe_schedule\": [\"backward\", \"forward\", \"forward\", \"backward\"], \"power_state_range\": [1410, 1395]}"
want 400 'power_state_range\[1\]' POST /register_rank "{\"job_id\": \"$job\", \"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0, \"pipe_schedule\": $sched, \"power_state_range\": [1410, -5]}"
want 400 'outside the job' POST /register_rank "{\"job_id\": \"$job\", \"rank\": 7, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0, \"pipe_schedule\": $sched, \"power_state_range\": [1410]}"
curl -sf -X POST -H 'Content-Type: application/json' "$url/register_rank" \
  -d "{\"job_id\": \"$job\", \"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0, \"pipe_schedule\": $sched, \"power_state_range\": [1410, 1395]}" >/dev/null ||
  fail "a good registration"
want 409 'other coordinates' POST /register_rank "{\"job_id\": \"$job\", \"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 1, \"tp_rank\": 0, \"pipe_schedule\": [\"forward\", \"backward\", \"forward\", \"backward\"], \"power_state_range\": [1410, 1395]}"
want 409 "is rank 0's" POST "/register_rank" "{\"job_id\": \"$job\", \"rank\": 1, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0, \"pipe_schedule\": $sched, \"power_state_range\": [1410, 1395]}"
want 400 'other clocks' POST /register_rank "{\"job_id\": \"$job\", \"rank\": 1, \"dp_rank\": 0, \"pp_rank\": 1, \"tp_rank\": 0, \"pipe_schedule\": [\"forward\", \"backward\", \"forward\", \"backward\"], \"power_state_range\": [1410]}"
want 400 'available_frequencies' POST "/register_rank/$job" '{"rank": 1, "dp_rank": 0, "pp_rank": 1, "tp_rank": 0}'
want 404 'no such job' GET '/schedule/nope?rank=0'
want 400 'rank: expected' GET "/schedule/$job"
want 400 'rank: expected' GET "/schedule/$job?rank=abc"
want 400 'outside' GET "/schedule/$job?rank=9"
want 404 'has not registered' GET "/schedule/$job?rank=1"
want 400 'iter_time' POST "/result/$job" '{"rank": 0, "iter_time": "fast"}'
want 400 'iter_energy: 2 values for 1' POST "/result/$job" '{"rank": 0, "iter_time": [1.0], "iter_energy": [1.0, 2.0]}'
want 400 'time_breakdown.forward\[0\]\[1\]' POST "/result/$job" '{"rank": 0, "iter_time": [1.0], "time_breakdown": {"forward": [[0.1, -1]]}, "energy_breakdown": {"forward": [[1, 1]]}}'
want 404 'has not registered' POST "/result/$job" '{"rank": 1, "iter_time": [1.0]}'
want 400 'expected a JSON object' POST "/result/$job" '[1, 2]'
curl -sf "$url/healthz" >/dev/null || fail "the server went down"
stop master

# 600 requests with one thing wrong each (zeus_client.py fuzz): 200 or 4xx with a message, never 5xx.
start fuzz --zeus-compat
$client fuzz "$url" 600 || fail "mutated requests"
stop fuzz

# The barrier holds no HTTP worker: with one worker thread, 31 of 32 ranks wait in /schedule while
# the server answers other requests; the last rank's request releases them all.
start barrier --zeus-compat --threads 1
job=$(curl -sf -X POST -H 'Content-Type: application/json' "$url/register_job" \
  -d '{"pp_degree": 4, "dp_degree": 8, "tp_degree": 1, "world_size": 32, "num_microbatches": 4}' |
  $py -c 'import json,sys; print(json.load(sys.stdin))')
for r in $(seq 0 31); do
  curl -sf -X POST -H 'Content-Type: application/json' "$url/register_rank/$job" \
    -d "{\"rank\": $r, \"dp_rank\": $((r / 4)), \"pp_rank\": $((r % 4)), \"tp_rank\": 0,
         \"available_frequencies\": [1410, 1395]}" >/dev/null || fail "register rank $r"
done
pids=()
for r in $(seq 1 31); do
  curl -s -o "$tmp/barrier/$r.json" -w '%{http_code}' "$url/schedule/$job?rank=$r" \
    >"$tmp/barrier/$r.code" &
  pids+=($!)
done
waiting() {
  [[ $(curl -sf "$url/v1_job/$job" | $py -c 'import json,sys; print(json.load(sys.stdin)["waiting"])') == 31 ]]
}
wait_until 60 waiting || fail "the ranks are not all waiting"
curl -sf "$url/healthz" >/dev/null || fail "one worker, 31 waiting ranks: the server does not answer"
[[ $(ls "$tmp"/barrier/*.code | wc -l) == 31 && -z $(cat "$tmp"/barrier/*.code) ]] ||
  fail "a rank was answered before the last one asked"
# Master's dialect without --zeus-profile: the released barrier says what is missing (409).
want 409 'zeus-profile' GET "/schedule/$job?rank=0"
for p in "${pids[@]}"; do wait "$p"; done
[[ $(sort -u "$tmp"/barrier/*.code) == 409 ]] || fail "the waiting ranks were not all answered"
stop barrier

# Off without --zeus-compat; the --zeus-* options need it; a prefix is a real secret.
start off
[[ $(curl -s -o /dev/null -w '%{http_code}' "$url/info") == 404 ]] || fail "/info without --zeus-compat"
stop off
rc=0
"$bin/perseusd" --zeus-microbatches 4 2>"$tmp/err" || rc=$?
[[ $rc == 2 ]] && grep -q 'need.*--zeus-compat' "$tmp/err" || fail "--zeus-* without --zeus-compat"
rc=0
"$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$tmp/short" --zeus-compat --zeus-prefix short \
  2>"$tmp/err" || rc=$?
[[ $rc == 1 ]] && grep -q 'zeus-prefix: a secret of 16' "$tmp/err" || fail "a short --zeus-prefix"
echo "create-token-for-the-zeus-test" >"$tmp/create"
start prefixed --zeus-compat --zeus-prefix team-secret-0123456789 --create-token-file "$tmp/create"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$url/team-secret-0123456789/info") == 200 ]] ||
  fail "/info under the prefix"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$url/info") == 200 ]] || fail "/info on loopback"
# one_rank_job URL [CURL OPTIONS]: a one-rank job through its two warm-up rounds; its v1 job is then
# created (with the creation token when the server has one) and profiling starts at the highest
# clock.
one_rank_job() {
  local z=$1
  shift
  local c=(curl -sf "$@")
  local job
  job=$("${c[@]}" -X POST -H 'Content-Type: application/json' "$z/register_job" \
    -d '{"pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1, "num_microbatches": 1}' |
    $py -c 'import json,sys; print(json.load(sys.stdin))')
  "${c[@]}" -X POST -H 'Content-Type: application/json' "$z/register_rank" -d "{\"job_id\": \"$job\",
    \"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0, \"pipe_schedule\": [\"load\",
    \"forward\", \"backward\", \"step\"], \"power_state_range\": [1395, 1410]}" >/dev/null ||
    fail "register_rank at $z"
  local round
  for round in 0 1; do
    [[ $("${c[@]}" "$z/schedule/$job?rank=0") == '{"rank":0,"power_states":[1410,1410,1410,1410]}' ]] ||
      fail "warm-up round $round at $z"
    "${c[@]}" -X POST -H 'Content-Type: application/json' "$z/result/$job" \
      -d '{"rank": 0, "iter_time": [0.5, 0.5], "iter_energy": [100, 100]}' >/dev/null ||
      fail "result of warm-up round $round at $z"
  done
  [[ $("${c[@]}" "$z/schedule/$job?rank=0") == '{"rank":0,"power_states":[1410,1410,1410,1410]}' ]] ||
    fail "first profiling round at $z: $("${c[@]}" "$z/v1_job/$job")"
  "${c[@]}" "$z/v1_job/$job" | $py -c 'import json,sys; assert json.load(sys.stdin)["v1_job_id"]' ||
    fail "no v1 job behind the Zeus job at $z"
}
# Under the prefix, on a server with a creation token.
one_rank_job "$url/team-secret-0123456789"
stop prefixed
# Over HTTPS (a self-signed certificate, when openssl is here): the routes reach the v1 API too.
if command -v openssl >/dev/null; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 2 \
    -subj /CN=perseusd.example >/dev/null 2>&1 || fail "openssl"
  start tls --zeus-compat --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem"
  one_rank_job "https://127.0.0.1:$(cat "$tmp/tls/port")" -k
  stop tls
else
  echo "note: no openssl here: HTTPS not exercised"
fi
# Beyond loopback (when this machine has a non-loopback IPv4 address to reach itself by): the bare
# routes answer 403 with a message, the prefixed ones work, v1 is unchanged.
ext=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.' | grep -v '^127\.' | head -1 || true)
if [[ -n $ext ]]; then
  d=$tmp/beyond
  mkdir -p "$d"
  "$bin/perseusd" --listen 0.0.0.0:0 --data-dir "$d" --port-file "$d/port" \
    --create-token-file "$tmp/create" --zeus-compat --zeus-prefix team-secret-0123456789 \
    2>"$d/perseusd.log" &
  echo $! >"$d/pid"
  wait_until 30 test -s "$d/port" || { cat "$d/perseusd.log"; fail "perseusd did not start"; }
  url="http://$ext:$(cat "$d/port")"
  want 403 'loopback clients only.*--zeus-prefix' GET /info
  want 403 'loopback clients only' POST /register_job '{}'
  [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/team-secret-0123456789/info") == 200 ]] ||
    fail "/info under the prefix from $ext"
  [[ $(curl -s -o /dev/null -w "%{http_code}" "$url/team-secret-01234567/info") == 404 ]] ||
    fail "a wrong prefix is not the prefix"
  stop beyond
else
  echo "note: no non-loopback IPv4 address here: the loopback-only rule is not exercised"
fi
echo "ok: three recorded exchanges replayed; bad input refused with messages"
