#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make deb` (debian/): builds the three packages, runs lintian (no error or
# warning; the remaining info tag is explained in docs/deploy.md), installs
# them into a throwaway root with `dpkg --root` (maintainer scripts run
# chrootless with DPKG_ROOT: the sysusers user, the config's root:kctrld
# 0640), checks the layout, runs the installed daemon (--version,
# --check-config of the shipped config, `kctrld rbac` loading the shipped
# plugins), builds a plugin against the installed headers, checks that the
# packaged kctrld(8) names every flag of the installed --help, checks the hook
# material (schema, helpers, example hooks, the JIT drop-in: each the source
# tree's file) and runs the example hooks' test with the installed daemon,
# simulator, helpers and examples, and verifies the installed unit, alone
# and with the JIT drop-in, with systemd-analyze. Skipped without debhelper
# (`make deb-deps`). About a minute: most of it is the package build. TAP.
set -u
cd "$(dirname "$0")/../.."
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/# /'; }
check() { local what=$1; shift; local out; if out=$("$@" 2>&1); then ok "$what"; else notok "$what" "$out"; fi; }

if ! command -v dpkg-buildpackage >/dev/null 2>&1 || ! dpkg-query -W -f='${Status}' debhelper 2>/dev/null | grep -q "install ok installed"; then
  echo "1..1"
  echo "ok 1 - Debian package # SKIP dpkg-buildpackage/debhelper not installed (make deb-deps)"
  exit 0
fi
echo "1..11"
version=$(sed -n 's/^VERSION *:= *//p' Makefile)
arch=$(dpkg --print-architecture)
tmp=$(mktemp -d /tmp/kctrld-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if make deb >"$tmp/build.log" 2>&1; then ok "make deb"; else notok "make deb" "$(tail -30 "$tmp/build.log")"; fi
debs="build/deb/kctrld_${version}_${arch}.deb build/deb/kctrld-dev_${version}_all.deb build/deb/kube-apisim_${version}_${arch}.deb"
missing=""
for d in $debs; do [ -f "$d" ] || missing="$missing $d"; done
if [ -z "$missing" ]; then ok "packages kctrld_${version}_${arch}.deb, kctrld-dev, kube-apisim"; else notok "packages built" "missing:$missing"; echo "# $failed failed"; exit 1; fi

if command -v lintian >/dev/null 2>&1; then
  out=$(lintian --pedantic build/deb/kctrld_${version}_${arch}.changes 2>&1 | grep -v '^running with root privileges')
  bad=$(printf '%s\n' "$out" | grep -E '^[EW]: ' || true)
  if [ -z "$bad" ]; then ok "lintian: no errors or warnings"; else notok "lintian: no errors or warnings" "$out"; fi
else
  ok "lintian # SKIP not installed"
fi

root="$tmp/root"
mkdir -p "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/info"
touch "$root/var/lib/dpkg/status"
# --force-depends: the root has no libraries (the host's are used below).
check "dpkg --root installs the packages (maintainer scripts chrootless)" \
  dpkg --root="$root" --force-script-chrootless --force-depends --log=/dev/null -i $debs

layout() {
  local bad="" p
  for p in usr/bin/kctrld usr/bin/kube-apisim usr/lib/kctrld/plugins/podset.so usr/lib/kctrld/plugins/reloader.so \
           usr/lib/kctrld/plugins/ttl.so lib/systemd/system/kctrld.service usr/lib/sysusers.d/kctrld.conf \
           etc/kctrld/kctrld.yaml usr/share/man/man8/kctrld.8.gz usr/share/man/man5/kctrld.yaml.5.gz \
           usr/share/man/man1/kube-apisim.1.gz usr/include/kctrld/plugin.h usr/include/kctrld/plugin_util.h \
           usr/share/pkgconfig/kctrld-plugin.pc usr/share/doc/kctrld/operations.md usr/share/doc/kctrld/deploy.md \
           usr/share/doc/kctrld/examples/kctrld.example.yaml usr/share/doc/kctrld/copyright \
           usr/share/kctrld/kctrld.schema.json; do
    [ -e "$root/$p" ] || bad="$bad missing:$p"
  done
  [ "$(stat -c %a "$root/usr/bin/kctrld")" = 755 ] || bad="$bad kctrld-mode"
  [ "$(stat -c %a "$root/usr/lib/kctrld/plugins/ttl.so")" = 644 ] || bad="$bad plugin-mode"
  local gid
  gid=$(sed -n 's/^kctrld:[^:]*:\([0-9]*\):.*/\1/p' "$root/etc/group")
  [ -n "$gid" ] || bad="$bad no-kctrld-group"
  grep -q '^kctrld:x:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$' "$root/etc/passwd" || bad="$bad no-kctrld-user"
  [ "$(stat -c '%U:%g %a' "$root/etc/kctrld/kctrld.yaml")" = "root:$gid 640" ] || bad="$bad config:$(stat -c '%U:%g %a' "$root/etc/kctrld/kctrld.yaml")"
  [ "$(stat -c '%U:%g %a' "$root/etc/kctrld")" = "root:$gid 750" ] || bad="$bad configdir:$(stat -c '%U:%g %a' "$root/etc/kctrld")"
  dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Conffiles}\n' kctrld | grep -q '/etc/kctrld/kctrld.yaml' || bad="$bad not-a-conffile"
  cmp -s "$root/etc/kctrld/kctrld.yaml" config/kctrld.example.yaml || bad="$bad config-not-the-example"
  for p in kctrld kctrld-dev kube-apisim; do
    [ "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Version} ${db:Status-Abbrev}' $p)" = "$version ii " ] || bad="$bad $p-not-installed"
  done
  [ -z "$bad" ] || { echo "$bad"; return 1; }
}
check "layout: binaries, plugins, unit, sysusers, root:kctrld 0640 conffile, man pages, headers, pc, docs, config schema" layout

run_installed() {
  "$root/usr/bin/kctrld" --version | grep -qx "kctrld $version" || return 1
  # --check-config loads the plugins the config names (/usr/lib/...): check
  # a copy that names them inside the throwaway root.
  # The check also resolves the credentials: the kubeconfig the shipped
  # config names (/etc/kctrld/kubeconfig) is the site's; --kubeconfig
  # stands in for it.
  sed "s|/usr/lib/kctrld/plugins/|$root/usr/lib/kctrld/plugins/|" "$root/etc/kctrld/kctrld.yaml" >"$tmp/kctrld.yaml"
  printf '%s\n' 'apiVersion: v1' 'kind: Config' \
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]" \
    'users: [{name: u, user: {token: t}}]' \
    'contexts: [{name: c, context: {cluster: c, user: u}}]' 'current-context: c' >"$tmp/kubeconfig"
  chmod 600 "$tmp/kubeconfig"
  "$root/usr/bin/kctrld" --check-config "$tmp/kctrld.yaml" --kubeconfig "$tmp/kubeconfig" >/dev/null 2>"$tmp/check.err" || { cat "$tmp/check.err"; return 1; }
  "$root/usr/bin/kube-apisim" --help | grep -q -- '--rbac' || return 1
  # The shipped plugins load into the shipped daemon and declare their permissions.
  "$root/usr/bin/kctrld" rbac --config deploy/base/kctrld.yaml --plugin-dir "$root/usr/lib/kctrld/plugins" >"$tmp/rbac.yaml" 2>"$tmp/rbac.err" || { cat "$tmp/rbac.err"; return 1; }
  [ ! -s "$tmp/rbac.err" ] || { cat "$tmp/rbac.err"; return 1; }
  cmp -s "$tmp/rbac.yaml" deploy/base/rbac.yaml || { diff "$tmp/rbac.yaml" deploy/base/rbac.yaml; return 1; }
}
check "installed kctrld runs, validates the shipped config, loads the shipped plugins" run_installed

build_plugin() {
  local pc
  pc=$(PKG_CONFIG_PATH="$root/usr/share/pkgconfig" pkg-config --variable=plugindir kctrld-plugin) || return 1
  [ "$pc" = /usr/lib/kctrld/plugins ] || { echo "plugindir=$pc"; return 1; }
  [ "$(PKG_CONFIG_PATH="$root/usr/share/pkgconfig" pkg-config --modversion kctrld-plugin)" = "$version" ] || return 1
  # docs/plugins.md's out-of-tree command, with the root's headers.
  cc -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden -I"$root/usr/include" \
    -o "$tmp/ttl.so" plugins/ttl/ttl.c
}
check "kctrld-dev: pkg-config file and headers build a plugin" build_plugin

man_names_every_flag() {
  local page flags f bad=""
  page=$(zcat "$root/usr/share/man/man8/kctrld.8.gz" | sed -e 's/\\-/-/g') || return 1
  flags=$("$root/usr/bin/kctrld" --help | sed -n 's/^  \(--[a-z-]*\).*/\1/p')
  [ -n "$flags" ] || { echo "no flags in --help"; return 1; }
  synopsis=$(printf '%s\n' "$page" | sed -n '/^\.SH SYNOPSIS/,/^\.SH /p')
  for f in $flags; do
    printf '%s\n' "$synopsis" | grep -q -- "$f\b" || bad="$bad $f"
  done
  [ -z "$bad" ] || { echo "kctrld(8) SYNOPSIS lacks:$bad"; return 1; }
  ! printf '%s\n' "$page" | grep -n '@[A-Z]*@\|PREFIX/' || return 1
}
check "packaged kctrld(8): SYNOPSIS names every flag of the installed kctrld --help, no placeholder" man_names_every_flag

# Hooks: the protocol schema, the helpers, the JIT drop-in, the example
# hooks (docs/deploy.md "Hooks"), each exactly the source tree's file.
hook_files() {
  local bad="" src dst
  while read -r src dst; do
    [ -f "$root/$dst" ] || { bad="$bad missing:$dst"; continue; }
    cmp -s "$src" "$root/$dst" || bad="$bad differs:$dst"
    case "$(stat -c %a "$root/$dst")" in 644 | 755) ;; *) bad="$bad mode-$(stat -c %a "$root/$dst"):$dst" ;; esac
  done <<'LIST'
docs/hook-v1.schema.json usr/share/kctrld/hook-v1.schema.json
plugins/hooks/helpers/kctrld_hook.py usr/share/kctrld/python/kctrld_hook.py
plugins/hooks/helpers/hook.sh usr/share/kctrld/hook.sh
systemd/jit-hooks.conf usr/share/kctrld/systemd/jit-hooks.conf
plugins/hooks/README.md usr/share/doc/kctrld/examples/hooks/README.md
plugins/hooks/cmhash/cmhash.py usr/share/doc/kctrld/examples/hooks/cmhash/cmhash.py
plugins/hooks/cmhash-webhook/server.py usr/share/doc/kctrld/examples/hooks/cmhash-webhook/server.py
plugins/hooks/nsdefault/nsdefault.sh usr/share/doc/kctrld/examples/hooks/nsdefault/nsdefault.sh
plugins/hooks/keycount/keycount.py usr/share/doc/kctrld/examples/hooks/keycount/keycount.py
plugins/hooks/keycount/keycount.sh usr/share/doc/kctrld/examples/hooks/keycount/keycount.sh
plugins/hooks/keycount/keycount.js usr/share/doc/kctrld/examples/hooks/keycount/keycount.js
LIST
  # the Python helper imports as documented (PYTHONPATH=/usr/share/kctrld/python)
  PYTHONPATH="$root/usr/share/kctrld/python" python3 -c 'import kctrld_hook; kctrld_hook.run' || bad="$bad no-import"
  [ -z "$bad" ] || { echo "$bad"; return 1; }
}
check "hooks: schema, Python and shell helpers, JIT drop-in, example hooks (the source files, not writable by others)" hook_files

# The installed helpers and keycount examples, run by the installed daemon
# against the installed simulator (plugins/hooks/tests/test_keycount.py).
installed_hooks() {
  mkdir -p "$tmp/bin"
  ln -sf "$root/usr/bin/kctrld" "$tmp/bin/kctrld"
  ln -sf "$root/usr/bin/kube-apisim" "$tmp/bin/kube-apisim"
  local out
  out=$(KCTRLD_BUILD="$tmp/bin" KCTRLD_HOOK_PYTHONPATH="$root/usr/share/kctrld/python" \
        KCTRLD_HOOK_SH="$root/usr/share/kctrld/hook.sh" KEYCOUNT_DIR="$root/usr/share/doc/kctrld/examples/hooks/keycount" \
        python3 plugins/hooks/tests/test_keycount.py 2>&1) || { echo "$out"; return 1; }
  printf '%s\n' "$out" | grep -q '^not ok' && { echo "$out"; return 1; }
  printf '%s\n' "$out" | grep -c '^ok .*helper' | grep -qx 4 || { echo "$out"; return 1; }
}
check "installed hook helpers and examples reconcile against the installed kube-apisim" installed_hooks

if command -v systemd-analyze >/dev/null 2>&1; then
  # The installed unit, with ExecStart pointing into the root (verify needs
  # the executable on this machine).
  mkdir -p "$tmp/unit"
  sed -e "s|/usr/bin/kctrld|$root/usr/bin/kctrld|" "$root/lib/systemd/system/kctrld.service" >"$tmp/unit/kctrld.service"
  out=$(systemd-analyze verify "$tmp/unit/kctrld.service" 2>&1); rc=$?
  # and with the JIT drop-in linked in as docs/deploy.md says
  mkdir -p "$tmp/unit/kctrld.service.d"
  ln -s "$root/usr/share/kctrld/systemd/jit-hooks.conf" "$tmp/unit/kctrld.service.d/"
  out2=$(systemd-analyze verify "$tmp/unit/kctrld.service" 2>&1); rc2=$?
  if [ $rc -eq 0 ] && [ -z "$out" ] && [ $rc2 -eq 0 ] && [ -z "$out2" ]; then
    ok "systemd-analyze verify of the installed unit, alone and with the JIT drop-in: clean"
  else
    notok "systemd-analyze verify of the installed unit (rc=$rc, with the drop-in rc=$rc2)" "$out$out2"
  fi
else
  ok "systemd-analyze verify # SKIP systemd-analyze not installed"
fi

echo "# $failed failed"
[ "$failed" -eq 0 ]
