#!/usr/bin/env bash
# perseus demo --inference, short: perseusd, four fake instances (batches of 64, --max-running),
# the router and the clock
# controllers (through perseus-gpud on the fake NVML when $PRS_FAKE_NVML is set) started next to
# the perseus binary; the built-in synthetic trace replayed twice; the summary complete (every
# request answered in both runs and both pools, SLO attainment, energy, clocks, the cluster
# level's desired instances, the GPUs reset, the emulator's prediction of both runs with
# --compare), the plots written; and nothing left behind, neither
# processes nor files, after a normal end and after Ctrl-C (SIGINT) mid-replay (exit 130). Bad
# options exit 2 with one line.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prs-demo-inf-XXXXXX")
demo_pid=
cleanup() {
  [[ -n $demo_pid ]] && kill "$demo_pid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir "$tmp/t"
# leftovers: a process started with the demo's temporary directory in its command line, or a
# file left in it
leftovers() {
  local procs
  procs=$(pgrep -f "$tmp/t/perseus-demo-" || true)
  [[ -n $procs ]] && { echo "processes left: $(ps -o pid,args -p "${procs//$'\n'/,}")"; return 0; }
  [[ -n $(ls -A "$tmp/t") ]] && { echo "files left: $(ls -A "$tmp/t")"; return 0; }
  return 1
}

TMPDIR=$tmp/t "$bin/perseus" demo --inference --trace synthetic --duration 30 --time-scale 20 \
  --max-running 64 --compare --out "$tmp/plots" >"$tmp/out" 2>"$tmp/err" ||
  fail "demo failed: $(cat "$tmp/err")"
cat "$tmp/out"
# every request of both runs answered, in both pools
n=$(grep -c 'requests ok / sent' "$tmp/out")
[[ $n == 2 ]] || fail "want 2 pool lines, got $n"
while read -r ok1 sent1 ok2 sent2; do
  ((ok1 == sent1 && ok2 == sent2 && sent1 == sent2 && sent1 > 0)) ||
    fail "requests: $ok1/$sent1 and $ok2/$sent2"
done < <(sed -n 's|.*requests ok / sent *\([0-9]*\) / \([0-9]*\) *\([0-9]*\) / \([0-9]*\).*|\1 \2 \3 \4|p' "$tmp/out")
grep -qE '^SLO attainment +[0-9.]+ % +[0-9.]+ %' "$tmp/out" || fail "no SLO attainment"
grep -qE '^energy, 12 GPUs \(kJ\) +[0-9.]+ +[0-9.]+' "$tmp/out" || fail "no energy"
[[ $(grep -cE '^  [sl][12] \(pool (short|long), TP [24]\): [0-9]+ / [0-9]+ / [0-9]+$' "$tmp/out") == 4 ]] ||
  fail "no clocks for the 4 instances"
grep -qE '^  [SML]{2} [0-9]+ x TP[248]' "$tmp/out" || fail "no desired instances from perseusd"
grep -q '^each instance batches at most 64 requests' "$tmp/out" || fail "no --max-running line"
# --compare: the emulator's prediction of both runs beside the live figures (the agreement itself
# depends on the host's load: scripts/replay-compare.sh measures it)
grep -q '^predicted by perseus infer emulate --cluster' "$tmp/out" || fail "no prediction"
for l in 'SLO attainment, predicted +[0-9.]+ % +[0-9.]+ %' 'SLO attainment, live +[0-9.]+ % +[0-9.]+ %' \
  'live - predicted \(points\) +[-+][0-9.]+ +[-+][0-9.]+' 'energy predicted \(kJ\) +[0-9.]+ +[0-9.]+' \
  'energy live \(kJ\) +[0-9.]+ +[0-9.]+' 'live / predicted energy +[-+][0-9.]+ % +[-+][0-9.]+ %'; do
  grep -qE "^  $l\$" "$tmp/out" || fail "no line /$l/"
done
grep -q 'TTFT p50 / p99' "$tmp/out" && grep -q 'TBT  p50 / p99' "$tmp/out" || fail "no latencies"
if [[ -n ${PRS_FAKE_NVML:-} ]]; then
  grep -q '^GPUs reset after the controllers stopped: yes' "$tmp/out" || fail "GPUs not reset"
fi
for p in clocks ttft-cdf tbt-cdf; do
  grep -q '</svg>' "$tmp/plots/$p.svg" || fail "no $p.svg"
done
! leftovers || fail "after the demo"

# Ctrl-C mid-replay: everything stopped, exit 130.
TMPDIR=$tmp/t "$bin/perseus" demo --inference --trace synthetic --duration 3600 --no-plots \
  >"$tmp/out2" 2>"$tmp/err2" &
demo_pid=$!
wait_until 60 grep -q "replaying" "$tmp/err2" || fail "the demo did not start: $(cat "$tmp/err2")"
kill -INT "$demo_pid"
rc=0
wait "$demo_pid" || rc=$?
demo_pid=
[[ $rc == 130 ]] || fail "exit $rc after SIGINT (want 130): $(cat "$tmp/err2")"
grep -q "interrupted; everything stopped" "$tmp/err2" || fail "$(cat "$tmp/err2")"
! leftovers || fail "after SIGINT"

expect_error 2 "--time-scale: expected a number" "$bin/perseus" demo --inference --time-scale 0
expect_error 2 "unknown option" "$bin/perseus" demo --inference --bogus
expect_error 2 "--per-pool: expected an integer in \\[1, 8\\]" "$bin/perseus" demo --inference --per-pool 9
expect_error 2 "--max-running: expected an integer" "$bin/perseus" demo --inference --max-running 1.5
expect_error 1 "no-such.csv" "$bin/perseus" demo --inference --trace "$tmp/no-such.csv"
echo ok
