#!/usr/bin/env bash
# perseus-instclock on a perseus-fakeserve instance, through the instance's clock file:
#   - idle, the instance gets the GPU's lowest clock, and the fake runs its next request at it;
#   - under load (32 streams), the clock rises, and the fake's iterations run at the new clock;
#   - when the load goes, the clock falls back to the lowest;
#   - stopped (SIGTERM), the controller leaves the highest clock (the default) behind;
#   - a metrics page it cannot read sends the instance to the highest clock, with a message;
#   - bad options exit 2.
set -euo pipefail
ctl=${PRS_BIN_DIR:?}/perseus-instclock
fake=$PRS_BIN_DIR/perseus-fakeserve
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

"$fake" --listen 127.0.0.1:0 --port-file "$tmp/port" --tp 4 --clock-file "$tmp/clock" \
  2>"$tmp/fake.log" &
pids+=($!)
wait_until 30 test -s "$tmp/port" || fail "fake did not start: $(cat "$tmp/fake.log")"
url=http://127.0.0.1:$(cat "$tmp/port")
fake_metric() { curl -s "$url/metrics" | awk -v k="$1" 'index($1, k "{") == 1 {print $2}'; }

"$ctl" --metrics "$url/metrics" --tp 4 --period 0.05 --clock-file "$tmp/clock" \
  2>"$tmp/ctl.log" &
ctl_pid=$!
pids+=($ctl_pid)
clock_is() { [[ -s $tmp/clock && $(cat "$tmp/clock") == "$1" ]]; }
clock_above() { [[ -s $tmp/clock && $(cat "$tmp/clock") -gt $1 ]]; }

# Idle: the lowest clock; the fake's next request runs at it.
wait_until 30 clock_is 345 || fail "idle clock: $(cat "$tmp/clock" 2>&1) $(cat "$tmp/ctl.log")"
curl -s "$url/v1/completions" -d '{"model": "llama2-70b", "prompt": "x", "max_tokens": 2}' >/dev/null
# (the controller may have moved the clock while the request ran: the fake took one of its
# clocks, not its own 1980 MHz)
(($(fake_metric perseus_fake_gpu_clock_mhz) < 1980)) ||
  fail "the fake ignored the clock file: $(fake_metric perseus_fake_gpu_clock_mhz) MHz"

# Load: 32 long streams raise the clock, and the fake follows.
streams=()
for _ in $(seq 32); do
  curl -sN "$url/v1/completions" -d '{"model": "llama2-70b", "prompt": "x", "max_tokens": 100000,
    "stream": true}' >/dev/null &
  streams+=($!)
done
wait_until 60 clock_above 345 || fail "the clock did not rise under load: $(tail -3 "$tmp/ctl.log")"
loaded=$(cat "$tmp/clock")
fake_follows() { (($(fake_metric perseus_fake_gpu_clock_mhz) > 345)); }
wait_until 30 fake_follows || fail "the fake did not take the new clock $loaded"

# The load goes: back to the lowest clock.
kill "${streams[@]}" 2>/dev/null || true
wait "${streams[@]}" 2>/dev/null || true
wait_until 60 clock_is 345 || fail "the clock did not fall back: $(tail -3 "$tmp/ctl.log")"
grep -q "clock $loaded MHz" "$tmp/ctl.log" || fail "the log lacks the change to $loaded"

# Stopped: the highest clock, the GPU's default, is left behind.
kill "$ctl_pid"
wait "$ctl_pid" || fail "the controller exited with $?"
clock_is 1980 || fail "after SIGTERM the clock file says $(cat "$tmp/clock")"

# An unreadable page: the highest clock, and a message naming the URL.
echo 345 >"$tmp/clock"
"$ctl" --metrics http://127.0.0.1:1/metrics --tp 4 --clock-file "$tmp/clock" --iterations 1 \
  2>"$tmp/err" || true
clock_is 1980 || fail "with no page the clock is $(cat "$tmp/clock")"
grep -q 'http://127.0.0.1:1/metrics.*highest clock' "$tmp/err" || fail "message: $(cat "$tmp/err")"

expect_error 2 'required' "$ctl" --tp 4
expect_error 2 '--headroom' "$ctl" --metrics "$url/metrics" --tp 4 --headroom 2
expect_error 2 'no cost model.*--tp 1' "$ctl" --metrics "$url/metrics" --tp 1
echo ok
