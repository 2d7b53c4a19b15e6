#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two informers of the same kind in different namespaces (docs/config.md
"informers", `name:` and `namespaces:`), each the `for:` informer of its own
controller (`informer: NAME`), against kube-apisim.

Both controllers run tests/integration/plugins/stamp.c, which reads the key's
ConfigMap from the cache and stamps it with its `settings.identity`: each
controller must stamp the ConfigMaps of its own namespace, and only those.
The plugin's cache reads go through the daemon's cache view for the kind
(daemon.c), which must find the object in whichever informer holds it, not
only in the first informer of the kind.

A `watches` entry may name the other informer too: a ConfigMap in team-b
whose annotation names team-a/target enqueues that key of a controller
whose `for` is the team-a informer (counted in
controller_runtime_reconcile_total).
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import ROOT, Apisim, run_tests, wait_for  # noqa: E402

CONFIG = """metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { name: cm-a, apiVersion: v1, kind: ConfigMap, namespaces: [team-a] }
  - { name: cm-b, apiVersion: v1, kind: ConfigMap, namespaces: [team-b] }
controllers:
  - name: stamp-a
    plugin: %(so)s
    for: { apiVersion: v1, kind: ConfigMap, informer: cm-a }
    settings: { identity: a }
  - name: stamp-b
    plugin: %(so)s
    for: { apiVersion: v1, kind: ConfigMap, informer: cm-b }
    settings: { identity: b }
"""

WATCH_CONFIG = """metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { name: cm-a, apiVersion: v1, kind: ConfigMap, namespaces: [team-a] }
  - { name: cm-b, apiVersion: v1, kind: ConfigMap, namespaces: [team-b] }
controllers:
  - name: w
    plugin: %(so)s
    for: { apiVersion: v1, kind: ConfigMap, informer: cm-a }
    watches:
      - apiVersion: v1
        kind: ConfigMap
        informer: cm-b
        mapping: { annotation: test.kctrld.io/target }
    settings: { identity: w }
"""

STAMP = "test.kctrld.io/stamp"


def namespace(sim, ns):
    code, _, body = sim.request("POST", "/api/v1/namespaces",
                                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    assert code == 201, (code, body)


def cm(sim, ns, name, seq):
    code, _, body = sim.request("POST", "/api/v1/namespaces/%s/configmaps" % ns,
                                {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": name}, "data": {"seq": seq}})
    assert code == 201, (code, body)


def stamp(sim, ns, name):
    _, body = sim.json("GET", "/api/v1/namespaces/%s/configmaps/%s" % (ns, name), expect=200)
    return ((body.get("metadata") or {}).get("annotations") or {}).get(STAMP)


def test_second_named_informer_reconciles():
    second_named_informer(CONFIG)


def test_second_named_informer_isolated():
    """The same with the second controller's plugin in a child process
    (isolation: process, whose cache reads the daemon answers)."""
    second_named_informer(CONFIG.replace("    settings: { identity: b }",
                                         "    isolation: process\n    settings: { identity: b }"))


def second_named_informer(config):
    tmp = tempfile.mkdtemp(prefix="kctrld-twoinf-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "stamp.c"), tmp)
    with Apisim() as sim:
        namespace(sim, "team-a")
        namespace(sim, "team-b")
        cm(sim, "team-a", "before", "1")
        cm(sim, "team-b", "before", "1")
        with taplib.Kctrld(config % {"so": so}, sim.kubeconfig, dir=os.path.join(tmp, "run")) as k:
            try:
                wait_for(lambda: stamp(sim, "team-a", "before") == "a/1" or not k.alive(),
                         what="stamp-a to stamp team-a/before")
                wait_for(lambda: stamp(sim, "team-b", "before") == "b/1" or not k.alive(),
                         what="stamp-b to stamp team-b/before")
                # Objects created after the sync (watch events) too.
                cm(sim, "team-a", "after", "2")
                cm(sim, "team-b", "after", "2")
                wait_for(lambda: stamp(sim, "team-b", "after") == "b/2" or not k.alive(),
                         what="stamp-b to stamp team-b/after")
                wait_for(lambda: stamp(sim, "team-a", "after") == "a/2" or not k.alive(),
                         what="stamp-a to stamp team-a/after")
                assert k.alive(), k.log()[-3000:]
                # Each controller saw only its own informer's namespace.
                log = k.log()
                assert "stamp=b/" not in "".join(l for l in log.splitlines() if "key=team-a/" in l), log[-3000:]
                assert "stamp=a/" not in "".join(l for l in log.splitlines() if "key=team-b/" in l), log[-3000:]
            except AssertionError:
                sys.stderr.write("# kctrld log:\n" + "".join("# " + l + "\n" for l in k.log().splitlines()[-40:]))
                raise
            assert k.stop() == 0, k.log()[-3000:]


def reconciles(k, controller):
    return taplib.Kctrld.metric(k.scrape(), "controller_runtime_reconcile_total",
                                'controller="%s"' % controller)


def test_watches_on_the_second_named_informer():
    tmp = tempfile.mkdtemp(prefix="kctrld-twoinf-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "stamp.c"), tmp)
    with Apisim() as sim:
        namespace(sim, "team-a")
        namespace(sim, "team-b")
        cm(sim, "team-a", "target", "1")
        with taplib.Kctrld(WATCH_CONFIG % {"so": so}, sim.kubeconfig, dir=os.path.join(tmp, "run")) as k:
            try:
                wait_for(lambda: stamp(sim, "team-a", "target") == "w/1" or not k.alive(),
                         what="w to stamp team-a/target")
                # The stamp's own update reconciles once more (nothing to do).
                wait_for(lambda: reconciles(k, "w") >= 2, what="the reconcile after the stamp")
                before = reconciles(k, "w")
                code, _, body = sim.request(
                    "POST", "/api/v1/namespaces/team-b/configmaps",
                    {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "pointer",
                                  "annotations": {"test.kctrld.io/target": "team-a/target"}}})
                assert code == 201, (code, body)
                wait_for(lambda: reconciles(k, "w") > before or not k.alive(),
                         what="the watch event on cm-b to enqueue team-a/target")
                assert k.alive(), k.log()[-3000:]
                assert "key=team-b/" not in k.log(), k.log()[-3000:]
            except AssertionError:
                sys.stderr.write("# kctrld log:\n" + "".join("# " + l + "\n" for l in k.log().splitlines()[-40:]))
                raise
            assert k.stop() == 0, k.log()[-3000:]


if __name__ == "__main__":
    run_tests(globals())
