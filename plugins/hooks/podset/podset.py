#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The podset controller as a desired-state hook (docs/hooks.md "Desired
state"): a PodSet has spec.replicas Pods NAME-0, NAME-1, ... built from
spec.template, and its status counts the Pods it has. The daemon applies
them, deletes the others and writes the status. Being deleted, it keeps no
Pod and is finalized once they are gone."""
import json
import sys


def sync(req):
    ps, pods = req["object"], req["children"]["Pod.v1"]
    name, spec = ps["metadata"]["name"], ps.get("spec", {})
    template = spec.get("template", {})
    labels = dict(template.get("metadata", {}).get("labels", {}), podset=name)
    replicas = 0 if req.get("finalizing") else spec.get("replicas", 1)
    children = [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "%s-%d" % (name, i), "labels": labels},
                 "spec": template.get("spec", {})} for i in range(replicas)]
    status = {"replicas": len(pods), "observedGeneration": ps["metadata"].get("generation", 0)}
    return {"apiVersion": "kctrld.io/hook/v1", "children": children, "status": status,
            "finalized": bool(req.get("finalizing")) and not pods}


for line in sys.stdin:
    print(json.dumps(sync(json.loads(line))), flush=True)
