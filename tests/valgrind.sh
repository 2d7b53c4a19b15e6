#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make valgrind`: memcheck pass over the normal build (slow: about 6 minutes,
# so tests/run-tests does not pick it up; run it by hand or from `make valgrind`).
#
#  1. every unit test binary build/tests/test_* under
#       valgrind --error-exitcode=99 --leak-check=full
#                --errors-for-leak-kinds=definite,indirect --track-fds=yes
#     one TAP line each; a file descriptor still open at exit that was not
#     inherited from the parent also fails the test (valgrind 3.19 only
#     reports them).
#  2. an end-to-end scenario: kube-apisim and kctrld both under valgrind, a
#     demo.yaml-like config (podset, reloader, ttl plugins), PodSet scale up,
#     a relist forced by compaction, injected API faults, a SIGHUP reload that
#     drops a controller and an informer, scale down under the new config,
#     then SIGTERM. Asserts zero memcheck errors, no definite/indirect leaks,
#     no leaked descriptors and a clean exit status for both processes.
#
# Prints TAP. Suppressions: tests/valgrind.supp (third-party noise only).
#
#   tests/valgrind.sh [--build DIR] [--unit-only | --e2e-only] [--keep]
#   VALGRIND_FILTER=store tests/valgrind.sh --unit-only   only test_*store*
#   VALGRIND_TIMEOUT=900 (default) seconds per unit test binary
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
B=build
unit=1 e2e=1 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) B=$2; shift ;;
    --unit-only) e2e=0 ;;
    --e2e-only) unit=0 ;;
    --keep) keep=1 ;;
    *) echo "usage: $0 [--build DIR] [--unit-only|--e2e-only] [--keep]" >&2; exit 2 ;;
  esac
  shift
done

command -v valgrind >/dev/null || { echo "1..0 # SKIP valgrind not installed"; exit 0; }
[ -d "$B/tests" ] || { echo "Bail out! $B/tests missing: run make first"; exit 2; }
case "$B" in *asan*|*tsan*) echo "Bail out! valgrind needs a build without sanitizers"; exit 2 ;; esac

VG=(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --track-fds=yes --num-callers=30
    --suppressions="$ROOT/tests/valgrind.supp")
tmp=$(mktemp -d /tmp/kctrld-valgrind.XXXXXX)
n=0 failed=0
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ "$keep" = 1 ] || [ "$failed" -gt 0 ]; then echo "# logs kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
diag() { sed 's/^/# /' | tail -"${2:-40}"; }

# Problems in one valgrind log: memcheck errors, definite/indirect leaks and
# descriptors open at exit that the process created. Empty output = clean.
vg_problems() {
  local log=$1
  grep -E 'ERROR SUMMARY: [1-9]' "$log"
  grep -E '(definitely|indirectly) lost: [1-9]' "$log"
  # valgrind prints "Open <what> N: ..." then either "<inherited from parent>"
  # or the stack that created it; std fds are not listed. The memfd copies of
  # loaded plugins stay open on purpose (daemon/host/plugin_host.c load_copy, the
  # only memfd_create).
  awk '/== Open (file descriptor|AF_|Unix|pipe|socket)/ { o = $0; getline;
         if ($0 !~ /inherited from parent/ && $0 !~ /memfd_create/) print "leaked fd: " o }' "$log"
  grep -q 'ERROR SUMMARY' "$log" || echo "no ERROR SUMMARY (valgrind killed?)"
}

# -- 1. unit tests --------------------------------------------------------------
if [ "$unit" = 1 ]; then
  for t in "$B"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    name=$(basename "$t")
    [ -n "${VALGRIND_FILTER:-}" ] && case "$name" in *"$VALGRIND_FILTER"*) ;; *) continue ;; esac
    if [ "$name" = test_informer_apisim ] && [ -z "${VALGRIND_FILTER:-}" ]; then
      # Syncs 3,000+ simulator objects per case with wall-clock deadlines:
      # past 15 min under memcheck. Its code paths run under memcheck in the
      # end-to-end scenario below; VALGRIND_FILTER=informer_apisim forces it.
      n=$((n + 1)); echo "ok $n - valgrind $t # SKIP too slow under memcheck (see tests/valgrind.sh)"
      continue
    fi
    log="$tmp/$name.vg"
    CMOCKA_MESSAGE_OUTPUT=TAP timeout --kill-after=10 "${VALGRIND_TIMEOUT:-900}" "${VG[@]}" --log-file="$log" "$t" \
      >"$tmp/$name.out" 2>&1
    rc=$?
    probs=$(vg_problems "$log")
    if [ "$rc" -eq 0 ] && [ -z "$probs" ]; then
      ok "valgrind $t"
    else
      not_ok "valgrind $t (exit $rc)"
      { echo "$probs"; grep -E '^not ok' "$tmp/$name.out"; grep -v '^==[0-9]*== *$' "$log"; } | diag 60
    fi
  done
fi

# -- 2. end to end --------------------------------------------------------------
api() { # METHOD PATH [BODY [CONTENT-TYPE]]
  if [ $# -gt 2 ]; then
    curl -sS -m 20 -X "$1" -H "Content-Type: ${4:-application/json}" --data-binary "$3" "$url$2"
  else
    curl -sS -m 20 -X "$1" "$url$2"
  fi
}
# Number of live (not terminating) Pods owned by PodSet demo/web.
live_pods() {
  api GET "/api/v1/namespaces/demo/pods?labelSelector=podset%3Dweb" | python3 -c '
import json, sys
try:
    items = json.load(sys.stdin)["items"]
except Exception:
    print(-1); sys.exit()
print(sum(1 for p in items if not p["metadata"].get("deletionTimestamp")))'
}
wait_until() { # SECONDS COMMAND... : polls every 0.5 s
  local end=$((SECONDS + $1)); shift
  while [ $SECONDS -lt $end ]; do "$@" && return 0; sleep 0.5; done
  return 1
}
pods_are() { [ "$(live_pods)" = "$1" ]; }
gone() { [ "$(curl -s -m 20 -o /dev/null -w '%{http_code}' "$url$1")" = 404 ]; }
log_has() { grep -q -- "$2" "$1"; }

write_config() { # FILE PHASE (1: podset+reloader+ttl, 2: after reload)
  local pl="$ROOT/$B/plugins"
  {
    echo "logLevel: info"
    echo "metrics: { bindAddress: \"127.0.0.1:0\" }"
    echo "informers:"
    echo "  - { apiVersion: v1, kind: Pod, transform: { drop: [metadata.managedFields] }, indexes: { byNode: spec.nodeName } }"
    if [ "$2" = 1 ]; then
      echo "  - apiVersion: apps/v1"
      echo "    kind: Deployment"
      echo "    transform: { drop: [metadata.managedFields] }"
      echo "    indexes: { cmEnvFrom: 'spec.template.spec.containers[].envFrom[].configMapRef.name' }"
    fi
    echo "controllers:"
    echo "  - name: podset"
    echo "    plugin: $pl/podset.so"
    echo "    for: { apiVersion: demo.kctrld.io/v1, kind: PodSet }"
    echo "    owns: [ { apiVersion: v1, kind: Pod } ]"
    echo "    workers: $([ "$2" = 1 ] && echo 2 || echo 1)"
    if [ "$2" = 1 ]; then
      echo "  - name: reloader"
      echo "    plugin: $pl/reloader.so"
      echo "    for: { apiVersion: apps/v1, kind: Deployment }"
      echo "    predicates: [GenerationChanged, AnnotationsChanged]"
      echo "    watches:"
      echo "      - { apiVersion: v1, kind: ConfigMap, mapping: { index: cmEnvFrom }, predicates: [ResourceVersionChanged] }"
    fi
    echo "  - name: ttl"
    echo "    plugin: $pl/ttl.so"
    echo "    for: { apiVersion: v1, kind: ConfigMap }"
    echo "    settings:"
    echo "      kinds: [ { apiVersion: v1, kind: ConfigMap } ]"
  } >"$1"
}

e2e() {
  for f in "$B/kctrld" "$B/kube-apisim" "$B/plugins/podset.so" "$B/plugins/reloader.so" "$B/plugins/ttl.so"; do
    [ -e "$f" ] || { not_ok "e2e: $f missing"; return; }
  done
  local alog="$tmp/apisim.vg" klog="$tmp/kctrld.vg" cfg="$tmp/kctrld.yaml"
  "${VG[@]}" --log-file="$alog" "$B/kube-apisim" --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
    --seed config/podset-crd.yaml --seed config/demo-objects.yaml >"$tmp/url" 2>"$tmp/apisim.err" &
  local apid=$!
  pids+=("$apid")
  wait_until 60 test -s "$tmp/url"
  url=$(head -1 "$tmp/url")
  if [ -z "$url" ]; then
    not_ok "e2e: kube-apisim started under valgrind"; diag <"$tmp/apisim.err"; return
  fi
  ok "e2e: kube-apisim started under valgrind ($url)"

  write_config "$cfg" 1
  "${VG[@]}" --log-file="$klog" "$B/kctrld" --config "$cfg" --kubeconfig "$tmp/kubeconfig" \
    >"$tmp/kctrld.err" 2>&1 &
  local kpid=$!
  pids+=("$kpid")

  if wait_until 90 pods_are 3; then ok "e2e: podset created 3 pods"
  else not_ok "e2e: podset created 3 pods (have $(live_pods))"; diag <"$tmp/kctrld.err"; fi

  # Error paths under memcheck: a relist after compaction (watch 410), a
  # few failed writes (500, 429 with Retry-After, connection reset) and a
  # watch stream cut into tiny chunks.
  api POST /_apisim/faults '{"action":"status","code":500,"count":2,"method":"POST","pathPrefix":"/api/v1/namespaces/demo/pods"}' >/dev/null
  api POST /_apisim/faults '{"action":"status","code":429,"retryAfter":1,"count":1,"method":"POST"}' >/dev/null
  api POST /_apisim/faults '{"action":"reset","count":1,"method":"POST"}' >/dev/null
  api POST /_apisim/faults '{"action":"chunks","chunkBytes":7,"count":2,"watch":true}' >/dev/null
  api POST /_apisim/compact >/dev/null
  api POST /_apisim/drop-watches >/dev/null
  api PATCH /apis/demo.kctrld.io/v1/namespaces/demo/podsets/web '{"spec":{"replicas":5}}' \
    application/merge-patch+json >/dev/null
  if wait_until 90 pods_are 5; then ok "e2e: scaled to 5 through injected faults and a relist"
  else not_ok "e2e: scaled to 5 (have $(live_pods))"; diag <"$tmp/kctrld.err"; fi
  # Reloader rolls the Deployment on a ConfigMap change; a stream of Pod
  # modifications keeps the informers and predicates busy meanwhile.
  api PATCH /api/v1/namespaces/demo/configmaps/web-config '{"data":{"greeting":"bonjour"}}' \
    application/merge-patch+json >/dev/null
  api POST /_apisim/modify '{"resource":"pods","count":100,"rate":50}' >/dev/null
  if wait_until 30 log_has "$tmp/kctrld.err" "rolled deployment=demo/web.*previous=[0-9a-f]"; then
    ok "e2e: reloader rolled the Deployment after the ConfigMap change"
  else not_ok "e2e: reloader rolled the Deployment"; diag <"$tmp/kctrld.err"; fi

  # Reload: drop the reloader controller and the Deployment informer, change
  # podset's worker count (its controller restarts).
  write_config "$cfg" 2
  kill -HUP "$kpid"
  if wait_until 60 log_has "$tmp/kctrld.err" "reload applied"; then ok "e2e: SIGHUP reload applied"
  else not_ok "e2e: SIGHUP reload applied"; diag <"$tmp/kctrld.err"; fi
  api PATCH /apis/demo.kctrld.io/v1/namespaces/demo/podsets/web '{"spec":{"replicas":2}}' \
    application/merge-patch+json >/dev/null
  if wait_until 90 pods_are 2; then ok "e2e: scaled down to 2 after the reload"
  else not_ok "e2e: scaled down to 2 after the reload (have $(live_pods))"; diag <"$tmp/kctrld.err"; fi
  # ttl deletes ConfigMap demo/short-lived 20 s after its creation.
  if wait_until 60 gone /api/v1/namespaces/demo/configmaps/short-lived; then
    ok "e2e: ttl deleted the expired ConfigMap"
  else not_ok "e2e: ttl deleted the expired ConfigMap"; diag <"$tmp/kctrld.err"; fi
  # A second reload with an invalid file must be rejected without leaking.
  echo "controllers: [ { name: broken } ]" >"$cfg"
  kill -HUP "$kpid"
  if wait_until 30 log_has "$tmp/kctrld.err" "reload rejected"; then ok "e2e: invalid reload rejected"
  else not_ok "e2e: invalid reload rejected"; diag <"$tmp/kctrld.err"; fi

  kill -TERM "$kpid"
  wait "$kpid"
  local krc=$?
  kill -TERM "$apid"
  wait "$apid"
  local arc=$?
  pids=()
  local probs
  probs=$(vg_problems "$klog")
  if [ "$krc" -eq 0 ] && [ -z "$probs" ]; then ok "e2e: kctrld exit 0, no memcheck errors, leaks or fds"
  else
    not_ok "e2e: kctrld exit $krc, memcheck clean"
    { echo "$probs"; grep -v '^==[0-9]*== *$' "$klog"; } | diag 80
  fi
  probs=$(vg_problems "$alog")
  if [ "$arc" -eq 0 ] && [ -z "$probs" ]; then ok "e2e: kube-apisim exit 0, no memcheck errors, leaks or fds"
  else
    not_ok "e2e: kube-apisim exit $arc, memcheck clean"
    { echo "$probs"; grep -v '^==[0-9]*== *$' "$alog"; } | diag 80
  fi
}
[ "$e2e" = 1 ] && e2e

echo "1..$n"
[ "$failed" -eq 0 ]
