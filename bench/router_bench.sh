#!/usr/bin/env bash
# router_bench.sh BUILD_DIR: what perseus-router costs, on this machine (docs/router.md, "What
# the router costs"). Starts bench/sse_backend (first token after 20 ms, then one every 20 ms),
# a router in front of it, and:
#   1. RUNS times: bench/load_router at RATE requests/s (8-token streams) for DURATION s, routed
#      and --direct to the backend in alternating phases (ROUNDS of each): the router's added
#      TTFT at p50 and p99 (routed minus direct, same run). Prints each run, then the medians;
#   2. HOLD streams at once: a second backend with one token a second, HOLD streams opened over
#      10 s, each 16 s long, so all are open together for a few seconds; prints the most in
#      flight, the failures, and the router's threads and backend connections then.
# The machine's load average is printed before and after each part: on a shared machine the
# figures measure the neighbours too. Environment: RATE (2000), DURATION (5), ROUNDS (2),
# RUNS (3), HOLD (10000, lowered to what the open-files limit allows: 2 per stream; 0: no part
# 2), ROUTER_PRIO (a command that runs a second router at another CPU priority, for instance
# "chrt -f 50" or "nice -n -10": each run then measures both routers in turn, the same backend
# behind them, and the medians come for each).
set -euo pipefail
bin=${1:?usage: router_bench.sh BUILD_DIR}
rate=${RATE:-2000} duration=${DURATION:-5} rounds=${ROUNDS:-2} runs=${RUNS:-3}
hold=${HOLD:-10000}
read -r -a prio <<<"${ROUTER_PRIO:-}"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
wait_file() { for _ in $(seq 500); do [[ -s $1 ]] && return 0; sleep 0.02; done; return 1; }

# backend NAME GAP_MS: an sse_backend on a free port; sets port_NAME.
backend() {
  "$bin/bench/sse_backend" --port-file "$tmp/$1.port" --ttft-ms 20 --gap-ms "$2" \
    2>"$tmp/$1.log" &
  pids+=($!)
  wait_file "$tmp/$1.port" || { echo "backend $1 did not start" >&2; exit 1; }
  printf -v "port_$1" %s "$(cat "$tmp/$1.port")"
}
# router NAME BACKEND_PORT MAX_CONNECTIONS [PREFIX...]: a router on a free port, started under
# PREFIX (a command such as chrt) when given; sets url_NAME, pid_NAME.
router() {
  cat >"$tmp/$1.json" <<JSON
{"model": "llama2-70b", "cost_model": {"model": "llama2-70b", "gpu": "h100"},
 "max_connections": $3, "pools": [{"name": "all",
  "classes": ["SS", "SM", "SL", "MS", "MM", "ML", "LS", "LM", "LL"],
  "instances": [{"name": "b", "url": "http://127.0.0.1:$2", "tp": 2, "max_running": 100000}]}]}
JSON
  "${@:4}" "$bin/perseus-router" --config "$tmp/$1.json" --listen 127.0.0.1:0 \
    --port-file "$tmp/$1.rport" 2>"$tmp/$1.rlog" &
  pids+=($!)
  printf -v "pid_$1" %s $!
  wait_file "$tmp/$1.rport" || { echo "router $1: $(cat "$tmp/$1.rlog")" >&2; exit 1; }
  printf -v "url_$1" %s "http://127.0.0.1:$(cat "$tmp/$1.rport")"
}
loadavg() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"; }

echo "== added TTFT at $rate requests/s, $runs runs of $rounds routed and $rounds direct phases of $duration s"
backend fast 20
router fast "$port_fast" 4096
names=(fast)
if ((${#prio[@]})); then
  router prio "$port_fast" 4096 "${prio[@]}"
  names+=(prio)
fi
for i in $(seq "$runs"); do
  for n in "${names[@]}"; do
    loadavg
    url=url_$n
    "$bin/bench/load_router" --url "${!url}" --direct "http://127.0.0.1:$port_fast" \
      --rate "$rate" --duration "$duration" --rounds "$rounds" --max-tokens 8 \
      >"$tmp/$n.run$i.json" || true
    jq -c --arg n "$n" '{router: $n, ok, failed, direct_failed: .direct.failed,
      routed_ttft_s: .ttft_s, direct_ttft_s: .direct.ttft_s, added_ttft_s, cpu_s}' \
      "$tmp/$n.run$i.json"
  done
done
loadavg
for n in "${names[@]}"; do
  pid=pid_$n
  jq -s -c --arg n "$n" '{router: $n,
    median_added_ttft_p50_s: (map(.added_ttft_s.p50) | sort | .[length / 2 | floor]),
    median_added_ttft_p99_s: (map(.added_ttft_s.p99) | sort | .[length / 2 | floor]),
    median_direct_ttft_p50_s: (map(.direct.ttft_s.p50) | sort | .[length / 2 | floor]),
    failed: (map(.failed + .direct.failed) | add)}' "$tmp/$n".run*.json
  awk -v n="$n" '{printf "router %s CPU over the runs: %.1f s\n", n, ($14 + $15) / 100}' \
    "/proc/${!pid}/stat"
done
((hold > 0)) || exit 0

limit=$(ulimit -Hn)
if [[ $limit != unlimited ]] && ((2 * hold + 32 > limit)); then
  hold=$(((limit - 32) / 2 - 16))
  echo "(the hard limit of open files, $limit, allows $hold streams: 2 open files each)"
fi
echo "== $hold streams at once"
backend slow 1000
router slow "$port_slow" "$((hold + 16))"
loadavg
"$bin/bench/load_router" --url "$url_slow" --rate "$(awk -v h="$hold" 'BEGIN {print h / 10}')" --duration 10 \
  --max-tokens 16 >"$tmp/hold.json" &
lpid=$!
peak_threads=0 peak_conns=0
while kill -0 "$lpid" 2>/dev/null; do
  t=$(awk '/^Threads:/ {print $2}' "/proc/$pid_slow/status")
  ((t > peak_threads)) && peak_threads=$t
  sleep 0.5
done
wait "$lpid" || true
loadavg
conns=$(curl -s "$url_slow/metrics" | awk '$1 == "perseus_router_backend_connections_total" {print $2}')
jq -c --argjson th "$peak_threads" --argjson bc "${conns:-0}" '{sent, ok, failed,
  max_in_flight, e2e_s, router_threads_peak: $th, backend_connections_opened: $bc}' \
  "$tmp/hold.json"
