#!/usr/bin/env bash
# Check the formatting (clang-format) and run clang-tidy on src/ (both must be clean), build and
# run the whole test suite twice: an optimised build, then AddressSanitizer +
# UndefinedBehaviorSanitizer; then ThreadSanitizer on the threaded parts (the server, client and
# gpud tests). Then a short libFuzzer run of each fuzz target. After each suite, the slowest
# tests. --quick: the optimised build and its suite without the tests labelled slow (those that
# take over 8 s, tests/CMakeLists.txt), no lint, no sanitizers, no fuzzing: the edit-run loop.
# Usage: scripts/test.sh [--quick] [--no-lint] [--no-sanitize] [--no-tsan] [--no-fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=1 tsan=1 fuzz=1 lint=1 quick=0
for a in "$@"; do
  case "$a" in
    --no-lint) lint=0 ;;
    --no-sanitize) sanitize=0 ;;
    --tsan) tsan=1 ;;
    --no-tsan) tsan=0 ;;
    --no-fuzz) fuzz=0 ;;
    --quick) lint=0 sanitize=0 tsan=0 fuzz=0 quick=1 ;;
    *) echo "scripts/test.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done
jobs=$(nproc)

# run_ctest DIR [CTEST_ARGS...]: the suite built in DIR; then the tests it skipped (a test that
# cannot run, for instance without the shared data set, exits 77 and CTest reports it as skipped,
# not passed); their output, which says why, is in DIR/Testing/Temporary/LastTest.log. Prints the
# slowest tests of the run. Fails as ctest failed.
run_ctest() {
  local dir=$1 log rc=0 skipped
  shift
  log=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$log" || rc=$?
  skipped=$(sed -nE 's/^.*Test +#[0-9]+: ([^ ]+) .*\*\*\*Skipped.*$/\1/p' "$log" | sort)
  slowest "$log"
  rm -f "$log"
  if [[ -n $skipped ]]; then
    echo "skipped in $dir ($(wc -l <<<"$skipped"); reasons in $dir/Testing/Temporary/LastTest.log):"
    sed 's/^/  /' <<<"$skipped"
  else
    echo "skipped in $dir: none"
  fi
  return "$rc"
}

# slowest LOG: the 10 tests of a CTest run (its output in LOG) that took longest, so the suite's
# time is seen where it goes (CTest's own cost data is a moving average over runs).
slowest() {
  echo "slowest tests (seconds):"
  sed -nE 's/^.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' "$1" | sort -rn | head -n 10 |
    awk '{printf "  %8.2f  %s\n", $1, $2}'
}

# lint: every tracked C file formatted as .clang-format says; clang-tidy (.clang-tidy) silent on src/.
lint() {
  local out
  if ! out=$(git ls-files -z '*.c' '*.h' | xargs -0 clang-format --dry-run --Werror 2>&1); then
    printf '%s\n' "$out" | head -n 40
    echo "clang-format: the files above are not formatted (run clang-format -i on them)"
    return 1
  fi
  out=$(run-clang-tidy -p build -quiet -j "$jobs" "$PWD/src/" 2>&1 | sed 's/\x1b\[[0-9;]*m//g')
  if grep -q "warning:\|error:" <<<"$out"; then
    grep -A3 "warning:\|error:" <<<"$out" | head -n 80
    echo "clang-tidy: $(grep -c "warning:\|error:" <<<"$out") finding(s) on src/"
    return 1
  fi
  echo "lint: clang-format and clang-tidy clean"
}

# The build options explicitly ON: build/ may have been configured for the programs only (README).
all_parts=(-DPRS_BUILD_TESTS=ON -DPRS_BUILD_BENCH=ON -DPRS_BUILD_FUZZ=ON)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${all_parts[@]}" >/dev/null
cmake --build build -j "$jobs"
((lint)) && lint
if ((quick)); then
  run_ctest build -LE slow
  echo "left out by --quick: $(ctest --test-dir build -N -L slow | sed -nE 's/^Total Tests: //p')" \
    "tests labelled slow (scripts/test.sh without --quick runs them)"
else
  run_ctest build
fi

# AddressSanitizer at -O1, as its documentation advises, with the debug build's assertions: at
# -O0 the CPU-bound tests ran about twice as long (cli/infer_emulate 146 s against 60 s).
if ((sanitize)); then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
    -DPRS_SANITIZE=ON "${all_parts[@]}" >/dev/null
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-asan
fi

# ThreadSanitizer: the test programs of the threaded parts (tests/server, client, gpud) and what
# they run, then their tests. Races are errors (halt_on_error), as the other sanitizers' findings.
# die_after_fork=0: the clients fork from threaded processes (private perseus-gpud, watchdogs),
# and the child execs or runs only what is safe after fork.
if ((tsan)); then
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPRS_TSAN=ON \
    -DPRS_BUILD_TESTS=ON -DPRS_BUILD_BENCH=OFF -DPRS_BUILD_FUZZ=OFF >/dev/null
  targets=()
  for t in tests/server/test_*.c tests/client/test_*.c tests/gpud/test_*.c; do
    targets+=("$(basename "$t" .c)")
  done
  cmake --build build-tsan -j "$jobs" --target "${targets[@]}"
  # client/test_devsel's children create threads after a fork from a threaded process, which
  # ThreadSanitizer cannot follow ("dup thread"); the other builds run it.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0" run_ctest build-tsan \
    -R '^(server|client|gpud)/' -E '^client/test_devsel$'
fi

if ((fuzz)); then
  CC=clang cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPRS_FUZZ=ON \
    -DPRS_SANITIZE=ON >/dev/null
  names=()
  for src in fuzz/fuzz_*.c; do
    names+=("$(basename "$src" .c)")
  done
  cmake --build build-fuzz -j "$jobs" --target "${names[@]}"
  # Each target 30 s on its own corpus, as many at once as there are cores; a target's output
  # is printed whole when it ends, and any failing target fails the run.
  fuzz_one() {
    local name=$1 work out rc=0
    work=$(mktemp -d)
    cp -r "fuzz/corpus/$name/." "$work/"
    out=$("build-fuzz/fuzz/$name" -max_total_time=30 -print_final_stats=0 "$work" 2>&1) || rc=$?
    rm -rf "$work"
    echo "fuzzed $name for 30 s: $(tail -n 1 <<<"$out")"
    ((rc == 0)) || { tail -n 40 <<<"$out"; echo "fuzz: $name failed ($rc)"; }
    return "$rc"
  }
  export -f fuzz_one
  printf '%s\n' "${names[@]}" | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}'
fi
