#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A cluster-scoped owner with namespaced children (docs/config.md `owns`),
against kube-apisim, resync off: a controller `for: Namespace` that
`owns: [ConfigMap]` runs tests/integration/plugins/nsowner.c, which keeps a
ConfigMap "owned" (controller ownerReference to the Namespace) in every
Namespace labelled test.kctrld.io/nsowner=yes, setting the key's
expectations before each create. Events of the ConfigMaps map to the key
`name` of their Namespace; nothing else would wake the key.

Checked, each step waiting on the plugin's log lines or the simulator's
state with a deadline:
  - expectations: with the ConfigMap watch stalled (simulator fault), the
    first create's event cannot reach the cache; a change of the Namespace
    wakes the key, which finds the child missing but its creation expected,
    and waits instead of creating it twice; once the watch delivers, the
    ADDED event observes the creation and the key finds the child present;
  - a child deleted by hand is created again within 5 s (one more POST,
    no 409);
  - a `watches` entry whose label names a Namespace wakes that key from a
    ConfigMap in another namespace;
  - deleting the owner (the simulator empties its namespace) reconciles the
    key once more, which finds the owner gone; nothing is created again.
Run twice: in process, and with `isolation: process` (the plugin's cache
reads, expectations and creates cross its child's pipe).
"""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import ROOT, Apisim, run_tests, wait_for  # noqa: E402

CONFIG = """logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { apiVersion: v1, kind: Namespace }
  - { apiVersion: v1, kind: ConfigMap, streamingList: "off", watchInactivityTimeout: 2s }
controllers:
  - name: nsowner
    plugin: %(so)s
    for: { apiVersion: v1, kind: Namespace }
    owns: [ { apiVersion: v1, kind: ConfigMap } ]
    # What this test checks is the plugin's own expectations while the
    # ConfigMap watch is stalled; the wait for observed writes would hold
    # the key instead (until its 10 s timeout).
    readYourOwnWrites: false
    watches:
      - apiVersion: v1
        kind: ConfigMap
        mapping: { label: test.kctrld.io/namespace }
    rateLimit: { baseDelay: 50ms, maxDelay: 1s }
"""

CHILDREN = "/api/v1/namespaces/%s/configmaps"
LABEL = "test.kctrld.io/nsowner"


def namespace(sim, name, labels=None):
    st, doc = sim.json("POST", "/api/v1/namespaces",
                       {"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": name, "labels": labels or {}}})
    assert st == 201, (st, doc)
    return doc["metadata"]["uid"]


def child(sim, ns):
    st, doc = sim.json("GET", CHILDREN % ns + "/owned")
    return doc if st == 200 else None


def posts(sim, ns):
    """Status codes of the creates of ConfigMaps in namespace ns, in order."""
    return [r["code"] for r in sim.control("GET", "requests")["requests"]
            if r["method"] == "POST" and r["path"] == CHILDREN % ns]


def count(k, what, key="team-a"):
    """Lines of the plugin's decision `what` for key."""
    return len(re.findall(r"plugin\[nsowner/[a-z]+\]: %s .*\bkey=%s(?:\s|$)" % (what, re.escape(key)),
                          k.log(), re.M))


def test_namespace_owns_configmaps():
    namespace_owns_configmaps(CONFIG)


def test_namespace_owns_configmaps_isolated():
    """The same with the plugin in a child process (isolation: process: its
    cache reads, expectations and creates cross the child's pipe)."""
    namespace_owns_configmaps(CONFIG.replace("    rateLimit:", "    isolation: process\n    rateLimit:"))


def namespace_owns_configmaps(config):
    tmp = tempfile.mkdtemp(prefix="kctrld-owner-scope-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "nsowner.c"), tmp)
    with Apisim() as sim:
        uid = namespace(sim, "team-a", {LABEL: "yes"})
        namespace(sim, "team-b")
        # ConfigMap watches answer 200 and then nothing until the fault is cleared.
        sim.control("POST", "faults", {"action": "stall", "count": -1, "watch": True,
                                       "pathPrefix": "/api/v1/configmaps"})
        with taplib.Kctrld(config % {"so": so}, sim.kubeconfig, dir=os.path.join(tmp, "run")) as k:
            try:
                wait_for(lambda: count(k, "created") or not k.alive(), what="the first create")
                cm = child(sim, "team-a")
                ref = cm["metadata"]["ownerReferences"][0]
                assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == \
                    ("Namespace", "team-a", uid, True), cm

                # expectations: the Namespace changes while the create's event is held back
                st, doc = sim.json("PATCH", "/api/v1/namespaces/team-a",
                                   {"metadata": {"annotations": {"poke": "1"}}},
                                   headers={"Content-Type": "application/merge-patch+json"})
                assert st == 200, (st, doc)
                wait_for(lambda: count(k, "waiting") or not k.alive(),
                         what="the key to wait for its expected creation")
                sim.control("DELETE", "faults")
                wait_for(lambda: count(k, "present") or not k.alive(),
                         what="the ADDED event to observe the creation")
                assert posts(sim, "team-a") == [201], posts(sim, "team-a")
                assert count(k, "created") == 1, k.log()[-3000:]
                assert posts(sim, "team-b") == []  # not labelled

                # a child deleted by hand comes back within 5 s, created once
                st, doc = sim.json("DELETE", CHILDREN % "team-a" + "/owned")
                assert st == 200, (st, doc)
                t0 = time.monotonic()
                wait_for(lambda: (child(sim, "team-a") or {}).get("metadata", {}).get("uid") not in
                         (None, cm["metadata"]["uid"]), timeout=5, what="the child re-created within 5 s")
                print("# child re-created %.2f s after its deletion" % (time.monotonic() - t0), flush=True)
                wait_for(lambda: count(k, "created") == 2 or not k.alive(), what="the second create")
                assert posts(sim, "team-a") == [201, 201], posts(sim, "team-a")

                # watches: a ConfigMap in team-b labelled with the Namespace's name
                present = count(k, "present")
                st, doc = sim.json("POST", CHILDREN % "team-b",
                                   {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "pointer", "labels": {"test.kctrld.io/namespace": "team-a"}}})
                assert st == 201, (st, doc)
                wait_for(lambda: count(k, "present") > present or not k.alive(),
                         what="the watched ConfigMap to wake team-a")

                # the owner goes: its namespace is emptied, the key finds it gone
                st, doc = sim.json("DELETE", "/api/v1/namespaces/team-a")
                assert st == 200, (st, doc)
                wait_for(lambda: count(k, "owner gone") or not k.alive(), what="the owner's deletion")
                assert child(sim, "team-a") is None
                assert [c for c in posts(sim, "team-a") if c == 201] == [201, 201], posts(sim, "team-a")
                assert "key=team-a/" not in k.log(), k.log()[-3000:]  # never a namespaced key
                assert k.alive(), k.log()[-3000:]
            except AssertionError:
                sys.stderr.write("# kctrld log:\n" + "".join("# " + ln + "\n" for ln in k.log().splitlines()[-40:]))
                raise
            assert k.stop() == 0, k.log()[-3000:]


if __name__ == "__main__":
    run_tests(globals())
