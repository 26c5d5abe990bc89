# Shared by the CLI tests (sourced, not a test itself): failing with a message, and checking that
# a command fails the way a user should see it fail. Callers set $tmp to a scratch directory.

fail() { echo "FAIL: $*" >&2; exit 1; }

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
