#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`kctrld rbac` against kube-apisim --rbac: the generated RBAC of a demo-like
config (podset, reloader, ttl, leader election) is sufficient (every
controller does its job as the ServiceAccount, no request is denied) and
minimal (without any one of its rules some request gets a 403, kctrld's log
names the verb, resource and namespace or cluster scope of it, and the
controllers that do not need the rule keep working; the informers' `get` is
used by the history check after a failed watch connection). Also the simulator's own
RBAC semantics that kctrld does not exercise (resourceNames, RoleBinding to
a ClusterRole, subresources, `*`)."""
import copy
import json
import os
import subprocess
import tempfile

import taplib

ROOT = taplib.ROOT
BUILD = taplib.BUILD
KCTRLD = os.path.join(BUILD, "kctrld")
ADMIN = "admin-token"
SA_TOKEN = "kctrld-sa-token"
SA_USER = "system:serviceaccount:kctrld:kctrld"
NS = "demo"


def wait_for(pred, timeout=20.0, what="condition", kctrld=None):
    try:
        return taplib.wait_for(pred, timeout=timeout, what=what)
    except AssertionError as e:
        raise AssertionError("%s\nkctrld log (end):\n%s" % (e, kctrld.log()[-3000:] if kctrld else ""))


def plugin(name):
    return os.path.join(BUILD, "plugins", name + ".so")


CONFIG = """
logLevel: info
metrics: {{ bindAddress: "0" }}
leaderElection: {{ enabled: true, namespace: kctrld, name: kctrld }}
informers:
  - apiVersion: v1
    kind: Pod
  - apiVersion: apps/v1
    kind: Deployment
    indexes:
      configMaps: ["spec.template.spec.volumes[].configMap.name"]
      secrets: ["spec.template.spec.volumes[].secret.secretName"]
controllers:
  - name: podset
    plugin: {podset}
    for: {{ apiVersion: demo.kctrld.io/v1, kind: PodSet }}
    owns: [ {{ apiVersion: v1, kind: Pod }} ]
  - name: reloader
    plugin: {reloader}
    for: {{ apiVersion: apps/v1, kind: Deployment }}
    watches:
      - {{ apiVersion: v1, kind: ConfigMap, mapping: {{ index: configMaps }} }}
      - {{ apiVersion: v1, kind: Secret, mapping: {{ index: secrets }} }}
  - name: ttl
    plugin: {ttl}
    for: {{ apiVersion: v1, kind: ConfigMap }}
    settings:
      kinds: [ {{ apiVersion: v1, kind: ConfigMap }} ]
"""


class Admin:
    """The simulator's JSON helper with the superuser's token."""

    def __init__(self, sim):
        self.sim = sim

    def json(self, method, path, body=None, headers=None, expect=None):
        h = dict(headers or {})
        h["Authorization"] = "Bearer " + ADMIN
        return self.sim.json(method, path, body, headers=h, expect=expect)

    def sa(self, method, path, body=None, token=SA_TOKEN):
        return self.sim.json(method, path, body, headers={"Authorization": "Bearer " + token})


def resource_path(doc):
    group, _, version = doc["apiVersion"].rpartition("/")
    base = "/apis/%s/%s" % (group, version) if group else "/api/" + version
    plural = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles", "Role": "roles",
              "ClusterRoleBinding": "clusterrolebindings", "RoleBinding": "rolebindings"}[doc["kind"]]
    ns = doc["metadata"].get("namespace")
    return base + ("/namespaces/%s/" % ns if ns else "/") + plural


def generate(config_path):
    out = subprocess.run([KCTRLD, "rbac", "--config", config_path], capture_output=True, text=True)
    assert out.returncode == 0, out
    assert out.stderr == "", out.stderr  # every plugin declares its permissions
    import yaml
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def rules_of(docs):
    """(document index, rule index) of every rule."""
    return [(i, j) for i, d in enumerate(docs) if d["kind"] in ("Role", "ClusterRole")
            for j in range(len(d["rules"]))]


def without(docs, which):
    docs = copy.deepcopy(docs)
    i, j = which
    del docs[i]["rules"][j]
    return docs


def podset(name, replicas):
    return {"apiVersion": "demo.kctrld.io/v1", "kind": "PodSet", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": name}},
                                                         "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def deployment(name, cm):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "annotations": {"kctrld.io/reload": "true"}},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}],
                                           "volumes": [{"name": "v", "configMap": {"name": cm}}]}}}}


class World:
    """A simulator with --rbac, the CRD, namespaces, objects for every
    controller, the given RBAC documents, and kctrld as the ServiceAccount."""

    def __init__(self, docs):
        self.tmp = tempfile.mkdtemp(prefix="kctrld-rbac-")
        tokens = os.path.join(self.tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write("# token,user,uid\n%s,%s,uid-1\n" % (SA_TOKEN, SA_USER))
        self.sim = taplib.Apisim("--token", ADMIN, "--rbac", "--token-auth-file", tokens,
                                 seeds=[os.path.join(ROOT, "config", "podset-crd.yaml")])
        self.a = Admin(self.sim)
        for ns in ("kctrld", NS):
            self.a.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": ns}}, expect=201)
        for d in docs:
            self.a.json("POST", resource_path(d), d, expect=201)
        self.a.json("POST", "/apis/demo.kctrld.io/v1/namespaces/%s/podsets" % NS, podset("web", 2), expect=201)
        self.a.json("POST", "/api/v1/namespaces/%s/configmaps" % NS,
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}},
                    expect=201)
        self.a.json("POST", "/apis/apps/v1/namespaces/%s/deployments" % NS, deployment("dep", "cfg"), expect=201)
        self.a.json("POST", "/api/v1/namespaces/%s/configmaps" % NS,
                    {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "expired", "annotations": {"kctrld.io/ttl": "1s"}}}, expect=201)
        kubeconfig = os.path.join(self.tmp, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: sa\n"
                    "clusters: [{name: sim, cluster: %s}]\n"
                    "users: [{name: sa, user: {token: %s}}]\n"
                    "contexts: [{name: sa, context: {cluster: sim, user: sa}}]\n" % (self.sim.cluster(), SA_TOKEN))
        os.chmod(kubeconfig, 0o600)
        self.k = taplib.Kctrld(CONFIG.format(podset=plugin("podset"), reloader=plugin("reloader"),
                                             ttl=plugin("ttl")), kubeconfig, dir=os.path.join(self.tmp, "k"))

    # What each controller achieves, as seen by the admin.
    def podset_done(self):
        st, doc = self.a.json("GET", "/api/v1/namespaces/%s/pods" % NS)
        st2, ps = self.a.json("GET", "/apis/demo.kctrld.io/v1/namespaces/%s/podsets/web" % NS)
        return len(doc["items"]) == 2 and (ps.get("status") or {}).get("replicas") == 2

    def reloader_done(self):
        st, d = self.a.json("GET", "/apis/apps/v1/namespaces/%s/deployments/dep" % NS)
        ann = d["spec"]["template"]["metadata"].get("annotations") or {}
        return "kctrld.io/config-hash" in ann

    def ttl_done(self):
        st, _ = self.a.json("GET", "/api/v1/namespaces/%s/configmaps/expired" % NS)
        return st == 404

    def denials(self):
        _, doc = self.sim.json("GET", "/_apisim/requests")
        return [r for r in doc["requests"] if r["code"] == 403]

    def stop(self):
        code = self.k.stop()
        self.sim.stop()
        return code


def write_config():
    d = tempfile.mkdtemp(prefix="kctrld-rbac-cfg-")
    path = os.path.join(d, "kctrld.yaml")
    with open(path, "w") as f:
        f.write(CONFIG.format(podset=plugin("podset"), reloader=plugin("reloader"), ttl=plugin("ttl")))
    return path


def require():
    for p in (KCTRLD, os.path.join(BUILD, "kube-apisim"), plugin("podset"), plugin("reloader"), plugin("ttl")):
        if not os.path.exists(p):
            raise taplib.Skip("%s not built" % p)


def test_generated_rbac_is_sufficient():
    require()
    docs = generate(write_config())
    assert [d["kind"] for d in docs] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                         "RoleBinding"], [d["kind"] for d in docs]
    w = World(docs)
    try:
        wait_for(w.podset_done, timeout=30, what="podset: 2 pods and status", kctrld=w.k)
        wait_for(w.ttl_done, timeout=30, what="ttl: expired ConfigMap deleted", kctrld=w.k)
        # The reloader hashes the ConfigMap on the first reconcile; a change rolls it again.
        wait_for(w.reloader_done, timeout=30, what="reloader: hash annotation", kctrld=w.k)
        _, lease = w.a.json("GET", "/apis/coordination.k8s.io/v1/namespaces/kctrld/leases/kctrld", expect=200)
        assert lease["spec"].get("holderIdentity"), lease
        # Events were written (ScaledUp) as the ServiceAccount.
        _, evs = w.a.json("GET", "/api/v1/namespaces/%s/events" % NS)
        assert any(e["reason"] == "ScaledUp" for e in evs["items"]), evs
        assert w.denials() == [], w.denials()
    finally:
        w.stop()


# For each rule: the resource its absence shows up on, and which
# controllers need it (the others must keep working).
NEEDS = {
    "configmaps": ("reloader", "ttl"), "events": (), "pods": ("podset",), "secrets": ("reloader",),
    "deployments": ("reloader",), "podsets": ("podset",), "podsets/status": ("podset",),
    "leases": ("podset", "reloader", "ttl"),
    "namespaces": (),  # the cluster identity: without it kctrld logs once and goes on
}


def test_generated_rbac_is_minimal():
    require()
    docs = generate(write_config())
    rules = rules_of(docs)
    assert len(rules) == 10, rules
    for which in rules:
        i, j = which
        rule = docs[i]["rules"][j]
        res = rule["resources"][0]
        ns = docs[i]["metadata"].get("namespace")
        w = World(without(docs, which))
        try:
            denied = wait_for(lambda: w.denials(), timeout=30, what="a 403 without %s" % rule, kctrld=w.k)
            d = denied[0]
            assert d["verb"] in rule["verbs"], (rule, d)
            plural = res.split("/")[0]
            assert "/%s" % plural in d["path"], (rule, d)
            # kctrld names verb, resource and where.
            # (a Namespace's own path names it: the authorizer sees it as that namespace)
            in_ns = d["path"].split("/namespaces/", 1)[1].split("/")[0] if "/namespaces/" in d["path"] else None
            scope = 'in the namespace "%s"' % in_ns if in_ns else "at the cluster scope"
            want = 'cannot %s resource "%s" in API group "%s" %s' % (d["verb"], res if "/" in res else plural,
                                                                     rule["apiGroups"][0], scope)
            wait_for(lambda: want in w.k.log() and "403" in w.k.log(), timeout=15,
                     what="kctrld log naming %r" % want, kctrld=w.k)
            # The rest keeps working.
            for name, done in (("podset", w.podset_done), ("reloader", w.reloader_done), ("ttl", w.ttl_done)):
                if name not in NEEDS[res]:
                    wait_for(done, timeout=30, what="%s without %s" % (name, rule), kctrld=w.k)
            assert w.k.alive(), w.k.log()
            print("# without %s %s: %s %s denied, logged; the others work" % (
                res, rule["verbs"], d["verb"], d["path"]))
        finally:
            w.stop()


def test_history_check_needs_list_only():
    """The history check after a watch connection fails LISTs the scope's
    state at the watch's resourceVersion (resourceVersionMatch=Exact) for
    caches of up to 5000 objects: without `get` on pods nothing is denied,
    the check passes and the watch resumes. (`get` stays granted: larger
    caches read single objects instead.)"""
    require()
    docs = copy.deepcopy(generate(write_config()))
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    rule = next(r for r in role["rules"] if r["resources"] == ["pods"])
    rule["verbs"].remove("get")
    w = World(docs)
    try:
        wait_for(w.podset_done, timeout=30, what="podset: 2 pods and status", kctrld=w.k)
        assert w.denials() == [], w.denials()
        # Pods watches fail as connections (reset) until the check ran.
        w.sim.json("POST", "/_apisim/faults", {"action": "reset", "method": "GET", "pathPrefix": "/api/v1/pods",
                                               "watch": True, "count": -1})
        w.sim.json("POST", "/_apisim/drop-watches")

        def exact_list():
            _, doc = w.sim.json("GET", "/_apisim/requests")
            return [r for r in doc["requests"] if r["path"].endswith("/pods")
                    and "resourceVersionMatch=Exact" in r["query"] and r["code"] == 200]
        wait_for(exact_list, timeout=60, what="the history check's LIST", kctrld=w.k)
        w.sim.json("DELETE", "/_apisim/faults")
        assert w.denials() == [], w.denials()
        # Still serving: a new PodSet gets its pods.
        w.a.json("POST", "/apis/demo.kctrld.io/v1/namespaces/%s/podsets" % NS, podset("api", 1), expect=201)
        wait_for(lambda: len(w.a.json("GET", "/api/v1/namespaces/%s/pods" % NS)[1]["items"]) == 3,
                 timeout=30, what="the new PodSet's pod", kctrld=w.k)
    finally:
        w.stop()


def test_simulator_rbac_semantics():
    """What the generated RBAC does not exercise: resourceNames, a RoleBinding
    to a ClusterRole (namespace only), subresources, `*`, non-resource paths
    (discovery and OpenAPI allowed, others 403), and 401/403."""
    require()
    tmp = tempfile.mkdtemp(prefix="apisim-rbac-")
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write('t-alice,alice,1,"team-a,readers"\nt-sa,system:serviceaccount:x:bot,2\n')
    with taplib.Apisim("--token", ADMIN, "--rbac", "--token-auth-file", tokens) as sim:
        a = Admin(sim)
        a.json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}},
               expect=201)
        rb = "/apis/rbac.authorization.k8s.io/v1"
        a.json("POST", rb + "/clusterroles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                              "metadata": {"name": "cm-one"},
                                              "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                                         "resourceNames": ["one"], "verbs": ["get"]},
                                                        {"apiGroups": ["*"], "resources": ["*/status"],
                                                         "verbs": ["patch"]}]}, expect=201)
        a.json("POST", rb + "/namespaces/x/rolebindings",
               {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-one"},
                "subjects": [{"kind": "Group", "name": "readers"}, {"kind": "ServiceAccount", "name": "bot"}]},
               expect=201)
        a.json("POST", "/api/v1/namespaces/x/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "one"}}, expect=201)
        # Allowed by name, in x only.
        st, _ = a.sa("GET", "/api/v1/namespaces/x/configmaps/one", token="t-alice")
        assert st == 200, st
        st, _ = a.sa("GET", "/api/v1/namespaces/x/configmaps/one", token="t-sa")  # binding ns = SA ns
        assert st == 200, st
        st, doc = a.sa("GET", "/api/v1/namespaces/x/configmaps/two", token="t-alice")
        assert st == 403 and doc["reason"] == "Forbidden", doc
        assert doc["message"] == ('configmaps "two" is forbidden: User "alice" cannot get resource "configmaps" '
                                  'in API group "" in the namespace "x"'), doc["message"]
        assert doc["details"] == {"name": "two", "kind": "configmaps"}, doc
        st, doc = a.sa("GET", "/api/v1/namespaces/x/configmaps", token="t-alice")  # list: names do not apply
        assert st == 403, doc
        st, doc = a.sa("GET", "/api/v1/namespaces/default/configmaps/one", token="t-alice")
        assert st == 403 and doc["message"].endswith('in the namespace "default"'), doc
        # */status: any status subresource, not the resource itself.
        st, doc = a.sa("PATCH", "/apis/apps/v1/namespaces/x/deployments/d/status", token="t-alice")
        assert st != 403, doc  # authorized (then 415/404 from the handler)
        st, doc = a.sa("PATCH", "/apis/apps/v1/namespaces/x/deployments/d", token="t-alice")
        assert st == 403 and doc["message"].startswith('deployments.apps "d" is forbidden'), doc
        # Cluster scope wording; discovery allowed; unknown token 401; admin unchecked.
        st, doc = a.sa("GET", "/api/v1/nodes", token="t-alice")
        assert st == 403 and doc["message"] == ('nodes is forbidden: User "alice" cannot list resource "nodes" '
                                                'in API group "" at the cluster scope'), doc
        # Non-resource paths: system:discovery and system:public-info-viewer
        # (GET only) for every authenticated user; the rest is a 403 by path;
        # no credentials at all is a 401 (no anonymous requests).
        for path in ("/apis", "/api", "/api/v1", "/apis/apps", "/apis/apps/v1", "/openapi/v2",
                     "/openapi/v3", "/openapi/v3/api/v1", "/version", "/healthz", "/livez", "/readyz"):
            st, _ = a.sa("GET", path, token="t-alice")
            assert st == 200, (path, st)
        st, doc = a.sa("POST", "/version", token="t-alice")
        assert st == 403 and doc["message"] == 'forbidden: User "alice" cannot post path "/version"', doc
        st, doc = a.sa("GET", "/metrics", token="t-alice")
        assert st == 403 and doc["reason"] == "Forbidden", doc
        st, doc = a.sa("GET", "/", token="t-alice")
        assert st == 403, doc
        st, _ = a.json("GET", "/")
        assert st == 200, st
        st, _ = sim.json("GET", "/openapi/v2")
        assert st == 401, st
        st, _ = a.sa("GET", "/api/v1/nodes", token="nope")
        assert st == 401, st
        st, _ = a.json("GET", "/api/v1/nodes")
        assert st == 200, st


if __name__ == "__main__":
    taplib.run_tests(globals())
