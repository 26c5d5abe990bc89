#!/usr/bin/env bash
# The installed tree (docs/install.md): `cmake --install` into a fresh prefix, then, using only
# what is installed there: the programs print the project's version (and the inference demo runs
# them from there); a C program builds and runs
# against libperseus through pkg-config (shared, and static with the private dependencies), and
# another through find_package(Perseus); every installed header compiles alone; the man pages
# render without warnings; the shared library has the right SONAME and exports only the public
# prs_ functions the headers declare; the bash completion completes subcommands and options; the
# Python package installs with pip and loads the installed library.
set -euo pipefail

bindir="${PRS_BIN_DIR:?PRS_BIN_DIR not set}"
src="${PRS_SOURCE_DIR:?PRS_SOURCE_DIR not set}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$src/tests/cli/lib.bash" # fail, wait_until
for t in cmake pkg-config cc nm readelf; do
  command -v "$t" >/dev/null || { echo "no $t"; exit 77; }
done

prefix=$tmp/prefix
cmake --install "$bindir" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  fail "cmake --install: $(tail -n 5 "$tmp/install.log")"
version=$(sed -nE 's/^project\(perseus VERSION ([0-9.]+) .*/\1/p' "$src/CMakeLists.txt")
[[ -n $version ]] || fail "no version in CMakeLists.txt"
grep -q "^version = \"$version\"$" "$src/python/pyproject.toml" ||
  fail "python/pyproject.toml's version is not $version"
grep -q "^_SONAME = \"libperseus.so.${version%%.*}\"$" "$src/python/perseus/__init__.py" ||
  fail "python/perseus/__init__.py's _SONAME is not libperseus.so.${version%%.*}"
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}

# Programs.
for p in perseus perseusd perseus-gpud perseus-router perseus-instclock perseus-fakeserve; do
  [[ -x $prefix/bin/$p ]] || fail "bin/$p not installed"
  out=$("$prefix/bin/$p" --version) || fail "$p --version failed"
  [[ $out == "$p $version"* ]] || fail "$p --version: '$out' (want $p $version)"
done
# The inference demo finds the other programs next to the installed perseus.
(cd "$tmp" && "$prefix/bin/perseus" demo --inference --trace synthetic --duration 10 --no-plots \
  >"$tmp/demo_inference.out" 2>&1) || fail "demo --inference from the install: $(cat "$tmp/demo_inference.out")"
grep -q "requests ok / sent" "$tmp/demo_inference.out" || fail "demo --inference printed no summary"

# Library, headers and the files beside them.
pc=$(find "$prefix" -name perseus.pc -path '*/pkgconfig/*')
[[ -n $pc ]] || fail "perseus.pc not installed"
libdir=$(dirname "$(dirname "$pc")")
lib=$libdir/libperseus.so.$major.$minor
[[ -f $lib && -f $libdir/libperseus.a ]] || fail "libperseus.so.$major.$minor or .a missing"
[[ $(readlink "$libdir/libperseus.so") == libperseus.so.$major ]] || fail "libperseus.so link"
grep -q "SONAME.*\[libperseus.so.$major\]" <<<"$(readelf -d "$lib")" || fail "SONAME is not libperseus.so.$major"
[[ ! -e $prefix/include/perseus/server.h ]] || fail "server.h is not part of the library"
for f in share/man/man1/perseus.1.gz share/man/man8/perseusd.8.gz share/man/man8/perseus-gpud.8.gz \
  share/man/man8/perseus-router.8.gz share/man/man8/perseus-instclock.8.gz \
  share/man/man1/perseus-fakeserve.1.gz \
  share/bash-completion/completions/perseus lib/systemd/system/perseus-gpud.service \
  lib/systemd/system/perseusd.service \
  share/perseus/examples/a100-8stage.csv share/perseus/examples/gpud.conf.example \
  share/doc/perseus/LICENSE share/doc/perseus/install.md; do
  [[ -f $prefix/$f ]] || fail "$f not installed"
done
grep -q "^ExecStart=$prefix/bin/perseus-gpud \|^ExecStart=/.*/bin/perseus-gpud " \
  "$prefix/lib/systemd/system/perseus-gpud.service" || fail "unit's ExecStart"
grep -q "^ExecStart=/.*/bin/perseusd --listen 127.0.0.1:7787 --data-dir /var/lib/perseusd$" \
  "$prefix/lib/systemd/system/perseusd.service" || fail "perseusd.service's ExecStart"
grep -q "^StateDirectory=perseusd$" "$prefix/lib/systemd/system/perseusd.service" ||
  fail "perseusd.service's state directory"

# Exported symbols: exactly the PRS_API functions of the installed headers, no internal prs__
# names, nothing of perseus-gpud or the test fakes.
nm -D --defined-only "$lib" | awk '{print $3}' | sort >"$tmp/exported"
grep -hoE '^PRS_API[^(]*\bprs_[a-z0-9_]+\(' "$prefix"/include/perseus/*.h |
  grep -oE 'prs_[a-z0-9_]+\($' | tr -d '(' | sort >"$tmp/declared"
bad=$(grep -vE '^prs_[a-z][a-z0-9_]*$' "$tmp/exported" || true)
[[ -z $bad ]] || fail "libperseus.so exports non-public names: $(head -n 5 <<<"$bad" | tr '\n' ' ')"
diff -u "$tmp/declared" "$tmp/exported" >"$tmp/symdiff" ||
  fail "exports differ from the headers' PRS_API functions: $(grep '^[-+]p' "$tmp/symdiff" | head -n 5 | tr '\n' ' ')"
[[ $(wc -l <"$tmp/exported") -gt 100 ]] || fail "too few exported functions"

# A library built with the sanitizers needs them in the programs linked to it too.
cflags=(-std=c11 -Wall -Wextra -Werror)
if grep -q 'libasan\|libubsan' <<<"$(ldd "$lib")"; then
  cflags+=(-fsanitize=address,undefined)
  export ASAN_OPTIONS=detect_leaks=0
fi

cat >"$tmp/use.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "perseus/clock.h"
#include "perseus/error.h"
#include "perseus/planner.h"

int main(void)
{
    prs_schedule s;
    if (prs_schedule_parse("1f1b", &s) != 0 || strcmp(prs_schedule_name(s), "1f1b") != 0)
        return 1;
    prs_pipeline pipe = {.stages = 4, .microbatches = 8, .schedule = s, .unit_time_s = 0.001};
    prs_error err = {0};
    if (prs_pipeline_check(&pipe, &err) != 0) return 2;
    if (prs_mono_s() <= 0) return 3;
    printf("ops per stage %d\n", prs_ops_per_stage(&pipe));
    return 0;
}
C
export PKG_CONFIG_PATH=$libdir/pkgconfig
[[ $(pkg-config --modversion perseus) == "$version" ]] || fail "pkg-config --modversion"
# shellcheck disable=SC2046
cc "${cflags[@]}" "$tmp/use.c" -o "$tmp/use-shared" $(pkg-config --cflags --libs perseus) ||
  fail "build with pkg-config"
out=$(LD_LIBRARY_PATH=$libdir "$tmp/use-shared") || fail "program (pkg-config, shared) failed"
[[ $out == "ops per stage 16" ]] || fail "program (pkg-config, shared) printed '$out'"
grep -q "libperseus.so.$major => $libdir/" <<<"$(LD_LIBRARY_PATH=$libdir ldd "$tmp/use-shared")" ||
  fail "not linked to $lib"
# Static: libperseus.a by name, then the shared libraries of what Requires.private names and the
# Libs.private flags (`pkg-config --static` would also want the static dependencies of libcurl).
# shellcheck disable=SC2046
static_libs="$(pkg-config --libs $(pkg-config --print-requires-private perseus)) $(sed -n 's/^Libs.private: //p' "$pc")"
# shellcheck disable=SC2046,SC2086
cc "${cflags[@]}" "$tmp/use.c" -o "$tmp/use-static" $(pkg-config --cflags perseus) \
  "$libdir/libperseus.a" $static_libs || fail "static build with pkg-config --static"
out=$("$tmp/use-static") || fail "program (pkg-config, static) failed"
[[ $out == "ops per stage 16" ]] || fail "program (pkg-config, static) printed '$out'"

# find_package(Perseus): the shared and the static imported targets.
mkdir -p "$tmp/proj"
cp "$tmp/use.c" "$tmp/proj/use.c"
cat >"$tmp/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(use_perseus C)
find_package(Perseus $version REQUIRED)
add_executable(use use.c)
target_link_libraries(use PRIVATE Perseus::perseus)
add_executable(use_static use.c)
target_link_libraries(use_static PRIVATE Perseus::perseus_static)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="${cflags[*]}" >"$tmp/cm.log" 2>&1 || fail "find_package: $(tail -n 8 "$tmp/cm.log")"
cmake --build "$tmp/proj/build" >"$tmp/cm.log" 2>&1 || fail "find_package build: $(tail -n 8 "$tmp/cm.log")"
for p in use use_static; do
  out=$("$tmp/proj/build/$p") || fail "program (find_package, $p) failed"
  [[ $out == "ops per stage 16" ]] || fail "program (find_package, $p) printed '$out'"
done

# Every installed header compiles alone (includes what it needs).
for h in "$prefix"/include/perseus/*.h; do
  echo "#include \"perseus/$(basename "$h")\"" >"$tmp/h.c"
  cc "${cflags[@]}" -fsyntax-only -I"$prefix/include" "$tmp/h.c" || fail "$(basename "$h") alone"
done

# Man pages render without warnings.
for m in "$prefix"/share/man/man1/*.1.gz "$prefix"/share/man/man8/*.8.gz; do
  if command -v man >/dev/null; then
    LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$m" >"$tmp/man.out" 2>"$tmp/man.err" ||
      fail "man -l $m"
  elif command -v groff >/dev/null; then
    gzip -dc "$m" | groff -man -Tutf8 -ww >"$tmp/man.out" 2>"$tmp/man.err" || fail "groff $m"
  else
    echo "no man or groff: man pages not rendered"
    break
  fi
  [[ ! -s $tmp/man.err ]] || fail "$(basename "$m"): $(head -n 3 "$tmp/man.err")"
  grep -q "SYNOPSIS" "$tmp/man.out" || fail "$(basename "$m") has no SYNOPSIS"
done

# Bash completion, with bash-completion's two helpers stubbed.
complete_words() {
  bash -c '
    _init_completion() { words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; cur=${words[cword]}
                         prev=${words[cword-1]}; }
    _filedir() { :; }
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _perseus; echo "${COMPREPLY[*]}"' \
    _ "$prefix/share/bash-completion/completions/perseus" "$@"
}
[[ $(complete_words perseus p) == "plan plot" ]] || fail "completion of 'perseus p'"
[[ $(complete_words perseus plan "") == export ]] || fail "completion of 'perseus plan '"
[[ $(complete_words perseus demo --st) == "--stages --straggler" ]] || fail "completion of demo --st"
[[ $(complete_words perseus plan --schedule g) == gpipe ]] || fail "completion of --schedule"
[[ $(complete_words perseus plan --frontier c) == clean ]] || fail "completion of plan --frontier"
[[ $(complete_words perseus infer e) == emulate ]] || fail "completion of 'perseus infer e'"
# infer's options come from the installed program's --help
[[ $(PATH="$prefix/bin:$PATH" complete_words perseus infer emulate --peak-s) == --peak-share ]] ||
  fail "completion of infer emulate --peak-s"
[[ $(complete_words perseus noise --jit) == --jitter ]] || fail "completion of noise --jit"
# The Python package (python/pyproject.toml) installs with pip into a virtual environment and,
# from outside the source tree, loads the installed library by its SONAME. Needs Debian's
# python3 with venv, setuptools and wheel (scripts/install-deps.sh); without them, left out.
py=/usr/bin/python3
if [[ -x $py ]] && $py -c 'import venv, setuptools, wheel' 2>/dev/null &&
  ! grep -q 'libasan\|libubsan' <<<"$(ldd "$lib")"; then
  # The installed package, as Debian's python3 finds it (PYTHONPATH for a prefix outside /usr).
  out=$(cd "$tmp" && env -u PERSEUS_LIBRARY PYTHONPATH="$prefix/lib/python3/dist-packages" \
    LD_LIBRARY_PATH="$libdir" PYTHONDONTWRITEBYTECODE=1 "$py" -c \
    'import perseus; print(perseus.__file__); print(perseus.load_library()._name)') ||
    fail "import the installed perseus package"
  [[ $out == "$prefix/lib/python3/dist-packages/perseus/__init__.py"$'\n'"libperseus.so.$major" ]] ||
    fail "the installed Python package: '$out'"
  [[ -f $prefix/lib/python3/dist-packages/perseus/py.typed ]] || fail "py.typed not installed"
  # Without the library, the error says where it is looked for.
  out=$(cd "$tmp" && env -u PERSEUS_LIBRARY -u LD_LIBRARY_PATH \
    PYTHONPATH="$prefix/lib/python3/dist-packages" PYTHONDONTWRITEBYTECODE=1 "$py" -c \
    'import perseus; perseus.load_library()' 2>&1) && fail "load_library without the library"
  grep -q 'PERSEUS_LIBRARY' <<<"$out" && grep -q 'LD_LIBRARY_PATH' <<<"$out" ||
    fail "the missing library's message names neither PERSEUS_LIBRARY nor LD_LIBRARY_PATH: $out"
  # The virtual environment, offline, exactly as docs/install.md and python/README.md say.
  for doc in docs/install.md python/README.md; do
    grep -q '^ *python3 -m venv --system-site-packages venv$' "$src/$doc" &&
      grep -q '^ *venv/bin/pip install --no-index --no-build-isolation ./python$' "$src/$doc" ||
      fail "$doc no longer shows the venv install this test runs"
  done
  cp -r "$src/python" "$tmp/python"
  (cd "$tmp" && $py -m venv --system-site-packages venv >/dev/null 2>&1) || fail "python3 -m venv"
  (cd "$tmp" && venv/bin/pip install --no-index --no-build-isolation ./python) >"$tmp/pip.log" 2>&1 ||
    fail "pip install python/: $(tail -n 5 "$tmp/pip.log")"
  out=$(cd "$tmp" && env -u PERSEUS_LIBRARY LD_LIBRARY_PATH="$libdir" PYTHONDONTWRITEBYTECODE=1 \
    "$tmp/venv/bin/python" -c 'import perseus; print(perseus.load_library()._name)') ||
    fail "import perseus from the venv"
  [[ $out == "libperseus.so.$major" ]] || fail "the Python package loaded '$out'"
  # The Python end-to-end test against the installed perseusd, importing the installed package
  # (the test's copy sits outside the source tree, so it cannot import python/ from there).
  mkdir -p "$tmp/pytest/tests" "$tmp/srv"
  cp "$src/python/tests/e2e_sim.py" "$tmp/pytest/tests/"
  "$prefix/bin/perseusd" --listen 127.0.0.1:0 --data-dir "$tmp/srv" --port-file "$tmp/srv/port" \
    2>"$tmp/srv/log" &
  srv=$!
  wait_until 30 test -s "$tmp/srv/port" || fail "the installed perseusd did not start: $(cat "$tmp/srv/log")"
  r=0
  (cd "$tmp" && env -u PERSEUS_LIBRARY LD_LIBRARY_PATH="$libdir" PYTHONDONTWRITEBYTECODE=1 \
    timeout 120 "$tmp/venv/bin/python" "$tmp/pytest/tests/e2e_sim.py" \
    "http://127.0.0.1:$(cat "$tmp/srv/port")") >"$tmp/pye2e.log" 2>&1 || r=$?
  kill "$srv" 2>/dev/null
  wait "$srv" 2>/dev/null || true
  ((r == 0)) || fail "the Python end-to-end test on the installed tree: $(tail -n 5 "$tmp/pye2e.log")"
  echo "Python end-to-end on the installed tree: $(tail -n 1 "$tmp/pye2e.log")"
else
  echo "no Debian python3 with venv, setuptools and wheel (or a sanitizer build): Python package not checked"
fi
echo "installed tree OK ($prefix)"
