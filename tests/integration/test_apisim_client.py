# SPDX-License-Identifier: Apache-2.0
"""kube-apisim against real third-party clients: python3-kubernetes (Debian
package) and, when installed, kubectl."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from taplib import Apisim, FIXTURES, Skip, run_tests  # noqa: E402


def client(sim):
    try:
        import kubernetes
    except ImportError:
        raise Skip("python3-kubernetes not installed")
    cfg = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=sim.kubeconfig, client_configuration=cfg)
    return kubernetes, kubernetes.client.ApiClient(cfg)


def test_list_create_get_stale_update_patch_delete():
    with Apisim("--generate", "pods=5") as s:
        k8s, api = client(s)
        core = k8s.client.CoreV1Api(api)
        pods = core.list_pod_for_all_namespaces()
        assert len(pods.items) == 5 and pods.metadata.resource_version
        assert pods.items[0].spec.containers[0].name
        cm = core.create_namespaced_config_map("default", {"metadata": {"name": "c1"}, "data": {"a": "1"}})
        assert cm.metadata.uid and cm.metadata.resource_version
        stale = core.read_namespaced_config_map("c1", "default")
        cm.data = {"a": "2"}
        core.replace_namespaced_config_map("c1", "default", cm)
        stale.data = {"a": "3"}
        try:
            core.replace_namespaced_config_map("c1", "default", stale)
            raise AssertionError("stale update accepted")
        except k8s.client.exceptions.ApiException as e:
            assert e.status == 409 and json.loads(e.body)["reason"] == "Conflict"
        try:
            core.create_namespaced_config_map("default", {"metadata": {"name": "c1"}})
            raise AssertionError("duplicate create accepted")
        except k8s.client.exceptions.ApiException as e:
            assert e.status == 409 and json.loads(e.body)["reason"] == "AlreadyExists"
        p = core.patch_namespaced_config_map("c1", "default", {"metadata": {"labels": {"x": "y"}}})
        assert p.metadata.labels == {"x": "y"} and p.data == {"a": "2"}
        core.delete_namespaced_config_map("c1", "default")
        try:
            core.read_namespaced_config_map("c1", "default")
            raise AssertionError("deleted object still readable")
        except k8s.client.exceptions.ApiException as e:
            assert e.status == 404


def test_watch_from_resource_version():
    with Apisim() as s:
        k8s, api = client(s)
        core = k8s.client.CoreV1Api(api)
        rv = core.list_namespaced_config_map("default").metadata.resource_version
        core.create_namespaced_config_map("default", {"metadata": {"name": "w1"}})
        core.patch_namespaced_config_map("w1", "default", {"data": {"k": "v"}})
        core.delete_namespaced_config_map("w1", "default")
        w = k8s.watch.Watch()
        seen = []
        for ev in w.stream(core.list_namespaced_config_map, "default", resource_version=rv,
                           timeout_seconds=5, allow_watch_bookmarks=True):
            if ev["type"] == "BOOKMARK":
                continue
            seen.append((ev["type"], ev["object"].metadata.name))
            if len(seen) == 3:
                w.stop()
        assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")], seen


def test_crd_create_then_use():
    with Apisim() as s:
        k8s, api = client(s)
        ext = k8s.client.ApiextensionsV1Api(api)
        ext.create_custom_resource_definition({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "podsets.demo.kctrld.io"},
            "spec": {"group": "demo.kctrld.io", "scope": "Namespaced",
                     "names": {"plural": "podsets", "singular": "podset", "kind": "PodSet"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
        crd = ext.read_custom_resource_definition("podsets.demo.kctrld.io")
        assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
        co = k8s.client.CustomObjectsApi(api)
        obj = co.create_namespaced_custom_object("demo.kctrld.io", "v1", "default", "podsets",
                                                 {"apiVersion": "demo.kctrld.io/v1", "kind": "PodSet",
                                                  "metadata": {"name": "ps"}, "spec": {"replicas": 2}})
        assert obj["metadata"]["generation"] == 1
        obj = co.patch_namespaced_custom_object("demo.kctrld.io", "v1", "default", "podsets", "ps", {"spec": {"replicas": 3}})
        assert obj["metadata"]["generation"] == 2
        st = co.patch_namespaced_custom_object_status("demo.kctrld.io", "v1", "default", "podsets", "ps",
                                                      {"status": {"observedGeneration": 2}})
        assert st["status"]["observedGeneration"] == 2
        items = co.list_namespaced_custom_object("demo.kctrld.io", "v1", "default", "podsets")["items"]
        assert [i["metadata"]["name"] for i in items] == ["ps"]
        co.delete_namespaced_custom_object("demo.kctrld.io", "v1", "default", "podsets", "ps")
        assert co.list_namespaced_custom_object("demo.kctrld.io", "v1", "default", "podsets")["items"] == []


def test_dynamic_client_discovery():
    with Apisim(seeds=[os.path.join(FIXTURES, "objects", "deployment-k9s.json")]) as s:
        k8s, api = client(s)
        try:
            from kubernetes.dynamic import DynamicClient
        except ImportError:
            raise Skip("kubernetes.dynamic not available")
        dyn = DynamicClient(api)
        deps = dyn.resources.get(api_version="apps/v1", kind="Deployment")
        lst = deps.get()
        assert len(lst.items) == 1
        leases = dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
        assert leases.namespaced


def kubectl(s, *args, input=None):
    exe = shutil.which("kubectl")
    if not exe:
        raise Skip("kubectl not installed")
    r = subprocess.run([exe, "--kubeconfig", s.kubeconfig] + list(args), input=input,
                       capture_output=True, text=True, timeout=60)
    return r


def test_kubectl_get_apply_delete():
    with Apisim("--generate", "pods=3") as s:
        r = kubectl(s, "get", "pods", "-A", "-o", "json")
        assert r.returncode == 0, r.stderr
        assert len(json.loads(r.stdout)["items"]) == 3
        cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "k1"}, "data": {"a": "b"}})
        r = kubectl(s, "create", "--validate=false", "-f", "-", input=cm)
        assert r.returncode == 0, r.stderr
        r = kubectl(s, "get", "configmap", "k1", "-o", "jsonpath={.data.a}")
        assert r.returncode == 0 and r.stdout == "b", (r.stdout, r.stderr)
        r = kubectl(s, "label", "configmap", "k1", "x=y")
        assert r.returncode == 0, r.stderr
        r = kubectl(s, "get", "configmaps", "-l", "x=y", "-o", "name")
        assert r.stdout.strip() == "configmap/k1", (r.stdout, r.stderr)
        r = kubectl(s, "delete", "configmap", "k1")
        assert r.returncode == 0, r.stderr
        r = kubectl(s, "get", "configmap", "k1")
        assert r.returncode != 0 and "NotFound" in r.stderr


if __name__ == "__main__":
    run_tests(globals())
