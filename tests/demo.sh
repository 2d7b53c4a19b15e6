#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: starts kube-apisim seeded with the PodSet CRD and sample
# objects, starts kctrld with config/demo.yaml (podset, reloader and ttl
# plugins), then walks through a short scenario and shows what is reconciled.
#   DEMO_FOLLOW=1 make demo   keeps both running after the scenario (Ctrl-C ends).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${KCTRLD_BUILD:-build}
tmp=$(mktemp -d /tmp/kctrld-demo.XXXXXX)
pids=()
cleanup() {
  # The daemon first (started last), so it does not log the simulator going away.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

"$B/kube-apisim" --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
  --seed config/podset-crd.yaml --seed config/demo-objects.yaml >"$tmp/url" 2>"$tmp/apisim.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/url" ] && break; sleep 0.05; done
url=$(head -1 "$tmp/url")
[ -n "$url" ] || { echo "kube-apisim did not start:"; cat "$tmp/apisim.log"; exit 1; }
bold "kube-apisim serving at $url (kubeconfig $tmp/kubeconfig)"

api() { # METHOD PATH [CONTENT-TYPE BODY]
  if [ $# -gt 2 ]; then
    curl -sS -X "$1" -H "Content-Type: $3" --data-binary "$4" "$url$2"
  else
    curl -sS -X "$1" "$url$2"
  fi
}
pods() {
  api GET "/api/v1/namespaces/demo/pods?labelSelector=podset%3Dweb" | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print("   %d pods labelled podset=web:" % len(items))
for p in items:
    m = p["metadata"]
    owner = [o["kind"] + "/" + o["name"] for o in m.get("ownerReferences", []) if o.get("controller")]
    print("     %-22s owner=%s%s" % (m["name"], ",".join(owner) or "-", " (terminating)" if m.get("deletionTimestamp") else ""))'
  api GET /apis/demo.kctrld.io/v1/namespaces/demo/podsets/web | python3 -c '
import json, sys
o = json.load(sys.stdin)
print("   PodSet web: spec.replicas=%s status=%s generation=%s" % (o["spec"]["replicas"], json.dumps(o.get("status", {})), o["metadata"].get("generation")))'
}

bold "starting kctrld --config config/demo.yaml"
# Not through a pipe: $! of a pipeline is its last command, so cleanup would
# stop the filter and leave the daemon running (it ignores SIGPIPE).
"$B/kctrld" --config config/demo.yaml --kubeconfig "$tmp/kubeconfig" 2>&1 &
pids+=($!)
sleep 4
bold "PodSet demo/web asks for 3 replicas"
pods

bold "scale the PodSet to 5 (merge patch on spec.replicas)"
api PATCH /apis/demo.kctrld.io/v1/namespaces/demo/podsets/web application/merge-patch+json '{"spec":{"replicas":5}}' >/dev/null
sleep 3
pods

bold "delete one of its Pods: the controller replaces it"
victim=$(api GET "/api/v1/namespaces/demo/pods?labelSelector=podset%3Dweb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["metadata"]["name"])')
api DELETE "/api/v1/namespaces/demo/pods/$victim" >/dev/null
echo "   deleted $victim"
sleep 3
pods

bold "scale down to 2"
api PATCH /apis/demo.kctrld.io/v1/namespaces/demo/podsets/web application/merge-patch+json '{"spec":{"replicas":2}}' >/dev/null
sleep 3
pods

hash() { api GET /apis/apps/v1/namespaces/demo/deployments/web | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["spec"]["template"]["metadata"].get("annotations", {}).get("kctrld.io/config-hash", "(none)"))'; }
bold "reloader: Deployment demo/web references ConfigMap web-config; config-hash = $(hash)"
api PATCH /api/v1/namespaces/demo/configmaps/web-config application/merge-patch+json '{"data":{"greeting":"bonjour"}}' >/dev/null
sleep 3
bold "changed web-config: config-hash = $(hash)"

bold "ttl: ConfigMap demo/short-lived has kctrld.io/ttl: 20s"
for _ in $(seq 30); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$url/api/v1/namespaces/demo/configmaps/short-lived")
  [ "$code" = 404 ] && break
  sleep 1
done
echo "   GET short-lived -> HTTP $code"

if [ "${DEMO_FOLLOW:-0}" = 1 ]; then
  bold "following (Ctrl-C to stop)"
  wait
fi
bold "demo finished"
