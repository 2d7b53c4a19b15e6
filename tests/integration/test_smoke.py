#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end smoke test, the one `make check` runs: kctrld with the podset
plugin against kube-apisim reconciles a PodSet (two Pods owned by it, status
written through the status subresource), follows a scale-down, stops
cleanly on SIGTERM, and serves /metrics meanwhile. A couple of seconds; the
plugin's own test (plugins/podset/tests) covers the rest."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins", "common"))
import itest  # noqa: E402
from itest import Cluster, Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

NS = "smoke"
PS_PATH = "/apis/demo.kctrld.io/v1/namespaces/%s/podsets" % NS
PODS = "/api/v1/namespaces/%s/pods" % NS

CONFIG = """
logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
controllers:
  - name: podset
    plugin: %s
    for: { apiVersion: demo.kctrld.io/v1, kind: PodSet }
    owns: [ { apiVersion: v1, kind: Pod } ]
    workers: 2
"""


def live_pods(c):
    return [p for p in c.items(PODS + "?labelSelector=podset%3Dweb")
            if not p["metadata"].get("deletionTimestamp")]


def test_podset_reconciled():
    itest.require_binaries("podset")
    with taplib.Apisim(seeds=[os.path.join(itest.ROOT, "config", "podset-crd.yaml")]) as sim:
        c = Cluster(sim)
        c.namespace(NS)
        ps = c.create(PS_PATH, {
            "apiVersion": "demo.kctrld.io/v1", "kind": "PodSet",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"replicas": 2, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}})
        uid = ps["metadata"]["uid"]
        with Kctrld(CONFIG % itest.plugin_path("podset"), sim.kubeconfig) as k:
            pods = wait_for(lambda: len(live_pods(c)) == 2 and live_pods(c), what="2 pods", kctrld=k)
            for p in pods:
                owners = p["metadata"]["ownerReferences"]
                assert [o["uid"] for o in owners] == [uid], owners
            wait_for(lambda: (c.get(PS_PATH + "/web").get("status") or {}) == {"replicas": 2, "observedGeneration": 1},
                     what="status 2/1", kctrld=k)

            c.merge_patch(PS_PATH + "/web", {"spec": {"replicas": 1}})
            wait_for(lambda: len(live_pods(c)) == 1, what="1 pod", kctrld=k)
            wait_for(lambda: (c.get(PS_PATH + "/web").get("status") or {}) == {"replicas": 1, "observedGeneration": 2},
                     what="status 1/2", kctrld=k)

            snap = k.scrape()
            assert k.metric(snap, "controller_runtime_reconcile_total", 'controller="podset"') >= 2, snap
            assert k.stop() == 0, k.log()[-2000:]


if __name__ == "__main__":
    taplib.run_tests(globals())
