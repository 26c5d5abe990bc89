#!/usr/bin/env bash
# End-to-end tests of `perseus plot`: the three plots from the example profile are valid SVG
# (our own checks, and xmllint where installed) with the expected axis titles and legend
# entries; bad input gets one line on stderr and exit status 2; scripts/plots.sh works.
set -euo pipefail
bin=${PRS_BIN_DIR:?}/perseus
src=${PRS_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

# check_svg FILE LABEL...: a well-formed SVG 1.1 document under 200 KB containing every LABEL
check_svg() {
  local f=$1; shift
  [[ -s $f ]] || fail "$f missing or empty"
  [[ ! -e $f.tmp ]] || fail "$f.tmp left behind"
  (($(wc -c <"$f") < 200 * 1024)) || fail "$f is $(wc -c <"$f") bytes (want < 200 KB)"
  head -c 100 "$f" | grep -q '^<?xml version="1.0"' || fail "$f: no XML declaration"
  grep -q '<svg xmlns="http://www.w3.org/2000/svg" version="1.1"' "$f" || fail "$f: root"
  [[ $(grep -c '<svg' "$f") -eq 1 && $(tail -c 8 "$f") == *'</svg>'* ]] || fail "$f: one root"
  if command -v xmllint >/dev/null; then
    xmllint --noout "$f" || fail "$f: xmllint"
  fi
  if [[ -x /usr/bin/python3 ]]; then
    /usr/bin/python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$f" ||
      fail "$f: not well-formed XML (python3 xml.dom.minidom)"
  fi
  local label
  for label in "$@"; do grep -qF -- "$label" "$f" || fail "$f lacks '$label'"; done
  if command -v rsvg-convert >/dev/null; then
    rsvg-convert "$f" -o "$f.png" || fail "$f: rsvg-convert cannot render it"
  fi
}
command -v xmllint >/dev/null || echo "xmllint not found (libxml2-utils); XML checked by grep only"

ex=$src/examples/a100-8stage.csv
pipe=(--stages 8 --microbatches 8 --unit-time 0.001 --blocking-power 83.64)
"$bin" plan --profile "$ex" "${pipe[@]}" --quiet --out "$tmp/fr"

# --- the three plots ---
"$bin" plot frontier --frontier "$tmp/fr" --profile "$ex" --out "$tmp/frontier.svg"
check_svg "$tmp/frontier.svg" "Iteration time-energy frontier" "Iteration time (s)" \
  "Iteration energy (J)" "Perseus: predicted (cost model)" "Perseus: evaluated (profile)" \
  ">all-max<" ">EnvPipe-style<" "uniform clock, " "(fastest plan)" "T* = " "8 stages, 8 microbatches"
# hull's clean frontier is ordered by evaluated time, and an iteration can give two plans at its
# planned time: the predicted line still runs slowest first (the first polyline, x never rising)
"$bin" synth --gpu a40 --stages 4 --noise 0.03 --seed 7 --out "$tmp/noisy.csv"
"$bin" plan --profile "$tmp/noisy.csv" --stages 4 --microbatches 8 --unit-time 0.001 \
  --blocking-power 70.38 --cost-model hull --quiet --out "$tmp/hull"
"$bin" plot frontier --frontier "$tmp/hull" --out "$tmp/hull.svg"
grep -o '<polyline points="[^"]*"' "$tmp/hull.svg" | head -1 | sed 's/.*points="//; s/"$//' |
  tr ' ' '\n' | cut -d, -f1 | awk 'NR > 1 && $1 > prev { bad = 1 } { prev = $1 } END { exit bad }' ||
  fail "hull: the predicted line doubles back"

# without a profile: the frontier alone
"$bin" plot frontier --frontier "$tmp/fr" --out "$tmp/frontier-only.svg" --title 'Only <ours> & "it"'
check_svg "$tmp/frontier-only.svg" "Only &lt;ours&gt; &amp; &quot;it&quot;" "Iteration energy (J)"
! grep -q "EnvPipe" "$tmp/frontier-only.svg" || fail "baselines drawn without a profile"
# a title that is not UTF-8 (Latin-1 e-acute, a lone continuation byte, an overlong '/', a
# surrogate, U+FFFF): each bad byte becomes U+FFFD in a document declared UTF-8; good UTF-8
# (e-acute, an emoji) is kept
"$bin" plot frontier --frontier "$tmp/fr" --out "$tmp/latin1.svg" \
  --title $'caf\xe9 \x80 \xc0\xaf \xed\xa0\x80 \xef\xbf\xbf caf\xc3\xa9 \xf0\x9f\x94\x8b'
check_svg "$tmp/latin1.svg" $'<title>caf\xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd' \
  $'caf\xc3\xa9 \xf0\x9f\x94\x8b</title>'

"$bin" plot timeline --frontier "$tmp/fr" --profile "$ex" --index 5 --out "$tmp/timeline.svg"
check_svg "$tmp/timeline.svg" "Pipeline timeline: plan 5 of" "Time within the iteration (s)" \
  "Pipeline stage" "SM clock (MHz)" "GPU 0" "GPU 7" "forward (F3" "backward (B3)" "idle" \
  ">B7</text>" "url(#hatch)" "linearGradient"
[[ $(grep -c 'url(#hatch)' "$tmp/timeline.svg") -eq 64 ]] || fail "want 64 hatched backwards"
"$bin" plot timeline --frontier "$tmp/fr" --profile "$ex" --time 2.5 --out "$tmp/tl-time.svg"
check_svg "$tmp/tl-time.svg" "Pipeline timeline: plan"
for b in all-max envpipe uniform; do
  "$bin" plot timeline --frontier "$tmp/fr" --profile "$ex" --baseline $b --out "$tmp/tl-$b.svg"
done
check_svg "$tmp/tl-all-max.svg" "all-max baseline"
check_svg "$tmp/tl-envpipe.svg" "EnvPipe-style baseline"
check_svg "$tmp/tl-uniform.svg" "uniform clock 1410 MHz"
"$bin" plot timeline --frontier "$tmp/fr" --profile "$ex" --baseline uniform --time 2.9 \
  --out "$tmp/tl-u29.svg"
! grep -q "uniform clock 1410 MHz" "$tmp/tl-u29.svg" || fail "--time did not slow the uniform clock"

"$bin" plot savings --profile "$ex" "${pipe[@]}" --pipelines 16 --straggler 1.00:1.50:0.05 \
  --out "$tmp/savings.svg"
check_svg "$tmp/savings.svg" "Energy savings vs straggler slowdown" "Straggler slowdown T" \
  ">min</tspan>" "Energy saving of the job (%)" ">Perseus<" ">EnvPipe-style<" ">uniform clock<" \
  ">all-max (reference)<" "16 pipelines" "paper variant"
# from a planned frontier, another metric and variant
"$bin" plot savings --frontier "$tmp/fr" --profile "$ex" --pipelines 4 --metric extrinsic \
  --variant lookup --straggler "1.1 1.2,1.3" --out "$tmp/savings-ext.svg"
check_svg "$tmp/savings-ext.svg" "Extrinsic energy saving (%)" "lookup variant" ">Perseus<"

# --- help and usage errors ---
"$bin" plot --help | grep -q -- "--straggler" || fail "plot --help"
"$bin" plot timeline --help | grep -q -- "--baseline" || fail "plot timeline --help"
"$bin" --help | grep -q "plot" || fail "--help"
out=(--out "$tmp/x.svg")
expect_error 2 "expected a plot: frontier, timeline or savings" "$bin" plot
expect_error 2 "unknown plot .*'histogram'" "$bin" plot histogram
expect_error 2 "missing required option '--out'" "$bin" plot frontier --frontier "$tmp/fr"
expect_error 2 "missing required option '--frontier'" "$bin" plot frontier "${out[@]}"
expect_error 2 "unknown option '--bogus'" "$bin" plot frontier --bogus "${out[@]}"
expect_error 2 "missing value for '--out'" "$bin" plot frontier --frontier "$tmp/fr" --out
expect_error 2 "option '--pipelines' does not apply" "$bin" plot frontier --pipelines 3 "${out[@]}"
expect_error 2 "option '--index' does not apply" "$bin" plot savings --index 3 "${out[@]}"
expect_error 2 "unexpected argument 'extra'" "$bin" plot frontier --frontier "$tmp/fr" extra "${out[@]}"
expect_error 2 "plans.prs: cannot open" "$bin" plot frontier --frontier "$tmp/nowhere" "${out[@]}"
expect_error 2 "missing required option '--profile'" "$bin" plot timeline --frontier "$tmp/fr" \
  --index 0 "${out[@]}"
tl=("$bin" plot timeline --frontier "$tmp/fr" --profile "$ex")
expect_error 2 "give exactly one of --index K, --time SEC or --baseline NAME" "${tl[@]}" "${out[@]}"
expect_error 2 "give exactly one of" "${tl[@]}" --index 0 --time 2.5 "${out[@]}"
expect_error 2 "--index: expected 0\.\.[0-9]+, got '99999'" "${tl[@]}" --index 99999 "${out[@]}"
expect_error 2 "--index: expected an integer >= 0, got '-1'" "${tl[@]}" --index -1 "${out[@]}"
expect_error 2 "--time: no plan meets 0.1 s" "${tl[@]}" --time 0.1 "${out[@]}"
expect_error 2 "--time: expected a number > 0, got 'soon'" "${tl[@]}" --time soon "${out[@]}"
expect_error 2 "--baseline: expected all-max, uniform or envpipe, got 'fast'" "${tl[@]}" \
  --baseline fast "${out[@]}"
expect_error 2 "--time goes with --baseline uniform only" "${tl[@]}" --baseline envpipe \
  --time 2.5 "${out[@]}"
head -n 300 "$ex" >"$tmp/short.csv" # stages 0..3 only
expect_error 2 "short.csv: stage [0-9]+ has no (forward|backward) rows" "$bin" plot timeline \
  --frontier "$tmp/fr" --profile "$tmp/short.csv" --index 0 "${out[@]}"
expect_error 2 "short.csv: stage [0-9]+ has no (forward|backward) rows" "$bin" plot frontier \
  --frontier "$tmp/fr" --profile "$tmp/short.csv" "${out[@]}"
sv=("$bin" plot savings --profile "$ex")
expect_error 2 "missing required option '--pipelines'" "${sv[@]}" "${pipe[@]}" "${out[@]}"
expect_error 2 "missing required option '--microbatches'" "${sv[@]}" --stages 8 --pipelines 2 "${out[@]}"
expect_error 2 "--pipelines: expected an integer >= 1, got '0'" "${sv[@]}" --pipelines 0 "${out[@]}"
expect_error 2 "--straggler: .*0\.5" "${sv[@]}" "${pipe[@]}" --pipelines 2 --straggler 0.5 "${out[@]}"
expect_error 2 "--metric: expected saving, saving-pp, intrinsic or extrinsic, got 'joy'" \
  "${sv[@]}" --metric joy "${out[@]}"
expect_error 2 "--variant: expected paper, exact or lookup, got 'best'" "${sv[@]}" --variant best "${out[@]}"
expect_error 2 "give --frontier DIR or the pipeline options, not both" "${sv[@]}" --frontier \
  "$tmp/fr" --stages 8 --pipelines 2 "${out[@]}"
expect_error 2 "--schedule: expected 1f1b, gpipe or interleaved, got 'zigzag'" "${sv[@]}" \
  --schedule zigzag "${out[@]}"
[[ ! -e $tmp/x.svg && ! -e $tmp/x.svg.tmp ]] || fail "output written by a failed command"
# an output path that cannot be written: a runtime failure (1), nothing left behind
# (missing folders are created; a file where a folder should be is not)
touch "$tmp/file"
expect_error 1 "cannot create directory '$tmp/file/dir' for '$tmp/file/dir/x.svg'" \
  "$bin" plot frontier --frontier "$tmp/fr" --out "$tmp/file/dir/x.svg"

# --- scripts/plots.sh regenerates the README's three plots ---
bash "$src/scripts/plots.sh" "$PRS_BIN_DIR" "$tmp/img" >/dev/null
check_svg "$tmp/img/frontier.svg" "Iteration energy (J)" ">all-max<"
check_svg "$tmp/img/timeline.svg" "SM clock (MHz)"
check_svg "$tmp/img/savings.svg" ">Perseus<"
echo "plot CLI tests passed"
