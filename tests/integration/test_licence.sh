#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The licence is in the tree and every source file says so: LICENSE holds
# the Apache License 2.0 text, and every C, C++, Python and shell source and
# Makefile tracked by git carries an SPDX-License-Identifier line in its
# first three lines. Prints TAP.
set -u
cd "$(dirname "$0")/../.."
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | head -20 | sed 's/^/# /'; }
echo "1..2"
if [ -f LICENSE ] && grep -q "Apache License" LICENSE && grep -q "Version 2.0, January 2004" LICENSE; then
  ok "LICENSE is the Apache License 2.0"
else
  notok "LICENSE is the Apache License 2.0" "LICENSE is missing or not the Apache-2.0 text"
fi
missing=""
if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files | grep -E '\.(c|h|cpp|py|sh)$|(^|/)Makefile$|^tests/run-tests$|^\.ci/(run|install-deps)$|run-bench$|^tests/fuzz/replay$' |
    grep -v '^tests/fuzz/corpus/')
else
  files=$(find daemon include plugins tests -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.py' -o -name '*.sh' \) -not -path 'tests/fuzz/corpus/*')
fi
for f in $files; do
  [ -f "$f" ] || continue
  head -3 "$f" | grep -q "SPDX-License-Identifier: Apache-2.0" || missing="$missing$f"$'\n'
done
if [ -z "$missing" ]; then ok "every source file has an SPDX line"; else notok "every source file has an SPDX line" "$missing"; fi
[ "$failed" -eq 0 ]
