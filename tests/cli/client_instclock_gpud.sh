#!/usr/bin/env bash
# perseus-instclock through perseus-gpud (a lease per GPU) on the fake NVML, two GPUs for a TP-2
# instance (a perseus-fakeserve):
#   - idle, both GPUs are locked below their highest clock;
#   - kill -9 of the controller: perseus-gpud resets both GPUs (their default, highest clock);
#   - a second controller leases them again (nothing left held), and SIGTERM resets them too.
# Skipped (77) without the fake NVML.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
[[ -n ${PRS_FAKE_NVML:-} ]] || skip_input "no fake NVML"
export PRS_FAKE_GPU_COUNT=2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prs-instclock-XXXXXX")
start_gpud "$tmp"
fake_pid= ctl_pid=
trap 'kill $fake_pid $ctl_pid "$gpud_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

"$bin/perseus-fakeserve" --listen 127.0.0.1:0 --port-file "$tmp/port" --tp 2 2>"$tmp/fake.log" &
fake_pid=$!
wait_until 30 test -s "$tmp/port" || fail "fake did not start"
url=http://127.0.0.1:$(cat "$tmp/port")

clock_of() { "$bin/perseus-gpud" --list | awk -v i="$1" '$1 == i {print $4}'; }
highest=$(clock_of 0)
[[ $highest =~ ^[0-9]+$ ]] || fail "no clock in perseus-gpud --list: $("$bin/perseus-gpud" --list)"
both_below() { (($(clock_of 0) < highest && $(clock_of 1) < highest)); }
both_reset() { [[ $(clock_of 0) == "$highest" && $(clock_of 1) == "$highest" ]]; }

start_ctl() {
  "$bin/perseus-instclock" --metrics "$url/metrics" --tp 2 --period 0.05 --gpus nvml:0,nvml:1 \
    --gpud-socket "$gpud_sock" 2>"$tmp/ctl.log" &
  ctl_pid=$!
}
start_ctl
wait_until 30 both_below || fail "GPUs not locked low: $(clock_of 0) $(clock_of 1) $(cat "$tmp/ctl.log")"

kill -9 "$ctl_pid"
wait "$ctl_pid" 2>/dev/null || true
wait_until 30 both_reset || fail "after kill -9 the GPUs are at $(clock_of 0) $(clock_of 1)"
grep -q "msg=release" "$tmp/gpud.log" || fail "no release in perseus-gpud's log"

start_ctl
wait_until 30 both_below || fail "the second controller could not lease: $(cat "$tmp/ctl.log")"
kill "$ctl_pid"
wait "$ctl_pid" || fail "the controller exited with $?"
both_reset || fail "after SIGTERM the GPUs are at $(clock_of 0) $(clock_of 1)"
ctl_pid=
echo ok
