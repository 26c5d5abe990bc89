#!/usr/bin/env bash
# kill -9 of the inference run time's services at random instants, under a steady stream of
# requests (docs/router.md, "Crashes"): perseusd with an inference cluster declared, perseus-gpud
# on the fake NVML, three perseus-fakeserve instances, a perseus-instclock per instance leasing
# its GPUs through perseus-gpud, and perseus-router in front of the instances reporting its loads
# to perseusd. A client program (tests/router/infer_kill_client.c) keeps four requests in flight
# (completions and chats, streamed or not, short and long prompts), each with a deadline, and
# records every request's outcome. Rounds of three kills (the router, one controller, perseusd,
# in a random order), each after a random number of completed requests, and after each:
#   - the router (with two 20,000-token requests in flight besides the clients'): every request
#     in flight ends with a whole answer or a transfer error (never a half answer taken for a
#     whole one, never a hang past the deadline); the instances drop the dead router's requests
#     (their running and waiting counts drain to 0); a router restarted on the same port serves;
#   - a controller: perseus-gpud releases and resets every GPU it held (back at the highest
#     clock, a release line with reset=ok per GPU); a controller restarted after the reset, at
#     once, or at once and killed again while it starts (all it leased reset), leases them again;
#   - perseusd: restarted on the same data directory and port, the cluster is there as declared,
#     its load count never goes back, the router's reports resume, and every report the router
#     counted as delivered is stored (the cluster's load count is at least the count at the
#     router's start plus the router's delivered reports).
# Requests that fail are all cut by a router kill (they overlap its down time); the others are
# all answered whole. The seed is printed (PRS_KILL_SEED replays the draws; PRS_KILL_ROUNDS sets
# the rounds, 6 by default). Skipped (77) without the fake NVML.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
[[ -n ${PRS_FAKE_NVML:-} ]] || skip_input "no fake NVML"
command -v jq >/dev/null || skip_input "jq not found"
seed=${PRS_KILL_SEED:-$((($$ ^ ${EPOCHSECONDS:-0}) % 32768))}
rounds=${PRS_KILL_ROUNDS:-6}
echo "seed $seed (PRS_KILL_SEED=$seed replays the draws), $rounds rounds"
RANDOM=$seed
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prs-infer-kill-XXXXXX")
declare -A pid=()
workers=() sentinel=()
cleanup() {
  touch "$tmp/stop"
  for p in "${workers[@]}" "${sentinel[@]}" "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
: >"$tmp/router_down" # one line per router kill: its instant, and when the new one served
# stop NAME [SIGNAL]: signal a service and reap it.
stop() {
  kill "-${2:-TERM}" "${pid[$1]}" 2>/dev/null || true
  wait "${pid[$1]}" 2>/dev/null || true
  unset "pid[$1]"
}
now() { echo "$EPOCHREALTIME"; }
# poll_until SECONDS CMD...: wait_until at a quarter of a second between tries, for predicates
# that run programs each try (on a busy machine, starting them every 20 ms costs the services
# the CPU they need to recover).
poll_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || { "$@"; return; }
    sleep 0.25
  done
}

# --- perseus-gpud on 8 fake H100s ---
export PRS_FAKE_GPU_DIR=$tmp PRS_NVML_LIBRARY=$PRS_FAKE_NVML PRS_FAKE_GPU_COUNT=8
export PRS_FAKE_NVML_PRESET=h100
gpud_sock=$tmp/gpud.sock
echo "# root only" >"$tmp/gpud.conf"
"$bin/perseus-gpud" --socket "$gpud_sock" --state-dir "$tmp" --config "$tmp/gpud.conf" \
  2>"$tmp/gpud.log" &
pid[gpud]=$!
wait_until 30 grep -q "msg=serving" "$tmp/gpud.log" || fail "perseus-gpud did not start"
"$bin/perseus-gpud" --list >"$tmp/list"
mapfile -t uuid < <(awk 'NR > 1 {print $2}' "$tmp/list")
highest=$(awk 'NR == 2 {print $4}' "$tmp/list")
((${#uuid[@]} == 8)) && [[ $highest =~ ^[0-9]+$ ]] || fail "perseus-gpud --list: $(cat "$tmp/list")"
clocks() { "$bin/perseus-gpud" --list | awk 'NR > 1 {printf "%s%s", (NR > 2 ? " " : ""), $4}'; }

# --- the instances: name, TP, first GPU; the pools of the router and of perseusd ---
names=(s1 s2 l1)
declare -A tp=([s1]=2 [s2]=2 [l1]=4) first=([s1]=0 [s2]=2 [l1]=4)
declare -A fport=()
for n in "${names[@]}"; do
  echo 1980 >"$tmp/$n.mhz"
  "$bin/perseus-fakeserve" --listen 127.0.0.1:0 --port-file "$tmp/$n.port" --tp "${tp[$n]}" \
    --speedup 20 --clock-file "$tmp/$n.mhz" 2>"$tmp/$n.log" &
  pid[$n]=$!
  wait_until 30 test -s "$tmp/$n.port" || fail "fake $n did not start: $(cat "$tmp/$n.log")"
  fport[$n]=$(cat "$tmp/$n.port")
done
# gpus_of NAME: the instance's GPU indices.
gpus_of() { seq "${first[$1]}" $((first[$1] + tp[$1] - 1)); }

# --- perseusd, and the cluster declared in it ---
"$bin/perseus" infer synth --gpu h100 --model llama2-70b --tp 2,4 --clocks 1980,930 \
  --out "$tmp/prof.csv" >/dev/null || fail "synth"
# start_perseusd [PORT]: on the data directory $tmp/d (a free port the first time).
start_perseusd() {
  rm -f "$tmp/sport"
  "$bin/perseusd" --listen "127.0.0.1:${1:-0}" --data-dir "$tmp/d" --port-file "$tmp/sport" \
    2>>"$tmp/perseusd.log" &
  pid[perseusd]=$!
  wait_until 30 test -s "$tmp/sport" || fail "perseusd did not start: $(tail "$tmp/perseusd.log")"
}
start_perseusd
sport=$(cat "$tmp/sport")
server=http://127.0.0.1:$sport
inst_json() { # inst_json NAME: the instance as perseusd's declaration lists it
  local g list=
  for g in $(gpus_of "$1"); do list+="${list:+,}\"${uuid[$g]}\""; done
  echo "{\"url\": \"http://127.0.0.1:${fport[$1]}\", \"tp\": ${tp[$1]}, \"gpus\": [$list]}"
}
jq -n --rawfile prof "$tmp/prof.csv" --argjson s1 "$(inst_json s1)" --argjson s2 "$(inst_json s2)" \
  --argjson l1 "$(inst_json l1)" '{name: "killed", gpus: 16, profile_csv: $prof,
  probe_requests: 100, clocks: 2, pools: {SS: {instances: [$s1]}, MM: {instances: [$s2]},
  LS: {instances: [$l1]}}}' >"$tmp/decl.json"
curl -sf -H 'Content-Type: application/json' --data-binary "@$tmp/decl.json" \
  "$server/v1/clusters" >"$tmp/cluster.json" || fail "declaring the cluster"
cid=$(jq -r .cluster_id "$tmp/cluster.json")
jq -r .token "$tmp/cluster.json" >"$tmp/token"
cluster_state() { curl -sf -H "Authorization: Bearer $(cat "$tmp/token")" "$server/v1/clusters/$cid"; }
cluster_state | jq -S '[.name, .gpus, .instances]' >"$tmp/declared" || fail "cluster state"
loads() { cluster_state | jq -e .loads; }

# --- the clock controllers ---
start_ctl() { # start_ctl NAME
  local g gpus=
  for g in $(gpus_of "$1"); do gpus+="${gpus:+,}nvml:$g"; done
  "$bin/perseus-instclock" --metrics "http://127.0.0.1:${fport[$1]}/metrics" --tp "${tp[$1]}" \
    --period 0.1 --time-scale 20 --gpus "$gpus" --gpud-socket "$gpud_sock" \
    --clock-file "$tmp/$1.mhz" 2>>"$tmp/ctl-$1.log" &
  pid[ctl-$1]=$!
}
# locked NAME: every GPU of the instance below its highest clock (leased and set by a controller).
locked() {
  local c g
  read -ra c <<<"$(clocks)"
  for g in $(gpus_of "$1"); do ((c[g] < highest)) || return 1; done
}
reset_all() { # reset_all NAME: every GPU of the instance back at its highest clock
  local c g
  read -ra c <<<"$(clocks)"
  for g in $(gpus_of "$1"); do ((c[g] == highest)) || return 1; done
}
for n in "${names[@]}"; do start_ctl "$n"; done
for n in "${names[@]}"; do
  poll_until 30 locked "$n" || fail "controller $n did not lock its GPUs: $(tail "$tmp/ctl-$n.log")"
done

# --- the router ---
inst() { echo "{\"name\": \"$1\", \"url\": \"http://127.0.0.1:${fport[$1]}\", \"tp\": ${tp[$1]}}"; }
cat >"$tmp/router.json" <<JSON
{"model": "llama2-70b", "cost_model": {"model": "llama2-70b", "gpu": "h100"},
 "backend_timeout_s": 10,
 "perseusd": {"url": "$server", "cluster": "$cid", "token_file": "$tmp/token", "period_s": 0.2,
              "rate_scale": 10},
 "pools": [{"name": "short", "classes": ["SS", "SM", "SL", "MS", "MM", "ML"],
            "instances": [$(inst s1), $(inst s2)]},
           {"name": "long", "classes": ["LS", "LM", "LL"], "instances": [$(inst l1)]}]}
JSON
# start_router [PORT]: the router (a free port the first time); L0 is the cluster's load count
# before it, from which its delivered reports are counted.
start_router() {
  L0=$(loads) || fail "no load count before the router's start"
  rm -f "$tmp/rport"
  "$bin/perseus-router" --config "$tmp/router.json" --listen "127.0.0.1:${1:-0}" \
    --port-file "$tmp/rport" 2>>"$tmp/router.log" &
  pid[router]=$!
  wait_until 30 test -s "$tmp/rport" || fail "router did not start: $(tail "$tmp/router.log")"
}
start_router
rport=$(cat "$tmp/rport")
rurl=http://127.0.0.1:$rport
rmetric() { # rmetric PREFIX: the sum of the router's series starting with PREFIX
  curl -sf "$rurl/metrics" | awk -v k="$1" 'index($1, k) == 1 {v += $2} END {print v + 0}'
}
# acked: the reports the router counted as delivered (answered 2xx, or 422: taken, not planned).
acked() {
  curl -sf "$rurl/metrics" |
    awk '$1 ~ /^perseus_router_load_reports_total\{result="(ok|unplannable)"\}$/ {v += $2}
      END {print v + 0}'
}
fake_busy() { # the requests running and waiting at every fake (one curl reads the three pages)
  curl -sf "http://127.0.0.1:${fport[s1]}/metrics" "http://127.0.0.1:${fport[s2]}/metrics" \
    "http://127.0.0.1:${fport[l1]}/metrics" |
    awk '/^vllm:num_requests_(running|waiting)\{/ {v += $2} END {print v + 0}'
}
drained() { [[ $(fake_busy) == 0 ]]; }
served() {
  [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$rurl/v1/completions" \
    -d '{"model": "llama2-70b", "prompt": "probe", "max_tokens": 2}') == 200 ]]
}
poll_until 30 served || fail "the router does not serve"

# --- the clients ---
long_prompt=$(printf 'word %.0s' $(seq 1000)) # about 1250 tokens: input class L
# Four requests kept in flight, each with a 20 s deadline, each outcome a line of $tmp/outcomes
# (tests/router/infer_kill_client.c: start end stream chat long max_tokens curl-status
# http-status verdict).
client=$bin/tests/infer_kill_client
[[ -x $client ]] || skip_input "no $client"
# The verdicts can fail: from an instance answering garbage every answer is "half" (a 200 that is
# not whole), from one that is stopped (SIGSTOP) every request a "hang" at its deadline.
"$bin/perseus-fakeserve" --listen 127.0.0.1:0 --port-file "$tmp/bad.port" --tp 2 --garbage \
  2>/dev/null &
pid[bad]=$!
wait_until 30 test -s "$tmp/bad.port" || fail "the garbage instance did not start"
verdicts() { # verdicts DEADLINE: 4 requests to the bad instance, their verdicts
  rm -f "$tmp/check"
  "$client" --url "http://127.0.0.1:$(cat "$tmp/bad.port")" --out "$tmp/check" \
    --stop-file "$tmp/stop" --seed "$seed" --deadline-s "$1" --requests 4 || fail "client: $?"
  awk '{print $9}' "$tmp/check" | sort -u | paste -sd' '
}
[[ $(verdicts 20) == half ]] || fail "answers of garbage not judged half: $(cat "$tmp/check")"
kill -STOP "${pid[bad]}"
[[ $(verdicts 1) == hang ]] || fail "unanswered requests not judged hang: $(cat "$tmp/check")"
kill -CONT "${pid[bad]}"
stop bad
"$client" --url "$rurl" --out "$tmp/outcomes" --stop-file "$tmp/stop" --seed "$seed" \
  --concurrency 4 --deadline-s 20 &
workers+=($!)
completed() { # the requests the clients completed so far, into $ndone (running no program)
  local lines=()
  [[ ! -e $tmp/outcomes ]] || mapfile -t lines <"$tmp/outcomes"
  ndone=${#lines[@]}
}
# after_some: wait for 1 to 12 more completed requests (the random instant of the next kill).
after_some() {
  completed
  local want=$((ndone + 1 + RANDOM % 12))
  at_least() { completed && ((ndone >= want)); }
  poll_until 60 at_least || fail "the clients completed no request in 60 s"
}
declare -A kills=([router]=0 [ctl]=0 [perseusd]=0)

# every_report_stored: every report the running router counted as delivered is in the cluster's
# load count (read after the router's count).
every_report_stored() {
  local a n
  a=$(acked) && n=$(loads) || return 1
  ((n >= L0 + a)) || fail "perseusd stores $n loads, fewer than $L0 + $a delivered by the router"
}

# mark LABEL: the time since the previous mark, into $phases (the kill's report line).
mark() {
  local t=$EPOCHREALTIME
  phases+="${phases:+, }$1 +$(((${t/./} - ${last_mark/./}) / 1000)) ms"
  last_mark=$t
}

# sentinels: two requests of class ML (which the clients never send) generating 20,000 tokens,
# one whole and one streamed, that take minutes to answer: the instances must drop them when the
# router dies. Waits until the router routed both and the stream's first token came.
sentinels() {
  local ml body
  ml=$(rmetric 'perseus_router_class_requests_total{class="ML"')
  body="{\"model\": \"llama2-70b\", \"prompt\": \"${long_prompt:0:2000}\", \"max_tokens\": 20000"
  curl -s --max-time 60 -o /dev/null --data-binary "$body}" "$rurl/v1/completions" &
  sentinel=($!)
  curl -sN --max-time 60 -o "$tmp/sentinel" --data-binary "$body, \"stream\": true}" \
    "$rurl/v1/completions" &
  sentinel+=($!)
  routed() { (($(rmetric 'perseus_router_class_requests_total{class="ML"') == ml + 2)); }
  poll_until 30 routed || fail "the sentinel requests were not routed"
  wait_until 30 grep -q '^data: {' "$tmp/sentinel" || fail "the sentinel stream did not start"
}

# kill_router: with requests in flight; the instances drop them, a router on the same port serves.
kill_router() {
  sentinels
  every_report_stored
  local t p rc
  what="the router ($(rmetric perseus_router_inflight) requests in flight)"
  t=$(now)
  stop router KILL
  mark killed
  poll_until 30 drained || fail "the instances still run $(fake_busy) requests of the dead router"
  mark "instances drained"
  for p in "${sentinel[@]}"; do
    rc=0
    wait "$p" || rc=$?
    ((rc != 0 && rc != 28)) || fail "a sentinel request cut by the router's death: curl status $rc"
  done
  start_router "$rport"
  poll_until 30 served || fail "the restarted router does not serve: $(tail "$tmp/router.log")"
  mark "restarted router serving"
  echo "$t $(now)" >>"$tmp/router_down"
}

# kill_ctl: a controller holding its GPUs low; perseus-gpud resets them, a new one leases them.
# The new one starts after the reset, or at once (as a supervisor restarts it), or at once and is
# killed in turn 0-199 ms into its start (a second kill, whatever it leased by then).
kill_ctl() {
  local n=${names[RANDOM % 3]} mode=$((RANDOM % 3)) p q
  local how=("after the reset" "at once" "at once, and killed again while it starts")
  poll_until 30 locked "$n" || fail "controller $n does not hold its GPUs: $(clocks)"
  p=${pid[ctl-$n]}
  what="controller $n (restarted ${how[mode]})"
  stop "ctl-$n" KILL
  mark killed
  ((mode == 0)) || start_ctl "$n"
  if ((mode == 2)); then
    q=${pid[ctl-$n]}
    sleep "$(printf '0.%03d' $((RANDOM % 200)))" # a random instant of its start
    stop "ctl-$n" KILL
    kills[ctl]=$((kills[ctl] + 1))
    mark "killed again"
    # every GPU it leased is released and reset
    all_released() {
      (($(grep -c "msg=release .*pid=$q .*reset=ok" "$tmp/gpud.log") ==
        $(grep -c "msg=lease .*pid=$q " "$tmp/gpud.log")))
    }
    poll_until 30 all_released || fail "perseus-gpud did not reset what pid $q leased: $(tail "$tmp/gpud.log")"
    mark "its $(grep -c "msg=lease .*pid=$q " "$tmp/gpud.log") leases reset"
  fi
  if ((mode != 1)); then
    poll_until 30 reset_all "$n" || fail "after kill -9 of controller $n the GPUs are at $(clocks)"
    mark "GPUs at the highest clock"
  fi
  released() { (($(grep -c "msg=release .*pid=$p .*reset=ok" "$tmp/gpud.log") == tp[$n])); }
  poll_until 30 released || fail "perseus-gpud did not reset the $n GPUs of pid $p: $(tail "$tmp/gpud.log")"
  mark "${tp[$n]} resets logged"
  ((mode == 1)) || start_ctl "$n"
  poll_until 30 locked "$n" || fail "restarted controller $n holds no GPU: $(tail "$tmp/ctl-$n.log")"
  mark "leased again"
}

# kill_perseusd: the cluster, its load count and the delivered reports survive; reports resume.
kill_perseusd() {
  local n1 n2 a
  n1=$(loads) || fail "cluster state before the kill"
  what="perseusd ($n1 loads stored)"
  stop perseusd KILL
  mark killed
  start_perseusd "$sport"
  mark restarted
  cluster_state | jq -S '[.name, .gpus, .instances]' | cmp -s - "$tmp/declared" ||
    fail "the cluster changed across kill -9: $(cluster_state)"
  n2=$(loads)
  ((n2 >= n1)) || fail "the cluster's loads went back from $n1 to $n2 across kill -9"
  a=$(acked)
  resumed() { (($(acked) > a)); }
  poll_until 30 resumed || fail "the router's reports did not resume: $(tail "$tmp/router.log")"
  mark "reports resumed"
  every_report_stored
}

for ((r = 1; r <= rounds; r++)); do
  order=(router ctl perseusd)
  for ((i = 2; i > 0; i--)); do # Fisher-Yates
    j=$((RANDOM % (i + 1)))
    k=${order[i]} order[i]=${order[j]} order[j]=$k
  done
  for k in "${order[@]}"; do
    after_some
    completed
    phases='' last_mark=$EPOCHREALTIME done_before=$ndone
    "kill_$k"
    kills[$k]=$((kills[$k] + 1))
    echo "round $r: kill -9 of $what after $done_before requests; $phases"
  done
done

# --- the outcomes ---
touch "$tmp/stop"
for p in "${workers[@]}"; do wait "$p" || fail "the clients failed"; done
workers=()
awk '$9 != "ok" && $9 != "clean"' "$tmp/outcomes" >"$tmp/bad"
[[ ! -s $tmp/bad ]] || fail "requests that hung or were half answered as whole:
$(head "$tmp/bad")"
# Every failed request overlaps a router's down time (from its kill to the restarted one serving).
awk 'NR == FNR {k[NR] = $1; up[NR] = $2; n = NR; next}
  $9 != "ok" {for (i = 1; i <= n; i++) if ($1 <= up[i] && $2 >= k[i]) next; print}' \
  "$tmp/router_down" "$tmp/outcomes" >"$tmp/stray"
[[ ! -s $tmp/stray ]] || fail "requests failed away from any router kill:
$(head "$tmp/stray")"
poll_until 30 drained || fail "the instances still run $(fake_busy) requests"
every_report_stored
for n in "${names[@]}"; do stop "ctl-$n"; done
[[ $(clocks) == $(printf "$highest %.0s" {1..8} | sed 's/ $//') ]] ||
  fail "GPUs not reset after the controllers stopped: $(clocks)"
read -r total ok cut cut_streams refused < <(awk '{t++} $9 == "ok" {o++}
  $9 == "clean" && $7 == 7 {r++} $9 == "clean" && $7 != 7 {c++; s += $3}
  END {print t, o, c + 0, s + 0, r + 0}' "$tmp/outcomes")
echo "kills: router ${kills[router]}, controllers ${kills[ctl]}, perseusd ${kills[perseusd]}"
echo "requests: $total, $ok answered whole; $cut cut by a router kill ($cut_streams streams), all" \
  "with a transfer error; $refused refused while the router was down; load reports stored: $(loads)"
echo "failed requests by curl status (HTTP status): $(awk '$9 != "ok" {print $7 " (" $8 ")"}' \
  "$tmp/outcomes" | sort | uniq -c | awk '{printf "%s%s %s x%s", (NR > 1 ? ", " : ""), $2, $3, $1}')"
echo ok
