#!/usr/bin/env bash
# Debian's real Prometheus scraping perseusd while a job runs (python/tests/e2e_sim.py: 4 sim
# ranks through profiling, planning and running): the job's savings series is read back through
# Prometheus's HTTP query API and equals what perseusd's /metrics says once the job is over.
# Skipped (77) without prometheus or what the Python client needs (lib.bash).
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
command -v prometheus >/dev/null || { echo "prometheus not found (apt-get install prometheus)"; exit 77; }
python_client_checks
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-prom-XXXXXX")
start_perseusd "$dir"
pport=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: perseusd
    static_configs:
      - targets: ["${url#http://}"]
YML
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$dir/prometheus.log" 2>&1 &
prom_pid=$!
trap 'kill "$prom_pid" "$perseusd_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
prom="http://127.0.0.1:$pport"
wait_until 60 curl -sf "$prom/-/ready" >/dev/null || true
curl -sf "$prom/-/ready" >/dev/null || fail "prometheus did not start: $(tail -5 "$dir/prometheus.log")"

PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" timeout 120 "$py" \
  "$src/python/tests/e2e_sim.py" "$url" >"$dir/e2e.log" || fail "the job did not run: $(tail -5 "$dir/e2e.log")"

# The job is over: its counter no longer moves. Wait for a scrape that has it, then compare.
want=$(curl -sf "$url/metrics" | sed -n 's/^perseusd_job_energy_saved_joules_total{[^}]*} //p')
[[ -n $want ]] || fail "/metrics has no perseusd_job_energy_saved_joules_total sample"
got=""
scraped() {
  got=$(curl -sf --data-urlencode 'query=perseusd_job_energy_saved_joules_total' "$prom/api/v1/query" |
    "$py" -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")')
  [[ -n $got ]] && "$py" -c "import sys; sys.exit(0 if float('$got') == float('$want') else 1)"
}
wait_until 60 scraped || true
echo "perseusd /metrics: $want J saved; Prometheus query API: ${got:-nothing} J"
[[ -n $got ]] || fail "Prometheus has no perseusd_job_energy_saved_joules_total"
"$py" -c "import sys; sys.exit(0 if float('$got') == float('$want') > 0 else 1)" ||
  fail "Prometheus says $got J, perseusd $want J"
echo "prometheus checks passed"
