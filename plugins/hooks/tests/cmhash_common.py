# SPDX-License-Identifier: Apache-2.0
"""What the cmhash hook tests share (test_cmhash.py: the exec hook,
test_cmhash_webhook.py: the webhook): the daemon config around the hook
section, the expected label, the cluster setup, and the create / update /
409-conflict sequence both implementations must pass the same way."""
import hashlib
import json
import os
import re
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import itest  # noqa: E402
from itest import Cluster, wait_for  # noqa: E402

NS = "cmh"
CMS = "/api/v1/namespaces/%s/configmaps" % NS
LABEL = "kctrld.io/config-hash"

CONFIG = """
logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - apiVersion: v1
    kind: ConfigMap
    namespaces: [%(ns)s]
controllers:
  - name: cmhash
    for: { apiVersion: v1, kind: ConfigMap }
    workers: 2
    rateLimit: { baseDelay: 50ms, maxDelay: 2s }
    hook:
%(hook)s"""


def config(hook):
    """The daemon config with hook (the YAML under `hook:`, indented 6)."""
    return CONFIG % {"ns": NS, "hook": hook}


def want_hash(cm):
    doc = {"binaryData": cm.get("binaryData") or {}, "data": cm.get("data") or {}}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def label_of(c, name):
    cm = c.get(CMS + "/" + name)
    return cm and (cm["metadata"].get("labels") or {}).get(LABEL)


def labelled(c, name):
    cm = c.get(CMS + "/" + name)
    return cm is not None and (cm["metadata"].get("labels") or {}).get(LABEL) == want_hash(cm)


def cm(name, data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def readyz(k):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % k.metrics_port(), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read().decode(errors="replace"))


def cluster(sim, first):
    """The test namespace with one ConfigMap in it."""
    itest.require_binaries()
    c = Cluster(sim)
    c.namespace(NS)
    c.create(CMS, cm(first, {"k": "1"}))
    return c


def labels_and_survives_conflict(sim, c, k):
    """The ConfigMap "a" of cluster(sim, "a") is labelled, so is a new "b";
    updating "a" changes its label; a 409 on the hook's next PATCH of "b"
    requeues it and the retry succeeds."""
    wait_for(lambda: labelled(c, "a"), what="a labelled", kctrld=k)
    c.create(CMS, cm("b", {"x": "y"}))
    wait_for(lambda: labelled(c, "b"), what="b labelled", kctrld=k)
    h1 = label_of(c, "a")
    c.merge_patch(CMS + "/a", {"data": {"k": "2"}})
    wait_for(lambda: label_of(c, "a") not in (None, h1) and labelled(c, "a"), what="a relabelled", kctrld=k)
    sim.control("POST", "faults", {"action": "status", "code": 409, "count": 1, "method": "PATCH",
                                   "pathPrefix": CMS + "/b"})
    b = c.get(CMS + "/b")
    b["data"] = {"x": "z"}
    sim.json("PUT", CMS + "/b", b, expect=200)  # (a PUT: the fault waits for the hook's PATCH)
    wait_for(lambda: labelled(c, "b"), what="b relabelled after the conflict", kctrld=k)
    reqs = [r for r in sim.control("GET", "requests")["requests"]
            if r["method"] == "PATCH" and r["path"] == CMS + "/b"]
    assert [r["code"] for r in reqs][-2:] == [409, 200], reqs
    assert re.search(r"conflict .*requeue", k.log()), k.log()
