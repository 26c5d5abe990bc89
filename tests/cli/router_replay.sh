#!/usr/bin/env bash
# A request trace (Azure's format) replayed through perseus-router by bench/load_router, as the
# end-to-end runs do: every request is answered, each lands in the pool of its DynamoLLM class
# (by its context tokens and its generated tokens as max_tokens), the fakes generate exactly the
# trace's tokens, and the replay's report counts them all.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
load=$bin/bench/load_router
[[ -x $load ]] || skip_input "no $load (benchmarks not built)"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# 8 requests over 2 s: classes SS, SM, MS, LS, LL, SS, ML, LM (input < 256 / < 1024 / longer,
# output < 100 / < 350 / longer).
cat >"$tmp/trace.csv" <<'CSV'
TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:00:00.0000000,100,20
2023-11-16 18:00:00.2500000,200,150
2023-11-16 18:00:00.5000000,500,30
2023-11-16 18:00:00.7500000,2000,10
2023-11-16 18:00:01.0000000,1500,400
2023-11-16 18:00:01.2500000,50,5
2023-11-16 18:00:01.5000000,800,360
2023-11-16 18:00:01.7500000,3000,120
CSV

for n in s l; do
  tp=2; [[ $n == l ]] && tp=4
  "$bin/perseus-fakeserve" --listen 127.0.0.1:0 --port-file "$tmp/$n.port" --tp "$tp" \
    --speedup 20 2>"$tmp/$n.log" &
  pids+=($!)
  wait_until 30 test -s "$tmp/$n.port" || fail "fake $n did not start"
done
cat >"$tmp/router.json" <<JSON
{"model": "llama2-70b", "cost_model": {"model": "llama2-70b", "gpu": "h100"}, "pools": [
  {"name": "short", "classes": ["SS", "SM", "SL", "MS", "MM", "ML"],
   "instances": [{"name": "s", "url": "http://127.0.0.1:$(cat "$tmp/s.port")", "tp": 2}]},
  {"name": "long", "classes": ["LS", "LM", "LL"],
   "instances": [{"name": "l", "url": "http://127.0.0.1:$(cat "$tmp/l.port")", "tp": 4}]}]}
JSON
"$bin/perseus-router" --config "$tmp/router.json" --listen 127.0.0.1:0 \
  --port-file "$tmp/router.port" 2>"$tmp/router.log" &
pids+=($!)
wait_until 30 test -s "$tmp/router.port" || fail "router did not start"
url=http://127.0.0.1:$(cat "$tmp/router.port")

"$load" --url "$url" --trace "$tmp/trace.csv" --duration 10 --time-scale 20 >"$tmp/report.json" ||
  fail "replay failed: $(cat "$tmp/report.json")"
jq -e '.sent == 8 and .ok == 8 and .failed == 0 and .slo_attainment >= 0 and
  .slo_attainment <= 1 and .ttft_s.p50 > 0' "$tmp/report.json" >/dev/null ||
  fail "report: $(cat "$tmp/report.json")"

metric() { curl -s "$url/metrics" | awk -v k="$1{$2}" '$1 == k {v = $2} END {print v + 0}'; }
for c in SS:2 SM:1 MS:1 ML:1; do
  [[ $(metric perseus_router_class_requests_total "class=\"${c%:*}\",pool=\"short\"") == "${c#*:}" ]] ||
    fail "class ${c%:*}: want ${c#*:}"
done
for c in LS:1 LM:1 LL:1; do
  [[ $(metric perseus_router_class_requests_total "class=\"${c%:*}\",pool=\"long\"") == "${c#*:}" ]] ||
    fail "class ${c%:*}: want ${c#*:}"
done
[[ $(metric perseus_router_requests_ok_total 'pool="short",instance="s"') == 5 &&
  $(metric perseus_router_requests_ok_total 'pool="long",instance="l"') == 3 ]] ||
  fail "answers per pool: $(curl -s "$url/metrics" | grep '^perseus_router_requests_ok')"
# The fakes generated exactly the trace's tokens: 20+150+30+5+360 and 10+400+120.
gen() { curl -s "http://127.0.0.1:$(cat "$tmp/$1.port")/metrics" |
  awk 'index($1, "vllm:generation_tokens_total{") == 1 {print $2}'; }
[[ $(gen s) == 565 && $(gen l) == 530 ]] || fail "generated $(gen s) and $(gen l) tokens"
echo ok
