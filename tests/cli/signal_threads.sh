#!/usr/bin/env bash
# SIGTERM stops perseus-router and perseus-fakeserve (exit 0) whichever of their threads the
# kernel hands it to. A signal sent to a thread id goes to that thread first (Linux), so each
# thread in turn gets the SIGTERM of a fresh process; a program that takes the signal with a
# handler and waits in pause() in main never wakes when another thread ran the handler.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
[[ -d /proc/self/task ]] || { echo "no /proc/PID/task"; exit 77; }
tmp=$(mktemp -d)
svc=
trap 'if [[ -n $svc ]]; then kill -9 "$svc" 2>/dev/null; fi; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

# start NAME CMD...: CMD in the background, with --port-file; waits until it serves; sets svc.
start() {
  local name=$1
  shift
  rm -f "$tmp/$name.port"
  "$@" --port-file "$tmp/$name.port" 2>>"$tmp/$name.log" &
  svc=$!
  wait_until 30 test -s "$tmp/$name.port" || fail "$name did not start: $(cat "$tmp/$name.log")"
}
gone() { ! kill -0 "$svc" 2>/dev/null; }

# each_thread NAME CMD...: for every thread of CMD's process but main, a fresh process whose
# SIGTERM is sent to that thread; it must exit with status 0.
each_thread() {
  local name=$1 n i t tids rc
  shift
  start "$name" "$@"
  n=$(ls "/proc/$svc/task" | wc -l)
  kill "$svc"
  wait "$svc" || fail "$name exited with $? on SIGTERM to its process"
  ((n > 1)) || fail "$name runs no thread besides main"
  for ((i = 1; i < n; i++)); do
    start "$name" "$@"
    tids=()
    for t in "/proc/$svc/task/"*; do [[ ${t##*/} == "$svc" ]] || tids+=("${t##*/}"); done
    mapfile -t tids < <(printf '%s\n' "${tids[@]}" | sort -n)
    kill -TERM "${tids[i - 1]}"
    wait_until 10 gone || fail "$name ignores a SIGTERM that its thread ${tids[i - 1]} took"
    rc=0
    wait "$svc" || rc=$?
    ((rc == 0)) || fail "$name exited with $rc on SIGTERM to its thread ${tids[i - 1]}"
  done
  svc=
  echo "$name: SIGTERM to each of its $((n - 1)) threads besides main: exit 0"
}

each_thread fake "$bin/perseus-fakeserve" --listen 127.0.0.1:0 --tp 2
port=$(cat "$tmp/fake.port")
cat >"$tmp/router.json" <<JSON
{"model": "llama2-70b", "cost_model": {"model": "llama2-70b", "gpu": "h100"},
 "perseusd": {"url": "http://127.0.0.1:1", "cluster": "AAAAAAAAAAAAAAAA", "token": "t",
              "period_s": 60},
 "pools": [{"name": "all", "classes": ["SS", "SM", "SL", "MS", "MM", "ML", "LS", "LM", "LL"],
            "instances": [{"name": "f", "url": "http://127.0.0.1:$port", "tp": 2}]}]}
JSON
each_thread router "$bin/perseus-router" --config "$tmp/router.json" --listen 127.0.0.1:0
echo ok
