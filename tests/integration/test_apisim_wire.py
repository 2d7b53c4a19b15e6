# SPDX-License-Identifier: Apache-2.0
"""kube-apisim wire-level fidelity: raw HTTP against the exact shapes of
docs/api-contract.md (section 6: status codes and Status reasons; 4.2: watch framing)."""
import base64
import json
import os
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from taplib import Apisim, FIXTURES, run_tests, wait_for  # noqa: E402

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"a": "1"}}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "foos.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


def fixture(name):
    with open(os.path.join(FIXTURES, "objects", name)) as f:
        return json.load(f)


def q(**kw):
    return "?" + urllib.parse.urlencode(kw)


def test_concurrent_requests_keep_their_own_paths():
    # One thread per connection: each answer must be about its own URL (a
    # shared tokenizer cursor once gave threads each other's path segments).
    with Apisim() as sim:
        wrong, errors = [], []

        def worker(t):
            for i in range(150):
                name = "t%d-n%d" % (t, i)
                try:
                    st, doc = sim.json("GET", "/api/v1/namespaces/ns%d/configmaps/%s" % (t, name))
                except OSError as e:
                    errors.append(repr(e))
                    return
                if st != 404 or (doc or {}).get("details", {}).get("name") != name:
                    wrong.append((name, st, doc))
        ts = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        assert not errors, errors[:3]
        assert not wrong, wrong[:3]
        assert sim.proc.poll() is None, sim.log()


def test_discovery_shapes():
    with Apisim() as s:
        _, api = s.json("GET", "/api", expect=200)
        assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
        _, v1 = s.json("GET", "/api/v1", expect=200)
        names = {r["name"]: r for r in v1["resources"]}
        assert names["pods"]["kind"] == "Pod" and names["pods"]["namespaced"] is True
        assert names["pods/status"]["verbs"] == ["get", "patch", "update"]
        assert names["namespaces"]["namespaced"] is False
        _, apis = s.json("GET", "/apis", expect=200)
        groups = {g["name"] for g in apis["groups"]}
        assert {"apps", "coordination.k8s.io", "events.k8s.io", "apiextensions.k8s.io"} <= groups
        _, leases = s.json("GET", "/apis/coordination.k8s.io/v1", expect=200)
        assert leases["groupVersion"] == "coordination.k8s.io/v1"
        assert [r["name"] for r in leases["resources"]] == ["leases"]
        # unknown resource under a served group: Status 404; unknown group: plain text
        st, doc = s.json("GET", "/apis/coordination.k8s.io/v1/namespaces/x/foos")
        assert st == 404 and doc["reason"] == "NotFound" and doc.get("details", {}) == {}
        assert doc["message"] == "the server could not find the requested resource"
        st, hd, body = s.request("GET", "/apis/nope/v1/things")
        assert st == 404 and hd["content-type"].startswith("text/plain") and body == b"404 page not found\n"


def test_crud_and_errors():
    with Apisim() as s:
        st, obj = s.json("POST", "/api/v1/namespaces/default/configmaps", CM, expect=201)
        md = obj["metadata"]
        assert obj["kind"] == "ConfigMap" and md["uid"] and md["resourceVersion"].isdigit()
        assert md["creationTimestamp"].endswith("Z") and md["namespace"] == "default"
        st, err = s.json("POST", "/api/v1/namespaces/default/configmaps", CM, expect=409)
        assert err["reason"] == "AlreadyExists" and err["code"] == 409
        assert err["message"] == 'configmaps "c1" already exists'
        assert err["details"] == {"name": "c1", "kind": "configmaps"}
        stale = dict(obj, data={"a": "2"})
        _, upd = s.json("PUT", "/api/v1/namespaces/default/configmaps/c1", stale, expect=200)
        assert int(upd["metadata"]["resourceVersion"]) > int(md["resourceVersion"])
        st, err = s.json("PUT", "/api/v1/namespaces/default/configmaps/c1", dict(obj, data={"a": "3"}), expect=409)
        assert err["reason"] == "Conflict"
        assert "the object has been modified" in err["message"]
        # no-op update: same RV, 200
        _, same = s.json("PUT", "/api/v1/namespaces/default/configmaps/c1", upd, expect=200)
        assert same["metadata"]["resourceVersion"] == upd["metadata"]["resourceVersion"]
        # namespace mismatch, name mismatch
        bad = dict(CM, metadata={"name": "c2", "namespace": "kube-system"})
        st, err = s.json("POST", "/api/v1/namespaces/default/configmaps", bad, expect=400)
        assert err["reason"] == "BadRequest"
        st, err = s.json("PUT", "/api/v1/namespaces/default/configmaps/other", upd, expect=400)
        assert "does not match the name on the URL" in err["message"]
        # create with resourceVersion set: 500 without reason
        st, err = s.json("POST", "/api/v1/namespaces/default/configmaps",
                         dict(CM, metadata={"name": "c3", "resourceVersion": "5"}), expect=500)
        assert "reason" not in err
        # create in a missing namespace
        st, err = s.json("POST", "/api/v1/namespaces/nope/configmaps", CM, expect=404)
        assert err["message"] == 'namespaces "nope" not found'
        _, gone = s.json("DELETE", "/api/v1/namespaces/default/configmaps/c1", expect=200)
        st, err = s.json("GET", "/api/v1/namespaces/default/configmaps/c1", expect=404)
        assert err == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": 'configmaps "c1" not found', "reason": "NotFound",
                       "details": {"name": "c1", "kind": "configmaps"}, "code": 404}
        # Lease: PUT without RV on existing is 422, PUT on missing creates (201), MicroTime checked
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l1"},
                 "spec": {"holderIdentity": "a", "renewTime": "2024-05-01T10:03:12.123456Z"}}
        p = "/apis/coordination.k8s.io/v1/namespaces/default/leases/l1"
        s.json("PUT", p, lease, expect=201)
        st, err = s.json("PUT", p, lease, expect=422)
        assert err["reason"] == "Invalid" and "must be specified for an update" in err["message"]
        bad = json.loads(json.dumps(lease))
        bad["metadata"]["name"] = "l2"
        bad["spec"]["renewTime"] = "2024-05-01T10:03:12Z"
        s.json("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", bad, expect=400)


def test_bad_input_statuses():
    with Apisim() as s:
        p = "/api/v1/namespaces/default/configmaps"
        st, err = s.json("POST", p, "{not json", expect=400)
        assert err["reason"] == "BadRequest"
        st, err = s.json("POST", p, json.dumps(CM), {"Content-Type": "text/plain"}, expect=415)
        assert err["reason"] == "UnsupportedMediaType"
        st, err = s.json("POST", p, dict(CM, kind="Secret"), expect=400)
        st, err = s.json("POST", p, dict(CM, metadata={"name": "Bad_Name"}), expect=422)
        assert err["reason"] == "Invalid" and err["details"]["causes"][0]["field"] == "metadata.name"
        assert err["details"]["kind"] == "ConfigMap"
        big = dict(CM, data={"x": "y" * (3 * 1024 * 1024 + 10)})
        st, err = s.json("POST", p, big, expect=413)
        assert err["reason"] == "RequestEntityTooLarge"
        assert err["message"] == "Request entity too large: limit is 3145728"
        st, err = s.json("POST", "/api/v1/namespaces/default/pods",
                         {"metadata": {"name": "p"}, "spec": {"containers": []}}, expect=422)
        assert err["details"]["causes"][0]["field"] == "spec.containers"
        s.json("PATCH", p + "/c1", {"a": 1}, {"Content-Type": "application/json"}, expect=415)
        # the server still works afterwards
        s.json("POST", p, CM, expect=201)


def test_list_pagination_and_expiry():
    with Apisim("--generate", "configmaps=25") as s:
        p = "/api/v1/configmaps"
        _, page1 = s.json("GET", p + q(limit=10), expect=200)
        m1 = page1["metadata"]
        assert len(page1["items"]) == 10 and m1["continue"] and m1["remainingItemCount"] == 15
        assert "kind" not in page1["items"][0] and page1["kind"] == "ConfigMapList"
        rv = m1["resourceVersion"]
        tok = json.loads(base64.b64decode(m1["continue"]))
        assert tok["v"] == "meta.k8s.io/v1" and tok["rv"] == int(rv) and tok["start"].endswith("\u0000")
        # a write between pages does not show up: pages are one snapshot
        first_page2 = s.json("GET", p + q(limit=10, **{"continue": m1["continue"]}), expect=200)[1]
        victim = first_page2["items"][0]["metadata"]
        s.json("DELETE", "/api/v1/namespaces/%s/configmaps/%s" % (victim["namespace"], victim["name"]), expect=200)
        _, page2 = s.json("GET", p + q(limit=10, **{"continue": m1["continue"]}), expect=200)
        assert page2["metadata"]["resourceVersion"] == rv
        assert [i["metadata"]["name"] for i in page2["items"]] == [i["metadata"]["name"] for i in first_page2["items"]]
        _, page3 = s.json("GET", p + q(limit=10, **{"continue": page2["metadata"]["continue"]}), expect=200)
        assert len(page3["items"]) == 5 and not page3["metadata"].get("continue")
        # continue + resourceVersion: 400; garbage token: 400
        st, err = s.json("GET", p + q(limit=10, resourceVersion="5", **{"continue": m1["continue"]}), expect=400)
        assert "specifying resource version is not allowed when using continue" in err["message"]
        s.json("GET", p + q(limit=10, **{"continue": "garbage!"}), expect=400)
        # compaction expires the token: 410 with a fresh token
        s.control("POST", "compact")
        st, err = s.json("GET", p + q(limit=10, **{"continue": m1["continue"]}), expect=410)
        assert err["reason"] == "Expired" and err["metadata"]["continue"]
        # Exact list at a compacted RV: 410
        st, err = s.json("GET", p + q(resourceVersion=rv, resourceVersionMatch="Exact"), expect=410)
        assert err["message"] == "The resourceVersion for the provided list is too old."


def test_list_validation():
    with Apisim() as s:
        p = "/api/v1/pods"
        for params, text in [({"resourceVersionMatch": "Exact"}, "resourceVersionMatch is forbidden unless resourceVersion is provided"),
                             ({"resourceVersionMatch": "Bogus", "resourceVersion": "1"}, "Unsupported value"),
                             ({"resourceVersionMatch": "Exact", "resourceVersion": "0"}, "is forbidden for resourceVersion \"0\""),
                             ({"sendInitialEvents": "true"}, "sendInitialEvents is forbidden for list")]:
            st, err = s.json("GET", p + q(**params), expect=422)
            assert err["reason"] == "Invalid" and text in err["message"], err
            assert err["details"]["kind"] == "ListOptions" and err["details"]["group"] == "meta.k8s.io"
        st, err = s.json("GET", p + q(resourceVersion="abc"), expect=500)
        assert "reason" not in err
        st, hd, _ = s.request("GET", p + q(resourceVersion="999999"))
        assert st == 504 and hd.get("retry-after") == "1"


def test_selectors_and_errors():
    with Apisim("--generate", "pods=20") as s:
        p = "/api/v1/pods"
        _, all_ = s.json("GET", p, expect=200)
        n = len(all_["items"])
        _, sel = s.json("GET", p + q(labelSelector="apisim.kctrld.io/app in (app-1,app-2)"), expect=200)
        assert {i["metadata"]["labels"]["apisim.kctrld.io/app"] for i in sel["items"]} == {"app-1", "app-2"}
        _, neg = s.json("GET", p + q(labelSelector="apisim.kctrld.io/app!=app-1,!missing"), expect=200)
        assert len(neg["items"]) == n - len([i for i in all_["items"] if i["metadata"]["labels"]["apisim.kctrld.io/app"] == "app-1"])
        _, f1 = s.json("GET", p + q(fieldSelector="spec.nodeName=node-3"), expect=200)
        assert f1["items"] and all(i["spec"]["nodeName"] == "node-3" for i in f1["items"])
        _, f2 = s.json("GET", p + q(fieldSelector="status.phase=Pending,metadata.namespace=gen-1"), expect=200)
        assert all(i["status"]["phase"] == "Pending" and i["metadata"]["namespace"] == "gen-1" for i in f2["items"])
        st, err = s.json("GET", p + q(labelSelector="a=b,"), expect=400)
        assert err["reason"] == "BadRequest" and "found '', expected: identifier after ','" in err["message"]
        st, err = s.json("GET", p + q(labelSelector="a in (b"), expect=400)
        st, err = s.json("GET", p + q(labelSelector="app=-x"), expect=400)
        assert "unable to parse requirement" in err["message"]
        st, err = s.json("GET", p + q(fieldSelector="spec.foo=1"), expect=400)
        assert err["message"] == "field label not supported: spec.foo"
        st, err = s.json("GET", "/api/v1/configmaps" + q(fieldSelector="data.x=1"), expect=400)
        assert err["message"] == '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
        st, err = s.json("GET", p + q(fieldSelector="nooperator"), expect=400)
        assert "invalid selector" in err["message"]


def test_watch_from_rv_events():
    with Apisim() as s:
        _, lst = s.json("GET", "/api/v1/namespaces/default/configmaps", expect=200)
        rv0 = lst["metadata"]["resourceVersion"]
        p = "/api/v1/namespaces/default/configmaps/c1"
        _, c = s.json("POST", "/api/v1/namespaces/default/configmaps", CM, expect=201)
        _, u = s.json("PATCH", p, {"data": {"a": "2"}}, {"Content-Type": "application/merge-patch+json"}, expect=200)
        _, d = s.json("DELETE", p, expect=200)
        st, evs = s.watch("/api/v1/namespaces/default/configmaps" + q(watch="true", resourceVersion=rv0), max_events=3)
        assert st == 200
        assert [e["type"] for e in evs] == ["ADDED", "MODIFIED", "DELETED"]
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
        assert rvs == sorted(rvs) and len(set(rvs)) == 3
        assert evs[0]["object"]["kind"] == "ConfigMap" and evs[0]["object"]["apiVersion"] == "v1"
        assert evs[2]["object"]["data"] == {"a": "2"} and rvs[2] > int(u["metadata"]["resourceVersion"])
        # RV unset: synthetic ADDED for current objects
        s.json("POST", "/api/v1/namespaces/default/configmaps", CM, expect=201)
        st, evs = s.watch("/api/v1/namespaces/default/configmaps?watch", max_events=1)
        assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "c1"


def test_watch_410_and_http_mode():
    with Apisim() as s:
        s.json("POST", "/api/v1/namespaces/default/configmaps", CM, expect=201)
        _, lst = s.json("GET", "/api/v1/configmaps", expect=200)
        old = int(lst["metadata"]["resourceVersion"]) - 1
        s.control("POST", "compact")
        st, evs = s.watch("/api/v1/configmaps" + q(watch="1", resourceVersion=old), timeout=5)
        assert st == 200 and len(evs) == 1, evs
        e = evs[0]
        assert e["type"] == "ERROR" and e["object"]["code"] == 410 and e["object"]["reason"] == "Expired"
        assert e["object"]["message"].startswith("too old resource version: %d (" % old)
        s.control("POST", "config", {"watch410": "http"})
        st, body = s.watch("/api/v1/configmaps" + q(watch="1", resourceVersion=old), timeout=5)
        assert st == 410 and body[0]["reason"] == "Expired"


def test_watch_bookmarks_timeout_and_initial_events():
    with Apisim("--bookmark-interval-ms", "200") as s:
        s.json("POST", "/api/v1/namespaces/default/pods",
               {"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, expect=201)
        _, lst = s.json("GET", "/api/v1/pods", expect=200)
        rv = lst["metadata"]["resourceVersion"]
        t0 = time.monotonic()
        st, evs = s.watch("/api/v1/pods" + q(watch="true", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds=1), timeout=10)
        took = time.monotonic() - t0
        assert 0.8 < took < 3, took  # ends cleanly at timeoutSeconds
        assert evs and all(e["type"] == "BOOKMARK" for e in evs)
        b = evs[0]["object"]
        assert b["kind"] == "Pod" and b["metadata"]["resourceVersion"] == rv and "name" not in b["metadata"]
        # streaming list
        st, evs = s.watch("/api/v1/pods" + q(watch="true", sendInitialEvents="true", allowWatchBookmarks="true",
                                             resourceVersionMatch="NotOlderThan", resourceVersion=""), max_events=2)
        assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "p1"
        assert evs[1]["type"] == "BOOKMARK"
        assert evs[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert evs[1]["object"]["metadata"]["resourceVersion"] == rv
        st, err = s.json("GET", "/api/v1/pods" + q(watch="true", sendInitialEvents="true", allowWatchBookmarks="true"), expect=422)
        assert "resourceVersionMatch" in err["message"]
        st, err = s.json("GET", "/api/v1/pods" + q(watch="true", resourceVersionMatch="NotOlderThan", resourceVersion="1"), expect=422)


def test_watch_selector_transitions():
    with Apisim() as s:
        cm = dict(CM, metadata={"name": "c1", "labels": {"tier": "web"}})
        _, c = s.json("POST", "/api/v1/namespaces/default/configmaps", cm, expect=201)
        rv = c["metadata"]["resourceVersion"]
        mp = {"Content-Type": "application/merge-patch+json"}
        path = "/api/v1/namespaces/default/configmaps/c1"
        _, off = s.json("PATCH", path, {"metadata": {"labels": {"tier": "db"}}}, mp, expect=200)
        _, on = s.json("PATCH", path, {"metadata": {"labels": {"tier": "web"}}}, mp, expect=200)
        st, evs = s.watch("/api/v1/namespaces/default/configmaps" + q(watch="true", resourceVersion=rv, labelSelector="tier=web"), max_events=2)
        assert [e["type"] for e in evs] == ["DELETED", "ADDED"]
        # DELETED on transition carries the previous content with the new RV
        assert evs[0]["object"]["metadata"]["labels"] == {"tier": "web"}
        assert evs[0]["object"]["metadata"]["resourceVersion"] == off["metadata"]["resourceVersion"]
        assert evs[1]["object"]["metadata"]["resourceVersion"] == on["metadata"]["resourceVersion"]


def test_finalizers_lifecycle():
    with Apisim() as s:
        cm = dict(CM, metadata={"name": "c1", "finalizers": ["example.com/x"]})
        s.json("POST", "/api/v1/namespaces/default/configmaps", cm, expect=201)
        p = "/api/v1/namespaces/default/configmaps/c1"
        _, d1 = s.json("DELETE", p, expect=200)
        ts = d1["metadata"]["deletionTimestamp"]
        assert ts and d1["metadata"]["deletionGracePeriodSeconds"] == 0
        _, d2 = s.json("DELETE", p, expect=200)
        assert d2["metadata"]["resourceVersion"] == d1["metadata"]["resourceVersion"]
        mp = {"Content-Type": "application/merge-patch+json"}
        st, err = s.json("PATCH", p, {"metadata": {"finalizers": ["example.com/x", "new/one"]}}, mp, expect=422)
        assert "no new finalizers can be added" in err["message"]
        st, err = s.json("POST", "/api/v1/namespaces/default/configmaps", cm, expect=409)
        assert err["message"].startswith("object is being deleted: ")
        rv = d1["metadata"]["resourceVersion"]
        _, last = s.json("PATCH", p, {"metadata": {"finalizers": None}}, mp, expect=200)
        assert last["kind"] == "ConfigMap" and not last["metadata"].get("finalizers")
        s.json("GET", p, expect=404)
        st, evs = s.watch("/api/v1/namespaces/default/configmaps" + q(watch="true", resourceVersion=rv), max_events=1)
        assert evs[0]["type"] == "DELETED" and evs[0]["object"]["metadata"]["finalizers"] == ["example.com/x"]


def test_crd_status_generation_patches():
    with Apisim() as s:
        s.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD, expect=201)
        _, disc = s.json("GET", "/apis/example.com/v1", expect=200)
        assert {r["name"] for r in disc["resources"]} == {"foos", "foos/status"}
        base = "/apis/example.com/v1/namespaces/default/foos"
        foo = {"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "a"},
               "spec": {"size": 1, "items": [1, 2]}, "status": {"ready": True}}
        _, c = s.json("POST", base, foo, expect=201)
        assert c["metadata"]["generation"] == 1 and "status" not in c
        mp = {"Content-Type": "application/merge-patch+json"}
        _, m = s.json("PATCH", base + "/a", {"metadata": {"labels": {"x": "y"}}}, mp, expect=200)
        assert m["metadata"]["generation"] == 1
        _, sp = s.json("PATCH", base + "/a", {"spec": {"size": 2}, "status": {"ready": True}}, mp, expect=200)
        assert sp["metadata"]["generation"] == 2 and "status" not in sp and sp["spec"]["items"] == [1, 2]
        _, st_ = s.json("PATCH", base + "/a/status", {"status": {"ready": True}, "metadata": {"labels": {"lost": "1"}}}, mp, expect=200)
        assert st_["status"] == {"ready": True} and st_["metadata"]["generation"] == 2
        assert "lost" not in st_["metadata"]["labels"]
        jp = {"Content-Type": "application/json-patch+json"}
        _, j = s.json("PATCH", base + "/a", [{"op": "test", "path": "/spec/size", "value": 2},
                                               {"op": "add", "path": "/spec/items/-", "value": 3},
                                               {"op": "replace", "path": "/metadata/labels/x", "value": "z"}], jp, expect=200)
        assert j["spec"]["items"] == [1, 2, 3] and j["metadata"]["labels"]["x"] == "z"
        st, err = s.json("PATCH", base + "/a", [{"op": "test", "path": "/spec/size", "value": 9}], jp, expect=422)
        st, err = s.json("PATCH", base + "/a", {"spec": {}}, {"Content-Type": "application/strategic-merge-patch+json"}, expect=415)
        st, err = s.json("PATCH", base + "/a", {"metadata": {"resourceVersion": "1"}, "spec": {"size": 5}}, mp, expect=409)
        assert err["reason"] == "Conflict"
        # PUT without resourceVersion on a CR: 422
        st, err = s.json("PUT", base + "/a", foo, expect=422)
        # list items of CRs carry kind/apiVersion
        _, lst = s.json("GET", base, expect=200)
        assert lst["kind"] == "FooList" and lst["items"][0]["kind"] == "Foo"
        # apply patch needs fieldManager, creates when missing
        ap = {"Content-Type": "application/apply-patch+yaml"}
        st, err = s.json("PATCH", base + "/b", "apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: b\nspec:\n  size: 3\n", ap, expect=422)
        assert err["details"]["causes"][0]["field"] == "fieldManager"
        _, b = s.json("PATCH", base + "/b?fieldManager=t", "apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: b\nspec:\n  size: 3\n", ap, expect=201)
        assert b["spec"]["size"] == 3
        # strategic merge on a built-in merges containers by name
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}
        s.json("POST", "/api/v1/namespaces/default/pods", pod, expect=201)
        _, pp = s.json("PATCH", "/api/v1/namespaces/default/pods/p", {"spec": {"containers": [{"name": "b", "image": "z"}]}},
                       {"Content-Type": "application/strategic-merge-patch+json"}, expect=200)
        assert [(c["name"], c["image"]) for c in pp["spec"]["containers"]] == [("a", "x"), ("b", "z")]
        # deleting the CRD removes the resource
        s.json("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.example.com", expect=200)
        st, _, _ = s.request("GET", base)
        assert st == 404


def test_metadata_only_accept():
    with Apisim("--generate", "pods=3") as s:
        meta_list = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
        meta_one = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}
        _, lst = s.json("GET", "/api/v1/pods", headers=meta_list, expect=200)
        assert lst["kind"] == "PartialObjectMetadataList" and lst["apiVersion"] == "meta.k8s.io/v1"
        it = lst["items"][0]
        assert it["kind"] == "PartialObjectMetadata" and set(it) == {"kind", "apiVersion", "metadata"}
        st, err = s.json("GET", "/api/v1/pods", headers=meta_one, expect=406)
        assert "but the requested object is a list" in err["message"]
        name, ns = it["metadata"]["name"], it["metadata"]["namespace"]
        _, one = s.json("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name), headers=meta_one, expect=200)
        assert one["kind"] == "PartialObjectMetadata" and "spec" not in one
        st, evs = s.watch("/api/v1/pods?watch=1", max_events=1, headers=meta_one)
        assert evs[0]["object"]["kind"] == "PartialObjectMetadata"
        fallback = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;q=0.9"}
        _, lst = s.json("GET", "/api/v1/pods", headers=fallback, expect=200)
        assert lst["kind"] == "PartialObjectMetadataList"
        _, one = s.json("GET", "/api/v1/namespaces/%s/pods/%s" % (ns, name), headers=fallback, expect=200)
        assert one["kind"] == "Pod"


def test_auth_token_401():
    with Apisim("--token", "s3cret") as s:
        st, err = s.json("GET", "/api/v1/pods", expect=401)
        assert err["reason"] == "Unauthorized" and err["message"] == "Unauthorized"
        st, _ = s.json("GET", "/api/v1/pods", headers={"Authorization": "Bearer wrong"}, expect=401)
        s.json("GET", "/api/v1/pods", headers={"Authorization": "Bearer s3cret"}, expect=200)
        with open(s.kubeconfig) as f:
            assert 'token: "s3cret"' in f.read()


def test_faults_counters_drop_watches():
    with Apisim() as s:
        s.control("POST", "faults", {"code": 429, "retryAfter": 2, "count": 2, "pathPrefix": "/api/v1/pods"})
        for _ in range(2):
            st, hd, body = s.request("GET", "/api/v1/pods")
            assert st == 429 and hd["retry-after"] == "2"
            assert json.loads(body)["details"]["retryAfterSeconds"] == 2
        assert s.request("GET", "/api/v1/pods")[0] == 200
        s.control("POST", "faults", {"code": 503, "count": 1})
        assert s.request("GET", "/api/v1/configmaps")[0] == 503
        s.control("POST", "faults", {"action": "reset", "count": 1})
        try:
            s.request("GET", "/api/v1/configmaps")
            raise AssertionError("connection should have been reset")
        except (ConnectionError, OSError, Exception) as e:  # http.client raises RemoteDisconnected
            assert not isinstance(e, AssertionError)
        c = s.control("GET", "counters")
        assert c["byCode"]["429"] == 2 and c["byCode"]["503"] == 1 and c["faultsInjected"] == 4
        reqs = s.control("GET", "requests")["requests"]
        assert reqs[-1]["path"] == "/api/v1/configmaps"
        # drop-watches ends an open watch cleanly, without an ERROR event
        out = {}

        def run():
            out["r"] = s.watch("/api/v1/configmaps?watch=1&resourceVersion=1&timeoutSeconds=30", timeout=20)
        t = threading.Thread(target=run)
        t0 = time.monotonic()
        t.start()
        wait_for(lambda: s.control("GET", "counters")["watchesOpen"] >= 1, what="watch open")
        assert s.control("POST", "drop-watches")["dropped"] >= 1
        t.join(15)
        assert not t.is_alive() and time.monotonic() - t0 < 10
        assert all(e["type"] != "ERROR" for e in out["r"][1])
        # latency
        s.control("POST", "latency", {"ms": 300, "pathPrefix": "/api/v1/secrets"})
        t0 = time.monotonic()
        s.request("GET", "/api/v1/secrets")
        assert time.monotonic() - t0 >= 0.3
        s.control("DELETE", "latency")


def test_generate_and_modification_stream():
    with Apisim("--generate", "deployments.apps=10") as s:
        _, lst = s.json("GET", "/apis/apps/v1/deployments", expect=200)
        assert len(lst["items"]) == 10
        d0 = lst["items"][0]
        assert d0["spec"]["template"]["spec"]["containers"]  # shaped like the fixture
        rv = lst["metadata"]["resourceVersion"]
        s.control("POST", "modify", {"resource": "deployments.apps", "count": 50, "rate": 0, "spec": True})
        wait_for(lambda: not s.control("GET", "modify")["running"], what="modifications")
        st, evs = s.watch("/apis/apps/v1/deployments" + q(watch="1", resourceVersion=rv), max_events=50)
        assert len(evs) == 50 and all(e["type"] == "MODIFIED" for e in evs)
        _, after = s.json("GET", "/apis/apps/v1/deployments", expect=200)
        assert max(i["metadata"]["generation"] for i in after["items"]) > 1


def test_seeds_json_yaml_list_and_chunked_watch():
    tmp = tempfile.mkdtemp(prefix="apisim-seed-")
    with open(os.path.join(tmp, "00-crd.yaml"), "w") as f:
        f.write("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: foobars.k8s-openapi-tests-custom-resource-definition.com\n"
                "spec:\n  group: k8s-openapi-tests-custom-resource-definition.com\n  scope: Namespaced\n  names:\n    plural: foobars\n    singular: foobar\n    kind: FooBar\n"
                "  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n"
                "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n")
    with open(os.path.join(tmp, "10-pod.json"), "w") as f:
        json.dump(fixture("pod-k8s-openapi-coredns.json"), f)
    seeds = [tmp, os.path.join(FIXTURES, "watch", "deploymentlist-k8s-openapi.json"),
             os.path.join(FIXTURES, "watch", "foobarlist-k8s-openapi.json")]
    with Apisim(seeds=seeds) as s:
        _, pods = s.json("GET", "/api/v1/namespaces/kube-system/pods", expect=200)
        want = fixture("pod-k8s-openapi-coredns.json")["metadata"]["name"]
        assert [p["metadata"]["name"] for p in pods["items"]] == [want]
        _, fb = s.json("GET", "/apis/k8s-openapi-tests-custom-resource-definition.com/v1/foobars", expect=200)
        assert {i["metadata"]["name"] for i in fb["items"]} == {"fb1", "fb2"}
        _, deps = s.json("GET", "/apis/apps/v1/deployments", expect=200)
        assert deps["items"]
        s.json("GET", "/api/v1/namespaces/web", expect=200)
        # watch output split into 7-byte chunks still parses into the same events
        s.control("POST", "faults", {"action": "chunks", "chunkBytes": 7, "watch": True, "count": 1})
        st, evs = s.watch("/apis/apps/v1/deployments?watch=1", max_events=len(deps["items"]))
        assert len(evs) == len(deps["items"])


if __name__ == "__main__":
    run_tests(globals())
