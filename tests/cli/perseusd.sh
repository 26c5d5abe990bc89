#!/usr/bin/env bash
# The perseusd command line, run as an operator would:
#   - --listen takes an IPv4 address or a host name (localhost: resolved to 127.0.0.1); a name
#     that does not resolve is refused with exit 2 and a message naming --listen;
#   - --log-level takes debug, info, warn or error, each logging what docs/server.md says
#     (debug: every request; info: job and server events; warn: failed requests; error: server
#     faults only); any other value is refused with exit 2.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseusd
tmp=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

# bad_arg PATTERN ARGS...: perseusd refuses ARGS with exit 2, its first line on stderr matches
# the extended regex PATTERN, and it creates nothing.
bad_arg() {
  local pattern=$1 rc=0
  shift
  "$bin" "$@" --data-dir "$tmp/never" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc -eq 2 ]] || fail "exit $rc (want 2): perseusd $* :: $(cat "$tmp/err")"
  head -n 1 "$tmp/err" | grep -qE -- "$pattern" ||
    fail "stderr '$(cat "$tmp/err")' lacks /$pattern/: perseusd $*"
  [[ ! -e $tmp/never ]] || fail "perseusd $* created its data directory"
}

# start LEVEL LISTEN: perseusd in the background at LEVEL on LISTEN, its log in $tmp/log-LEVEL;
# sets pid and port once it serves.
start() {
  local level=$1 listen=$2
  rm -f "$tmp/port"
  "$bin" --listen "$listen" --data-dir "$tmp/d-$level" --port-file "$tmp/port" \
    --log-level "$level" 2>"$tmp/log-$level" &
  pid=$!
  wait_until 30 eval '[[ -s $tmp/port ]] || ! kill -0 "$pid" 2>/dev/null' || true
  kill -0 "$pid" 2>/dev/null || fail "perseusd --log-level $level exited: $(cat "$tmp/log-$level")"
  [[ -s $tmp/port ]] || fail "perseusd --log-level $level: no port file"
  port=$(cat "$tmp/port")
}

# stop: SIGTERM, and perseusd exits 0.
stop() {
  local rc=0
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  pid=
  [[ $rc -eq 0 ]] || fail "perseusd exited $rc on SIGTERM"
}

# status PATH: the HTTP status of GET PATH on 127.0.0.1:$port.
status() {
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$1" >&3
  head -n 1 <&3 | awk '{print $2}'
  exec 3<&-
}

# aborted_creates: how many job-creation requests the server counted as ended without an answer
# (perseusd_http_requests_total, code "other"): the server's own record of having seen a client
# go away.
aborted_creates() {
  exec 4<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&4
  awk '/^perseusd_http_requests_total\{route="create_job",code="other"\}/ {n = $2} END {print n + 0}' <&4
  exec 4<&-
}

# disconnect LEVEL: a client that sends half a body, pauses and goes away (a client's doing:
# debug, never error); waits until the server has seen it: until its request count records the
# aborted request (libmicrohttpd reports the closed connection, which is logged or not, before it
# ends the request), so the checks of what was logged do not pass merely because the server had
# not got to it.
disconnect() {
  local before
  before=$(aborted_creates)
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{"st' >&3
  # The client pauses before going away (the situation under test). Sent together with the
  # data, its close has been seen to go unnoticed until the server stopped (libmicrohttpd).
  sleep 0.3
  exec 3<&-
  wait_until 30 eval '(($(aborted_creates) > before))' ||
    fail "$1: the server never counted the aborted request (perseusd_http_requests_total)"
}

# --- usage ---
"$bin" --help >"$tmp/help"
grep -q -- "--log-level LEVEL" "$tmp/help" || fail "--help lacks --log-level"
levels=$(grep -A3 -- "--log-level LEVEL" "$tmp/help" | tr -s ' \n' ' ')
for level in debug info warn error; do
  grep -q " $level (" <<<"$levels" || fail "--help lacks $level: $levels"
done
grep -A2 -- "--listen HOST:PORT" "$tmp/help" | grep -q "host name" || fail "--help: host names"
bad_arg "^perseusd: --log-level: expected debug, info, warn or error, got 'verbose'$" \
  --log-level verbose
bad_arg "^perseusd: --log-level: expected debug, info, warn or error, got 'WARN'$" \
  --log-level WARN
bad_arg "^perseusd: --listen: expected HOST:PORT, got 'localhost'$" --listen localhost
bad_arg "^perseusd: --listen: expected HOST:PORT, got 'localhost:99999'$" --listen localhost:99999
bad_arg "^perseusd: --listen: cannot resolve 'no-such-host\.invalid' to an IPv4 address: " \
  --listen no-such-host.invalid:7787

# --- each level, on a host name: what is logged ---
for level in debug info warn error; do
  start "$level" localhost:0
  [[ $(status /healthz) == 200 ]] || fail "$level: /healthz"
  [[ $(status /v1/jobs/nosuchjob) == 404 ]] || fail "$level: unknown job not 404"
  disconnect "$level"
  stop
  log=$tmp/log-$level
  has() { grep -qE -- "$1" "$log"; }
  case $level in
    debug)
      has "level=debug msg=request route=healthz status=200" || fail "debug: no request line"
      has "level=debug msg=http_daemon detail=\"Connection was closed by remote side" ||
        fail "debug: the client's disconnect is not logged at debug: $(cat "$log")"
      ;;&
    debug | info)
      has "level=info msg=listening version=[^ ]+ addr=127\.0\.0\.1 port=$port " || fail "$level: listening"
      has "level=info msg=stopped" || fail "$level: stopped"
      ;;&
    debug | info | warn)
      has "level=warn msg=request_error route=[a-z_]+ status=404 code=not_found" ||
        fail "$level: no warn line for the 404"
      ;;
  esac
  case $level in
    info | warn | error) ! has "level=debug" || fail "$level: debug lines logged" ;;&
    warn | error) ! has "level=info" || fail "$level: info lines logged" ;;&
    error) [[ ! -s $log ]] || fail "error: logged without a fault: $(cat "$log")" ;;
  esac
done

# --- a numeric address still works; the start-up line names the version ---
start info 127.0.0.1:0
[[ $(status /healthz) == 200 ]] || fail "127.0.0.1: /healthz"
grep -qE "level=info msg=listening version=[0-9]+\.[0-9]+\.[0-9]+ " "$tmp/log-info" ||
  fail "the start-up line names no version: $(head -n 1 "$tmp/log-info")"
# --- a port in use: refused before the data directory or database is made, in one logfmt line
# (it logged 'msg=stopped' first, then the error in plain text, after creating the database) ---
rc=0
"$bin" --listen "127.0.0.1:$port" --data-dir "$tmp/busy" 2>"$tmp/busy.err" || rc=$?
[[ $rc -eq 1 ]] || fail "port in use: exit $rc"
[[ $(wc -l <"$tmp/busy.err") -eq 1 ]] || fail "port in use: not one line: $(cat "$tmp/busy.err")"
grep -qE '^ts=[^ ]+ level=error msg=start_failed version=[0-9.]+ detail="cannot listen on 127\.0\.0\.1:[0-9]+: Address already in use"$' \
  "$tmp/busy.err" || fail "port in use: $(cat "$tmp/busy.err")"
[[ ! -e $tmp/busy ]] || fail "port in use: the data directory was created"
stop
# --- 'did you mean', and the --help examples as written start (the one beyond loopback with its
# creation token: it once showed an example the server refuses) ---
bad_arg "^perseusd: unknown option '--lisen' \(did you mean '--listen'\?\)$" --lisen x
rc=0
"$bin" --data-dir "$tmp/never" --listen 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 ]] && head -n 1 "$tmp/err" | grep -qE "^perseusd: missing value for '--listen'$" ||
  fail "a missing value: exit $rc, $(cat "$tmp/err")"
echo secret >"$tmp/create-token"
"$bin" --help | sed -n 's/^  perseusd//p' | while read -r ex; do
  ex=${ex//\/etc\/perseus\/create-token/$tmp\/create-token}
  ex=${ex//\/var\/lib\/perseusd/$tmp\/ex-data}
  ex=${ex//:7787/:0}
  # shellcheck disable=SC2086
  "$bin" $ex --data-dir "$tmp/ex-data" --port-file "$tmp/ex-port" 2>"$tmp/ex.log" &
  expid=$!
  wait_until 15 test -s "$tmp/ex-port" || fail "--help example 'perseusd $ex' did not start: $(cat "$tmp/ex.log")"
  kill "$expid"
  wait "$expid" || fail "--help example 'perseusd $ex' did not stop cleanly"
  rm -f "$tmp/ex-port"
done
echo "perseusd CLI tests passed"
