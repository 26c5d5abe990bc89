#!/usr/bin/env bash
# End-to-end test of `perseus infer synth`: the profile it writes has the grid, clocks and
# capacities its --help promises (the loader's checks run in tests/infer), stdout and --out agree,
# and bad options are refused with exit status 2 and one line on stderr.
set -euo pipefail
bin="${PRS_BIN_DIR:?PRS_BIN_DIR not set}/perseus"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

"$bin" infer synth --gpu h100 --model llama2-70b --out "$tmp/sub/llama.csv" ||
    fail "infer synth --out exited $?"
"$bin" infer synth --gpu h100 --model llama2-70b >"$tmp/stdout.csv" || fail "to stdout exited $?"
cmp -s "$tmp/sub/llama.csv" "$tmp/stdout.csv" || fail "stdout differs from --out"
f=$tmp/stdout.csv
# default: tp 2,4,8 and 12 clocks (825..1980 by 105)
clocks=$(grep ',idle,' "$f" | cut -d, -f4 | sort -nu | tr '\n' ' ')
[[ $clocks == "825 930 1035 1140 1245 1350 1455 1560 1665 1770 1875 1980 " ]] ||
    fail "default clocks: $clocks"
[[ $(grep -c ',capacity,' "$f") -eq 3 ]] || fail "want one capacity row per tp"
# per (tp, clock): 9 batches x 11 tokens values per phase, and an idle row
[[ $(grep -c ',prefill,' "$f") -eq $((3 * 12 * 99)) ]] || fail "prefill rows"
[[ $(grep -c ',decode,' "$f") -eq $((3 * 12 * 99)) ]] || fail "decode rows"
[[ $(grep -vc '^#' "$f") -eq $((1 + 3 + 3 * 12 * 199)) ]] || fail "row count"
# prefill of 1 x 1024 tokens at tp 4: slower at 825 MHz than at 1980 MHz
lo=$(grep '^llama2-70b,h100,4,825,prefill,1,1024,' "$f" | cut -d, -f8)
hi=$(grep '^llama2-70b,h100,4,1980,prefill,1,1024,' "$f" | cut -d, -f8)
awk -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(lo > 1.5 * hi) }' || fail "prefill $lo vs $hi"

"$bin" infer synth --gpu a100 --model bloom-176b --tp 8 --clocks 1410,1005 >"$tmp/b.csv" ||
    fail "bloom on a100 at tp 8"
[[ $(grep -c ',idle,' "$tmp/b.csv") -eq 2 ]] || fail "two clocks"

expect_error 2 '^perseus infer synth: bloom-176b does not fit on 2 h100 GPUs' \
    "$bin" infer synth --gpu h100 --model bloom-176b
expect_error 2 "^perseus infer synth: unknown GPU 'v100' \(known: a100, h100\)" \
    "$bin" infer synth --gpu v100 --model llama2-70b
expect_error 2 '^perseus infer synth: missing --model' "$bin" infer synth --gpu h100
expect_error 2 "^perseus infer synth: --tp: expected a comma-separated list" \
    "$bin" infer synth --gpu h100 --model llama2-70b --tp 2,,4
expect_error 2 "^perseus infer synth: clock 2100 MHz outside h100's 345..1980 MHz" \
    "$bin" infer synth --gpu h100 --model llama2-70b --clocks 1980,2100
expect_error 2 "^perseus infer synth: tp 4 given twice" \
    "$bin" infer synth --gpu h100 --model llama2-70b --tp 4,4
expect_error 2 "^perseus infer synth: unexpected argument 'extra'" \
    "$bin" infer synth --gpu h100 --model llama2-70b extra
expect_error 2 "^perseus infer: unknown subcommand 'synt' \(did you mean 'synth'\?\)" \
    "$bin" infer synt
# perseus infer check: the summary of a good file; a bad one named with its line
"$bin" infer check "$f" >"$tmp/check.out" || fail "infer check of the synthetic profile failed"
grep -q '^model llama2-70b on h100: 3 TP degree(s), 12 clock(s) from 825 to 1980 MHz$' \
    "$tmp/check.out" || fail "check summary: $(head -1 "$tmp/check.out")"
grep -q '^  tp 2: KV cache 36552 tokens, at most 256 sequences, idle 150.0 W' "$tmp/check.out" ||
    fail "check tp 2: $(cat "$tmp/check.out")"
sed '5s/,prefill,/,prefil,/' "$f" >"$tmp/bad.csv"
expect_error 1 "^perseus infer check: $tmp/bad.csv:5: column 'phase'" \
    "$bin" infer check "$tmp/bad.csv"
expect_error 2 '^perseus infer check: expected one profile FILE' "$bin" infer check
"$bin" infer --help | grep -q '^  synth ' || fail "infer --help lists no synth"
"$bin" --help | grep -q '^  infer ' || fail "perseus --help lists no infer"
echo "infer synth: ok"
