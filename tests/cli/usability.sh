#!/usr/bin/env bash
# A new user's first steps, checked as they would take them:
#   - every command's --help ends with examples, and the examples run as printed (in a scratch
#     directory, in the order a user would: synth, plan, plan export, evaluate, plot, emulate);
#   - --out creates the folders it names (plan, plot, synth, demo);
#   - a unit time coarser than the computations (no frontier) is an error (exit 1) that says why and what to change.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

# examples CMD...: the lines after "examples:" of CMD --help, continuation lines joined, comments
# dropped, one command per line.
examples() {
  "$@" --help | sed -n '/^examples:$/,$p' | tail -n +2 | sed -e 's/ *#.*$//' -e 's/^ *//' |
    sed -e ':a' -e '/\\$/N; s/\\\n *//; ta'
}

for c in "" synth plan "plan export" evaluate emulate plot demo; do
  # shellcheck disable=SC2086
  [[ -n $(examples "$bin/perseus" $c) ]] || fail "perseus $c --help has no examples"
done
[[ -n $(examples "$bin/perseusd") ]] || fail "perseusd --help has no examples"

# Run the examples as printed, with the built binary for 'perseus'.
mkdir "$tmp/run"
ran=0
for c in synth plan "plan export" evaluate plot emulate; do
  # shellcheck disable=SC2086
  while IFS= read -r line; do
    [[ $line == *"..."* ]] && continue # an elided example ("perseus emulate ... --json")
    [[ $line == "perseus "* ]] || fail "example of perseus $c is not a perseus command: $line"
    (cd "$tmp/run" && eval "\"$bin/perseus\" ${line#perseus }" >/dev/null 2>"$tmp/err") ||
      fail "example of perseus $c --help failed: $line :: $(cat "$tmp/err")"
    ran=$((ran + 1))
  done < <(examples "$bin/perseus" $c)
done
((ran >= 10)) || fail "only $ran examples ran"
[[ -s $tmp/run/plots/frontier.svg ]] || fail "plot example wrote no plots/frontier.svg"

# --out creates the folders it names.
p=$tmp/run/prof.csv
"$bin/perseus" synth --gpu a100 --stages 2 --out "$tmp/a/b/prof.csv"
[[ -s $tmp/a/b/prof.csv ]] || fail "synth --out did not create a/b/"
pipe=(--stages 4 --microbatches 8 --blocking-power 83.64)
"$bin/perseus" plan --profile "$p" "${pipe[@]}" --unit-time 0.001 --out "$tmp/c/d/fr" --quiet
[[ -s $tmp/c/d/fr/frontier.csv ]] || fail "plan --out did not create c/d/"
"$bin/perseus" plot frontier --frontier "$tmp/c/d/fr" --out "$tmp/e/f/fr.svg"
[[ -s $tmp/e/f/fr.svg ]] || fail "plot --out did not create e/f/"
touch "$tmp/file"
expect_error 1 "cannot create directory '$tmp/file/x/fr': Not a directory" \
  "$bin/perseus" plan --profile "$p" "${pipe[@]}" --unit-time 0.001 --out "$tmp/file/x/fr" --quiet

# A unit time coarser than every computation: no frontier, an error saying so and what to change,
# before planning (it warned about every computation first), as bad input (status 2); nothing
# else on stderr (expect_error wants one line).
expect_error 2 "--unit-time 1 s is coarser than the computations.*Use a --unit-time" \
  "$bin/perseus" plan --profile "$p" "${pipe[@]}" --unit-time 1 --out "$tmp/g" --quiet
[[ ! -e $tmp/g/frontier.csv ]] || fail "plan wrote a frontier it called unusable"
# A profile in milliseconds (every time 1000 x): refused, saying so, unless --force-units.
awk -F, 'NR == 1 {print; next} {printf "%s,%s,%s,%.9g,%s\n", $1, $2, $3, $4 * 1000, $5}' "$p" \
  >"$tmp/ms.csv"
ms_err="ms.csv: times look like milliseconds, not seconds \(median computation 93 s;.*--force-units"
expect_error 2 "$ms_err" "$bin/perseus" plan --profile "$tmp/ms.csv" "${pipe[@]}" \
  --unit-time 0.001 --out "$tmp/ms" --quiet
[[ ! -e $tmp/ms ]] || fail "plan wrote a frontier of a profile in milliseconds"
expect_error 2 "$ms_err" "$bin/perseus" emulate --profile "$tmp/ms.csv" "${pipe[@]}" \
  --unit-time 0.001 --pipelines 2 --tp 1 --quiet
# Energies whose sum would overflow a double: the row is refused, not an inf frontier (exit 0).
awk -F, 'NR > 1 { $5 = "1e308" } 1' OFS=, "$p" >"$tmp/huge.csv"
expect_error 2 "huge.csv:2: column 'energy': 1e308 J is more than one computation may take" \
  "$bin/perseus" plan --profile "$tmp/huge.csv" "${pipe[@]}" --unit-time 0.001 --out "$tmp/h" --quiet
[[ ! -e $tmp/h/frontier.csv ]] || fail "plan wrote an inf frontier"
# One JSON vocabulary: every object a command prints starts with "schema": 1, and every key it
# holds is documented (docs/json.md; emulate's in docs/emulator.md and docs/power.md).
src=${PRS_SOURCE_DIR:?}
r=$tmp/run
"$bin/perseus" plan export "$r/fr" --index 0 >"$tmp/export.json"
"$bin/perseus" evaluate --profile "$p" "${pipe[@]}" --unit-time 0.001 --uniform auto --json \
  >"$tmp/evaluate.json"
"$bin/perseus" evaluate --profile "$p" --frontier "$r/fr" --index 0 --json >"$tmp/evaluate-fr.json"
"$bin/perseus" emulate --profile "$p" "${pipe[@]}" --unit-time 0.001 --pipelines 4 --tp 1 \
  --straggler 1.1 --power-cap 900 --json --quiet >"$tmp/emulate.json"
"$bin/perseus" demo --json --no-plots --stages 2 --microbatches 2 >"$tmp/demo.json"
/usr/bin/python3 - "$tmp" "$src/docs" <<'PY' || fail "JSON vocabulary"
import json, os, re, sys
tmp, docs = sys.argv[1:]
text = lambda *names: "".join(open(os.path.join(docs, n)).read() for n in names)
def keys(o):
    if isinstance(o, dict):
        for k, v in o.items():
            yield k
            yield from keys(v)
    elif isinstance(o, list):
        for v in o:
            yield from keys(v)
for name, doc in (("export", ("json.md",)), ("evaluate", ("json.md",)),
                  ("evaluate-fr", ("json.md",)), ("demo", ("json.md",)),
                  ("emulate", ("emulator.md", "power.md"))):
    o = json.load(open(os.path.join(tmp, name + ".json")))
    assert list(o)[0] == "schema" and o["schema"] == 1, (name, list(o)[:3])
    d = text(*doc)
    missing = sorted({k for k in keys(o) if "`%s`" % k not in d})
    assert not missing, (name, "keys not documented in", doc, missing)
PY
# perseus-gpud suggests the option meant, as perseus does.
expect_error 2 "^perseus-gpud: unknown option '--sokcet' \(did you mean '--socket'\?\)$" \
  "$bin/perseus-gpud" --sokcet /tmp/x
expect_error 2 "^perseus-gpud: unknown option '--frobnicate' \(see perseus-gpud --help\)$" \
  "$bin/perseus-gpud" --frobnicate
echo "usability checks passed ($ran help examples ran)"
