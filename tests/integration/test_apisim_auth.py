# SPDX-License-Identifier: Apache-2.0
"""kube-apisim's authentication side over the HTTPS it serves with its own
CA under --token/--rbac: the generated certificate, TokenReview and
SubjectAccessReview (what an API-server-backed authorization filter asks,
e.g. for GET /metrics), and the --token-auth-file read again when it
changes. kubectl's own use (auth can-i, auth whoami) is in
test_apisim_kubectl.py."""
import http.client
import json
import os
import ssl
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from taplib import Apisim, run_tests, wait_for  # noqa: E402

ADMIN = {"Authorization": "Bearer admin-tok"}
TOKENS = ('alice-tok,alice,uid-alice,"team-a"\n'
          'metrics-sa-tok,system:serviceaccount:obs:scraper,uid-s\n'
          'checker-tok,system:serviceaccount:kctrld:kctrld,uid-k\n')


def token_file(text=TOKENS):
    d = tempfile.mkdtemp(prefix="apisim-auth-")
    p = os.path.join(d, "tokens")
    with open(p, "w") as f:
        f.write(text)
    return p


def apply(sim, path, obj):
    sim.json("POST", path, obj, headers=ADMIN, expect=201)


def cluster_role(sim, name, rules):
    apply(sim, "/apis/rbac.authorization.k8s.io/v1/clusterroles",
          {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name}, "rules": rules})


def bind(sim, name, role, subject):
    apply(sim, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
          {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
           "subjects": [subject]})


def token_review(sim, token, auth, audiences=None):
    spec = {"token": token}
    if audiences:
        spec["audiences"] = audiences
    return sim.json("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec},
                    headers=auth)


def sar(sim, auth, spec):
    return sim.json("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                    {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                     "spec": spec}, headers=auth)


def metrics_sar(user, groups=()):
    return {"user": user, "groups": list(groups),
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}


def test_generated_ca_verifies_the_server():
    with Apisim("--token", "admin-tok") as sim:
        assert sim.url.startswith("https://127.0.0.1:"), sim.url
        port = int(sim.url.rsplit(":", 1)[1])
        for host in ("127.0.0.1", "localhost"):
            c = http.client.HTTPSConnection(host, port, timeout=10, context=sim.ssl_context())
            c.request("GET", "/version", headers=ADMIN)
            r = c.getresponse()
            assert r.status == 200 and json.loads(r.read())["major"] == "1"
            c.close()
        # a client that does not trust the simulator's CA refuses it
        c = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ssl.create_default_context())
        try:
            c.request("GET", "/version")
            raise AssertionError("an unknown CA was accepted")
        except ssl.SSLCertVerificationError:
            pass
        finally:
            c.close()
        st, doc = sim.json("GET", "/api/v1/namespaces")
        assert st == 401 and doc["reason"] == "Unauthorized"
    with Apisim("--token", "admin-tok", "--plain-http") as sim:
        assert sim.url.startswith("http://"), sim.url
        sim.json("GET", "/api/v1/namespaces", headers=ADMIN, expect=200)


def test_discovery_lists_the_review_kinds():
    with Apisim("--token", "admin-tok") as sim:
        _, rl = sim.json("GET", "/apis/authorization.k8s.io/v1", headers=ADMIN, expect=200)
        verbs = {r["name"]: r["verbs"] for r in rl["resources"]}
        assert verbs == {"subjectaccessreviews": ["create"], "selfsubjectaccessreviews": ["create"]}, verbs
        _, rl = sim.json("GET", "/apis/authentication.k8s.io/v1", headers=ADMIN, expect=200)
        assert {r["name"] for r in rl["resources"]} == {"tokenreviews", "selfsubjectreviews"}
        st, _ = sim.json("GET", "/apis/authentication.k8s.io/v1/tokenreviews", headers=ADMIN)
        assert st == 405


def test_token_review():
    with Apisim("--token", "admin-tok", "--rbac", "--token-auth-file", token_file()) as sim:
        st, tr = token_review(sim, "metrics-sa-tok", ADMIN)
        assert st == 201, tr
        assert tr["kind"] == "TokenReview" and "token" not in tr["spec"], tr
        assert tr["status"]["authenticated"] is True
        assert tr["status"]["user"] == {
            "username": "system:serviceaccount:obs:scraper", "uid": "uid-s",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:obs", "system:authenticated"]}
        assert tr["status"]["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
        _, tr = token_review(sim, "metrics-sa-tok", ADMIN, audiences=["kctrld"])
        assert tr["status"]["audiences"] == ["kctrld"]
        _, tr = token_review(sim, "admin-tok", ADMIN)
        assert tr["status"]["user"]["username"] == "kubernetes-admin"
        st, tr = token_review(sim, "no-such-token", ADMIN)
        assert st == 201 and not tr["status"].get("authenticated") and tr["status"]["error"], tr
        # creating TokenReviews is a right of its own (system:auth-delegator's)
        checker = {"Authorization": "Bearer checker-tok"}
        st, doc = token_review(sim, "metrics-sa-tok", checker)
        assert st == 403 and doc["reason"] == "Forbidden", doc
        cluster_role(sim, "auth-delegator", [
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}])
        bind(sim, "kctrld-auth-delegator", "auth-delegator",
             {"kind": "ServiceAccount", "name": "kctrld", "namespace": "kctrld"})
        st, tr = token_review(sim, "metrics-sa-tok", checker)
        assert st == 201 and tr["status"]["authenticated"] is True
        st, doc = sar(sim, checker, metrics_sar("alice"))
        assert st == 201, doc


def test_subject_access_review_of_metrics():
    with Apisim("--token", "admin-tok", "--rbac", "--token-auth-file", token_file()) as sim:
        scraper = "system:serviceaccount:obs:scraper"
        groups = ["system:serviceaccounts", "system:serviceaccounts:obs", "system:authenticated"]
        st, r = sar(sim, ADMIN, metrics_sar(scraper, groups))
        assert st == 201 and r["kind"] == "SubjectAccessReview" and r["status"]["allowed"] is False, r
        cluster_role(sim, "metrics-reader", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
        bind(sim, "scraper-metrics", "metrics-reader",
             {"kind": "ServiceAccount", "name": "scraper", "namespace": "obs"})
        _, r = sar(sim, ADMIN, metrics_sar(scraper, groups))
        assert r["status"]["allowed"] is True, r
        assert 'ClusterRoleBinding "scraper-metrics" of ClusterRole "metrics-reader"' in r["status"]["reason"]
        _, r = sar(sim, ADMIN, {"user": scraper, "groups": groups,
                                "nonResourceAttributes": {"path": "/metrics", "verb": "post"}})
        assert r["status"]["allowed"] is False
        _, r = sar(sim, ADMIN, metrics_sar("alice", ["system:authenticated"]))
        assert r["status"]["allowed"] is False
        # discovery paths are every authenticated user's; system:masters may do anything
        _, r = sar(sim, ADMIN, {"user": "alice", "groups": ["system:authenticated"],
                                "nonResourceAttributes": {"path": "/version", "verb": "get"}})
        assert r["status"]["allowed"] is True
        _, r = sar(sim, ADMIN, {"user": "bob", "groups": ["system:masters"],
                                "resourceAttributes": {"verb": "delete", "resource": "nodes"}})
        assert r["status"]["allowed"] is True
        # resource attributes, by group subject
        cluster_role(sim, "pod-lister", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
        bind(sim, "team-pods", "pod-lister", {"kind": "Group", "name": "team-a"})
        _, r = sar(sim, ADMIN, {"groups": ["team-a"], "resourceAttributes": {
            "namespace": "default", "verb": "list", "resource": "pods", "version": "v1"}})
        assert r["status"]["allowed"] is True
        _, r = sar(sim, ADMIN, {"groups": ["team-a"], "resourceAttributes": {
            "namespace": "default", "verb": "delete", "resource": "pods"}})
        assert r["status"]["allowed"] is False
        # what the server rejects
        st, doc = sar(sim, ADMIN, {"user": "alice"})
        assert st == 422 and "exactly one of nonResourceAttributes or resourceAttributes" in doc["message"]
        st, doc = sar(sim, ADMIN, {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}})
        assert st == 422 and "at least one of user or group" in doc["message"], doc


def test_token_auth_file_is_read_again():
    path = token_file('old-tok,alice,uid-1\n')
    with Apisim("--token", "admin-tok", "--rbac", "--token-auth-file", path) as sim:
        def whoami(tok):
            return sim.json("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                            headers={"Authorization": "Bearer " + tok})
        st, r = whoami("old-tok")
        assert st == 201 and r["status"]["userInfo"]["username"] == "alice", r
        tmp = path + ".new"
        with open(tmp, "w") as f:
            f.write('new-tok,bob,uid-2,"ops"\n')
        os.replace(tmp, path)  # a new inode, as a Secret volume update does
        st, r = whoami("new-tok")
        assert st == 201 and r["status"]["userInfo"] == {
            "username": "bob", "uid": "uid-2", "groups": ["ops", "system:authenticated"]}, r
        assert whoami("old-tok")[0] == 401
        # a file that does not parse keeps the users that were read last
        with open(path, "w") as f:
            f.write("no-user-field\n")
        assert whoami("new-tok")[0] == 201
        wait_for(lambda: "keeping the previous users" in sim.log(), timeout=5,
                 what="the simulator saying it kept the users")


if __name__ == "__main__":
    run_tests(globals())
