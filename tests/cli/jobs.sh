#!/usr/bin/env bash
# perseus jobs and perseus job show against a running perseusd, as an operator uses them: the
# administrator's token lists every job and shows any; a job's token shows its own job only; a
# wrong token or no server is exit 1 with the server's words or why there was no answer; bad
# usage is exit 2.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
tmp=$(mktemp -d)
srv=
trap '[[ -n $srv ]] && kill "$srv" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
echo "admin-token-for-the-jobs-test-0123" >"$tmp/admin"
"$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$tmp/d" --port-file "$tmp/port" \
  --admin-token-file "$tmp/admin" 2>"$tmp/log" &
srv=$!
wait_until 30 test -s "$tmp/port" || fail "perseusd did not start: $(cat "$tmp/log")"
url="http://127.0.0.1:$(cat "$tmp/port")"
create() {
  curl -sf -X POST -H 'Content-Type: application/json' "$url/v1/jobs" -d "{\"model\":\"$1\",\"stages\":2,\
\"microbatches\":2,\"dp\":$2,\"tp\":$3,\"clocks_mhz\":[1410,1200],\"blocking_power_w\":83.64}"
}
a=$(create gpt-a 1 2) b=$(create bloom-b 2 1)
ida=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])' <<<"$a")
toka=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' <<<"$a")
idb=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])' <<<"$b")

out=$("$bin/perseus" jobs --server "$url" --token-file "$tmp/admin")
echo "$out"
[[ $(head -n 1 <<<"$out") =~ ^JOB_ID\ +MODEL\ +PHASE\ +STAGES\ +DP\ +TP\ +RANKS$ ]] || fail "header"
grep -qE "^$ida +gpt-a +registering +2 +1 +2 +0/4$" <<<"$out" || fail "job a's row"
grep -qE "^$idb +bloom-b +registering +2 +2 +1 +0/4$" <<<"$out" || fail "job b's row"
[[ $(tail -n 1 <<<"$out") == "2 jobs" ]] || fail "count line"
n=$(PERSEUS_SERVER=$url PERSEUS_TOKEN=$(cat "$tmp/admin") "$bin/perseus" jobs --json |
  python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["count"], len(j["jobs"]))')
[[ $n == "2 2" ]] || fail "jobs --json from the environment: $n"

show=$("$bin/perseus" job show "$ida" --server "$url" --token "$toka")
grep -qE "^job +$ida \(gpt-a\)$" <<<"$show" || fail "job show: $show"
grep -qE "^phase +registering, round 0$" <<<"$show" || fail "job show phase: $show"
grep -qE "^ranks +0 of 4 registered" <<<"$show" || fail "job show ranks: $show"
# (output taken whole before grep reads it: with pipefail, grep -q quitting early fails the pipe)
show=$("$bin/perseus" job show "$idb" --server "$url" --token-file "$tmp/admin")
grep -q "bloom-b" <<<"$show" || fail "the administrator's job show: $show"
[[ $("$bin/perseus" job show "$idb" --server "$url" --token-file "$tmp/admin" --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])') == "$idb" ]] || fail "show --json"

expect_error 1 "^perseus jobs: /v1/jobs answered HTTP 401: listing jobs needs the server's admin token" \
  "$bin/perseus" jobs --server "$url" --token "$toka"
expect_error 1 "^perseus job show: /v1/jobs/$idb answered HTTP 401: " \
  "$bin/perseus" job show "$idb" --server "$url" --token "$toka"
expect_error 1 "^perseus jobs: no answer from http://127.0.0.1:1: " \
  "$bin/perseus" jobs --server http://127.0.0.1:1 --token x
expect_error 2 "^perseus job show: missing the job id" "$bin/perseus" job show --server "$url"
expect_error 2 "^perseus job show: not a job id: 'a/b'" "$bin/perseus" job show a/b
expect_error 2 "^perseus jobs: --token-file: cannot read a token from '$tmp/none'" \
  "$bin/perseus" jobs --token-file "$tmp/none"
echo "perseus jobs / job show checks passed"
