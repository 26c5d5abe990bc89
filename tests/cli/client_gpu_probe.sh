#!/usr/bin/env bash
# The read-only GPU probe (bench/gpu_probe.c) on the fake drivers made to behave as an H100 did
# when probed: an energy counter refreshed every 100 ms whose reads keep a CPU busy for 3 ms. The
# probe must find the refresh period and the read cost, its sampler section must fit the period
# while using well under a CPU, the stream section must run, it must change no clock, and bad
# usage is refused with status 2.
set -euo pipefail
source "$(dirname "$0")/lib.bash"
bin="${PRS_BIN_DIR:?}"
[[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || skip_input "no fake driver"
probe="$bin/bench/gpu_probe"
[[ -x $probe ]] || skip_input "no $probe (benchmarks not built)"
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-gpu-probe-XXXXXX")
trap 'rm -rf "$dir"' EXIT
export PRS_FAKE_GPU_DIR=$dir PRS_FAKE_NVML_REFRESH_MS=100 PRS_FAKE_NVML_READ_MS=3
export PRS_NVML_LIBRARY=$PRS_FAKE_NVML PRS_FAKE_NVML_STATE=$dir/clocks
"$probe" --cuda "$PRS_FAKE_CUDA" --seconds 3 --reps 40 --mib 256 --raw "$dir/raw.csv" \
  >"$dir/out" 2>&1
cat "$dir/out"

# A figure of the line that names what: the median, p10 or p90 ($2).
figure() { sed -n "s/^ *$1  *median  *\([0-9.]*\) [a-z]*  *p10  *\([0-9.]*\)  *p90  *\([0-9.]*\) .*/\\$2/p" "$dir/out" | head -1; }
median() { figure "$1" 1; }
within() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }
check() { if ! within "$2" "$3" "$4"; then echo "FAIL: $1 = $2, not in [$3, $4]"; exit 1; fi; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }

# Tolerances come from what the probe measured on this machine, not from fixed milliseconds: a
# read keeps its thread busy 0.9-1.1 times 3 ms when it runs undisturbed, and its wall time grows
# as the thread's share of a CPU shrinks (busy loops beside it); a change of the counter is seen by
# the first read after it, so the interval between two changes is off by at most the span of a
# read (its p90: the fake's tail and the scheduler's preemptions included).
read_p90=$(figure "cost of one read" 3)
busy_reads=$(sed -n 's/^  CPU busy \([0-9]*\) % of the time while reading/\1/p' "$dir/out" | head -1)
[[ -n $read_p90 && -n $busy_reads ]] || { echo "FAIL: no read cost or CPU share in the output"; exit 1; }
share=$(calc "($busy_reads > 5 ? $busy_reads : 5) / 100")
check "cost of one read (us)" "$(median "cost of one read")" 2700 "$(calc "3300 / $share")"
tol=$(calc "$read_p90 / 1000")
check "interval between changes (ms)" "$(median "interval between changes")" \
  "$(calc "100 - $tol")" "$(calc "100 + $tol")"
grep -q "CUDA device 0 is nvml:uuid=GPU-.* (this GPU)" "$dir/out"
# The refresh fit dates the refresh instants from readings bracketing them: over the 3 s its
# period error is a fraction of a bracket (p90 of the sampler's poll brackets) per period spanned;
# 0.5 % of the period when the brackets are narrow.
bracket_p90=$(figure "poll bracket" 3)
[[ -n $bracket_p90 ]] || { echo "FAIL: no poll bracket in the output"; exit 1; }
ptol=$(calc "(0.5 > 3 * $bracket_p90 / 30) ? 0.5 : 3 * $bracket_p90 / 30")
period=$(sed -n 's/.*refresh fit: period \([0-9.]*\) ms.*/\1/p' "$dir/out")
check "fitted refresh period (ms)" "$period" "$(calc "100 - $ptol")" "$(calc "100 + $ptol")"
busy=$(sed -n 's/.*CPU busy \([0-9]*\) % of the time (the sampler.*/\1/p' "$dir/out")
check "sampler CPU (%)" "$busy" 0 70
grep -q "two hand-offs" "$dir/out"
grep -q "power read, beside .* median" "$dir/out"
grep -q "^reading,t_lo_s,t_hi_s,value$" "$dir/raw.csv"
(($(grep -c '^energy_j,' "$dir/raw.csv") >= 25))
[[ ! -e $dir/clocks ]] || { echo "FAIL: the probe changed a clock: $(cat "$dir/clocks")"; exit 1; }

rc=0
"$probe" --seconds 0 >/dev/null 2>"$dir/err" || rc=$?
((rc == 2)) && grep -q -- "--seconds" "$dir/err"
rc=0
"$probe" --bogus 1 >/dev/null 2>&1 || rc=$?
((rc == 2))
echo "gpu_probe: ok"
