#!/usr/bin/env bash
# Profiles in Zeus master's rank-level format (rank,dp_rank,pp_rank,tp_rank,stage,...) plan to the
# same frontier as the same data per stage, and `perseus plan --filter zeus` is Zeus master's
# option filter (blocking power subtracted before dominated options are dropped).
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
src=${PRS_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

ex=$src/examples/a100-8stage.csv
common=(--stages 8 --microbatches 4 --unit-time 0.001 --blocking-power 83.64 --quiet)

# The example split over two tensor-parallel ranks per stage: rank tp 0 takes the stage's time,
# rank tp 1 is 3 % faster, each burns half the energy (halving is exact in binary, and Python's
# repr round-trips), rows written tp 1 first so that combining cannot lean on the order.
/usr/bin/python3 - "$ex" "$tmp/zeus.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
with open(sys.argv[2], "w") as f:
    f.write("rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n")
    for r in rows:
        s, t, e = int(r["stage"]), float(r["time"]), float(r["energy"])
        for tp in (1, 0):
            f.write(f"{2 * s + tp},0,{s},{tp},{s},{r['instruction']},{r['frequency']},"
                    f"{t if tp == 0 else t * 0.97!r},{e / 2!r}\n")
PY
[[ $(wc -l <"$tmp/zeus.csv") -eq $((2 * $(wc -l <"$ex") - 1)) ]] || fail "conversion"

for model in exp hull; do
  "$bin" plan --profile "$ex" "${common[@]}" --cost-model $model --out "$tmp/stage-$model"
  "$bin" plan --profile "$tmp/zeus.csv" "${common[@]}" --cost-model $model --out "$tmp/rank-$model"
  cmp "$tmp/stage-$model/frontier.csv" "$tmp/rank-$model/frontier.csv" ||
    fail "$model: the rank-level profile plans to another frontier"
  [[ $(wc -l <"$tmp/rank-$model/frontier.csv") -gt 10 ]] || fail "$model: frontier too short"
done

# --filter zeus keeps slow options the artifact's filter drops: with the exp model the frontier's
# slowest point is slower. With hull (always on effective cost) it changes nothing.
"$bin" plan --profile "$ex" "${common[@]}" --filter zeus --out "$tmp/zeus-exp"
slow_artifact=$(sed -n 2p "$tmp/stage-exp/frontier.csv" | cut -d, -f1)
slow_zeus=$(sed -n 2p "$tmp/zeus-exp/frontier.csv" | cut -d, -f1)
/usr/bin/python3 -c "import sys; sys.exit(not float('$slow_zeus') > float('$slow_artifact'))" ||
  fail "--filter zeus: slowest point $slow_zeus s, not slower than the artifact's $slow_artifact s"
"$bin" plan --profile "$ex" "${common[@]}" --filter artifact --out "$tmp/artifact-exp"
cmp "$tmp/stage-exp/frontier.csv" "$tmp/artifact-exp/frontier.csv" || fail "artifact is not the default"
"$bin" plan --profile "$ex" "${common[@]}" --cost-model hull --filter zeus --out "$tmp/zeus-hull"
cmp "$tmp/stage-hull/frontier.csv" "$tmp/zeus-hull/frontier.csv" || fail "--filter changed hull"
expect_error 2 "--filter: expected artifact or zeus, got 'x'" "$bin" plan --filter x
"$bin" plan --help | grep -- "--filter KIND" >/dev/null || fail "plan --help lacks --filter" # all of it read: no SIGPIPE

# Inconsistent rank-level files are refused with the file and line.
head -3 "$tmp/zeus.csv" >"$tmp/dup.csv"
sed -n 2p "$tmp/zeus.csv" >>"$tmp/dup.csv"
expect_error 2 "dup.csv:4: rank 1 has a second row for stage 0 forward at 1410 MHz" \
  "$bin" plan --profile "$tmp/dup.csv" "${common[@]}" --out "$tmp/x"
# rank 1 (stage 0, tp 1) loses its row at stage 0 forward 1395 MHz
grep -v '^1,0,0,1,0,forward,1395,' "$tmp/zeus.csv" >"$tmp/hole.csv"
line=$(grep -n '^0,0,0,0,0,forward,1395,' "$tmp/hole.csv" | cut -d: -f1)
expect_error 2 "hole.csv:$line: stage 0 forward at 1395 MHz has no row from rank 1" \
  "$bin" plan --profile "$tmp/hole.csv" "${common[@]}" --out "$tmp/x"
# perseusd takes the rank-level file as a job's profile upload and keeps the combined stage
# profile: the example itself, byte for byte.
if command -v curl >/dev/null; then
  mkdir "$tmp/server"
  bin=${PRS_BIN_DIR:?} start_perseusd "$tmp/server"
  # start_perseusd's trap stops the server and removes its folder; remove ours too
  trap 'kill "$perseusd_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
  # the job lists the example's clocks: a profile at clocks the job does not list is refused
  clocks=$(/usr/bin/python3 -c "import csv,sys; print(','.join(sorted({r['frequency'] for r in
           csv.DictReader(open(sys.argv[1]))}, key=int, reverse=True)))" "$ex")
  spec='{"model":"m","stages":8,"microbatches":4,"dp":1,"clocks_mhz":['"$clocks"'],
         "blocking_power_w":83.64}'
  curl -sf -X POST -H 'Content-Type: application/json' "$url/v1/jobs" -d "$spec" >"$tmp/job" ||
    fail "create a job"
  id=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['job_id'])" "$tmp/job")
  tok=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['token'])" "$tmp/job")
  curl -sf -X POST -H "Authorization: Bearer $tok" --data-binary "@$tmp/zeus.csv" \
    "$url/v1/jobs/$id/profile" >"$tmp/upload" || fail "upload the rank-level profile"
  grep -q '"phase":"planning"' "$tmp/upload" || fail "upload: $(cat "$tmp/upload")"
  curl -sf -H "Authorization: Bearer $tok" "$url/v1/jobs/$id/profile" >"$tmp/stored.csv"
  cmp "$tmp/stored.csv" "$ex" || fail "perseusd stored another profile than the combined one"
  # an inconsistent one is refused (400) with the line
  curl -sf -X POST -H 'Content-Type: application/json' "$url/v1/jobs" -d "$spec" >"$tmp/job"
  id=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['job_id'])" "$tmp/job")
  tok=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['token'])" "$tmp/job")
  code=$(curl -s -o "$tmp/upload" -w '%{http_code}' -X POST -H "Authorization: Bearer $tok" \
    --data-binary "@$tmp/hole.csv" "$url/v1/jobs/$id/profile")
  [[ $code == 400 ]] && grep -q ":$line: stage 0 forward at 1395 MHz has no row from rank 1" \
    "$tmp/upload" || fail "inconsistent upload: $code $(cat "$tmp/upload")"
else
  echo "no curl: perseusd's upload not checked"
fi
echo "zeus_profile: ok"
