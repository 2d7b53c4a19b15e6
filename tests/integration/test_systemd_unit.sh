#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Renders systemd/kctrld.service.in with a real prefix (a temp dir holding the
# built kctrld) and checks it with `systemd-analyze verify`: any message at
# all (unknown key, bad value, missing executable) fails the test. Also checks
# the directives docs/deploy.md promises and the exposure score. Prints TAP.
set -u
cd "$(dirname "$0")/../.."
B=${KCTRLD_BUILD:-build}
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/# /'; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "1..1"
  skip "systemd unit verification" "systemd-analyze is not installed (apt-get install systemd)"
  exit 0
fi
echo "1..6"
tmp=$(mktemp -d /tmp/kctrld-unit.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
mkdir -p "$prefix/bin" "$prefix/lib/kctrld/plugins" "$prefix/lib/systemd/system"
if [ -x "$B/kctrld" ]; then cp "$B/kctrld" "$prefix/bin/kctrld"; else printf '#!/bin/sh\n' >"$prefix/bin/kctrld"; fi
chmod 0755 "$prefix/bin/kctrld"
unit="$prefix/lib/systemd/system/kctrld.service"
sed -e "s|@PREFIX@|$prefix|g" systemd/kctrld.service.in >"$unit"

if grep -n '@[A-Z_]*@' "$unit" >/dev/null; then notok "template fully rendered" "$(grep -n '@[A-Z_]*@' "$unit")"; else ok "template fully rendered"; fi

out=$(systemd-analyze verify "$unit" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -z "$out" ]; then ok "systemd-analyze verify: clean"; else notok "systemd-analyze verify: clean (rc=$rc)" "$out"; fi

# The check can fail: a misspelt protection must be reported.
bad="$prefix/lib/systemd/system/kctrld-bad.service"
sed -e 's/^ProtectHome=yes/ProtectHomes=yes/' "$unit" >"$bad"
out=$(systemd-analyze verify "$bad" 2>&1)
if printf '%s' "$out" | grep -q "Unknown key 'ProtectHomes'"; then ok "verify reports a misspelt directive"; else notok "verify reports a misspelt directive" "$out"; fi

missing=""
for want in 'Type=notify' 'NotifyAccess=main' 'ExecReload=/bin/kill -HUP $MAINPID' 'WatchdogSec=' \
  'Restart=on-failure' 'User=kctrld' 'NoNewPrivileges=yes' 'CapabilityBoundingSet=' \
  'ProtectSystem=strict' 'ProtectHome=yes' 'PrivateTmp=yes' 'PrivateDevices=yes' \
  'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' 'MemoryDenyWriteExecute=yes' \
  'SystemCallFilter=@system-service' 'SystemCallArchitectures=native' 'ConfigurationDirectory=kctrld' \
  "ReadOnlyPaths=-$prefix/lib/kctrld/plugins"; do
  grep -qxF -- "$want" "$unit" || grep -q "^${want}" "$unit" || missing="$missing $want"
done
if [ -z "$missing" ]; then ok "hardening directives present"; else notok "hardening directives present" "missing:$missing"; fi

# Paths the service must still read are not hidden: /etc (config and
# kubeconfig) and the plugin directory are outside ProtectHome/InaccessiblePaths.
if grep -E '^(InaccessiblePaths|TemporaryFileSystem)=.*(/etc|/lib/kctrld)' "$unit" >/dev/null; then
  notok "config, kubeconfig and plugins stay readable" "$(grep -E '^(InaccessiblePaths|TemporaryFileSystem)=' "$unit")"
else
  ok "config, kubeconfig and plugins stay readable"
fi

score=$(systemd-analyze security --offline=yes "$unit" 2>/dev/null | sed -n 's/.*Overall exposure level for kctrld.service: \([0-9.]*\).*/\1/p')
if [ -z "$score" ]; then
  skip "exposure score at most 2.0" "systemd-analyze security --offline not supported here"
elif awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'; then
  ok "exposure score at most 2.0 (got $score)"
else
  notok "exposure score at most 2.0 (got $score)"
fi
[ $failed -eq 0 ]
