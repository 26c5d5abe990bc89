#!/usr/bin/env bash
# perseus-router reports its per-class loads to perseusd's inference cluster (the "perseusd" key
# of its configuration): with a cluster declared, requests of class SS through the router reach
# the cluster as a load report (its `loads` count grows; the SS pool's forecast, the peak of the
# reports over the pool period, is positive, the other classes' zero: the latest load itself lasts
# one 0.1-s report), the router counts the reports on /metrics; a wrong token makes the reports fail
# (counted, logged once) without disturbing the requests; bad "perseusd" keys exit 2 naming the
# field.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
command -v jq >/dev/null || skip_input "jq not found"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

"$bin/perseus" infer synth --gpu h100 --model llama2-70b --tp 2,4 --clocks 1980,930 \
  --out "$tmp/prof.csv" || fail "synth"
"$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$tmp/d" --port-file "$tmp/sport" \
  2>"$tmp/perseusd.log" &
pids+=($!)
wait_until 30 test -s "$tmp/sport" || fail "perseusd did not start: $(cat "$tmp/perseusd.log")"
server=http://127.0.0.1:$(cat "$tmp/sport")
jq -n --rawfile prof "$tmp/prof.csv" '{name: "demo", gpus: 8, profile_csv: $prof,
  probe_requests: 100, clocks: 2,
  pools: {SS: {instances: [{url: "http://127.0.0.1:1", tp: 2, gpus: ["GPU-a", "GPU-b"]}]}}}' \
  >"$tmp/decl.json"
curl -sf -H 'Content-Type: application/json' --data-binary "@$tmp/decl.json" \
  "$server/v1/clusters" >"$tmp/cluster.json" || fail "declaring the cluster"
id=$(jq -r .cluster_id "$tmp/cluster.json")
token=$(jq -r .token "$tmp/cluster.json")

"$bin/perseus-fakeserve" --listen 127.0.0.1:0 --port-file "$tmp/fport" --tp 2 --speedup 50 \
  2>"$tmp/fake.log" &
pids+=($!)
wait_until 30 test -s "$tmp/fport" || fail "fake did not start"
# config TOKEN-JSON: a router configuration reporting to the cluster every 0.1 s (rates / 100,
# so that the 8-GPU budget plans them).
config() {
  cat <<JSON
{"model": "llama2-70b", "cost_model": {"model": "llama2-70b", "gpu": "h100"},
 "perseusd": {"url": "$server", "cluster": "$id", $1, "period_s": 0.1, "rate_scale": 100},
 "pools": [{"name": "all", "classes": ["SS", "SM", "SL", "MS", "MM", "ML", "LS", "LM", "LL"],
   "instances": [{"name": "f", "url": "http://127.0.0.1:$(cat "$tmp/fport")", "tp": 2}]}]}
JSON
}
# start_router NAME: the router on $tmp/NAME.json; sets rurl and router_pid.
start_router() {
  rm -f "$tmp/rport"
  "$bin/perseus-router" --config "$tmp/$1.json" --listen 127.0.0.1:0 --port-file "$tmp/rport" \
    2>"$tmp/$1.log" &
  router_pid=$!
  pids+=($router_pid)
  wait_until 30 test -s "$tmp/rport" || fail "router did not start: $(cat "$tmp/$1.log")"
  rurl=http://127.0.0.1:$(cat "$tmp/rport")
}
echo "$token" >"$tmp/token"
config "\"token_file\": \"$tmp/token\"" >"$tmp/good.json"
"$bin/perseus-router" --config "$tmp/good.json" --check | grep -q "loads to $server" ||
  fail "--check does not show the reports: $("$bin/perseus-router" --config "$tmp/good.json" --check)"
start_router good

complete() {
  curl -sf "$rurl/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model": "llama2-70b", "prompt": "Hello", "max_tokens": 4}' >/dev/null
}
for _ in 1 2 3 4 5; do complete || fail "completion through the router"; done
# Each report carries the rate of the requests since the one before (0.1 s) and replaces the
# cluster's load: one request more before each look, or a busy machine's slow looks miss the one
# report with the five requests above and see only zeros.
ss_load() {
  complete || return 1
  curl -sf -H "Authorization: Bearer $token" "$server/v1/clusters/$id" >"$tmp/state.json" &&
    jq -e '.loads >= 1 and .desired.pools.SS.level.forecast_rps > 0' "$tmp/state.json" >/dev/null
}
wait_until 30 ss_load || fail "no SS load reached perseusd: $(cat "$tmp/state.json")"
jq -e '[.desired.pools | to_entries[] | select(.key != "SS") | .value.level.forecast_rps] |
  all(. == 0)' \
  "$tmp/state.json" >/dev/null || fail "loads on other classes: $(cat "$tmp/state.json")"
metric() { curl -s "$rurl/metrics" | awk -v k="$1" '$1 == k {v = $2} END {print v + 0}'; }
(($(metric 'perseus_router_load_reports_total{result="ok"}') >= 1)) ||
  fail "no ok report counted: $(curl -s "$rurl/metrics" | grep load_reports)"
kill "$router_pid"
wait "$router_pid" || fail "router exit status $?"

# A wrong token: the reports fail (401), are counted and logged once; requests are still served.
config '"token": "wrong"' >"$tmp/bad.json"
start_router bad
complete || fail "completion with failing reports"
failed() { (($(metric 'perseus_router_load_reports_total{result="failed"}') >= 3)); }
wait_until 30 failed || fail "failed reports not counted"
complete || fail "completion after failed reports"
[[ $(grep -c "load report to .*HTTP 401" "$tmp/bad.log") == 1 ]] ||
  fail "want one log line: $(cat "$tmp/bad.log")"

# Bad configurations: exit 2 naming the field.
for bad in '"token": "t", "token_file": "/x"' '"token": ""' '"token": "t", "every": 1' \
  '"token_file": "/nonexistent"'; do
  config "$bad" >"$tmp/c.json"
  expect_error 2 "perseusd" "$bin/perseus-router" --config "$tmp/c.json" --check
done
sed 's|"url": "http://127.0.0.1:[0-9]*", "cluster"|"url": "ftp://x", "cluster"|' "$tmp/good.json" \
  >"$tmp/c.json"
expect_error 2 "perseusd.url must start with http" "$bin/perseus-router" --config "$tmp/c.json" --check
sed 's|"period_s": 0.1|"period_s": 0|' "$tmp/good.json" >"$tmp/c.json"
expect_error 2 "perseusd.period_s must be a number" "$bin/perseus-router" --config "$tmp/c.json" --check
echo ok
