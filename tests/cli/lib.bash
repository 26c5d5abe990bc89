# Shared by the CLI tests (sourced, not a test itself): failing with a message, and checking that
# a command fails the way a user should see it fail. Callers set $tmp to a scratch directory.

fail() { echo "FAIL: $*" >&2; exit 1; }

# in_ci: the environment variable CI is set (to anything but "", "0" or "false").
in_ci() { [[ -n ${CI:-} && $CI != 0 && $CI != false ]]; }

# skip_input WHY: an input that is part of the project (the shared data set, a fake driver
# library or a program built from this tree) is missing: exit 77 (skipped) on a developer's
# machine, but fail when CI is set, so a continuous-integration run never passes by skipping.
skip_input() {
  if in_ci; then echo "FAIL: $* (CI is set: a missing input fails)" >&2; exit 1; fi
  echo "skipped: $*"
  exit 77
}

# wait_until SECONDS CMD...: run CMD until it succeeds, every 20 ms, for at most SECONDS; returns
# CMD's last status (non-zero when the deadline passed first). The only sleep here is the poll
# interval: the wait ends as soon as the predicate holds.
wait_until() {
  local limit=$1 deadline
  shift
  deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || { "$@"; return; }
    sleep 0.02
  done
}

# expect_error STATUS PATTERN CMD...: CMD exits with STATUS and writes exactly one line to stderr,
# matching the extended regex PATTERN.
expect_error() {
  local want=$1 pattern=$2; shift 2
  local rc=0
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc -eq $want ]] || fail "exit $rc (want $want): $* :: $(cat "$tmp/err")"
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "want one line on stderr: $* :: $(cat "$tmp/err")"
  grep -qE -- "$pattern" "$tmp/err" || fail "stderr '$(cat "$tmp/err")' lacks /$pattern/: $*"
}

# python_client_checks: exit 77 (skipped) without Debian's python3, without libperseus.so, or
# when libperseus.so is built with the sanitizers (Python would need libasan preloaded). Sets $py.
python_client_checks() {
  py=/usr/bin/python3
  [[ -x $py ]] || { echo "no $py"; exit 77; }
  [[ -f $bin/libperseus.so ]] || skip_input "no libperseus.so"
  # ldd's output is taken whole before grep looks at it: with pipefail, `ldd | grep -q` fails
  # whenever grep exits on the match before ldd has finished writing (SIGPIPE).
  if grep -q 'libasan\|libubsan' <<<"$(ldd "$bin/libperseus.so")"; then
    echo "sanitizer build"; exit 77
  fi
}

# start_perseusd DIR: perseusd on a free loopback port with its data in DIR, stopped and DIR
# removed at exit; sets $url.
start_perseusd() {
  local d=$1
  "$bin/perseusd" --listen 127.0.0.1:0 --data-dir "$d" --port-file "$d/port" \
    2>"$d/perseusd.log" &
  perseusd_pid=$!
  trap 'kill "$perseusd_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "'"$d"'"' EXIT
  wait_until 30 test -s "$d/port" || { echo "perseusd did not start"; cat "$d/perseusd.log"; exit 1; }
  url="http://127.0.0.1:$(cat "$d/port")"
}

# start_gpud DIR: perseus-gpud on the fake NVML ($PRS_FAKE_NVML, devices shared through files in
# DIR), socket $gpud_sock, config "root only", log DIR/gpud.log; stopped and DIR removed at exit.
# Exports PRS_FAKE_GPU_DIR and PRS_NVML_LIBRARY for the programs the script runs next.
start_gpud() {
  local d=$1
  export PRS_FAKE_GPU_DIR=$d PRS_NVML_LIBRARY=$PRS_FAKE_NVML
  gpud_sock=$d/gpud.sock
  echo "# root only" >"$d/gpud.conf"
  "$bin/perseus-gpud" --socket "$gpud_sock" --state-dir "$d" --config "$d/gpud.conf" \
    --log-level info 2>"$d/gpud.log" &
  gpud_pid=$!
  trap 'kill "$gpud_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "'"$d"'"' EXIT
  wait_until 30 grep -q "msg=serving" "$d/gpud.log" ||
    { echo "perseus-gpud did not start"; cat "$d/gpud.log"; exit 1; }
}
