#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of the ttl plugin against kube-apisim: objects go after
their TTL and not before, others stay, an invalid TTL gets one Warning Event
and no retry storm, an already expired object goes at start."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import itest  # noqa: E402
from itest import Cluster, Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

NS = "ttl"
CMS = "/api/v1/namespaces/%s/configmaps" % NS

CONFIG = """
logLevel: debug
metrics: { bindAddress: "0" }
controllers:
  - name: ttl
    plugin: %s
    for: { apiVersion: v1, kind: ConfigMap }
    settings:
      kinds: [ { apiVersion: v1, kind: ConfigMap } ]
"""


def cm(name, ttl=None):
    md = {"name": name}
    if ttl is not None:
        md["annotations"] = {"kctrld.io/ttl": ttl}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"k": "v"}}


def exists(c, name):
    return c.get(CMS + "/" + name) is not None


def test_ttl_deletes_after_not_before():
    itest.require_binaries("ttl")
    with taplib.Apisim() as sim:
        c = Cluster(sim)
        c.namespace(NS)
        c.create(CMS, cm("expired", "1s"))
        time.sleep(1.2)
        with Kctrld(CONFIG % itest.plugin_path("ttl"), sim.kubeconfig) as k:
            # An object whose TTL passed before the daemon started goes at once.
            wait_for(lambda: not exists(c, "expired"), timeout=10, what="expired object deleted", kctrld=k)
            t0 = time.time()
            c.create(CMS, cm("short", "4s"))
            c.create(CMS, cm("mixed", "1h30m"))
            c.create(CMS, cm("none"))
            c.create(CMS, cm("bad", "soon"))
            # creationTimestamp has second precision (truncated): the TTL can
            # end up to 1 s before t0 + 4 s, never before t0 + 3 s.
            while time.time() < t0 + 2.8:
                assert exists(c, "short"), "deleted %.1f s after creation" % (time.time() - t0)
                time.sleep(0.2)
            wait_for(lambda: not exists(c, "short"), timeout=6, what="short deleted", kctrld=k)
            took = time.time() - t0
            assert took < 7.0, took
            time.sleep(1.0)
            for name in ("mixed", "none", "bad"):
                assert exists(c, name), name
            # Events are written asynchronously (the recorder's queue).
            evts = wait_for(lambda: [e for e in c.items("/api/v1/namespaces/%s/events" % NS)
                                     if e["reason"] == "InvalidTTL"], what="InvalidTTL Event", kctrld=k)
            assert len(evts) == 1, evts
            assert evts[0]["type"] == "Warning" and evts[0]["involvedObject"]["name"] == "bad"
            assert "soon" in evts[0]["message"]
            log = k.log()
            # requeue-after, not polling: "mixed" and "short" reconciled once
            # or twice each, never in a loop; "bad" not retried.
            assert len(re.findall(r"\binvalid ttl (?:\S+=\S+ )*object=ttl/bad\b", log)) == 1, log
            assert len(re.findall(r"\bdeleted (?:\S+=\S+ )*object=ttl/short\b", log)) == 1, log
            assert k.stop() == 0, k.log()


def test_ttl_fixed_annotation_and_recreate():
    itest.require_binaries("ttl")
    with taplib.Apisim() as sim:
        c = Cluster(sim)
        c.namespace(NS)
        c.create(CMS, cm("later", "bad"))
        with Kctrld(CONFIG % itest.plugin_path("ttl"), sim.kubeconfig) as k:
            wait_for(lambda: re.search(r"\binvalid ttl (?:\S+=\S+ )*object=ttl/later\b", k.log()), timeout=10, what="warning", kctrld=k)
            # Fixing the annotation is an update: the key comes back and goes.
            c.merge_patch(CMS + "/later", {"metadata": {"annotations": {"kctrld.io/ttl": "1s"}}})
            wait_for(lambda: not exists(c, "later"), timeout=10, what="fixed object deleted", kctrld=k)
            assert k.stop() == 0, k.log()


if __name__ == "__main__":
    taplib.run_tests(globals())
