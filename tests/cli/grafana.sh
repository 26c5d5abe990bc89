#!/usr/bin/env bash
# docs/grafana-dashboard.json: valid JSON, a Grafana dashboard whose panels query Prometheus, and
# every perseusd_* or process_* series its queries name is one that perseusd's /metrics declares
# (a running perseusd with a job; histogram suffixes stripped).
set -euo pipefail
bin=${PRS_BIN_DIR:?}
src=${PRS_SOURCE_DIR:?}
tmp=$(mktemp -d)
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
start_perseusd "$tmp"
curl -sf -X POST -H 'Content-Type: application/json' "$url/v1/jobs" \
  -d '{"model":"m","stages":2,"microbatches":2,"dp":1,"clocks_mhz":[1410,1200],"blocking_power_w":83.64}' \
  >/dev/null || fail "create a job"
curl -sf "$url/metrics" >"$tmp/metrics" || fail "GET /metrics"
/usr/bin/python3 - "$src/docs/grafana-dashboard.json" "$tmp/metrics" <<'PY' || fail "dashboard check"
import json, re, sys
dash = json.load(open(sys.argv[1]))
declared = set(re.findall(r"^# TYPE (\S+) ", open(sys.argv[2]).read(), re.M))
assert dash["title"] and dash["panels"], "no title or panels"
names = set()
for p in dash["panels"]:
    assert p["targets"], f"panel {p['title']!r} has no query"
    for t in p["targets"]:
        names |= set(re.findall(r"\b((?:perseusd|process)_[a-z_]+)", t["expr"]))
missing = sorted(n for n in names if re.sub(r"_(bucket|sum|count)$", "", n) not in declared)
assert not missing, f"queried but not in /metrics: {missing}"
# Per-job panels group by the job's own label (job_id), never by Prometheus's scrape job.
labels = set(re.findall(r"\b([a-z_]+)=", open(sys.argv[2]).read()))
for p in dash["panels"]:
    for t in p["targets"]:
        for by in re.findall(r"by \(([^)]*)\)", t["expr"]):
            for l in (x.strip() for x in by.split(",")):
                assert l in labels or l == "le", f"panel {p['title']!r} groups by {l!r}, not a label of /metrics"
        if "perseusd_job_" in t["expr"]:
            assert "{{job_id}}" in t.get("legendFormat", "{{job_id}}"), f"panel {p['title']!r} legend"
print(f"{len(dash['panels'])} panels, {len(names)} series, all in /metrics")
PY
echo "grafana dashboard checks passed"
