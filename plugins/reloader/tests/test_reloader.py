#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of the reloader plugin against kube-apisim: the config
hash of an annotated Deployment is set, follows changes of the ConfigMaps and
Secrets it references (woken through field indexes and `watches`), ignores
unrelated objects and leaves Deployments without the annotation alone. The
expected hash is recomputed here from the documented algorithm."""
import json
import os
import re
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import itest  # noqa: E402
from itest import Cluster, Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

NS = "rl"
CMS = "/api/v1/namespaces/%s/configmaps" % NS
SECRETS = "/api/v1/namespaces/%s/secrets" % NS
DEPLOYS = "/apis/apps/v1/namespaces/%s/deployments" % NS
HASH = "kctrld.io/config-hash"

CONFIG = """
logLevel: info
metrics: { bindAddress: "0" }
informers:
  - apiVersion: apps/v1
    kind: Deployment
    indexes:
      configMaps:
        - spec.template.spec.volumes[].configMap.name
        - spec.template.spec.containers[].envFrom[].configMapRef.name
      secrets:
        - spec.template.spec.volumes[].secret.secretName
        - spec.template.spec.containers[].env[].valueFrom.secretKeyRef.name
controllers:
  - name: reloader
    plugin: %s
    for: { apiVersion: apps/v1, kind: Deployment }
    watches:
      - { apiVersion: v1, kind: ConfigMap, mapping: { index: configMaps } }
      - { apiVersion: v1, kind: Secret, mapping: { index: secrets } }
    settings: { requeueMissing: 0s }
"""


# --- the documented hash, recomputed ---
def fnv(h, data):
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def field(h, data):
    if isinstance(data, str):
        data = data.encode()
    return fnv(fnv(h, struct.pack("<Q", len(data))), data)


def raw(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def expected_hash(c, configmaps, secrets):
    h = 0xcbf29ce484222325
    for kind, path, names in (("ConfigMap", CMS, configmaps), ("Secret", SECRETS, secrets)):
        for name in sorted(set(names)):
            o = c.get(path + "/" + name)
            h = field(field(h, kind), name)
            if o is None:
                h = field(h, "absent")
                continue
            for member in ("data", "binaryData"):
                h = field(h, member)
                for k in sorted((o.get(member) or {}).keys(), key=lambda s: raw(s).encode()):
                    h = field(h, raw(k))
                    h = field(h, raw(o[member][k]))
    return "%016x" % h


def deployment(name, reload, cm_env, cm_vol, secret):
    md = {"name": name}
    if reload:
        md["annotations"] = {"kctrld.io/reload": "true"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": md,
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "volumes": [{"name": "v", "configMap": {"name": cm_vol}}],
                     "containers": [{"name": "c", "image": "nginx",
                                     "envFrom": [{"configMapRef": {"name": cm_env}}],
                                     "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": secret, "key": "p"}}}]}]}}},
    }


def rolled(log):
    """Roll lines for rl/web (the reconcile's controller= and reconcileID=
    come between the text and the plugin's fields)."""
    return len(re.findall(r"\brolled (?:\S+=\S+ )*deployment=rl/web ", log))


def hash_of(c, name):
    d = c.get(DEPLOYS + "/" + name)
    return ((d["spec"]["template"].get("metadata") or {}).get("annotations") or {}).get(HASH)


def test_reloader_follows_configmaps_and_secrets():
    itest.require_binaries("reloader")
    with taplib.Apisim() as sim:
        c = Cluster(sim)
        c.namespace(NS)
        c.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "env"},
                       "data": {"b": "2", "a": "1"}})
        c.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}, "data": {"x": "y"}})
        c.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pw"}, "data": {"p": "cGFzcw=="}})
        c.create(DEPLOYS, deployment("web", True, "env", "files", "pw"))
        c.create(DEPLOYS, deployment("plain", False, "env", "files", "pw"))
        refs = (["env", "files"], ["pw"])
        with Kctrld(CONFIG % itest.plugin_path("reloader"), sim.kubeconfig) as k:
            h1 = wait_for(lambda: hash_of(c, "web"), what="hash set", kctrld=k)
            assert h1 == expected_hash(c, *refs), (h1, expected_hash(c, *refs))

            # A referenced ConfigMap changes (envFrom): new hash.
            c.merge_patch(CMS + "/env", {"data": {"a": "changed"}})
            h2 = wait_for(lambda: hash_of(c, "web") not in (None, h1) and hash_of(c, "web"), what="hash after env change",
                          kctrld=k)
            assert h2 == expected_hash(c, *refs)

            # The missing volume ConfigMap appears: woken through its index.
            c.create(CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "files"},
                           "binaryData": {"f": "AAEC"}})
            h3 = wait_for(lambda: hash_of(c, "web") not in (h1, h2) and hash_of(c, "web"), what="hash after create",
                          kctrld=k)
            assert h3 == expected_hash(c, *refs)

            # The Secret changes.
            c.merge_patch(SECRETS + "/pw", {"data": {"p": "bmV3"}})
            h4 = wait_for(lambda: hash_of(c, "web") not in (h1, h2, h3) and hash_of(c, "web"),
                          what="hash after secret change", kctrld=k)
            assert h4 == expected_hash(c, *refs)

            # Unrelated changes and label-only changes leave it alone.
            gen = c.get(DEPLOYS + "/web")["metadata"].get("generation")
            c.merge_patch(CMS + "/other", {"data": {"x": "z"}})
            c.merge_patch(CMS + "/env", {"metadata": {"labels": {"l": "1"}}})
            time.sleep(1.5)
            assert hash_of(c, "web") == h4
            assert c.get(DEPLOYS + "/web")["metadata"].get("generation") == gen
            assert hash_of(c, "plain") is None
            log = k.log()
            assert rolled(log) == 4, log
            assert "deployment=rl/plain" not in log

            # A cache behind the server never rolls. The Deployments' watch
            # is stalled (reconnected to a watch that sends nothing), the
            # Deployment changes on the server, then a ConfigMap it uses: the
            # reloader sees the ConfigMap change with the old Deployment, its
            # conditional patch gets 409, and it waits. Once the watch
            # resumes, it rolls once from the current object.
            sim.control("POST", "faults", {"action": "stall", "watch": True, "count": 1,
                                           "pathPrefix": "/apis/apps/v1/"})
            sim.control("POST", "drop-watches")
            wait_for(lambda: all(f["remaining"] == 0 for f in sim.control("GET", "faults")["faults"]),
                     what="the stalled watch", kctrld=k)
            c.merge_patch(DEPLOYS + "/web", {"metadata": {"labels": {"touched": "1"}}})
            c.merge_patch(CMS + "/env", {"data": {"a": "again"}})
            wait_for(lambda: any(r["method"] == "PATCH" and r["path"] == DEPLOYS + "/web" and r["code"] == 409
                                 for r in sim.control("GET", "requests")["requests"]),
                     what="a conflicting patch from the stale view", kctrld=k)
            assert hash_of(c, "web") == h4
            assert rolled(k.log()) == 4, k.log()
            sim.control("POST", "drop-watches")
            h5 = wait_for(lambda: hash_of(c, "web") not in (h1, h2, h3, h4) and hash_of(c, "web"),
                          what="hash once the watch resumed", kctrld=k)
            assert h5 == expected_hash(c, *refs)
            assert rolled(k.log()) == 5, k.log()
            assert k.stop() == 0, k.log()


if __name__ == "__main__":
    taplib.run_tests(globals())
