# SPDX-License-Identifier: Apache-2.0
"""kube-apisim as kubectl sees it (docs/apisim.md "Using kubectl").

The wire-level tests check what kubectl relies on without needing kubectl:
the /openapi/v3 discovery and group-version documents (GVK extensions,
fieldValidation on PATCH, CRD schemas), /openapi/v2 in protobuf, protobuf
request bodies (built here with a small encoder), meta.k8s.io/v1 Table
answers. The kubectl tests run kubectl >= 1.27 (found in PATH or
$KUBECTL) against the simulator and check the results through the API;
they skip when there is no such kubectl."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from taplib import ROOT, Apisim, Skip, run_tests  # noqa: E402

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "additionalPrinterColumns": [
                               {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                               {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1}],
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "properties": {"spec": {"type": "object", "properties": {
                                   "size": {"type": "integer"}, "color": {"type": "string"}}}}}}}]}}
WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
          "spec": {"size": 3, "color": "red"}}
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


# ---- OpenAPI ----

def gv_docs(sim):
    _, root = sim.json("GET", "/openapi/v3", expect=200)
    return root["paths"]


def test_openapi_v3_discovery_and_documents():
    with Apisim() as sim:
        paths = gv_docs(sim)
        assert {"api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1", "apis/events.k8s.io/v1",
                "apis/apiextensions.k8s.io/v1"} <= set(paths), paths
        url = paths["api/v1"]["serverRelativeURL"]
        assert re.fullmatch(r"/openapi/v3/api/v1\?hash=[0-9A-F]{16}", url), url
        _, doc = sim.json("GET", url, expect=200)
        assert doc["openapi"].startswith("3.")
        item = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]
        patch = item["patch"]
        # what kubectl's field-validation verifier looks for
        assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "ConfigMap", "version": "v1"}
        assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
        assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
        assert {p["name"] for p in item["parameters"]} == {"name", "namespace", "pretty"}
        assert "/api/v1/namespaces/{name}" in doc["paths"]          # cluster scoped
        assert "/api/v1/namespaces/{namespace}/pods/{name}/status" in doc["paths"]
        schemas = doc["components"]["schemas"]
        cm = schemas["io.k8s.api.core.v1.ConfigMap"]
        assert cm["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "ConfigMap", "version": "v1"}]
        assert cm["properties"]["metadata"]["allOf"][0]["$ref"] == \
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        assert cm["properties"]["data"]["additionalProperties"]["type"] == "string"
        pod = schemas["io.k8s.api.core.v1.Pod"]
        assert pod["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] is True
        assert "labels" in schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
        # every $ref resolves inside the document
        refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(doc)))
        assert refs and refs <= set(schemas), refs - set(schemas)
        _, apps = sim.json("GET", paths["apis/apps/v1"]["serverRelativeURL"], expect=200)
        dep = apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
        assert dep["x-kubernetes-group-version-kind"][0]["kind"] == "Deployment"
        for p in ("/openapi/v3/apis/nope/v1", "/openapi/v3/apis/apps/v9", "/openapi/v3/api/v1/x"):
            st, _, _ = sim.request("GET", p)
            assert st == 404, p


def test_openapi_v3_crd_schema_and_hash():
    with Apisim() as sim:
        before = gv_docs(sim)
        assert "apis/example.com/v1" not in before
        sim.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD, expect=201)
        after = gv_docs(sim)
        assert after["api/v1"] == before["api/v1"]  # unchanged documents keep their hash
        url = after["apis/example.com/v1"]["serverRelativeURL"]
        _, doc = sim.json("GET", url, expect=200)
        w = doc["components"]["schemas"]["com.example.v1.Widget"]
        assert w["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Widget", "version": "v1"}]
        assert w["properties"]["spec"]["properties"]["size"] == {"type": "integer"}
        assert w["properties"]["kind"] == {"type": "string"}
        assert "ObjectMeta" in w["properties"]["metadata"]["allOf"][0]["$ref"]
        assert "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}" in doc["paths"]
        sim.json("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com", expect=200)
        assert "apis/example.com/v1" not in gv_docs(sim)


def test_openapi_v2_is_a_protobuf_document_without_definitions():
    with Apisim() as sim:
        st, hd, body = sim.request("GET", "/openapi/v2",
                                   headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
        assert st == 200 and hd["content-type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        assert body == b"\x0a\x032.0\x12\x1c\x0a\x0aKubernetes\x12\x0ev1.32.0-apisim", body
        _, doc = sim.json("GET", "/openapi/v2", expect=200)
        assert doc["swagger"] == "2.0"


# ---- protobuf bodies ----

def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


def ld(n, b):
    return varint(n << 3 | 2) + varint(len(b)) + b


def pstr(n, s):
    return ld(n, s.encode())


def pint(n, v):
    return varint(n << 3) + varint(v)


def pmap(n, k, v):
    return ld(n, pstr(1, k) + ld(2, v if isinstance(v, bytes) else v.encode()))


def envelope(api_version, kind, raw):
    return b"k8s\x00" + ld(1, pstr(1, api_version) + pstr(2, kind)) + ld(2, raw) + pstr(4, "")


PB = {"Content-Type": "application/vnd.kubernetes.protobuf",
      "Accept": "application/vnd.kubernetes.protobuf,application/json"}


def test_protobuf_bodies():
    with Apisim() as sim:
        # what kubectl create configmap x --from-literal=a=b sends (gogo writes empty strings)
        md = ld(1, pstr(1, "x") + pstr(2, "") + pstr(3, "") + pint(7, 0) + ld(8, b"") + pmap(11, "app", "web"))
        body = envelope("v1", "ConfigMap", md + pmap(2, "a", "b") + pmap(3, "bin", b"\x00\x01"))
        st, doc = sim.json("POST", "/api/v1/namespaces/default/configmaps?fieldManager=kubectl-create&fieldValidation=Strict",
                           body, headers=PB)
        assert st == 201, doc
        _, cm = sim.json("GET", "/api/v1/namespaces/default/configmaps/x", expect=200)
        assert cm["data"] == {"a": "b"} and cm["binaryData"] == {"bin": "AAE="}
        assert cm["metadata"]["labels"] == {"app": "web"} and cm["metadata"]["namespace"] == "default"
        assert "generation" not in cm["metadata"]
        sec = envelope("v1", "Secret", ld(1, pstr(1, "s")) + pmap(2, "pw", b"hunter2") + pstr(3, "Opaque"))
        sim.json("POST", "/api/v1/namespaces/default/secrets", sec, headers=PB, expect=201)
        _, s = sim.json("GET", "/api/v1/namespaces/default/secrets/s", expect=200)
        assert s["data"] == {"pw": "aHVudGVyMg=="} and s["type"] == "Opaque"
        ns = envelope("v1", "Namespace", ld(1, pstr(1, "n1")) + ld(2, b"") + ld(3, b""))
        sim.json("POST", "/api/v1/namespaces", ns, headers=PB, expect=201)
        c = pstr(1, "nginx") + pstr(2, "nginx") + ld(6, pint(3, 80)) + ld(8, b"")
        spec = (pint(1, 2) + ld(2, pmap(1, "app", "d")) +
                ld(3, ld(1, pmap(11, "app", "d")) + ld(2, ld(2, c))) + ld(4, b""))
        dep = envelope("apps/v1", "Deployment", ld(1, pstr(1, "d") + pmap(11, "app", "d")) + ld(2, spec) + ld(3, b""))
        sim.json("POST", "/apis/apps/v1/namespaces/n1/deployments", dep, headers=PB, expect=201)
        _, d = sim.json("GET", "/apis/apps/v1/namespaces/n1/deployments/d", expect=200)
        assert d["spec"]["replicas"] == 2 and d["spec"]["selector"] == {"matchLabels": {"app": "d"}}
        assert d["spec"]["template"]["spec"]["containers"] == [
            {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {}}]
        # refusals: a field outside the decoder's tables, an unsupported kind: 415 naming it
        st, doc = sim.json("POST", "/api/v1/namespaces/default/configmaps",
                           envelope("v1", "ConfigMap", pstr(42, "?")), headers=PB)
        assert st == 415 and doc["reason"] == "UnsupportedMediaType", doc
        assert "field 42 of k8s.io.api.core.v1.ConfigMap" in doc["message"], doc
        st, doc = sim.json("POST", "/api/v1/namespaces/default/endpoints",
                           envelope("v1", "Endpoints", b""), headers=PB)
        assert st == 415 and "not v1 Endpoints" in doc["message"], doc
        # malformed: 400
        st, doc = sim.json("POST", "/api/v1/namespaces/default/configmaps", b"k8s\x00\x0a\xff", headers=PB)
        assert st == 400 and doc["reason"] == "BadRequest", doc
        st, doc = sim.json("POST", "/api/v1/namespaces/default/configmaps", b'{"a":1}', headers=PB)
        assert st == 400 and "expected prefix [107 56 115 0]" in doc["message"], doc
        # the kind in the envelope must match the URL, as with JSON
        st, doc = sim.json("POST", "/api/v1/namespaces/default/secrets",
                           envelope("v1", "ConfigMap", ld(1, pstr(1, "y"))), headers=PB)
        assert st == 400 and "does not match the expected kind" in doc["message"], doc


# ---- field validation ----

def test_field_validation_strict_and_warn():
    with Apisim() as sim:
        sim.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD, expect=201)
        bad = {"apiVersion": "example.com/v1", "kind": "Widget", "extra": 1,
               "metadata": {"name": "w2", "labelz": {}}, "spec": {"size": 1, "colour": "red"}}
        base = "/apis/example.com/v1/namespaces/default/widgets"
        st, doc = sim.json("POST", base + "?fieldValidation=Strict", bad)
        assert st == 400 and doc["reason"] == "BadRequest", doc
        assert doc["message"] == ('Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
                                  'unknown field "extra", unknown field "metadata.labelz", '
                                  'unknown field "spec.colour"'), doc["message"]
        st, hd, _ = sim.request("POST", base + "?fieldValidation=Warn", bad)
        assert st == 201 and "unknown field \\\"spec.colour\\\"" in hd.get("warning", ""), hd
        st, hd, _ = sim.request("POST", base, dict(bad, metadata={"name": "w3"}))
        assert st == 201 and "warning" not in hd, hd
        # a patch is a partial object; $-directives of strategic merge patches are not fields
        st, doc = sim.json("PATCH", base + "/w2?fieldValidation=Strict", json.dumps({"spec": {"sizee": 2}}),
                           headers={"Content-Type": "application/merge-patch+json"})
        assert st == 400 and 'unknown field "spec.sizee"' in doc["message"], doc
        sim.json("PATCH", base + "/w2?fieldValidation=Strict", json.dumps({"spec": {"size": 2}}),
                 headers={"Content-Type": "application/merge-patch+json"}, expect=200)
        # built-in kinds: top level and metadata
        st, doc = sim.json("POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
                           {"metadata": {"name": "c"}, "datta": {"a": "b"}})
        assert st == 400 and doc["message"].endswith('strict decoding error: unknown field "datta"'), doc
        sim.json("POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
                 {"metadata": {"name": "c", "labels": {"a": "b"}}, "data": {"a": "b"}, "immutable": False},
                 expect=201)
        sim.json("PATCH", "/api/v1/namespaces/default/configmaps/c?fieldValidation=Strict",
                 json.dumps({"$setElementOrder/x": [], "data": {"b": "c"}}),
                 headers={"Content-Type": "application/strategic-merge-patch+json"}, expect=200)


# ---- Table ----

def table(sim, path, expect=200):
    st, doc = sim.json("GET", path, headers={"Accept": TABLE})
    assert st == expect, (st, doc)
    return doc


def cols(t):
    return [c["name"] for c in t["columnDefinitions"]]


def test_table_answers():
    with Apisim() as sim:
        sim.json("POST", "/api/v1/namespaces/default/configmaps",
                 {"metadata": {"name": "c1"}, "data": {"a": "1", "b": "2"}}, expect=201)
        sim.json("POST", "/api/v1/namespaces/default/pods",
                 {"metadata": {"name": "p1"}, "spec": {"nodeName": "n1", "containers": [
                     {"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}, expect=201)
        sim.json("PATCH", "/api/v1/namespaces/default/pods/p1/status",
                 json.dumps({"status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
                     {"name": "a", "ready": True, "restartCount": 2},
                     {"name": "b", "ready": False, "restartCount": 1}]}}),
                 headers={"Content-Type": "application/merge-patch+json"}, expect=200)
        t = table(sim, "/api/v1/namespaces/default/configmaps")
        assert t["kind"] == "Table" and t["apiVersion"] == "meta.k8s.io/v1"
        assert cols(t) == ["Name", "Data", "Age"] and t["metadata"]["resourceVersion"]
        (row,) = t["rows"]
        assert row["cells"][:2] == ["c1", 2] and re.fullmatch(r"\d+s", row["cells"][2])
        assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "c1"
        t = table(sim, "/api/v1/namespaces/default/pods")
        assert cols(t) == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node"]
        assert [c["priority"] for c in t["columnDefinitions"]] == [0, 0, 0, 0, 0, 1, 1]
        assert t["rows"][0]["cells"][:4] == ["p1", "1/2", "Running", "3"]
        assert t["rows"][0]["cells"][5:] == ["10.0.0.5", "n1"]
        # a get: one row; includeObject
        t = table(sim, "/api/v1/namespaces/default/configmaps/c1?includeObject=Object")
        assert len(t["rows"]) == 1 and t["rows"][0]["object"]["data"] == {"a": "1", "b": "2"}
        assert t["rows"][0]["object"]["kind"] == "ConfigMap"
        t = table(sim, "/api/v1/namespaces/default/configmaps?includeObject=None")
        assert "object" not in t["rows"][0]
        t = table(sim, "/api/v1/namespaces/default/configmaps?includeObject=Everything", expect=400)
        assert "includeObject" in t["message"]
        # pages carry the continue token
        sim.json("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c2"}}, expect=201)
        t = table(sim, "/api/v1/namespaces/default/configmaps?limit=1")
        assert len(t["rows"]) == 1 and t["metadata"]["continue"] and t["metadata"]["remainingItemCount"] == 1
        # custom resources: additionalPrinterColumns
        sim.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD, expect=201)
        sim.json("POST", "/apis/example.com/v1/namespaces/default/widgets", WIDGET, expect=201)
        t = table(sim, "/apis/example.com/v1/namespaces/default/widgets")
        assert cols(t) == ["Name", "Size", "Color"] and t["rows"][0]["cells"] == ["w1", 3, "red"]
        t = table(sim, "/apis/apps/v1/deployments")
        assert cols(t) == ["Name", "Ready", "Up-to-date", "Available", "Age"] and t["rows"] == []
        # watches: one Table per event, column definitions in the first only
        st, evs = sim.watch("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0&timeoutSeconds=2",
                            max_events=2, headers={"Accept": TABLE})
        assert st == 200 and [e["type"] for e in evs] == ["ADDED", "ADDED"], evs
        assert [e["object"]["kind"] for e in evs] == ["Table", "Table"]
        assert cols(evs[0]["object"]) == ["Name", "Data", "Age"] and evs[1]["object"]["columnDefinitions"] is None
        assert [e["object"]["rows"][0]["cells"][0] for e in evs] == ["c1", "c2"]
        assert evs[0]["object"]["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
        # without the Table first in Accept nothing changes
        _, plain = sim.json("GET", "/api/v1/namespaces/default/configmaps",
                            headers={"Accept": "application/json"}, expect=200)
        assert plain["kind"] == "ConfigMapList"
        _, meta = sim.json("GET", "/api/v1/namespaces/default/configmaps", expect=200, headers={
            "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1," + TABLE})
        assert meta["kind"] == "PartialObjectMetadataList"


# ---- kubectl ----

def kubectl_bin():
    k = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not k:
        raise Skip("kubectl not installed (set KUBECTL to a kubectl >= 1.27)")
    try:
        out = subprocess.run([k, "version", "--client", "-o", "json"], capture_output=True, text=True,
                             timeout=30).stdout
        minor = int(re.match(r"\d+", json.loads(out)["clientVersion"]["minor"]).group(0))
    except (ValueError, KeyError, AttributeError, OSError, subprocess.SubprocessError) as e:
        raise Skip("cannot read the kubectl version: %s" % e)
    if minor < 27:
        raise Skip("kubectl 1.%d is older than 1.27 (OpenAPI v3 validation, protobuf generators)" % minor)
    return k


class Kubectl:
    def __init__(self, sim):
        self.bin = kubectl_bin()
        self.sim = sim
        self.tmp = tempfile.mkdtemp(prefix="kubectl-", dir=sim.tmp)
        self.env = dict(os.environ, KUBECONFIG=sim.kubeconfig, HOME=self.tmp)
        self.env.pop("KUBECTL_EXTERNAL_DIFF", None)

    def run(self, *args, ok=True, stdin=None, env=None):
        cmd = [self.bin, "--cache-dir", os.path.join(self.tmp, "cache"), *args]
        p = subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=60,
                           env=dict(self.env, **(env or {})))
        if ok and p.returncode != 0:
            raise AssertionError("%s: exit %d\nstdout: %s\nstderr: %s\napisim: %s" % (
                " ".join(args), p.returncode, p.stdout, p.stderr, self.sim.log()))
        return p

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path


def test_kubectl_apply_and_create_validate():
    with Apisim() as sim:
        k = Kubectl(sim)
        crd = os.path.join(ROOT, "config", "podset-crd.yaml")
        objs = os.path.join(ROOT, "config", "demo-objects.yaml")
        out = k.run("apply", "-f", crd).stdout
        assert "podsets.demo.kctrld.io created" in out, out
        out = k.run("apply", "-f", objs).stdout
        assert "podset.demo.kctrld.io/web created" in out and "deployment.apps/web created" in out, out
        _, ps = sim.json("GET", "/apis/demo.kctrld.io/v1/namespaces/demo/podsets/web", expect=200)
        assert "kubectl.kubernetes.io/last-applied-configuration" in ps["metadata"]["annotations"]
        # a second apply with a change patches (CR: merge patch, Deployment: strategic)
        with open(objs) as f:
            text = f.read()
        changed = k.write("objs.yaml", text.replace("replicas: 3", "replicas: 4", 1))
        out = k.run("apply", "-f", changed).stdout
        assert "podset.demo.kctrld.io/web configured" in out, out
        _, ps = sim.json("GET", "/apis/demo.kctrld.io/v1/namespaces/demo/podsets/web", expect=200)
        assert ps["spec"]["replicas"] == 4, ps["spec"]
        # server-side apply
        out = k.run("apply", "--server-side", "-f", changed).stdout
        assert "serverside-applied" in out, out
        # create -f; validation on (the default): no --validate=false needed
        dep = k.write("dep.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d2, namespace: demo}\n"
                      "spec:\n  selector: {matchLabels: {app: d2}}\n  template:\n    metadata: {labels: {app: d2}}\n"
                      "    spec: {containers: [{name: c, image: nginx}]}\n")
        k.run("create", "-f", dep, "--validate=strict")
        sim.json("GET", "/apis/apps/v1/namespaces/demo/deployments/d2", expect=200)
        p = k.run("create", "-f", dep, ok=False)
        assert p.returncode != 0 and "AlreadyExists" in p.stderr, p.stderr
        # every write carried fieldValidation=Strict, and kubectl read the v3 documents
        reqs = sim.control("GET", "requests")["requests"]
        writes = [r for r in reqs if r["method"] in ("POST", "PATCH") and r["path"].startswith("/api")]
        assert writes and all("fieldValidation=Strict" in r["query"] for r in writes), writes
        assert any(r["path"].startswith("/openapi/v3/apis/demo.kctrld.io/v1") for r in reqs)
        # a misspelt field of a CR is refused by the server (kubectl sends fieldValidation=Strict)
        typo = k.write("typo.yaml", text.replace("replicas: 3", "replicaz: 3", 1))
        p = k.run("apply", "-f", typo, ok=False)
        assert p.returncode != 0 and 'unknown field "spec.replicaz"' in p.stderr, p.stderr
        # explain reads the CRD's schema from /openapi/v3
        out = k.run("explain", "podset.spec").stdout
        assert "replicas" in out and "template" in out, out


def test_kubectl_apply_deploy_base():
    """The in-cluster manifests (deploy/base, a kustomize base) apply with
    validation on, and a second apply changes nothing."""
    with Apisim() as sim:
        k = Kubectl(sim)
        base = os.path.join(ROOT, "deploy", "base")
        out = k.run("apply", "-k", base).stdout
        for what in ("namespace/kctrld created", "serviceaccount/kctrld created", "deployment.apps/kctrld created",
                     "configmap/kctrld-config-", "clusterrole.rbac.authorization.k8s.io/kctrld created"):
            assert what in out, out
        _, dep = sim.json("GET", "/apis/apps/v1/namespaces/kctrld/deployments/kctrld", expect=200)
        assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "kctrld", dep["spec"]
        out = k.run("apply", "-k", base).stdout
        assert "created" not in out and "configured" not in out, out


def test_kubectl_generators_send_protobuf():
    with Apisim() as sim:
        k = Kubectl(sim)
        k.run("create", "namespace", "n1")
        k.run("-n", "n1", "create", "configmap", "cm1", "--from-literal=a=b", "--from-literal=c=d")
        k.run("-n", "n1", "create", "secret", "generic", "s1", "--from-literal=pw=hunter2")
        k.run("-n", "n1", "create", "deployment", "d1", "--image=nginx", "--replicas=2", "--port=80")
        k.run("-n", "n1", "create", "serviceaccount", "sa1")
        k.run("-n", "n1", "run", "p1", "--image=busybox", "--labels=x=y", "--", "sleep", "10")
        k.run("-n", "n1", "create", "service", "nodeport", "svc1", "--tcp=80:8080", "--node-port=30001")
        _, ns = sim.json("GET", "/api/v1/namespaces/n1", expect=200)
        assert ns["status"]["phase"] == "Active"
        _, cm = sim.json("GET", "/api/v1/namespaces/n1/configmaps/cm1", expect=200)
        assert cm["data"] == {"a": "b", "c": "d"}
        _, s = sim.json("GET", "/api/v1/namespaces/n1/secrets/s1", expect=200)
        assert s["data"] == {"pw": "aHVudGVyMg=="}
        _, d = sim.json("GET", "/apis/apps/v1/namespaces/n1/deployments/d1", expect=200)
        assert d["spec"]["replicas"] == 2 and d["metadata"]["labels"] == {"app": "d1"}
        (c,) = d["spec"]["template"]["spec"]["containers"]
        assert c["image"] == "nginx" and c["ports"] == [{"containerPort": 80}]
        sim.json("GET", "/api/v1/namespaces/n1/serviceaccounts/sa1", expect=200)
        _, p = sim.json("GET", "/api/v1/namespaces/n1/pods/p1", expect=200)
        assert p["spec"]["containers"][0]["args"] == ["sleep", "10"] and p["metadata"]["labels"] == {"x": "y"}
        _, svc = sim.json("GET", "/api/v1/namespaces/n1/services/svc1", expect=200)
        assert svc["spec"]["type"] == "NodePort" and svc["spec"]["ports"] == [
            {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30001}]
        # they were protobuf: nothing answered 415
        reqs = sim.control("GET", "requests")["requests"]
        creates = [r for r in reqs if r["method"] == "POST"]
        assert len(creates) == 7 and all(r["code"] == 201 for r in creates), creates


def test_kubectl_get_describe_edit_delete():
    with Apisim() as sim:
        k = Kubectl(sim)
        sim.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD, expect=201)
        sim.json("POST", "/apis/example.com/v1/namespaces/default/widgets", WIDGET, expect=201)
        k.run("create", "configmap", "c1", "--from-literal=a=b")
        k.run("run", "p1", "--image=x")
        out = k.run("get", "pods").stdout
        assert re.match(r"NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\n", out) and re.search(r"p1\s+0/1\s+Pending\s+0\s", out), out
        out = k.run("get", "pods", "-o", "wide").stdout
        assert re.match(r"NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\n", out), out
        out = k.run("get", "configmaps").stdout
        assert re.search(r"c1\s+1\s+\d+s", out), out
        out = k.run("get", "widgets", "-o", "wide").stdout
        assert re.match(r"NAME\s+SIZE\s+COLOR\n", out) and re.search(r"w1\s+3\s+red", out), out
        w = subprocess.Popen([k.bin, "--cache-dir", os.path.join(k.tmp, "cache"), "get", "configmaps", "-w",
                              "--request-timeout=5s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=k.env)
        try:
            sim.json("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c2"},
                                                                       "data": {"a": "1", "b": "2"}}, expect=201)
            out = ""
            while not re.search(r"c2\s+2\s", out):
                line = w.stdout.readline()
                assert line, "kubectl get -w ended: %s %s" % (out, w.stderr.read())
                out += line
            assert re.match(r"NAME\s+DATA\s+AGE\n", out), out
        finally:
            w.kill()
            w.communicate()
        out = k.run("describe", "configmap", "c1").stdout
        assert "Name:" in out and "c1" in out, out
        k.run("label", "configmap", "c1", "team=a")
        editor = k.write("editor.sh", "#!/bin/sh\nsed -i 's/^  a: b$/  a: edited/' \"$1\"\n")
        os.chmod(editor, 0o755)
        out = k.run("edit", "configmap", "c1", env={"KUBE_EDITOR": editor, "EDITOR": editor}).stdout
        assert "edited" in out, out
        _, cm = sim.json("GET", "/api/v1/namespaces/default/configmaps/c1", expect=200)
        assert cm["data"] == {"a": "edited"} and cm["metadata"]["labels"] == {"team": "a"}
        k.run("delete", "configmap", "c1")
        st, _ = sim.json("GET", "/api/v1/namespaces/default/configmaps/c1")
        assert st == 404
        k.run("delete", "-f", k.write("w.json", json.dumps(WIDGET)))
        st, _ = sim.json("GET", "/apis/example.com/v1/namespaces/default/widgets/w1")
        assert st == 404


def managers(obj):
    return {(m["manager"], m["operation"]): m["fieldsV1"] for m in obj["metadata"].get("managedFields", [])}


def test_kubectl_server_side_apply_ownership():
    """kubectl apply --server-side against the simulator's field manager:
    create, re-apply (a field the applier drops goes), a conflict between
    two managers (kubectl's message and exit code), --force-conflicts, and
    an Update manager recorded for kubectl scale's-like merge patches."""
    with Apisim() as sim:
        k = Kubectl(sim)
        dep = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, labels: {app: web, tier: fe}}\n"
               "spec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n"
               "    metadata: {labels: {app: web}}\n    spec:\n      containers:\n"
               "      - {name: c, image: nginx, ports: [{containerPort: 80}], env: [{name: A, value: a}, {name: B, value: b}]}\n")
        f = k.write("dep.yaml", dep)
        out = k.run("apply", "--server-side", "-f", f).stdout
        assert "deployment.apps/web serverside-applied" in out, out
        path = "/apis/apps/v1/namespaces/default/deployments/web"
        _, d = sim.json("GET", path, expect=200)
        mf = managers(d)
        assert list(mf) == [("kubectl", "Apply")], mf
        c = mf[("kubectl", "Apply")]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']
        assert "." in c and 'k:{"containerPort":80,"protocol":"TCP"}' in c["f:ports"], c
        assert set(c["f:env"]) == {'k:{"name":"A"}', 'k:{"name":"B"}'}, c
        # re-apply without env B and the tier label: both go
        f2 = k.write("dep2.yaml", dep.replace(", {name: B, value: b}", "").replace(", tier: fe", ""))
        k.run("apply", "--server-side", "-f", f2)
        _, d = sim.json("GET", path, expect=200)
        assert d["metadata"]["labels"] == {"app": "web"}, d["metadata"]
        assert [e["name"] for e in d["spec"]["template"]["spec"]["containers"][0]["env"]] == ["A"], d["spec"]
        # another manager takes replicas: kubectl reports the conflict
        f3 = k.write("rep.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 5}\n")
        p = k.run("apply", "--server-side", "--field-manager", "scaler", "-f", f3, ok=False)
        assert p.returncode != 0, p.stdout
        assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in p.stderr, p.stderr
        _, d = sim.json("GET", path, expect=200)
        assert d["spec"]["replicas"] == 2
        # the raw 409 as the real server writes it
        st, body = sim.json("PATCH", path + "?fieldManager=scaler", body={
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 5}},
            headers={"Content-Type": "application/apply-patch+yaml"})
        assert st == 409 and body["reason"] == "Conflict", body
        assert body["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "kubectl"',
                                              "field": ".spec.replicas"}], body
        out = k.run("apply", "--server-side", "--field-manager", "scaler", "--force-conflicts", "-f", f3).stdout
        assert "serverside-applied" in out, out
        _, d = sim.json("GET", path, expect=200)
        mf = managers(d)
        assert d["spec"]["replicas"] == 5 and mf[("scaler", "Apply")] == {"f:spec": {"f:replicas": {}}}, mf
        assert "f:replicas" not in mf[("kubectl", "Apply")]["f:spec"], mf
        # kubectl's own apply now conflicts with scaler, until it stops listing replicas
        p = k.run("apply", "--server-side", "-f", f2, ok=False)
        assert 'conflict with "scaler": .spec.replicas' in p.stderr, p.stderr
        k.run("apply", "--server-side", "-f", k.write("dep3.yaml", open(f2).read().replace("  replicas: 2\n", "")))
        _, d = sim.json("GET", path, expect=200)
        assert d["spec"]["replicas"] == 5, d["spec"]        # still owned by scaler: kept
        # a non-apply write records an Update manager
        k.run("label", "deployment", "web", "team=x")
        _, d = sim.json("GET", path, expect=200)
        mf = managers(d)
        assert mf.get(("kubectl-label", "Update")) == {"f:metadata": {"f:labels": {"f:team": {}}}}, mf


def test_kubectl_with_token_over_generated_tls():
    """kube-apisim --token serves HTTPS with a CA it made and wrote into its
    kubeconfig: kubectl (which sends no bearer token over plain HTTP) creates
    and gets unchanged, and a wrong token is a 401 to it."""
    with Apisim("--token", "admin-tok") as sim:
        assert sim.url.startswith("https://127.0.0.1:"), sim.url
        k = Kubectl(sim)
        k.run("create", "namespace", "n1")
        k.run("-n", "n1", "create", "configmap", "cm1", "--from-literal=a=b")
        out = k.run("-n", "n1", "get", "configmap", "cm1", "-o", "json").stdout
        assert json.loads(out)["data"] == {"a": "b"}
        assert "cm1" in k.run("-n", "n1", "get", "configmaps").stdout
        p = k.run("get", "namespaces", "--token", "wrong", ok=False)
        assert p.returncode != 0 and "Unauthorized" in p.stderr, p.stderr


RBAC_YAML = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-reader, namespace: default}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-cm, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: team-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: metrics-reader}
rules: [{nonResourceURLs: [/metrics], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
"""


def test_kubectl_auth_can_i_and_whoami():
    """kubectl auth whoami (SelfSubjectReview) and auth can-i
    (SelfSubjectAccessReview) against --rbac, for the admin token and a
    token-file user bound to a Role and to a /metrics ClusterRole."""
    tmp = tempfile.mkdtemp(prefix="apisim-tokens-")
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write('alice-tok,alice,uid-alice,"team-a"\n')
    with Apisim("--token", "admin-tok", "--rbac", "--token-auth-file", tokens) as sim:
        k = Kubectl(sim)
        who = json.loads(k.run("auth", "whoami", "-o", "json").stdout)
        assert who["kind"] == "SelfSubjectReview"
        assert who["status"]["userInfo"]["username"] == "kubernetes-admin"
        assert "system:masters" in who["status"]["userInfo"]["groups"]
        who = json.loads(k.run("auth", "whoami", "-o", "json", "--token", "alice-tok").stdout)
        assert who["status"]["userInfo"] == {"username": "alice", "uid": "uid-alice",
                                             "groups": ["team-a", "system:authenticated"]}, who
        assert k.run("auth", "can-i", "create", "pods").stdout.strip() == "yes"
        p = k.run("auth", "can-i", "list", "configmaps", "-n", "default", "--token", "alice-tok", ok=False)
        assert p.returncode == 1 and p.stdout.strip() == "no", (p.returncode, p.stdout, p.stderr)
        # (kubectl create role|rolebinding would send protobuf kinds the simulator does not decode)
        k.run("apply", "-f", k.write("rbac.yaml", RBAC_YAML))
        assert k.run("auth", "can-i", "list", "configmaps", "-n", "default",
                     "--token", "alice-tok").stdout.strip() == "yes"
        p = k.run("auth", "can-i", "list", "configmaps", "-n", "kube-system", "--token", "alice-tok", ok=False)
        assert p.stdout.strip() == "no"
        assert k.run("auth", "can-i", "get", "/metrics", "--token", "alice-tok").stdout.strip() == "yes"
        p = k.run("auth", "can-i", "get", "/debug", "--token", "alice-tok", ok=False)
        assert p.stdout.strip() == "no"
        # and alice lists what the Role grants
        k.run("-n", "default", "get", "configmaps", "--token", "alice-tok")


if __name__ == "__main__":
    run_tests(globals())
