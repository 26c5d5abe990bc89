#!/usr/bin/env bash
# perseusd's /metrics as Prometheus reads it: `promtool check metrics` (Debian's prometheus
# package) finds nothing to complain about in the page, before and after a job ran; the process
# and build metrics are there. Exit 77 (skipped) without promtool.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
tmp=$(mktemp -d)
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
command -v promtool >/dev/null || { echo "promtool not found (apt-get install prometheus)"; exit 77; }
start_perseusd "$tmp"

check() {
  curl -sf "$url/metrics" >"$tmp/metrics" || fail "GET /metrics"
  promtool check metrics <"$tmp/metrics" >"$tmp/lint" 2>&1 || fail "promtool: $(cat "$tmp/lint")"
  [[ ! -s $tmp/lint ]] || fail "promtool: $(cat "$tmp/lint")"
}
check
for m in 'perseusd_build_info{version="[0-9.]+"} 1' 'process_cpu_seconds_total [0-9.]+' \
  'process_resident_memory_bytes [1-9][0-9]*' 'process_open_fds [1-9][0-9]*' \
  'process_start_time_seconds [1-9][0-9.]*' 'perseusd_jobs_loaded 0'; do
  grep -qE "^$m\$" "$tmp/metrics" || fail "/metrics lacks /$m/"
done
! grep -q "_total_" "$tmp/metrics" || fail "a metric name has _total inside it"
# With a job: the page stays valid.
curl -sf -X POST -H 'Content-Type: application/json' "$url/v1/jobs" \
  -d '{"model":"m","stages":2,"microbatches":2,"dp":1,"clocks_mhz":[1410,1200],"blocking_power_w":83.64}' \
  >/dev/null || fail "create a job"
check
grep -qE '^perseusd_jobs_loaded 1$' "$tmp/metrics" || fail "perseusd_jobs_loaded after one job"
# No label Prometheus sets itself (job, instance): the job's series carry job_id (a label named
# job became exported_job, and the dashboard's sums by job mixed different jobs).
grep -qE '^perseusd_job_phase\{job_id="[^"]+",model="m",phase="registering"\} 1$' "$tmp/metrics" ||
  fail "no perseusd_job_phase with job_id: $(grep perseusd_job_phase "$tmp/metrics")"
! grep -qE '[{,](job|instance)="' "$tmp/metrics" || fail "a reserved label: $(grep -E '[{,](job|instance)="' "$tmp/metrics" | head -n 3)"
# Predicted energies say so in their HELP.
for m in perseusd_job_energy_joules_total perseusd_job_energy_saved_joules_total; do
  grep -qE "^# HELP $m Predicted, not measured: .*all the job's GPUs" "$tmp/metrics" ||
    fail "$m's HELP does not say it is predicted, for all GPUs"
done
echo "metrics checks passed"
