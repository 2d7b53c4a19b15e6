# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the example plugins' integration tests
(plugins/NAME/tests/test_NAME.py): start build/kctrld with a config against
a running kube-apisim (tests/integration/taplib.py), and small cluster
helpers over plain HTTP.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import taplib  # noqa: E402

BUILD = taplib.BUILD


def plugin_path(name):
    return os.path.join(BUILD, "plugins", name + ".so")


def require_binaries(*plugins):
    for p in [os.path.join(BUILD, "kctrld"), os.path.join(BUILD, "kube-apisim")] + [plugin_path(n) for n in plugins]:
        if not os.access(p, os.X_OK if not p.endswith(".so") else os.R_OK):
            raise taplib.Skip("%s not built" % p)


# build/kctrld with a config against a running simulator (taplib.Kctrld).
Kctrld = taplib.Kctrld


class Cluster:
    """JSON helpers on an Apisim (plain HTTP)."""

    def __init__(self, sim):
        self.sim = sim

    def get(self, path):
        st, doc = self.sim.json("GET", path)
        return doc if st == 200 else None

    def create(self, path, obj):
        st, doc = self.sim.json("POST", path, obj)
        if st != 201:
            raise AssertionError("POST %s: %d %s" % (path, st, doc))
        return doc

    def merge_patch(self, path, patch):
        st, doc = self.sim.json("PATCH", path, json.dumps(patch),
                                headers={"Content-Type": "application/merge-patch+json"})
        if st != 200:
            raise AssertionError("PATCH %s: %d %s" % (path, st, doc))
        return doc

    def delete(self, path):
        st, doc = self.sim.json("DELETE", path)
        if st not in (200, 202):
            raise AssertionError("DELETE %s: %d %s" % (path, st, doc))
        return doc

    def items(self, path):
        doc = self.get(path)
        return doc["items"] if doc else []

    def namespace(self, name):
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def list_rv(self, path):
        return self.get(path)["metadata"]["resourceVersion"]

    def events_since(self, path, rv, timeout=1.5):
        """Watch events of path (a collection) after resourceVersion rv,
        read for `timeout` seconds (the simulator keeps a history)."""
        sep = "&" if "?" in path else "?"
        st, evs = self.sim.watch("%s%swatch=1&resourceVersion=%s" % (path, sep, rv), timeout=timeout)
        if st != 200:
            raise AssertionError("watch %s: %d %s" % (path, st, evs))
        return [e for e in evs if e.get("type") in ("ADDED", "MODIFIED", "DELETED")]


def wait_for(pred, timeout=20.0, what="condition", kctrld=None):
    try:
        return taplib.wait_for(pred, timeout=timeout, interval=0.1, what=what)
    except AssertionError:
        if kctrld is not None:
            sys.stdout.write("".join("# " + l + "\n" for l in kctrld.log().splitlines()[-40:]))
        raise


def now():
    return time.time()
