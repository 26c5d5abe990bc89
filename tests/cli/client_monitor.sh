#!/usr/bin/env bash
# perseus monitor and perseus show-env, run as a user would: on the simulated GPU (which a monitor
# keeps idle in wall time, at its model's blocking power) the energy of `sleep 2` is that power
# over the run within 1 %; the command's exit status comes back; the --csv trace adds up to the
# run; on the fake NVML (counter refreshed every 100 ms, or no counter at all: power readings)
# the average power is the power the fake draws within 3 %; show-env describes both.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

# field FILE KEY: a number from the monitor's JSON (first GPU unless KEY names the top level)
field() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(d['$2'] if '$2' in d else d['gpus'][0]['$2'])" "$1"; }
# within A B REL: |A / B - 1| < REL
within() { /usr/bin/python3 -c "import sys; a,b,r=map(float,sys.argv[1:]); sys.exit(not abs(a/b-1)<r)" "$@"; }

# --- usage ---
"$bin" monitor --help | grep -q -- "--interval SEC" || fail "monitor --help"
"$bin" show-env --help | grep -q -- "--gpus LIST" || fail "show-env --help"
expect_error 2 "missing the command to run" "$bin" monitor --gpus sim
expect_error 2 "--interval: expected 0.05 to 3600 s, got '0'" "$bin" monitor --csv x --interval 0 -- true
expect_error 1 "GPU 0 \(nope\)" "$bin" monitor --gpus nope -- true
PRS_NVML_LIBRARY=$tmp/none.so expect_error 1 "no NVIDIA GPU found .*--gpus sim:a100" "$bin" monitor -- true

# --- the simulated GPU ---
idle_w=$("$bin" show-env --gpus sim:a100 | sed -n 's/.*idles at its blocking power, \(.*\) W$/\1/p')
[[ -n $idle_w ]] || fail "show-env names no blocking power for sim:a100"
t0=$(date +%s.%N)
"$bin" monitor --gpus sim:a100,sim:h100 --json "$tmp/run.json" --csv "$tmp/trace.csv" \
  --interval 0.25 -- sleep 2 2>"$tmp/report"
t1=$(date +%s.%N)
grep -q "GPU 0 sim-a100: .* J, .* W average$" "$tmp/report" || fail "report: $(cat "$tmp/report")"
grep -q "GPU 1 sim-h100" "$tmp/report" || fail "report lacks GPU 1"
time_s=$(field "$tmp/run.json" time_s)
energy=$(field "$tmp/run.json" energy_j)
/usr/bin/python3 -c "import sys; t,a,b=map(float,sys.argv[1:]); sys.exit(not 2<=t<=b-a)" \
  "$time_s" "$t0" "$t1" || fail "run of $time_s s: not within sleep 2's and the outer run's"
expected=$(/usr/bin/python3 -c "print($idle_w * $time_s)")
within "$energy" "$expected" 0.01 || fail "sim: $energy J, the simulator integrated $expected J"
[[ $(field "$tmp/run.json" estimate) == False ]] || fail "a 2 s run flagged an estimate"
# the trace: a row per GPU per period, adding up to the run (its last row runs past the end)
rows=$(grep -c '^[0-9.]*,0,' "$tmp/trace.csv")
[[ $rows -ge 8 ]] || fail "trace: $rows rows for GPU 0"
head -1 "$tmp/trace.csv" | grep -qx "time_s,gpu,power_w,energy_j,estimate" || fail "trace header"
sum=$(awk -F, '$2 == 0 { s += $4 } END { printf "%.6f", s }' "$tmp/trace.csv")
/usr/bin/python3 -c "import sys; s,e,w=map(float,sys.argv[1:]); sys.exit(not e*0.99 < s < e + w)" \
  "$sum" "$energy" "$idle_w" || fail "trace adds up to $sum J, the run $energy J"

# --interval without --csv: a line per period on stderr
"$bin" monitor --gpus sim:a100 --interval 0.2 -- sleep 1 2>"$tmp/lines"
[[ $(grep -c "^perseus monitor: [0-9.]* s: GPU 0 [0-9.]* W$" "$tmp/lines") -ge 3 ]] ||
  fail "--interval without --csv: $(cat "$tmp/lines")"

# the command's exit status, and a command that cannot run
rc=0; "$bin" monitor --gpus sim -- sh -c 'exit 7' 2>/dev/null || rc=$?
[[ $rc -eq 7 ]] || fail "exit status $rc, want 7"
rc=0; "$bin" monitor --gpus sim -- "$tmp/no-such-command" 2>"$tmp/err" || rc=$?
[[ $rc -eq 127 ]] || fail "exit status $rc for a missing command, want 127"
grep -q "cannot run" "$tmp/err" || fail "no message for a missing command"
# the command's options are its own
"$bin" monitor --gpus sim -- sh -c 'echo "$1"' sh --help >"$tmp/out" 2>/dev/null
[[ $(cat "$tmp/out") == --help ]] || fail "the command's --help was taken"

# --- the fake NVML: a counter refreshed every 100 ms, then none ---
[[ -n ${PRS_FAKE_NVML:-} ]] || { echo "no fake NVML: skipping its part"; exit 0; }
export PRS_NVML_LIBRARY=$PRS_FAKE_NVML PRS_FAKE_NVML_REFRESH_MS=100
"$bin" show-env >"$tmp/env"
grep -q "^NVML: .*, 1 GPU$" "$tmp/env" || fail "show-env: $(cat "$tmp/env")"
grep -q "^  uuid: GPU-" "$tmp/env" || fail "show-env: no uuid"
grep -q "^  energy counter: readable" "$tmp/env" || fail "show-env: counter"
grep -q "^perseus-gpud: .*: not running (no socket)" "$tmp/env" ||
  PRS_GPUD_SOCKET=$tmp/none.sock "$bin" show-env | grep -q "not running (no socket)" ||
  fail "show-env: perseus-gpud"
power_w=$(sed -n 's/^  power now: \(.*\) W$/\1/p' "$tmp/env")
"$bin" monitor --json "$tmp/fake.json" -- sleep 1 2>/dev/null
avg=$(field "$tmp/fake.json" power_w)
within "$avg" "$power_w" 0.03 || fail "fake NVML: $avg W average, the fake draws $power_w W"
PRS_FAKE_NVML_NO_ENERGY=1 "$bin" show-env | grep -q "energy counter: not readable" ||
  fail "show-env: a GPU without an energy counter"
PRS_FAKE_NVML_NO_ENERGY=1 "$bin" monitor --json "$tmp/power.json" -- sleep 1 2>/dev/null
avg=$(field "$tmp/power.json" power_w)
within "$avg" "$power_w" 0.03 || fail "power readings: $avg W average, the fake draws $power_w W"
echo "client_monitor: ok"
