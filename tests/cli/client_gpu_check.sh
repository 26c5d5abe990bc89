#!/usr/bin/env bash
# scripts/gpu-check.sh on the fake drivers set up as the H100 was probed (an energy counter
# refreshed every 100 ms, 3 ms a read), so the script that runs on a GPU machine cannot rot: it
# must run every section and write the report, whose figures must be the fakes' (refresh
# interval, read cost, the refresh fit locked); the client measure-only on the fake CUDA stream
# must count every computation past the warm-up, tag it with the GPU's clock, fit the known work
# near its long-window references (the memset, drawn at 0.8 times a kernel's power, below the
# kernels: a mix-up shows) and change no clock; the probe must see a record held behind the
# fake driver's 53 pending host functions, and the power section must read. Skipped (77) without the fakes, the benchmarks,
# Debian's python3 or with a sanitizer build.
set -euo pipefail
bin="${PRS_BIN_DIR:?}"
src="${PRS_SOURCE_DIR:?}"
source "$src/tests/cli/lib.bash"
python_client_checks
[[ -n ${PRS_FAKE_CUDA:-} && -n ${PRS_FAKE_NVML:-} ]] || { echo "no fake driver"; exit 77; }
[[ -x $bin/bench/gpu_probe && -x $bin/bench/gpu_attrib ]] || { echo "benchmarks not built"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/prs-gpu-check-XXXXXX")
trap 'rm -rf "$dir"' EXIT
export PRS_FAKE_GPU_DIR=$dir PRS_FAKE_NVML_REFRESH_MS=100 PRS_FAKE_NVML_READ_MS=3
export PRS_FAKE_NVML_STATE=$dir/clocks PRS_PYTHON=$py PYTHONDONTWRITEBYTECODE=1
rc=0
timeout 280 "$src/scripts/gpu-check.sh" --fake "$bin" --out "$dir/out" >"$dir/log" 2>&1 || rc=$?
cat "$dir/log"
((rc == 0)) || { echo "FAIL: gpu-check.sh exited $rc"; exit 1; }
[[ ! -e $dir/clocks ]] || { echo "FAIL: a clock changed: $(cat "$dir/clocks")"; exit 1; }
grep -q "^## Attribution against long windows" "$dir/out/report.md"
$py - "$dir/out/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p, s = r["probe"], r["stream"]
def within(what, x, lo, hi):
    assert x is not None and lo <= x <= hi, f"{what} = {x}, not in [{lo}, {hi}]"
assert all(v == "ok" for v in r["meta"]["status"].values()), r["meta"]
# Tolerances from what the probe measured here, not fixed milliseconds: a read spins 0.9-1.1 times
# 3 ms of its thread's CPU, its wall time grows as the thread's share of a CPU shrinks; a change of
# the counter is seen by the first read after it, so an interval is off by at most a read's span
# (p90); the fit's period by a fraction of the sampler's poll brackets (p90) per period spanned.
read, share = p["energy_read_us"], max(p["energy_read_cpu_pct"] or 0, 5) / 100
within("energy read (us)", read["median"], 2700, 3300 / share)
tol = read["p90"] / 1000
within("refresh interval (ms)", p["energy_refresh_ms"]["median"], 100 - tol, 100 + tol)
ptol = max(0.5, 3 * p["sampler_bracket_ms"]["p90"] / 30)
within("sampler's fitted period (ms)", p["sampler_fit_period_ms"], 100 - ptol, 100 + ptol)
# The refresh fit locks when the sampler's reads bracket the counter's changes tightly; on a busy
# machine the scheduler widens the brackets (the median of 2 reads, 3 ms each, is 6 ms) and the
# fit may not lock in 3 s: required only when the brackets the probe measured were not widened.
if p["sampler_bracket_ms"]["median"] < 4.5:
    assert p["sampler_fit_locked"] == "locked", p
for k in ("event_record_host_us", "host_fn_enqueue_host_us", "two_host_fn_handoffs_us"):
    assert p[k]["n"] == 80, (k, p[k])
# The fake driver holds a record behind 53 pending host functions, as the H100 did: with 80
# rounds ahead, each of a 0.4 ms memset and a host function, the probe's backlog section must see
# it (events alone may be held too, by a busy machine's scheduler: not asserted).
b = p["backlog"]
assert b["with_host_fns"]["first_held_round"] is not None, b
w = r["power"]
assert w and w["reads"] > 100 and w["load"] is False, w
assert s["hooks"]["pair_us"]["median"] > 0, s["hooks"]
m, clock = s["model"], p["sm_clock_now_mhz"]
for k in ("forward/0", "backward/0"):
    kind = m["kinds"][k]
    assert kind["windows"] == 4 * (m["iterations"] - 1), (k, kind, m["iterations"])
    assert kind["clock_min_mhz"] == kind["clock_max_mhz"] == clock, (kind, clock)
kn = s["known"]["kinds"]
for k, v in kn.items():
    # The fit's own standard error is the scale (a few % after 30 s at a 100 ms refresh).
    tol = max(0.12 * v["reference_w"], 4 * v["se_w"]) * (3 if k == "blocked" else 1)
    within(f"{k} fitted (W)", v["fitted_w"], v["reference_w"] - tol, v["reference_w"] + tol)
within("copy / mm_bf16 fitted", kn["copy"]["fitted_w"] / kn["mm_bf16"]["fitted_w"], 0.6, 0.93)
print("gpu-check on the fakes:", {k: round(v["error_pct"], 2) for k, v in kn.items()})
PY
echo "gpu-check: ok"
