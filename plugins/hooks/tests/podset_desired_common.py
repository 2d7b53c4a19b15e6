# SPDX-License-Identifier: Apache-2.0
"""The desired-state podset scenario against kube-apisim, shared by the
Python hook (plugins/hooks/podset/podset.py, test_podset_desired.py) and the
C plugin written with the SDK's desired_* functions
(tests/integration/plugins/podset_desired.c, test_podset_desired_plugin.py):
create, a reconcile with nothing changed (no Pod applied again), scale up
and down, a Pod deleted by hand (restored), a Pod changed
by hand (restored by the apply), a 409 on the status write (retried), and
the PodSet deleted with the finalizer (finalizing reconcile, Pods pruned,
finalizer removed, object gone). Every wait is on the simulator's state.
PODSET_LOG=1 prints the daemon's log after the scenario."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import itest  # noqa: E402
from itest import Cluster, Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

ROOT = itest.ROOT
NS = "demo"
FINALIZER = "demo.kctrld.io/pods"
PS_PATH = "/apis/demo.kctrld.io/v1/namespaces/%s/podsets" % NS
PODS = "/api/v1/namespaces/%s/pods" % NS

CONFIG = """
logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
controllers:
  - name: podset
    for: { apiVersion: demo.kctrld.io/v1, kind: PodSet }
    owns: [ { apiVersion: v1, kind: Pod } ]
    finalizer: %s
    workers: 2
    rateLimit: { baseDelay: 20ms, maxDelay: 1s }
%s
"""


def config(runner):
    """The controller config with runner: the `hook:` or `plugin:` lines."""
    return CONFIG % (FINALIZER, runner)


def podset(name, replicas):
    return {"apiVersion": "demo.kctrld.io/v1", "kind": "PodSet", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}


def pods(c):
    return {p["metadata"]["name"]: p for p in c.items(PODS) if not p["metadata"].get("deletionTimestamp")}


SKIPPED = "kctrld_desired_applies_skipped_total"


def pod_patches(sim):
    """How many PATCH requests to Pods the simulator logged."""
    return sum(1 for r in sim.control("GET", "requests")["requests"]
               if r["method"] == "PATCH" and r["path"].startswith(PODS + "/"))


def status(c):
    ps = c.get(PS_PATH + "/web")
    return ps and ps.get("status")


def scenario(runner):
    itest.require_binaries()
    with taplib.Apisim(seeds=[os.path.join(ROOT, "config", "podset-crd.yaml")]) as sim:
        c = Cluster(sim)
        c.namespace(NS)
        with Kctrld(config(runner), sim.kubeconfig) as k:
            uid = c.create(PS_PATH, podset("web", 3))["metadata"]["uid"]
            # Create: three named Pods with the controller ownerReference, the
            # finalizer on the PodSet, the status counting them.
            wait_for(lambda: sorted(pods(c)) == ["web-0", "web-1", "web-2"], what="3 pods", kctrld=k)
            for p in pods(c).values():
                md = p["metadata"]
                assert md["labels"] == {"app": "web", "podset": "web"}, md
                assert md["ownerReferences"] == [{"apiVersion": "demo.kctrld.io/v1", "kind": "PodSet", "name": "web",
                                                  "uid": uid, "controller": True, "blockOwnerDeletion": True}], md
                assert [m["manager"] for m in md["managedFields"] if m["operation"] == "Apply"] == ["podset"], md
                assert p["spec"]["containers"][0]["image"] == "nginx:1.27"
            assert c.get(PS_PATH + "/web")["metadata"].get("finalizers") == [FINALIZER]
            wait_for(lambda: status(c) == {"replicas": 3, "observedGeneration": 1}, what="status 3", kctrld=k)

            # Reconciled again with nothing changed for the Pods (the PodSet
            # annotated): no Pod is applied again.
            patched = pod_patches(sim)
            skipped = k.metric(k.scrape(), SKIPPED, 'controller="podset"')
            c.merge_patch(PS_PATH + "/web", {"metadata": {"annotations": {"touched": "1"}}})
            wait_for(lambda: k.metric(k.scrape(), SKIPPED, 'controller="podset"') >= skipped + 3,
                     what="3 applies skipped", kctrld=k)
            assert pod_patches(sim) == patched, (patched, pod_patches(sim))

            # Scale up, then down: the missing Pod applied, the extra ones pruned.
            c.merge_patch(PS_PATH + "/web", {"spec": {"replicas": 4}})
            wait_for(lambda: sorted(pods(c)) == ["web-0", "web-1", "web-2", "web-3"], what="4 pods", kctrld=k)
            wait_for(lambda: status(c) == {"replicas": 4, "observedGeneration": 2}, what="status 4", kctrld=k)
            c.merge_patch(PS_PATH + "/web", {"spec": {"replicas": 2}})
            wait_for(lambda: sorted(pods(c)) == ["web-0", "web-1"], what="2 pods", kctrld=k)
            wait_for(lambda: status(c) == {"replicas": 2, "observedGeneration": 3}, what="status 2", kctrld=k)

            # A Pod deleted by hand comes back (a new one: another uid).
            old = pods(c)["web-0"]["metadata"]["uid"]
            c.delete(PODS + "/web-0")
            wait_for(lambda: "web-0" in pods(c) and pods(c)["web-0"]["metadata"]["uid"] != old,
                     what="web-0 restored", kctrld=k)

            # A Pod changed by hand is set back by the next apply.
            c.merge_patch(PODS + "/web-1", {"metadata": {"labels": {"app": "changed"}}})
            wait_for(lambda: pods(c)["web-1"]["metadata"]["labels"] == {"app": "web", "podset": "web"},
                     what="web-1 labels restored", kctrld=k)

            # A 409 on the status write is retried: the status gets there.
            sim.control("POST", "faults", {"action": "status", "code": 409, "count": 1, "method": "PUT",
                                           "pathPrefix": PS_PATH + "/web/status"})
            c.merge_patch(PS_PATH + "/web", {"spec": {"replicas": 1}})
            wait_for(lambda: status(c) == {"replicas": 1, "observedGeneration": 4}, what="status 1", kctrld=k)
            puts = [r["code"] for r in sim.control("GET", "requests")["requests"]
                    if r["method"] == "PUT" and r["path"] == PS_PATH + "/web/status"]
            assert 409 in puts and puts[-1] == 200, puts
            assert re.search(r"status of PodSet demo/web: conflict .*requeue", k.log()), k.log()

            # Deleted: the finalizing reconcile prunes every Pod, says
            # finalized, the finalizer goes and so does the PodSet.
            c.delete(PS_PATH + "/web")
            wait_for(lambda: c.get(PS_PATH + "/web") is None, what="podset gone", kctrld=k)
            assert pods(c) == {}, pods(c)
            assert re.search(r"finalized: finalizer %s removed" % re.escape(FINALIZER), k.log()), k.log()
            assert not re.search(r"\blevel=error\b|\bERROR\b", k.log()), k.log()
            if os.environ.get("PODSET_LOG"):
                sys.stdout.write(k.log())
