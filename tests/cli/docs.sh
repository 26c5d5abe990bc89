#!/usr/bin/env bash
# The documentation runs as written: every shell block of README.md and docs/*.md marked runnable
# (an HTML comment `<!-- runnable -->` on the line before its opening fence) is run, and every
# other one says why it is not (`<!-- not run: REASON -->`, e.g. it needs a GPU or root); the blocks of
# one file in order in one scratch directory, with the built programs first on PATH. The scratch
# directory holds links to the repository's examples/ and scripts/ and to the build (as build/), so
# the paths the docs use (examples/a100-8stage.csv, ./build/perseus) resolve as they do from the
# repository root. A marker must be
# followed by a fence; a file whose block fails is named with the block's line. Also: nothing in
# the docs, the sources or the programs' messages cites a document outside the repository.
set -euo pipefail
bin=${PRS_BIN_DIR:?}
src=${PRS_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.bash"

# Self-contained: neither the docs nor any program's output cite documents kept outside the
# repository (the team's design notes beside it).
if grep -rnE "\b(DESIGN|PLANNER|EVALUATION|STYLE)\.md\b" "$src/README.md" "$src/docs" "$src/src" \
  "$src/include" "$src/python" "$src/man" "$src/examples" >"$tmp/cites"; then
  fail "documents outside the repository cited:
$(head -n 20 "$tmp/cites")"
fi

# Every shell block is either run (<!-- runnable -->) or says why it cannot be
# (<!-- not run: REASON -->) on the line before its fence.
unmarked=$(awk '
  FNR == 1 { inblock = 0; prev = "" }
  /^```/ {
    if (!inblock && $0 ~ /^```(sh|bash|console|shell)$/ &&
        prev !~ /^<!-- runnable -->$/ && prev !~ /^<!-- not run: [^ ].* -->$/)
      print FILENAME ":" FNR
    inblock = !inblock
  }
  { prev = $0 }' "$src/README.md" "$src"/docs/*.md)
[[ -z $unmarked ]] || fail "shell blocks neither marked runnable nor saying why they are not run:
${unmarked//$src\//}"

blocks=0
for doc in "$src/README.md" "$src"/docs/*.md; do
  name=${doc#"$src/"}
  # One script per block: "LINE<TAB>path" lines on stdout, the scripts in $tmp/blocks.
  rm -rf "$tmp/blocks" && mkdir "$tmp/blocks"
  awk -v dir="$tmp/blocks" -v name="$name" '
    marked && /^```/ { inblock = 1; marked = 0; n++; f = sprintf("%s/%03d.sh", dir, n);
                       print FNR "\t" f; next }
    marked { printf "%s:%d: <!-- runnable --> not followed by a fence\n", name, FNR > "/dev/stderr";
             exit 1 }
    inblock && /^```/ { inblock = 0; close(f); next }
    inblock { print > f; next }
    /^<!-- runnable -->$/ { marked = 1 }' "$doc" >"$tmp/list" || fail "$name: bad marker"
  [[ -s $tmp/list ]] || continue
  work=$tmp/work/$(basename "$doc" .md)
  mkdir -p "$work"
  ln -s "$src/examples" "$work/examples"
  ln -s "$src/scripts" "$work/scripts"
  ln -s "$bin" "$work/build"
  while IFS=$'\t' read -r line script; do
    blocks=$((blocks + 1))
    (cd "$work" && PATH="$bin:$PATH" bash -euo pipefail "$script") >"$tmp/out" 2>&1 ||
      fail "$name:$line: the block failed:
$(cat "$script")
--- output:
$(tail -n 20 "$tmp/out")"
  done <"$tmp/list"
done
((blocks >= 5)) || fail "only $blocks runnable blocks in README.md and docs/"
echo "docs: $blocks runnable blocks ran"
