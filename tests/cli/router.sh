#!/usr/bin/env bash
# perseus-router in front of four perseus-fakeserve instances in two pools, as an operator runs
# them:
#   - short requests go to the "short" pool and long prompts to the "long" pool, streamed and not,
#     answers passed through (SSE events ending in [DONE]; whole JSON with usage);
#   - /metrics (promtool-clean when promtool is installed) counts classes, answers per instance,
#     and the TTFT and inter-token gaps measured from the streams;
#   - malformed JSON, a missing field, an unknown model, an oversized body and an unknown URL get
#     OpenAI-shaped errors (400, 400 with param, 404 model_not_found, 413, 404);
#   - an instance's own error (400) is passed on; one that answers garbage gives 502
#     bad_backend_response;
#   - a client leaving mid-stream frees its instance (nothing left in flight, the fake's batch
#     empties), and so does one leaving before a whole (not streamed) answer, while a kept-alive
#     client sending its next request before its answer is answered twice;
#   - kill -9 of an instance mid-stream ends that stream with an error, and later requests of its
#     pool are served by the survivor;
#   - instances that stop answering (SIGSTOP) are given up after backend_timeout_s and the
#     request is re-routed to the next pool; resumed, they are up after their pause and serve;
#   - kill -9 of the router mid-stream: the streams fail, the instance drops their requests, and
#     a router restarted on the same port serves;
#   - a bad configuration is refused with exit 2 and a message naming the field, and so are bad
#     options (with a suggestion for a typo).
set -euo pipefail
router=${PRS_BIN_DIR:?}/perseus-router
fake=$PRS_BIN_DIR/perseus-fakeserve
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

# start_fake NAME TP [ARGS...]: a fake instance on a free port; sets port_NAME and pid_NAME.
start_fake() {
  local name=$1 tp=$2; shift 2
  "$fake" --listen 127.0.0.1:0 --port-file "$tmp/$name.port" --tp "$tp" "$@" \
    2>"$tmp/$name.log" &
  pids+=($!)
  printf -v "pid_$name" %s $!
  wait_until 30 test -s "$tmp/$name.port" || fail "fake $name did not start: $(cat "$tmp/$name.log")"
  printf -v "port_$name" %s "$(cat "$tmp/$name.port")"
}
start_fake s1 2
start_fake s2 2
start_fake l1 4
start_fake l2 4
start_fake bad 2 --garbage

inst() { echo "{\"name\": \"$1\", \"url\": \"http://127.0.0.1:$2\", \"tp\": $3}"; }
cat >"$tmp/router.json" <<JSON
{
  "model": "llama2-70b",
  "cost_model": {"model": "llama2-70b", "gpu": "h100"},
  "max_body_bytes": 65536,
  "backend_timeout_s": 2,
  "pools": [
    {"name": "short", "classes": ["SS", "SM", "SL", "MS", "MM", "ML"],
     "instances": [$(inst s1 "$port_s1" 2), $(inst s2 "$port_s2" 2)]},
    {"name": "long", "classes": ["LS", "LM", "LL"],
     "instances": [$(inst l1 "$port_l1" 4), $(inst l2 "$port_l2" 4)]}
  ]
}
JSON
"$router" --config "$tmp/router.json" --listen 127.0.0.1:0 --port-file "$tmp/router.port" \
  2>"$tmp/router.log" &
router_pid=$!
pids+=($router_pid)
wait_until 30 test -s "$tmp/router.port" || fail "router did not start: $(cat "$tmp/router.log")"
url=http://127.0.0.1:$(cat "$tmp/router.port")

# post PATH BODY: the status on stdout, the body in $tmp/body.
post() { curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary "$2" "$url$1"; }
metric() { # metric NAME LABELS: the value of one series on the router (0 when absent)
  curl -s "$url/metrics" | awk -v k="$1{$2}" '$1 == k {v = $2} END {print v + 0}'
}
fake_metric() { # fake_metric PORT NAME
  curl -s "http://127.0.0.1:$1/metrics" | awk -v k="$2" 'index($1, k "{") == 1 {print $2}'
}
long_prompt=$(printf 'word %.0s' $(seq 1000)) # 5000 bytes: about 1250 tokens, input class L

# Short, not streamed: a whole completion from the short pool.
code=$(post /v1/completions '{"model": "llama2-70b", "prompt": "Say hi", "max_tokens": 4}')
[[ $code == 200 ]] || fail "short completion: $code $(cat "$tmp/body")"
jq -e '.choices[0].text == " tok tok tok tok" and .usage.completion_tokens == 4' "$tmp/body" \
  >/dev/null || fail "short completion body: $(cat "$tmp/body")"
short_ok=$(($(metric perseus_router_requests_ok_total 'pool="short",instance="s1"') +
  $(metric perseus_router_requests_ok_total 'pool="short",instance="s2"')))
[[ $short_ok == 1 ]] || fail "short pool answered $short_ok requests, want 1"
[[ $(metric perseus_router_class_requests_total 'class="SS",pool="short"') == 1 ]] ||
  fail "class SS not counted"

# Short, streamed chat: every event passed through, timed by the router.
curl -sN -H 'Content-Type: application/json' "$url/v1/chat/completions" --data-binary \
  '{"model": "llama2-70b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
    "stream": true}' >"$tmp/stream"
[[ $(grep -c '^data: {' "$tmp/stream") == 5 ]] || fail "want 5 events: $(cat "$tmp/stream")"
[[ $(tail -n 2 "$tmp/stream" | head -n 1) == 'data: [DONE]' ]] || fail "stream lacks [DONE]"
ttft=0 itl=0
for i in s1 s2; do
  ttft=$((ttft + $(metric perseus_router_ttft_seconds_count "pool=\"short\",instance=\"$i\"")))
  itl=$((itl + $(metric perseus_router_inter_token_seconds_count "pool=\"short\",instance=\"$i\"")))
done
[[ $ttft == 1 && $itl == 4 ]] || fail "measured $ttft first tokens and $itl gaps, want 1 and 4"

# A long prompt goes to the long pool.
code=$(post /v1/completions "{\"model\": \"llama2-70b\", \"prompt\": \"$long_prompt\", \"max_tokens\": 3}")
[[ $code == 200 ]] || fail "long completion: $code $(cat "$tmp/body")"
[[ $(metric perseus_router_class_requests_total 'class="LS",pool="long"') == 1 ]] ||
  fail "class LS not counted"
long_ok=$(($(metric perseus_router_requests_ok_total 'pool="long",instance="l1"') +
  $(metric perseus_router_requests_ok_total 'pool="long",instance="l2"')))
[[ $long_ok == 1 ]] || fail "long pool answered $long_ok requests, want 1"

# A body larger than the router's 16 KiB of connection memory (but under max_body_bytes) is read
# in pieces and passed on whole.
big_prompt=$(printf 'word %.0s' $(seq 4000)) # 20000 bytes
code=$(post /v1/completions "{\"model\": \"llama2-70b\", \"prompt\": \"$big_prompt\", \"max_tokens\": 2}")
[[ $code == 200 ]] || fail "20000-byte request: $code $(cat "$tmp/body")"
jq -e '.usage.completion_tokens == 2' "$tmp/body" >/dev/null || fail "20000-byte request: $(cat "$tmp/body")"

# Every fake counts its GPUs' energy, idle time included (s2 has served nothing yet).
for n in s1 s2 l1 l2; do
  port=port_$n
  awk '{exit !($1 > 0)}' <<<"$(fake_metric "${!port}" perseus_fake_energy_joules_total)" ||
    fail "fake $n reports no energy"
done

if command -v promtool >/dev/null; then
  curl -s "$url/metrics" | promtool check metrics || fail "promtool rejects the router's metrics"
fi

# Bad input: OpenAI-shaped errors.
expect_oai() { # expect_oai STATUS TYPE CODE PARAM PATH BODY
  local got
  got=$(post "$5" "$6")
  [[ $got == "$1" ]] || fail "$5 $6: status $got, want $1: $(cat "$tmp/body")"
  jq -e --arg t "$2" --arg c "$3" --arg p "$4" '.error.type == $t and (.error.message | length > 0)
    and (.error.code // "") == $c and (.error.param // "") == $p' "$tmp/body" >/dev/null ||
    fail "error body for $6: $(cat "$tmp/body")"
}
expect_oai 400 invalid_request_error "" "" /v1/completions '{"model": "llama2-70b", "prompt":'
expect_oai 400 invalid_request_error "" prompt /v1/completions '{"model": "llama2-70b"}'
expect_oai 400 invalid_request_error "" max_tokens /v1/completions \
  '{"model": "llama2-70b", "prompt": "x", "max_tokens": -3}'
expect_oai 400 invalid_request_error "" messages /v1/chat/completions \
  '{"model": "llama2-70b", "messages": []}'
expect_oai 404 invalid_request_error model_not_found model /v1/completions \
  '{"model": "gpt-9", "prompt": "x"}'
expect_oai 413 invalid_request_error body_too_large "" /v1/completions \
  "{\"model\": \"llama2-70b\", \"prompt\": \"$(head -c 70000 /dev/zero | tr '\0' a)\"}"
expect_oai 404 invalid_request_error unknown_url "" /v2/anything '{}'
# An error of the instance's own (more tokens than its KV cache holds) is passed on unchanged.
code=$(post /v1/completions '{"model": "llama2-70b", "prompt": "x", "max_tokens": 1000000}')
[[ $code == 400 ]] && jq -e '.error.type == "invalid_request_error" and
  (.error.message | test("KV cache"))' "$tmp/body" >/dev/null ||
  fail "the instance's own error: $code $(cat "$tmp/body")"
[[ $(metric perseus_router_rejected_total 'reason="invalid_request"') == 4 ]] ||
  fail "invalid requests not counted"

# A backend answering garbage: 502 from a router whose only instance is that one.
sed -e "s/$port_s1/$port_bad/; s/$port_s2/$port_bad/; s/\"s2\"/\"b2\"/" "$tmp/router.json" \
  >"$tmp/bad.json"
"$router" --config "$tmp/bad.json" --listen 127.0.0.1:0 --port-file "$tmp/badrouter.port" \
  2>"$tmp/badrouter.log" &
pids+=($!)
wait_until 30 test -s "$tmp/badrouter.port" || fail "second router did not start"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' --data-binary \
  '{"model": "llama2-70b", "prompt": "x", "max_tokens": 2}' \
  "http://127.0.0.1:$(cat "$tmp/badrouter.port")/v1/completions")
[[ $code == 502 ]] && jq -e '.error.code == "bad_backend_response"' "$tmp/body" >/dev/null ||
  fail "garbage backend: $code $(cat "$tmp/body")"

# A client leaving mid-stream frees its instance and the fake's batch.
stream_long() { # stream_long FILE: a long stream in the background; sets spid
  curl -sN -H 'Content-Type: application/json' "$url/v1/completions" --data-binary \
    "{\"model\": \"llama2-70b\", \"prompt\": \"$long_prompt\", \"max_tokens\": 50000,
      \"stream\": true}" >"$1" &
  spid=$!
}
stream_long "$tmp/gone"
wait_until 30 grep -q '^data: {' "$tmp/gone" || fail "long stream did not start"
kill "$spid"; wait "$spid" 2>/dev/null || true
inflight() { echo $(($(metric perseus_router_inflight 'pool="long",instance="l1"') +
  $(metric perseus_router_inflight 'pool="long",instance="l2"'))); }
fakes_running() { echo $(($(fake_metric "$port_l1" vllm:num_requests_running) +
  $(fake_metric "$port_l2" vllm:num_requests_running))); }
# (predicates, so that wait_until re-reads the metrics on every try)
none_inflight() { [[ $(inflight) == 0 ]]; }
none_running() { [[ $(fakes_running) == 0 ]]; }
wait_until 30 none_inflight || fail "requests left in flight after the client left"
wait_until 30 none_running || fail "the fake still runs the abandoned request"
(($(metric perseus_router_client_gone_total 'pool="long",instance="l1"') +
  $(metric perseus_router_client_gone_total 'pool="long",instance="l2"') == 1)) ||
  fail "the departed client is not counted"

# A client leaving before a whole (not streamed) answer: the router sees it leave while it waits
# for the instance, and the instance drops the request at once, not when it would have ended.
curl -s -H 'Content-Type: application/json' "$url/v1/completions" --data-binary \
  "{\"model\": \"llama2-70b\", \"prompt\": \"$long_prompt\", \"max_tokens\": 50000}" \
  >"$tmp/gone_whole" &
wpid=$!
one_running() { [[ $(fakes_running) == 1 && $(inflight) == 1 ]]; }
wait_until 30 one_running || fail "the long request did not start"
kill "$wpid"; wait "$wpid" 2>/dev/null || true
wait_until 30 none_inflight || fail "a whole answer's request left in flight after the client left"
wait_until 30 none_running || fail "the fake still runs the request whose client left"
# (unseen, the request would end only when backend_timeout_s gives the silent instances up,
# counted as their failures: the departure must be what is counted)
(($(metric perseus_router_client_gone_total 'pool="long",instance="l1"') +
  $(metric perseus_router_client_gone_total 'pool="long",instance="l2"') == 2)) ||
  fail "the client that left before a whole answer is not counted"
# ... but a kept-alive client sending its next request while it waits has not left: both
# requests are answered in full.
exec 3<>"/dev/tcp/127.0.0.1/$(cat "$tmp/router.port")"
req() { # req MAX_TOKENS CONNECTION: a request on the kept-alive connection
  local body="{\"model\": \"llama2-70b\", \"prompt\": \"$long_prompt\", \"max_tokens\": $1}"
  printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
  printf 'Connection: %s\r\nContent-Length: %d\r\n\r\n%s' "$2" "${#body}" "$body"
}
req 30 keep-alive >&3 # about 1 s at the fake, within backend_timeout_s
wait_until 30 one_running || fail "the kept-alive client's first request did not start"
req 2 close >&3
timeout 60 cat <&3 >"$tmp/pipelined" || fail "the kept-alive client's answers did not end"
exec 3<&-
answers=$(grep -o 'HTTP/1.1 200 OK' "$tmp/pipelined" | wc -l)
[[ $answers == 2 ]] && grep -q '"completion_tokens":30' "$tmp/pipelined" ||
  fail "a kept-alive client's next request was taken for a departure: $(cat "$tmp/pipelined")"

# Slow backends: both long instances stopped (SIGSTOP) answer nothing; each is given up after
# backend_timeout_s and counted as failed, and the request is re-routed to the short pool.
errors() { echo $(($(metric perseus_router_backend_errors_total 'pool="long",instance="l1"') +
  $(metric perseus_router_backend_errors_total 'pool="long",instance="l2"'))); }
rerouted() { echo $(($(metric perseus_router_rerouted_total 'pool="short",instance="s1"') +
  $(metric perseus_router_rerouted_total 'pool="short",instance="s2"'))); }
errors_before=$(errors) rerouted_before=$(rerouted)
kill -STOP "$pid_l1" "$pid_l2"
code=$(post /v1/completions "{\"model\": \"llama2-70b\", \"prompt\": \"$long_prompt\", \"max_tokens\": 2}")
kill -CONT "$pid_l1" "$pid_l2"
[[ $code == 200 ]] || fail "with the long pool stopped: $code $(cat "$tmp/body")"
(($(errors) - errors_before == 2)) || fail "$(($(errors) - errors_before)) stopped instances given up, want 2"
(($(rerouted) - rerouted_before == 1)) || fail "the request was not re-routed to the short pool"
wait_until 30 none_inflight || fail "requests left in flight after the slow backends"
long_up() { (($(metric perseus_router_instance_up 'pool="long",instance="l1"') +
  $(metric perseus_router_instance_up 'pool="long",instance="l2"') == 2)); }
wait_until 30 long_up || fail "the long instances are not back up"
long_ok() { echo $(($(metric perseus_router_requests_ok_total 'pool="long",instance="l1"') +
  $(metric perseus_router_requests_ok_total 'pool="long",instance="l2"'))); }
ok_before=$(long_ok)
code=$(post /v1/completions "{\"model\": \"llama2-70b\", \"prompt\": \"$long_prompt\", \"max_tokens\": 2}")
[[ $code == 200 && $(long_ok) == $((ok_before + 1)) ]] || fail "the resumed long pool does not serve"

# kill -9 of the instance serving a stream: the stream fails, the survivor serves what follows.
stream_long "$tmp/killed"
wait_until 30 grep -q '^data: {' "$tmp/killed" || fail "long stream did not start"
victim=l1 survivor=l2
[[ $(metric perseus_router_inflight 'pool="long",instance="l2"') == 1 ]] && victim=l2 survivor=l1
victim_pid=pid_$victim
kill -9 "${!victim_pid}"
rc=0; wait "$spid" || rc=$?
[[ $rc != 0 ]] || fail "the broken stream ended as if complete"
! grep -q '\[DONE\]' "$tmp/killed" || fail "the broken stream carries [DONE]"
before=$(metric perseus_router_requests_ok_total "pool=\"long\",instance=\"$survivor\"")
for _ in 1 2 3; do
  code=$(post /v1/completions "{\"model\": \"llama2-70b\", \"prompt\": \"$long_prompt\", \"max_tokens\": 2}")
  [[ $code == 200 ]] || fail "after the kill: $code $(cat "$tmp/body")"
done
after=$(metric perseus_router_requests_ok_total "pool=\"long\",instance=\"$survivor\"")
[[ $((after - before)) == 3 ]] || fail "the survivor ($survivor) served $((after - before)) of 3"
[[ $(metric perseus_router_backend_errors_total "pool=\"long\",instance=\"$victim\"") -ge 1 ]] ||
  fail "the killed instance's failure is not counted"

# kill -9 of the router with streams in flight: the clients see a broken transfer, the instances
# drop the requests, and a router restarted on the same port serves again.
router_port=$(cat "$tmp/router.port")
stream_long "$tmp/r1"
s1=$spid
stream_long "$tmp/r2"
s2=$spid
two_streams() { grep -q '^data: {' "$tmp/r1" && grep -q '^data: {' "$tmp/r2"; }
wait_until 30 two_streams || fail "streams through the router did not start"
kill -9 "$router_pid"
for p in "$s1" "$s2"; do
  rc=0; wait "$p" || rc=$?
  [[ $rc != 0 ]] || fail "a stream cut by the router's death ended as if complete"
done
survivor_idle() { [[ $(fake_metric "$(eval echo "\$port_$survivor")" vllm:num_requests_running) == 0 ]]; }
wait_until 30 survivor_idle || fail "the instance still runs the requests of the dead router"
"$router" --config "$tmp/router.json" --listen "127.0.0.1:$router_port" 2>"$tmp/router2.log" &
pids+=($!)
served() { [[ $(post /v1/completions '{"model": "llama2-70b", "prompt": "x", "max_tokens": 2}') == 200 ]]; }
wait_until 30 served || fail "the restarted router does not serve: $(cat "$tmp/router2.log")"

# Bad configurations: exit 2, one line naming the field.
echo '{"model": "m", "cost_model": {"model": "llama2-70b", "gpu": "h100"}, "pools": [
  {"name": "p", "classes": ["SS"], "instances": [{"name": "a", "url": "http://x:1", "tp": 2}]}]}' \
  >"$tmp/c1.json"
expect_error 2 'class SM is in no pool' "$router" --config "$tmp/c1.json"
sed 's/"tp": 2/"tp": 2, "mhz": 99/' "$tmp/c1.json" >"$tmp/c2.json"
expect_error 2 'pools\[0\]\.instances\[0\]\.mhz' "$router" --config "$tmp/c2.json"
echo '{"model": ' >"$tmp/c3.json"
expect_error 2 'c3.json:' "$router" --config "$tmp/c3.json"
# Bad options: one line, exit 2.
expect_error 2 "^perseus-router: unknown option '--confg' \(did you mean '--config'\?\)$" \
  "$router" --confg x
expect_error 2 'config FILE is required' "$router"
expect_error 2 "^perseus-fakeserve: not a number: 'x'$" "$fake" --tp x
expect_error 2 'does not fit on 1 h100' "$fake" --tp 1
expect_error 2 'needs a value' "$fake" --tp
[[ $("$router" --version) == "perseus-router "* ]] || fail "perseus-router --version"
echo ok
