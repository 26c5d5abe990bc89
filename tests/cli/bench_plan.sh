#!/usr/bin/env bash
# End-to-end test of bench/bench_plan on a small synthetic pipeline (no shared data needed): the
# text table with --stats gives one counter line per case and the hull/exp ratio line; --csv
# --stats adds 15 counter columns whose figures agree with the table's points; the frontier does
# not depend on --threads; bad arguments are refused with exit status 2 and one line on stderr.
set -euo pipefail
. "${PRS_SOURCE_DIR:?PRS_SOURCE_DIR not set}/tests/cli/lib.bash"

bench="${PRS_BIN_DIR:?PRS_BIN_DIR not set}/bench/bench_plan"
[[ -x $bench ]] || skip_input "no $bench (built with -DPRS_BUILD_BENCH=OFF?)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

args=(--synth a100 --stages 4 --microbatches 4,6 --unit-time 0.001 --cost-model both
      --runs 1 --quick)

"$bench" "${args[@]}" --stats >"$tmp/text"
for m in 4 6; do
    for model in exp hull; do
        line=$(grep -E "^# synth-a100 M=$m $model: [0-9]+ steps \([0-9]+ repeated\) for [0-9]+ raw points; [0-9]+ cuts solved" "$tmp/text") ||
            fail "no counter line for M=$m $model: $(cat "$tmp/text")"
        [[ $line == *"reclaimings by rate"*"ms picking plans; "*" ms polishing ("*" moves)" ]] ||
            fail "counter line cut short: $line"
    done
    grep -qE "^# synth-a100 M=$m: hull/exp median time ratio [0-9.]+ \(CPU time [0-9.]+\)$" "$tmp/text" ||
        fail "no ratio line for M=$m"
done
grep -qE '^# synth-a100 M=4 exp: .* 0 reclaimings by rate' "$tmp/text" ||
    fail "exp reclaimed slack: $(grep 'M=4 exp:' "$tmp/text")"
"$bench" "${args[@]}" >"$tmp/plain"
grep -q 'steps (' "$tmp/plain" && fail "counter lines without --stats"

"$bench" "${args[@]}" --stats --csv >"$tmp/csv"
header=$(head -1 "$tmp/csv")
[[ $header == *",rss_verdict,steps,repeated_steps,raw_points,cuts,cuts_kept,same_ops,level_searches,level_nodes,cut_searches,cut_nodes,evaluations,reclaims,reclaim_moves,tracks,pick_s,polish_moves,polish_s" ]] ||
    fail "CSV header: $header"
[[ $(wc -l <"$tmp/csv") -eq 5 ]] || fail "want a header and 4 rows: $(cat "$tmp/csv")"
# every row has 31 fields; exp's raw frontier is its frontier, one point per step, and exp
# rounds nothing along a relaxed schedule; the picks take some time
awk -F, 'NR > 1 && NF != 31 { print "row " NR " has " NF " fields"; bad = 1 }
         NR > 1 && !($29 > 0) { print "no pick time in row " NR; bad = 1 }
         NR > 1 && $3 == "exp" && ($4 != $17 || $15 != $17 || $28 != 0) { print "exp row " NR; bad = 1 }
         NR > 1 && $3 == "hull" && ($15 > $17 || $25 > $17 || $26 > $25 || $28 > $17) { print "hull row " NR; bad = 1 }
         NR > 1 && !($9 > 0) { print "no CPU time in row " NR; bad = 1 }
         NR > 1 && $3 == "exp" && ($30 != 0 || $31 != 0) { print "exp polished, row " NR; bad = 1 }
         NR > 1 && $3 == "hull" && !($31 > 0) { print "hull not polished, row " NR; bad = 1 }
         END { exit bad }' "$tmp/csv" >"$tmp/awk" || fail "CSV rows: $(cat "$tmp/awk")"
"$bench" "${args[@]}" --csv >"$tmp/csv0"
[[ $(head -1 "$tmp/csv0" | tr ',' '\n' | wc -l) -eq 14 ]] || fail "counter columns without --stats"
# the same frontiers (points) with one thread and with three
"$bench" "${args[@]}" --csv --threads 1 | cut -d, -f1-4 >"$tmp/t1"
"$bench" "${args[@]}" --csv --threads 3 | cut -d, -f1-4 >"$tmp/t3"
cmp -s "$tmp/t1" "$tmp/t3" || fail "frontier sizes depend on --threads: $(paste "$tmp/t1" "$tmp/t3")"
grep -q 'planner threads one per processor' "$tmp/text" || fail "no threads in the header"

expect_error 2 "^bench_plan: option '--stats=1' takes no value$" "$bench" --stats=1
expect_error 2 "^bench_plan: option '--help=1' takes no value$" "$bench" --help=1
expect_error 2 '^bench_plan: unknown option' "$bench" --statistics
expect_error 2 '^bench_plan: --runs' "$bench" --stats --runs 2
expect_error 2 '^bench_plan: --threads: expected an integer from 0 to 256' "$bench" --threads -1
