#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of the podset plugin against kube-apisim: scale up, down,
replace a deleted Pod, status through the status subresource, Events, and
never more creates or deletes than needed (counted from the watch history),
also when every answer and watch event arrives late.
Every test runs twice: with the plugin in the daemon (isolation: in-process)
and in a plugin child process (isolation: process, daemon/hooks/isolate.h), where
each of its host calls travels to the daemon and back."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import itest  # noqa: E402
from itest import Cluster, Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

ROOT = itest.ROOT
NS = "demo"
PS_PATH = "/apis/demo.kctrld.io/v1/namespaces/%s/podsets" % NS
PODS = "/api/v1/namespaces/%s/pods" % NS

CONFIG = """
logLevel: info
metrics: { bindAddress: "0" }
controllers:
  - name: podset
    plugin: %s
    for: { apiVersion: demo.kctrld.io/v1, kind: PodSet }
    owns: [ { apiVersion: v1, kind: Pod } ]
    workers: 2
    isolation: %s
"""


def podset(name, replicas):
    return {
        "apiVersion": "demo.kctrld.io/v1", "kind": "PodSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "template": {
            "metadata": {"labels": {"app": name, "podset": "not-this"}, "annotations": {"team": "a"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
    }


def live_pods(c, name):
    return [p for p in c.items(PODS + "?labelSelector=podset%3D" + name)
            if not p["metadata"].get("deletionTimestamp")]


def podset_lifecycle(isolation):
    itest.require_binaries("podset")
    with taplib.Apisim(seeds=[os.path.join(ROOT, "config", "podset-crd.yaml")]) as sim:
        c = Cluster(sim)
        c.namespace(NS)
        ps = c.create(PS_PATH, podset("web", 3))
        uid = ps["metadata"]["uid"]
        rv0 = c.list_rv(PODS)
        with Kctrld(CONFIG % (itest.plugin_path("podset"), isolation), sim.kubeconfig) as k:
            # Scale up to 3, with the template and the owner reference.
            pods = wait_for(lambda: len(live_pods(c, "web")) == 3 and live_pods(c, "web"), what="3 pods", kctrld=k)
            for p in pods:
                md = p["metadata"]
                assert md["name"].startswith("web-"), md["name"]
                assert md["labels"] == {"app": "web", "podset": "web"}, md["labels"]
                assert md["annotations"] == {"team": "a"}, md.get("annotations")
                assert md["ownerReferences"] == [{"apiVersion": "demo.kctrld.io/v1", "kind": "PodSet", "name": "web",
                                                  "uid": uid, "controller": True, "blockOwnerDeletion": True}]
                assert p["spec"]["containers"][0]["image"] == "nginx:1.27"
            wait_for(lambda: (c.get(PS_PATH + "/web").get("status") or {}) == {"replicas": 3, "observedGeneration": 1},
                     what="status 3/1", kctrld=k)

            # Scale down to 1.
            c.merge_patch(PS_PATH + "/web", {"spec": {"replicas": 1}})
            wait_for(lambda: len(live_pods(c, "web")) == 1, what="1 pod", kctrld=k)
            wait_for(lambda: (c.get(PS_PATH + "/web").get("status") or {}) == {"replicas": 1, "observedGeneration": 2},
                     what="status 1/2", kctrld=k)

            # A deleted Pod is replaced.
            victim = live_pods(c, "web")[0]["metadata"]["name"]
            c.delete(PODS + "/" + victim)
            wait_for(lambda: [p["metadata"]["name"] for p in live_pods(c, "web")] not in ([], [victim])
                     and len(live_pods(c, "web")) == 1, what="replacement pod", kctrld=k)

            # Scale up to 5 again.
            c.merge_patch(PS_PATH + "/web", {"spec": {"replicas": 5}})
            wait_for(lambda: len(live_pods(c, "web")) == 5, what="5 pods", kctrld=k)
            wait_for(lambda: (c.get(PS_PATH + "/web").get("status") or {}) == {"replicas": 5, "observedGeneration": 3},
                     what="status 5/3", kctrld=k)

            # A Pod that is not ours (no owner) with the label is left alone.
            c.create(PODS, {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": "stranger", "labels": {"podset": "web"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
            time.sleep(1.0)
            assert len(live_pods(c, "web")) == 6
            assert c.get(PODS + "/stranger") is not None

            # Never overshoots: exactly 3 + 1 (replacement) + 4 creates and
            # 2 deletes by the controller (plus the test's own).
            evs = c.events_since(PODS, rv0)
            added = [e for e in evs if e["type"] == "ADDED"
                     and e["object"]["metadata"].get("ownerReferences")]
            deleted = [e for e in evs if e["type"] == "DELETED"]
            assert len(added) == 8, "creates: %d" % len(added)
            assert len(deleted) == 3, "deletes (2 scale-down + 1 by the test): %d" % len(deleted)

            # Events: one ScaledUp per create batch, one ScaledDown. They are
            # written asynchronously (the recorder's queue), so wait for them.
            def web_events():
                evts = c.items("/api/v1/namespaces/%s/events" % NS)
                reasons = sorted(e["reason"] for e in evts if e["involvedObject"].get("name") == "web")
                return evts if reasons.count("ScaledUp") >= 3 and reasons.count("ScaledDown") >= 1 else None
            evts = wait_for(web_events, what="3 ScaledUp and 1 ScaledDown Events", kctrld=k)
            time.sleep(0.5)  # nothing more may follow
            evts = c.items("/api/v1/namespaces/%s/events" % NS)
            reasons = sorted(e["reason"] for e in evts if e["involvedObject"].get("name") == "web")
            assert reasons.count("ScaledDown") == 1, reasons
            assert reasons.count("ScaledUp") == 3, reasons
            for e in evts:
                assert e["involvedObject"]["uid"] == uid and e["involvedObject"]["kind"] == "PodSet"
                # reported by the controller, as kube-controller-manager's controllers are
                assert e["source"] == {"component": "kctrld.io/podset"} and e["count"] == 1
                assert e["reportingComponent"] == "kctrld.io/podset", e
            log = k.log()
            assert len(re.findall(r"\bcreated (?:\S+=\S+ )*pod=", log)) == 8, log
            assert len(re.findall(r"\bdeleted (?:\S+=\S+ )*pod=", log)) == 2, log
            assert k.stop() == 0, k.log()


def podset_deleted_and_zero(isolation):
    itest.require_binaries("podset")
    with taplib.Apisim(seeds=[os.path.join(ROOT, "config", "podset-crd.yaml")]) as sim:
        c = Cluster(sim)
        c.namespace(NS)
        c.create(PS_PATH, podset("zero", 0))
        c.create(PS_PATH, podset("gone", 2))
        with Kctrld(CONFIG % (itest.plugin_path("podset"), isolation), sim.kubeconfig) as k:
            wait_for(lambda: len(live_pods(c, "gone")) == 2, what="2 pods", kctrld=k)
            wait_for(lambda: (c.get(PS_PATH + "/zero").get("status") or {}) == {"replicas": 0, "observedGeneration": 1},
                     what="status of the empty PodSet", kctrld=k)
            assert live_pods(c, "zero") == []
            c.delete(PS_PATH + "/gone")  # no garbage collector in the simulator: pods stay, no new ones
            time.sleep(1.0)
            assert len(live_pods(c, "gone")) == 2
            assert k.alive()
            assert k.stop() == 0, k.log()


def podset_slow_watch(isolation):
    """Every answer of the server, watch events included, 200 ms late: the
    writes of one reconcile (creates, status) are not in the cache when the
    next one runs. The key waits until they are (read your own writes), so
    the PodSet never gets a duplicate Pod; an isolated plugin's writes are
    waited for too (they go out through the daemon)."""
    itest.require_binaries("podset")
    with taplib.Apisim(seeds=[os.path.join(ROOT, "config", "podset-crd.yaml")]) as sim:
        c = Cluster(sim)
        c.namespace(NS)
        c.create(PS_PATH, podset("slow", 3))
        rv0 = c.list_rv(PODS)
        sim.control("POST", "latency", {"ms": 200, "watchEvents": True})
        cfg = (CONFIG % (itest.plugin_path("podset"), isolation)).replace('bindAddress: "0"',
                                                                           'bindAddress: "127.0.0.1:0"')
        with Kctrld(cfg, sim.kubeconfig) as k:
            wait_for(lambda: (c.get(PS_PATH + "/slow").get("status") or {}) == {"replicas": 3, "observedGeneration": 1},
                     what="status 3/1", kctrld=k)
            c.merge_patch(PS_PATH + "/slow", {"spec": {"replicas": 4}})
            wait_for(lambda: (c.get(PS_PATH + "/slow").get("status") or {}) == {"replicas": 4, "observedGeneration": 2},
                     what="status 4/2", kctrld=k)
            assert len(live_pods(c, "slow")) == 4
            snap = k.scrape()
            assert k.metric(snap, "kctrld_stale_sync_skips_total") >= 1, snap
            assert k.stop() == 0, k.log()
        sim.control("DELETE", "latency")
        added = [e for e in c.events_since(PODS, rv0) if e["type"] == "ADDED"]
        assert len(added) == 4, "creates: %d" % len(added)


def test_podset_slow_watch():
    podset_slow_watch("in-process")


def test_podset_slow_watch_isolated():
    podset_slow_watch("process")


def test_podset_lifecycle():
    podset_lifecycle("in-process")


def test_podset_lifecycle_isolated():
    podset_lifecycle("process")


def test_podset_deleted_and_zero():
    podset_deleted_and_zero("in-process")


def test_podset_deleted_and_zero_isolated():
    podset_deleted_and_zero("process")


if __name__ == "__main__":
    taplib.run_tests(globals())
