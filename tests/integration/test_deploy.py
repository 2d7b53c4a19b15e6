#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/: the kustomize base is valid YAML with the expected kinds, its
RBAC is exactly `kctrld rbac` output for its config (it cannot drift), the
Deployment has the probes and the hardening docs/deploy.md promises, the
Containerfile installs the package as that user, and every object is
accepted by kube-apisim (plain HTTP POSTs, then read back). With kubectl
present, `kubectl kustomize` renders the same objects."""
import os
import shutil
import subprocess
import tempfile

import yaml

import taplib

ROOT = taplib.ROOT
BUILD = taplib.BUILD
KCTRLD = os.path.join(BUILD, "kctrld")
BASE = os.path.join(ROOT, "deploy", "base")

# Three ClusterRoles: the controllers', the metrics reviews' and the unbound
# metrics reader (kctrld rbac with metrics.secure).
KINDS = sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding",
                "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment", "Service"])


def load_base():
    """The objects of the base as kustomize would emit them, without kustomize:
    the resources files plus the generated ConfigMap (name without the hash)."""
    with open(os.path.join(BASE, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    docs = []
    for r in k["resources"]:
        with open(os.path.join(BASE, r)) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    for g in k["configMapGenerator"]:
        data = {}
        for fn in g["files"]:
            with open(os.path.join(BASE, fn)) as f:
                data[os.path.basename(fn)] = f.read()
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": g["name"], "namespace": k["namespace"]}, "data": data})
    for d in docs:
        if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert d["metadata"].get("namespace", k["namespace"]) == k["namespace"], d["metadata"]
            d["metadata"]["namespace"] = k["namespace"]
    return k, docs


def by_kind(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, (kind, found)
    return found[0]


def test_manifests_kinds_and_rbac_in_sync():
    if not os.access(KCTRLD, os.X_OK) or not os.path.exists(os.path.join(BUILD, "plugins", "ttl.so")):
        raise taplib.Skip("kctrld or plugins not built")
    k, docs = load_base()
    assert sorted(d["kind"] for d in docs) == KINDS, sorted(d["kind"] for d in docs)
    cfg = os.path.join(BASE, "kctrld.yaml")
    # --check-config loads the plugins: check a copy that names the built
    # ones instead of the package's /usr/lib/kctrld/plugins.
    tmp = tempfile.mkdtemp(prefix="kctrld-deploy-")
    with open(cfg) as f:
        text = f.read().replace("/usr/lib/kctrld/plugins/", os.path.join(BUILD, "plugins") + "/")
    local = os.path.join(tmp, "kctrld.yaml")
    with open(local, "w") as f:
        f.write(text)
    out = subprocess.run([KCTRLD, "--check-config", local], capture_output=True, text=True)
    shutil.rmtree(tmp, ignore_errors=True)
    assert out.returncode == 0, out
    out = subprocess.run([KCTRLD, "rbac", "--config", cfg, "--namespace", k["namespace"],
                          "--plugin-dir", os.path.join(BUILD, "plugins")], capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == "", out
    with open(os.path.join(BASE, "rbac.yaml")) as f:
        checked_in = f.read()
    assert checked_in == out.stdout, (
        "deploy/base/rbac.yaml differs from `kctrld rbac` output: regenerate it with\n"
        "  build/kctrld rbac --config deploy/base/kctrld.yaml --plugin-dir build/plugins > deploy/base/rbac.yaml")


def test_deployment_probes_and_hardening():
    k, docs = load_base()
    dep = by_kind(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == by_kind(docs, "ServiceAccount")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, sc
    assert sc["capabilities"]["drop"] == ["ALL"], sc
    assert c["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    with open(os.path.join(BASE, "kctrld.yaml")) as f:
        cfg = yaml.safe_load(f)
    assert cfg["metrics"]["bindAddress"].rsplit(":", 1)[1] == str(ports["metrics"]), cfg["metrics"]
    # Secure metrics (TLS, TokenReview + SubjectAccessReview) on kubebuilder's
    # 8443; the probes on a plain listener of their own, kubebuilder's 8081.
    assert cfg["metrics"]["secure"] is True and ports["metrics"] == 8443, cfg["metrics"]
    probe_arg = c["args"][c["args"].index("--health-probe-bind-address") + 1]
    assert probe_arg.rsplit(":", 1)[1] == str(ports["health"]) == "8081", c["args"]
    assert c["livenessProbe"]["httpGet"]["port"] == "health"
    assert c["readinessProbe"]["httpGet"]["port"] == "health"
    svc = by_kind(docs, "Service")
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics" and svc["spec"]["ports"][0]["port"] == 8443
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    # The config: the generated ConfigMap, mounted where the args point, not writable.
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    cm = by_kind(docs, "ConfigMap")
    assert vols["config"]["configMap"]["name"] == cm["metadata"]["name"]
    assert vols["config"]["configMap"]["defaultMode"] & 0o022 == 0
    # The file alone: its directory is the image's, not the volume's (writable by others).
    assert mounts["config"]["subPath"] == "kctrld.yaml" and mounts["config"]["subPath"] in cm["data"]
    assert mounts["config"]["readOnly"] is True
    assert c["args"][:2] == ["--config", mounts["config"]["mountPath"]], c["args"]
    assert cfg["leaderElection"]["namespace"] == k["namespace"]
    # The image: debian:12-slim with the package, the Deployment's user.
    with open(os.path.join(ROOT, "deploy", "Containerfile")) as f:
        cf = f.read()
    lines = [l for l in cf.splitlines() if l and not l.startswith("#")]
    assert lines[0] == "FROM debian:12-slim", lines[0]
    assert "apt-get install -y --no-install-recommends systemd-standalone-sysusers /tmp/kctrld_*.deb" in cf
    assert "USER %d:%d" % (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) in lines
    assert 'ENTRYPOINT ["/usr/bin/kctrld"]' in lines
    assert "useradd --system --uid %d --gid kctrld" % pod["securityContext"]["runAsUser"] in cf


PLURALS = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
           "ConfigMap": "configmaps", "Deployment": "deployments", "Service": "services"}


def collection(d):
    group, _, version = d["apiVersion"].rpartition("/")
    base = "/apis/%s/%s" % (group, version) if group else "/api/" + version
    ns = d["metadata"].get("namespace") if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding") else None
    return base + ("/namespaces/%s/" % ns if ns else "/") + PLURALS[d["kind"]]


def test_apisim_accepts_the_objects():
    if not os.access(os.path.join(BUILD, "kube-apisim"), os.X_OK):
        raise taplib.Skip("kube-apisim not built")
    _, docs = load_base()
    with taplib.Apisim() as sim:
        for d in sorted(docs, key=lambda d: d["kind"] != "Namespace"):
            st, got = sim.json("POST", collection(d), d)
            assert st == 201, (d["kind"], st, got)
        for d in docs:
            st, got = sim.json("GET", collection(d) + "/" + d["metadata"]["name"])
            assert st == 200 and got["kind"] == d["kind"], (d["kind"], st, got)
            for key in ("rules", "roleRef", "subjects", "data"):
                if key in d:
                    assert got[key] == d[key], (d["kind"], key, got[key], d[key])
        st, dep = sim.json("GET", "/apis/apps/v1/namespaces/kctrld/deployments/kctrld")
        assert dep["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_kustomize_renders_the_same_objects():
    kubectl = shutil.which("kubectl")
    if not kubectl:
        raise taplib.Skip("kubectl not installed")
    out = subprocess.run([kubectl, "kustomize", BASE], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rendered = [d for d in yaml.safe_load_all(out.stdout) if d]
    _, docs = load_base()
    def names(ds, hashed):
        return sorted((d["kind"], d["metadata"]["name"].rsplit("-", 1)[0] if hashed and d["kind"] == "ConfigMap"
                       else d["metadata"]["name"]) for d in ds)
    assert names(rendered, True) == names(docs, False), (names(rendered, True), names(docs, False))
    # The Deployment follows the generated (hashed) ConfigMap name; the Lease
    # name in the Role is left alone (kustomize renames resourceNames that
    # match a generated ConfigMap).
    cm = by_kind(rendered, "ConfigMap")["metadata"]["name"]
    dep = by_kind(rendered, "Deployment")
    assert dep["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] == cm
    assert by_kind(rendered, "Role")["rules"] == by_kind(docs, "Role")["rules"]
    assert all(d["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "kctrld" for d in rendered)


if __name__ == "__main__":
    taplib.run_tests(globals())
