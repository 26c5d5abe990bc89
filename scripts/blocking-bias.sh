#!/usr/bin/env bash
# What a blocking power measured too high costs: plans the SOSP'24 A100-SXM paper profiles
# (8 stages, tau = 1 ms, hull) once with the true blocking power (83.64 W) and once with it times
# FACTOR, takes from each clean frontier the plan `perseus evaluate --time` picks for a straggler
# time T' = s * T_min, and charges both with the true blocking power (idle time and the wait to
# T'). Prints the energy of each and the excess of the biased one, in percent. On an H100 the
# client's constant-power fit puts the GPU's power tail after each computation into the blocking
# power, 11-15 % above its steady value (docs/measurement.md, 'Attribution on a real GPU').
# usage: scripts/blocking-bias.sh [BUILD_DIR [SHARED_DIR [FACTOR]]]   (about 10 s)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-$here/build}/perseus
data=${2:-$here/../shared}/data/sosp24/stage_profile
factor=${3:-1.12}
pb=83.64
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[[ -x $bin ]] || { echo "no $bin: build first" >&2; exit 1; }
[[ -d $data ]] || { echo "no $data: the SOSP'24 profiles are needed" >&2; exit 1; }

# The true energy of the plan DIR's frontier gives for time T: busy energy, the true blocking
# power over the idle time, and over the wait from the plan's time to T on every GPU.
true_energy() {
  "$bin" evaluate --profile "$1" --frontier "$2" --time "$3" --json |
    python3 -c 'import json, sys
d, T, pb = json.load(sys.stdin), float(sys.argv[1]), float(sys.argv[2])
busy = sum(g["busy_energy_j"] for g in d["per_stage"])
idle = sum(g["idle_time_s"] for g in d["per_stage"]) + len(d["per_stage"]) * (T - d["time_s"])
print("%.2f" % (busy + pb * idle))' "$3" "$pb"
}

echo "| profile | M | s | T' (s) | energy, true P_block (J) | energy, P_block x $factor (J) | excess |"
echo "|---|---|---|---|---|---|---|"
for model in gpt3-175b bloom; do
  prof=$data/$model+a100_sxm_bf16.csv
  for m in 12 24; do
    for f in 1 "$factor"; do
      w=$(awk -v p="$pb" -v f="$f" 'BEGIN { printf "%.4f", p * f }')
      "$bin" plan --profile "$prof" --stages 8 --microbatches "$m" --unit-time 0.001 \
        --blocking-power "$w" --cost-model hull --quiet --out "$tmp/$model-$m-$f"
    done
    tmin=$(tail -n 1 "$tmp/$model-$m-1/frontier.csv" | cut -d, -f1)
    for s in 1.00 1.05 1.10 1.20 1.30; do
      t=$(awk -v a="$tmin" -v s="$s" 'BEGIN { printf "%.4f", a * s }')
      e1=$(true_energy "$prof" "$tmp/$model-$m-1" "$t")
      e2=$(true_energy "$prof" "$tmp/$model-$m-$factor" "$t")
      awk -v a="$e1" -v b="$e2" -v n="$model" -v m="$m" -v s="$s" -v t="$t" \
        'BEGIN { printf "| %s | %d | %s | %s | %.2f | %.2f | %+.3f %% |\n", n, m, s, t, a, b, 100 * (b - a) / a }'
    done
  done
done
