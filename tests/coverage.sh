#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make coverage`: builds the tree with --coverage -O0 into build-cov/
# (`make SAN=coverage`), resets the counters, runs the unit and integration
# tests of that build (tests/run-tests --build build-cov) and prints per-file
# line and branch coverage of daemon/**/*.c and plugins/*/*.c with Debian's gcov.
# Annotated sources (*.gcov, "#####" marks a line never run) are left in
# build-cov/gcov/ for finding untested paths.
#
#   tests/coverage.sh                  build, test, report
#   tests/coverage.sh --unit-only      only the unit tests feed the numbers
#   tests/coverage.sh --report-only    report the counters already collected
#
# "branches" is gcov's "taken at least once" over all branch outcomes: an
# if with an untested else counts 1 of 2.
set -u
cd "$(dirname "$0")/.."
B=build-cov
run=1 unit_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --unit-only) unit_only=1 ;;
    --report-only) run=0 ;;
    *) echo "usage: $0 [--unit-only|--report-only]" >&2; exit 2 ;;
  esac
  shift
done
command -v gcov >/dev/null || { echo "coverage: gcov not found (Debian package gcc)" >&2; exit 2; }

status=0
if [ "$run" = 1 ]; then
  make --no-print-directory SAN=coverage -j2 all >/dev/null || { echo "coverage: build failed" >&2; exit 1; }
  find "$B" -name '*.gcda' -delete
  if [ "$unit_only" = 1 ]; then
    # run-tests --unit-only is tied to build/; run the cmocka binaries here.
    for t in "$B"/tests/test_*; do
      case "$t" in *.d|*.o) continue ;; esac
      [ -x "$t" ] || continue
      CMOCKA_MESSAGE_OUTPUT=TAP timeout 300 "$t" >/dev/null 2>&1 || { echo "coverage: $t failed" >&2; status=1; }
    done
  else
    bash tests/run-tests --build "$B" >"$B/run-tests.log" 2>&1 || status=1
    grep -E '^(FAIL|failed:)' "$B/run-tests.log"
    tail -1 "$B/run-tests.log"
  fi
fi

# One gcov run per object directory; its summary names every source file
# (headers with inline functions too, which are skipped).
rm -rf "$B/gcov" && mkdir -p "$B/gcov"
report() { # OBJDIR SOURCES...
  local objdir=$1; shift
  [ -d "$objdir" ] || return 0
  gcov -b -o "$objdir" "$@" 2>/dev/null | awk -v want="$*" '
    BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
    /^File / { f = $2; gsub(/\047/, "", f); cur = (f in keep) ? f : ""; next }
    /^Creating / { cur = ""; next }
    cur != "" && /^Lines executed:/ { split($0, a, /[:% ]+/); lp[cur] = a[3]; ln[cur] = $NF }
    cur != "" && /^Taken at least once:/ { split($0, a, /[:% ]+/); bp[cur] = a[5]; bn[cur] = $NF }
    END { for (f in lp) printf "%s %s %s %s %s\n", f, lp[f], ln[f], (f in bp) ? bp[f] : "-", (f in bn) ? bn[f] : 0 }'
  mv ./*.gcov "$B/gcov/" 2>/dev/null
  return 0
}
{
  report "$B/obj/daemon" daemon/*.c
  for d in daemon/*/; do
    d=${d%/}
    report "$B/obj/$d" "$d"/*.c
  done
  for d in plugins/*/; do
    d=${d%/}
    ls "$d"/*.c >/dev/null 2>&1 && report "$B/pic/$d" "$d"/*.c
  done
} | sort >"$B/coverage.txt"

awk '
  BEGIN { printf "%-34s %8s %7s %9s %7s\n", "file", "lines%", "of", "branch%", "of" }
  { printf "%-34s %8s %7d %9s %7d\n", $1, $2, $3, $4, $5
    lt += $3; lc += $2 * $3 / 100; if ($4 != "-") { bt += $5; bc += $4 * $5 / 100 } }
  END { printf "%-34s %8.2f %7d %9.2f %7d\n", "TOTAL", lt ? 100 * lc / lt : 0, lt, bt ? 100 * bc / bt : 0, bt }
' "$B/coverage.txt"
echo "annotated sources: $B/gcov/*.gcov"
exit $status
