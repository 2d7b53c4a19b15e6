#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""--metrics-secure against kube-apisim --rbac: kctrld runs as the
ServiceAccount with exactly the RBAC `kctrld rbac` generates for a config with
metrics.secure (so the generated rules are enough for the reviews), and its
/metrics over TLS answers as controller-runtime's authentication and
authorization filter does: no token or a token the TokenReview does not
authenticate 401, an authenticated user without the right 403, a user bound
to the generated kctrld-metrics-reader ClusterRole the metrics (and 403 on
/debug/informers, which that role does not grant). The probes on their own
listener stay open. The certificate files replaced while it runs: the next
connections get the new certificate. Without certPath a self-signed
certificate is served."""
import http.client
import os
import re
import shutil
import ssl
import subprocess
import tempfile

import yaml

import taplib

BUILD = taplib.BUILD
KCTRLD = os.path.join(BUILD, "kctrld")
ADMIN = "admin-token"
SA_TOKEN = "kctrld-sa-token"
SA_USER = "system:serviceaccount:kctrld:kctrld"
READER_TOKEN = "prom-token"
NOBODY_TOKEN = "nobody-token"

CONFIG = """
metrics: {{ bindAddress: "127.0.0.1:0", secure: true{cert} }}
informers:
  - apiVersion: v1
    kind: ConfigMap
controllers: []
"""


def require():
    for p in (KCTRLD, os.path.join(BUILD, "kube-apisim")):
        if not os.path.exists(p):
            raise taplib.Skip("%s not built" % p)
    if not shutil.which("openssl"):
        raise taplib.Skip("openssl not installed")


def admin(sim, method, path, body=None, expect=None):
    return sim.json(method, path, body, headers={"Authorization": "Bearer " + ADMIN}, expect=expect)


def resource_path(doc):
    group, _, version = doc["apiVersion"].rpartition("/")
    base = "/apis/%s/%s" % (group, version) if group else "/api/" + version
    plural = {"ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles", "Role": "roles",
              "ClusterRoleBinding": "clusterrolebindings", "RoleBinding": "rolebindings"}[doc["kind"]]
    ns = doc["metadata"].get("namespace")
    return base + ("/namespaces/%s/" % ns if ns else "/") + plural


def write_pair(d, cn):
    """A self-signed pair for CN into d/tls.crt and d/tls.key, each replaced
    by a rename (key first), as a Secret volume swaps its files. Returns the
    certificate's DER."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "1", "-subj", "/CN=" + cn, "-keyout", "new.key", "-out", "new.crt"],
                   cwd=d, check=True, capture_output=True)
    os.rename(os.path.join(d, "new.key"), os.path.join(d, "tls.key"))
    os.rename(os.path.join(d, "new.crt"), os.path.join(d, "tls.crt"))
    with open(os.path.join(d, "tls.crt")) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def get(port, path, token=None):
    """(status, body, the server certificate's DER) of an HTTPS GET that
    does not verify the certificate."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=15)
    conn.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    der = conn.sock.getpeercert(binary_form=True)
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body, der


def probe_port(k):
    m = taplib.wait_for(lambda: re.search(r"health probes .* port=(\d+)", k.log()),
                        what="kctrld to log its probe port")
    return int(m.group(1))


def test_secure_metrics():
    require()
    tmp = tempfile.mkdtemp(prefix="kctrld-msec-")
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write("%s,%s,uid-sa\n%s,prometheus,uid-prom\n%s,nobody,uid-nobody\n" % (
            SA_TOKEN, SA_USER, READER_TOKEN, NOBODY_TOKEN))
    certs = os.path.join(tmp, "certs")
    os.mkdir(certs, 0o700)
    first = write_pair(certs, "one")
    cfg_text = CONFIG.format(cert=", certPath: %s" % certs)
    cfg_dir = os.path.join(tmp, "cfg")
    os.mkdir(cfg_dir, 0o700)
    with open(os.path.join(cfg_dir, "kctrld.yaml"), "w") as f:
        f.write(cfg_text)
    os.chmod(os.path.join(cfg_dir, "kctrld.yaml"), 0o600)
    out = subprocess.run([KCTRLD, "rbac", "--config", os.path.join(cfg_dir, "kctrld.yaml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    names = [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole"]
    assert names == ["kctrld", "kctrld-metrics-auth", "kctrld-metrics-reader"], names
    with taplib.Apisim("--token", ADMIN, "--rbac", "--token-auth-file", tokens) as sim:
        admin(sim, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "kctrld"}}, expect=201)
        for d in docs:
            admin(sim, "POST", resource_path(d), d, expect=201)
        # The scraper: bound to the generated reader role, as an operator would.
        admin(sim, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "prometheus-metrics"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "kctrld-metrics-reader"},
               "subjects": [{"kind": "User", "name": "prometheus"}]}, expect=201)
        kubeconfig = os.path.join(tmp, "kubeconfig")
        with open(sim.kubeconfig) as f:
            kc = yaml.safe_load(f)
        for u in kc["users"]:
            u["user"] = {"token": SA_TOKEN}
        with open(kubeconfig, "w") as f:
            yaml.safe_dump(kc, f)
        os.chmod(kubeconfig, 0o600)
        with taplib.Kctrld(cfg_text, kubeconfig, args=["--health-probe-bind-address", "127.0.0.1:0"],
                           dir=os.path.join(tmp, "k")) as k:
            port = k.metrics_port()
            assert "tls=on authorization=on" in k.log(), k.log()
            st, body, der = get(port, "/metrics")
            assert st == 401 and der == first, (st, body)
            st, body, _ = get(port, "/metrics", "forged-token")
            assert st == 401, (st, body)
            st, body, _ = get(port, "/metrics", NOBODY_TOKEN)
            assert st == 403 and "nobody" in body, (st, body)
            st, body, _ = get(port, "/metrics", READER_TOKEN)
            assert st == 200 and "# TYPE" in body, (st, body[:300], k.log()[-2000:])
            st, body, _ = get(port, "/debug/informers", READER_TOKEN)
            assert st == 403, (st, body)
            # The probes: plain HTTP, no token.
            pp = probe_port(k)
            conn = http.client.HTTPConnection("127.0.0.1", pp, timeout=10)
            conn.request("GET", "/livez")
            assert conn.getresponse().status == 200
            conn.close()
            # Rotated files: the new certificate from the next connections
            # (each handshake looks at the files at most once a second).
            second = write_pair(certs, "two")
            assert second != first
            taplib.wait_for(lambda: get(port, "/metrics", READER_TOKEN)[2] == second, timeout=10,
                            what="the rotated certificate to be served")
            st, body, _ = get(port, "/metrics", READER_TOKEN)
            assert st == 200, (st, body)
            assert "reloaded the serving certificate" in k.log()
            assert k.stop() == 0, k.log()[-3000:]
            assert not taplib.ERROR_LINE.search(k.log()), k.log()
        # No certificate files: a self-signed certificate, made at start.
        with taplib.Kctrld(CONFIG.format(cert=""), kubeconfig, dir=os.path.join(tmp, "k2")) as k:
            st, body, der = get(k.metrics_port(), "/metrics", READER_TOKEN)
            assert st == 200, (st, body)
            assert b"kctrld" in der and der != first and der != second
            assert "self-signed certificate" in k.log()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    taplib.run_tests(globals())
