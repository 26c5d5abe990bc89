#!/usr/bin/env bash
# The load generator as a functional test (no timing asserted): a small job of 64 ranks goes
# through every phase against the real perseusd (registration, profiling with measured
# windows, planning, polls, a straggler and its clearing, completion) and the generator
# reports no error; bad arguments are refused.
set -euo pipefail
source "$(dirname "$0")/lib.bash"
bin=${PRS_BIN_DIR:?}/bench/load_server
[[ -x $bin ]] || skip_input "load_server not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" --ranks 64 --stages 4 --connections 16 --pollers 16 --poll-seconds 1 \
  --perseusd "$PRS_BIN_DIR/perseusd" >"$tmp/out" 2>"$tmp/err" ||
  fail "load_server failed: $(cat "$tmp/out" "$tmp/err")"
grep -q '^result: OK' "$tmp/out" || fail "no OK result: $(cat "$tmp/out")"
grep -qE '^straggler: .*\[PASS\]' "$tmp/out" || fail "straggler check: $(cat "$tmp/out")"
grep -q '^complete: job done' "$tmp/out" || fail "job not done: $(cat "$tmp/out")"
grep -qE '^register \+ schedule: 64 ranks' "$tmp/out" || fail "registration line: $(cat "$tmp/out")"

rc=0
"$bin" --ranks 63 --stages 4 >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 ]] || fail "ranks not a multiple of stages: exit $rc"
rc=0
"$bin" --ranks 100000 >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 ]] || fail "too many ranks: exit $rc"
echo "load_server: OK"
