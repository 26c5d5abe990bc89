#!/usr/bin/env bash
# Inference clusters in perseusd (docs/api.md, "Inference clusters"), driven with curl as an
# operator and a router would: a cluster declared with a profile written by `perseus infer synth`
# (given inline), loads reported that grow and then shrink its SS pool, the desired instances x
# TP read from GET .../desired and from the perseus_cluster_desired_instances gauges (which must
# agree, and pass `promtool check metrics` when promtool is installed), the profile replaced by
# upload, a restart of perseusd that keeps the cluster and its desired configuration, bad input
# refused with a 4xx naming the field, and the tokens enforced: the creation token to declare,
# the cluster's own to report loads, the administrator's to read.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
tmp=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
command -v jq >/dev/null || skip_input "jq not found"

"$bin/perseus" infer synth --gpu h100 --model llama2-70b --tp 2,4,8 --clocks 1980,1455,930 \
  --out "$tmp/prof.csv" || fail "synth"
echo create-secret >"$tmp/ctok"
echo admin-secret >"$tmp/atok"
# start: perseusd on the database in $tmp/d; sets pid and url.
start() {
  rm -f "$tmp/port"
  "$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$tmp/d" --port-file "$tmp/port" \
    --create-token-file "$tmp/ctok" --admin-token-file "$tmp/atok" 2>>"$tmp/log" &
  pid=$!
  wait_until 30 test -s "$tmp/port" || fail "perseusd did not start: $(cat "$tmp/log")"
  url="http://127.0.0.1:$(cat "$tmp/port")"
}
start

# req METHOD PATH TOKEN [BODY-FILE]: the body into $tmp/body, the status printed.
req() {
  local args=(-s -o "$tmp/body" -w '%{http_code}' -X "$1" "$url$2")
  [[ -n $3 ]] && args+=(-H "Authorization: Bearer $3")
  [[ -n ${4:-} ]] && args+=(-H 'Content-Type: application/json' --data-binary "@$4")
  curl "${args[@]}"
}
# expect STATUS PATTERN METHOD PATH TOKEN [BODY-FILE]: the answer's status and its error message.
expect() {
  local want=$1 pattern=$2 got
  shift 2
  got=$(req "$@")
  [[ $got == "$want" ]] || fail "$*: status $got (want $want): $(cat "$tmp/body")"
  jq -r .error.message "$tmp/body" | grep -qE -- "$pattern" ||
    fail "$*: message '$(cat "$tmp/body")' lacks /$pattern/"
}

# The declaration: one TP-2 instance in SS, a 24-GPU budget, fast capacity probes.
# Periods of 0: every report planned at once on its own rates (the periodic levels, the default:
# tests/server/test_cluster_levels.c).
jq -n --rawfile prof "$tmp/prof.csv" '{name: "llama", gpus: 24, profile_csv: $prof,
  probe_requests: 200, clocks: 3, slo: {ttft_s: [0.25, 0.5, 1.5], tbt_s: 0.1},
  cluster_period_s: 0, pool_period_s: 0,
  pools: {SS: {instances: [{url: "http://10.0.0.1:8000", tp: 2, gpus: ["GPU-a", "GPU-b"]}]}}}' \
  >"$tmp/decl.json"

# --- auth and bad declarations ---
expect 401 "creation token" POST /v1/clusters "" "$tmp/decl.json"
expect 401 "creation token" POST /v1/clusters wrong "$tmp/decl.json"
jq '.pools.SS.instances[0].tp = 4' "$tmp/decl.json" >"$tmp/bad.json"
expect 400 "pools.SS.instances\[0\].gpus: 2 GPUs for tp 4" POST /v1/clusters create-secret \
  "$tmp/bad.json"
jq '.gpus = 1' "$tmp/decl.json" >"$tmp/bad.json"
expect 400 "^gpus: 1, fewer than the 2 GPUs" POST /v1/clusters create-secret "$tmp/bad.json"
jq '.pools.XY = {}' "$tmp/decl.json" >"$tmp/bad.json"
expect 400 "pools.XY: unknown class" POST /v1/clusters create-secret "$tmp/bad.json"
jq '.profile_csv = "model,gpu\n"' "$tmp/decl.json" >"$tmp/bad.json"
expect 400 "^profile" POST /v1/clusters create-secret "$tmp/bad.json"

# --- declare ---
[[ $(req POST /v1/clusters create-secret "$tmp/decl.json") == 201 ]] ||
  fail "declare: $(cat "$tmp/body")"
id=$(jq -r .cluster_id "$tmp/body")
tok=$(jq -r .token "$tmp/body")
[[ $(req GET "/v1/clusters/$id" "$tok") == 200 ]] || fail "state: $(cat "$tmp/body")"
jq -e '.instances[0].gpus == ["GPU-a", "GPU-b"] and .desired.generation == 0
  and .slo.tbt_s == 0.1' "$tmp/body" >/dev/null || fail "state: $(cat "$tmp/body")"
expect 401 "token" GET "/v1/clusters/$id" ""
expect 401 "token" GET "/v1/clusters/$id" create-secret
[[ $(req GET "/v1/clusters/$id/desired" admin-secret) == 200 ]] || fail "admin reads desired"

# load RATES: report {"rates_rps": RATES}; prints the SS pool's desired instances (all TPs) and
# checks that .../desired and the gauges say the same.
load() {
  echo "{\"rates_rps\": $1}" >"$tmp/load.json"
  [[ $(req POST "/v1/clusters/$id/loads" "$tok" "$tmp/load.json") == 200 ]] ||
    fail "load $1: $(cat "$tmp/body")"
  cp "$tmp/body" "$tmp/answer.json"
  [[ $(req GET "/v1/clusters/$id/desired" "$tok") == 200 ]] || fail "desired"
  jq -e --slurpfile a "$tmp/answer.json" '. == $a[0]' "$tmp/body" >/dev/null ||
    fail "desired differs from the load's answer"
  curl -sf "$url/metrics" >"$tmp/metrics" || fail "GET /metrics"
  local tp want gauge
  for tp in 2 4 8; do
    want=$(jq ".pools.SS.instances[] | select(.tp == $tp) | .count" "$tmp/body")
    gauge=$(awk -v k="perseus_cluster_desired_instances{cluster=\"$id\",pool=\"SS\",tp=\"$tp\"}" \
      '$1 == k {print $2}' "$tmp/metrics")
    [[ $gauge == "$want" ]] || fail "gauge SS tp $tp: '$gauge', desired says $want"
  done
  jq '[.pools.SS.instances[].count] | add' "$tmp/body"
}

low=$(load '{"SS": 1}')
high=$(load '{"SS": 30, "MM": 2}')
again=$(load '{"SS": 1}')
((low >= 1 && high > low)) || fail "the SS pool did not grow with its load: $low -> $high"
[[ $again == "$low" ]] || fail "the SS pool did not shrink back: $high -> $again (want $low)"
jq -e '.generation == 3 and .pools.MM.load_rps == 0' "$tmp/body" >/dev/null ||
  fail "generation/load: $(cat "$tmp/body")"
if command -v promtool >/dev/null; then
  promtool check metrics <"$tmp/metrics" >"$tmp/promtool" 2>&1 ||
    fail "promtool: $(cat "$tmp/promtool")"
fi

# --- a restart (SIGTERM) keeps the cluster and its plan ---
jq 'del(.generation)' "$tmp/body" >"$tmp/before.json"
kill -TERM "$pid"
wait "$pid" || fail "perseusd exited $? on SIGTERM"
start
[[ $(req GET "/v1/clusters/$id/desired" "$tok") == 200 ]] ||
  fail "desired after a restart: $(cat "$tmp/body")"
jq -e --slurpfile b "$tmp/before.json" 'del(.generation) == $b[0]' "$tmp/body" >/dev/null ||
  fail "desired changed across a restart: $(cat "$tmp/body") vs $(cat "$tmp/before.json")"

# --- bad loads and auth on loads ---
echo '{"rates_rps": {"SS": -2}}' >"$tmp/bad.json"
expect 400 "rates_rps.SS" POST "/v1/clusters/$id/loads" "$tok" "$tmp/bad.json"
echo '{"rates_rps": {"ZZ": 2}}' >"$tmp/bad.json"
expect 400 "rates_rps.ZZ: unknown class" POST "/v1/clusters/$id/loads" "$tok" "$tmp/bad.json"
echo '{"rates_rps": {"SS": 100000}}' >"$tmp/bad.json"
expect 422 "does not fit 24 GPUs" POST "/v1/clusters/$id/loads" "$tok" "$tmp/bad.json"
expect 401 "token" POST "/v1/clusters/$id/loads" admin-secret "$tmp/load.json"

# --- the profile replaced by upload (text/csv body) ---
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $tok" \
  -H 'Content-Type: text/csv' --data-binary "@$tmp/prof.csv" "$url/v1/clusters/$id/profile")
[[ $code == 200 ]] || fail "profile upload: $code $(cat "$tmp/body")"
echo "garbage" >"$tmp/bad.csv"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $tok" \
  --data-binary "@$tmp/bad.csv" "$url/v1/clusters/$id/profile")
[[ $code == 400 ]] || fail "bad profile upload: $code $(cat "$tmp/body")"

# --- delete ---
[[ $(req DELETE "/v1/clusters/$id" "$tok") == 200 ]] || fail "delete"
expect 404 "no such cluster" GET "/v1/clusters/$id" admin-secret
curl -sf "$url/metrics" | grep -q "cluster=\"$id\"" && fail "a deleted cluster's gauges remain"
echo "ok: SS pool instances $low -> $high -> $again"
