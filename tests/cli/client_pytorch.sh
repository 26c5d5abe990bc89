#!/usr/bin/env bash
# PyTorch end to end (python/examples/pipeline_gloo.py): 2 pipelines x 4 stage processes,
# torch.distributed gloo on CPU, 1F1B with isend/irecv, sim GPU backend, against a real perseusd:
# profiling -> planning -> running -> straggler -> recovery. Asserts every phase was reached, the
# profile was measured, running energy per iteration below all-max at <= 2 % longer time, clocks
# reset at exit. Skipped (77) without Debian's python3-torch or in a sanitizer build.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
$py -c 'import torch' 2>/dev/null || { echo "no python3-torch"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-client-torch-XXXXXX")
start_perseusd "$dir"
# The rendezvous port is picked free, then released for torch to bind: another process may take
# it in between ("Address already in use"); only that failure is retried, with a new port.
for attempt in 1 2 3; do
  master=$(PYTHONDONTWRITEBYTECODE=1 $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rc=0
  PYTHONDONTWRITEBYTECODE=1 PERSEUS_LIBRARY="$bin/libperseus.so" timeout 280 "$py" \
    "$src/python/examples/pipeline_gloo.py" --server "$url" --stages 4 --dp 2 \
    --master-port "$master" --json "$dir/out.json" >/dev/null 2>"$dir/err" || rc=$?
  ((rc == 0)) && break
  cat "$dir/err" >&2
  grep -q "Address already in use" "$dir/err" && ((attempt < 3)) || exit "$rc"
  echo "rendezvous port $master was taken: retrying with another"
done
PYTHONDONTWRITEBYTECODE=1 $py - "$dir/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("allmax", "running", "straggler", "recovery"):
    assert r[k], f"{k} never measured: {r}"
assert "profiling" in r["phases"] and "running" in r["phases"], r["phases"]
assert r["planning"]["done_pct"] == 100.0, r["planning"]
assert r["profile_source"] == "measured", r["profile_source"]
a, p = r["allmax"], r["running"]
assert p["energy_j"] < a["energy_j"], (p, a)
assert p["time_s"] <= 1.02 * a["time_s"], (p, a)
assert r["straggler"]["time_s"] > p["time_s"]
assert abs(r["recovery"]["time_s"] - p["time_s"]) < 1e-6 * p["time_s"] + 1e-9
assert r["clocks_reset"], r
print(f"pytorch e2e: all-max {a['time_s']:.4f} s {a['energy_j']:.1f} J; running "
      f"{p['time_s']:.4f} s {p['energy_j']:.1f} J ({100 * (p['energy_j'] / a['energy_j'] - 1):+.2f} %"
      f" energy); straggler {r['straggler']['time_s']:.4f} s {r['straggler']['energy_j']:.1f} J;"
      f" {r['iterations']} iterations, {r['wall_s']:.1f} s")
PY
