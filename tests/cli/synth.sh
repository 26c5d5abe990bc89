#!/usr/bin/env bash
# End-to-end test of `perseus synth`: the checked-in example profile regenerates byte for byte with
# the command recorded in examples/README.md, output is deterministic, and bad input is refused
# with exit status 2 and a one-line "perseus synth: ..." message on stderr.
set -u

bin="${PRS_BIN_DIR:?PRS_BIN_DIR not set}/perseus"
src="${PRS_SOURCE_DIR:?PRS_SOURCE_DIR not set}"
example="$src/examples/a100-8stage.csv"
readme="$src/examples/README.md"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

[ -x "$bin" ] || fail "no binary at $bin"
[ -f "$example" ] || fail "no example profile at $example"

# The exact command recorded in the README (with the output path replaced).
args=(synth --gpu a100 --stages 8 --fmin 855 --fmax 1410 --fstep 15 --imbalance 1,1,1,1,1,1,1,1.07)
grep -qF "perseus ${args[*]} --out examples/a100-8stage.csv" "$readme" ||
    fail "README does not record the command this test runs"

"$bin" "${args[@]}" --out "$tmp/a.csv" || fail "synth --out exited $?"
cmp "$tmp/a.csv" "$example" || fail "regenerated profile differs from $example"
"$bin" "${args[@]}" >"$tmp/b.csv" || fail "synth to stdout exited $?"
cmp "$tmp/b.csv" "$example" || fail "stdout output differs from --out output"
[ "$(wc -l <"$tmp/a.csv")" -eq $((1 + 8 * 38 * 2)) ] || fail "expected 608 rows"

# Seeded noise: same seed, same bytes; another seed, other bytes; both differ from exact.
"$bin" synth --gpu a40 --stages 2 --noise 0.05 --seed 9 >"$tmp/n1.csv" || fail "noisy synth failed"
"$bin" synth --gpu a40 --stages 2 --noise 0.05 --seed 9 >"$tmp/n2.csv" || fail "noisy synth failed"
"$bin" synth --gpu a40 --stages 2 --noise 0.05 --seed 10 >"$tmp/n3.csv" || fail "noisy synth failed"
"$bin" synth --gpu a40 --stages 2 >"$tmp/n0.csv" || fail "exact synth failed"
cmp -s "$tmp/n1.csv" "$tmp/n2.csv" || fail "same seed gave different output"
cmp -s "$tmp/n1.csv" "$tmp/n3.csv" && fail "different seeds gave the same output"
cmp -s "$tmp/n1.csv" "$tmp/n0.csv" && fail "noise did not change the output"

# Irregular curves: deterministic for a seed, another seed other curves; a regular run is
# untouched by the flag's absence (the example above). Every (stage, instruction) curve has a
# clock that is at most 8 % slower than one about PRS_SYNTH_JUMP_MHZ (210) above it but over 5 %
# cheaper, with the clocks between them no cheaper than the upper one, to 1 % (the jump); and some energy rises as
# the clock falls (not monotone).
for g in a40 h100; do
    "$bin" synth --gpu $g --stages 3 --irregular --seed 4 >"$tmp/i1.csv" || fail "irregular synth failed"
    "$bin" synth --gpu $g --stages 3 --irregular --seed 4 >"$tmp/i2.csv" || fail "irregular synth failed"
    "$bin" synth --gpu $g --stages 3 --irregular --seed 5 >"$tmp/i3.csv" || fail "irregular synth failed"
    "$bin" synth --gpu $g --stages 3 >"$tmp/i0.csv" || fail "regular synth failed"
    cmp -s "$tmp/i1.csv" "$tmp/i2.csv" || fail "$g: same seed gave different irregular curves"
    cmp -s "$tmp/i1.csv" "$tmp/i3.csv" && fail "$g: different seeds gave the same irregular curves"
    cmp -s "$tmp/i1.csv" "$tmp/i0.csv" && fail "$g: --irregular changed nothing"
    python3 - "$tmp/i1.csv" <<'PY' || fail "$g: irregular curves lack the jump"
import csv, sys
curves = {}
for r in csv.DictReader(open(sys.argv[1])):
    curves.setdefault((r["stage"], r["instruction"]), {})[int(r["frequency"])] = (
        float(r["time"]), float(r["energy"]))
assert len(curves) == 6, len(curves)
for key, c in curves.items():
    jumps = [(f, g) for f in c for g in c
             if 150 <= f - g <= 270 and c[g][0] <= 1.08 * c[f][0] and c[g][1] < 0.95 * c[f][1]
             and all(c[h][1] > 0.99 * c[f][1] for h in c if g < h < f)]
    assert jumps, f"no jump in {key}"
    fs = sorted(c)
    assert any(c[a][1] > c[b][1] for a, b in zip(fs, fs[1:])), f"{key} monotone"
PY
done

"$bin" synth --help >"$tmp/help.txt" || fail "--help exited $?"
grep -q '^usage: perseus synth' "$tmp/help.txt" || fail "--help prints no usage line"

# expect_bad PATTERN ARGS...: exit 2, nothing on stdout, one stderr line matching PATTERN.
expect_bad() {
    local pattern="$1"
    shift
    "$bin" synth "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "synth $* exited $rc, expected 2"
    [ ! -s "$tmp/out.txt" ] || fail "synth $* wrote to stdout"
    [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] || fail "synth $*: expected one stderr line, got: $(cat "$tmp/err.txt")"
    grep -q "^perseus synth: .*$pattern" "$tmp/err.txt" ||
        fail "synth $*: message '$(cat "$tmp/err.txt")' does not match '$pattern'"
}

expect_bad "unknown GPU 'v100' (known: a100, a40, h100)" --gpu v100 --stages 4
expect_bad "stages" --gpu a100 --stages 0
expect_bad "stages.*'four'" --gpu a100 --stages four
expect_bad "1410 MHz is above maximum clock 855" --gpu a100 --stages 2 --fmin 1410 --fmax 855
expect_bad "860 MHz is not a supported a100 clock" --gpu a100 --stages 2 --fmin 860
expect_bad "fmin.*'fast'" --gpu a100 --stages 2 --fmin fast
expect_bad "imbalance has 3 values but there are 2 stages" --gpu a100 --stages 2 --imbalance 1,1,1.1
expect_bad "noise" --gpu a100 --stages 2 --noise 0.9
expect_bad "missing --gpu" --stages 2
expect_bad "unknown option '--frobnicate'" --gpu a100 --stages 2 --frobnicate
"$bin" synth --gpu a100 --stages 0 --out "$tmp/never.csv" 2>/dev/null
[ ! -e "$tmp/never.csv" ] || fail "bad input still created the --out file"

echo "synth: ok"
