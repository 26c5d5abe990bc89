#!/usr/bin/env bash
# bench/plan_memory --quick: the planner's peak-memory estimate (prs_plan_measure), which
# perseusd's --max-plan-memory relies on, is at least the peak it measures on the small cases
# (exp and hull, one and two threads), and within three times it (not judged in a sanitizer
# build, whose allocator inflates the peak).
set -euo pipefail
. "${PRS_SOURCE_DIR:?PRS_SOURCE_DIR not set}/tests/cli/lib.bash"

bench="${PRS_BIN_DIR:?PRS_BIN_DIR not set}/bench/plan_memory"
[[ -x $bench ]] || skip_input "no $bench (built with -DPRS_BUILD_BENCH=OFF?)"
if grep -q 'libasan\|libubsan' <<<"$(ldd "$bench")"; then
  # AddressSanitizer's shadow memory and quarantine inflate the measured peak: under the
  # sanitizers the cases run (and are checked for memory errors) but their peaks are not judged.
  out=$("$bench" --quick) || true
  echo "$out"
  n=$(grep -cE ' (OK|LOOSE|UNDER)$' <<<"$out") || true
  [[ $n -eq 5 ]] || fail "expected 5 cases measured: $out"
  exit 0
fi
out=$("$bench" --quick) || fail "an estimate under its measured peak, or a case failed: $out"
echo "$out"
n=$(grep -cE ' (OK|LOOSE)$' <<<"$out") || true
[[ $n -eq 5 ]] || fail "expected 5 cases judged: $out"
awk 'NR > 1 && $11 > 3 { bad = 1 } END { exit bad }' <<<"$out" ||
    fail "an estimate over three times its measured peak: $out"
