#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Update strategies of desired-state children (docs/hooks.md "Desired
state"), against kube-apisim, whose ConfigMaps with `immutable: true` refuse
a change of their data with a 422 as the API server does: a desired-state
hook keeps an immutable copy of a ConfigMap's data. With `updateStrategy:
Recreate` a changed source deletes the copy (uid precondition) and the next
reconcile creates it anew with the new data; with the default InPlace the
refused apply is an error naming the child, and the copy stays."""
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import taplib  # noqa: E402

NS = "default"
CMS = "/api/v1/namespaces/%s/configmaps" % NS

HOOK = r'''
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    src = req["object"]
    children = [] if src["metadata"]["name"].endswith("-copy") else [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": src["metadata"]["name"] + "-copy"},
         "immutable": True, "data": src.get("data", {})}]
    print(json.dumps({"children": children}), flush=True)
'''

CONFIG = """
logLevel: info
metrics: { bindAddress: "0" }
controllers:
  - name: copier
    for: { apiVersion: v1, kind: ConfigMap }
    owns: [ { apiVersion: v1, kind: ConfigMap%s } ]
    rateLimit: { baseDelay: 20ms, maxDelay: 1s }
    hook:
      style: desired
      exec: { command: [%s, %s] }
"""


def copy_of(sim):
    st, doc = sim.json("GET", CMS + "/src-copy")
    return doc if st == 200 else None


def run(strategy):
    tmp = tempfile.mkdtemp(prefix="kctrld-recreate-")
    hook = os.path.join(tmp, "copier.py")
    with open(hook, "w") as f:
        f.write(HOOK)
    with taplib.Apisim() as sim:
        sim.json("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "src"},
                              "data": {"k": "1"}}, expect=201)
        extra = ", updateStrategy: %s" % strategy if strategy else ""
        with taplib.Kctrld(CONFIG % (extra, sys.executable, hook), sim.kubeconfig) as k:
            first = taplib.wait_for(lambda: copy_of(sim), what="the copy")
            assert first["data"] == {"k": "1"} and first.get("immutable") is True, first
            st, src = sim.json("GET", CMS + "/src")
            src["data"] = {"k": "2"}
            sim.json("PUT", CMS + "/src", src, expect=200)
            if strategy == "Recreate":
                again = taplib.wait_for(lambda: (copy_of(sim) or {}).get("data") == {"k": "2"} and copy_of(sim),
                                        what="the copy recreated with the new data")
                assert again["metadata"]["uid"] != first["metadata"]["uid"], again
                assert re.search(r"recreating v1 ConfigMap default/src-copy: .*immutable", k.log()), k.log()
            else:
                taplib.wait_for(lambda: re.search(r"apply v1 ConfigMap default/src-copy: .*field is immutable",
                                                  k.log()), what="the refused apply reported")
                assert copy_of(sim)["metadata"]["uid"] == first["metadata"]["uid"]
                assert copy_of(sim)["data"] == {"k": "1"}


def test_recreate_replaces_an_immutable_child():
    run("Recreate")


def test_in_place_reports_an_immutable_child():
    run(None)


if __name__ == "__main__":
    taplib.run_tests(globals())
