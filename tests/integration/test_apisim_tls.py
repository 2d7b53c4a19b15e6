# SPDX-License-Identifier: Apache-2.0
"""kube-apisim over TLS: server certificate, bearer token, client certificates."""
import http.client
import json
import os
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from taplib import Apisim, make_pki, run_tests  # noqa: E402


def get(url, path, ctx, token=None):
    host, port = url.split("//")[1].split(":")
    c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
    c.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, json.loads(body)


def test_tls_token_and_client_cert():
    d = make_pki()
    p = lambda n: os.path.join(d, n)  # noqa: E731
    with Apisim("--tls-cert", p("server.crt"), "--tls-key", p("server.key"), "--client-ca", p("ca.crt"),
                "--tls-ca", p("ca.crt"), "--token", "tok",
                "--kubeconfig-client-cert", p("client.crt"), "--kubeconfig-client-key", p("client.key")) as s:
        assert s.url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=p("ca.crt"))
        st, doc = get(s.url, "/api/v1/namespaces", ctx)
        assert st == 401 and doc["reason"] == "Unauthorized"
        st, doc = get(s.url, "/api/v1/namespaces", ctx, token="tok")
        assert st == 200 and doc["kind"] == "NamespaceList"
        cctx = ssl.create_default_context(cafile=p("ca.crt"))
        cctx.load_cert_chain(p("client.crt"), p("client.key"))
        st, doc = get(s.url, "/api/v1/namespaces", cctx)
        assert st == 200, doc
        # a certificate from another CA is not accepted
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rogue.key",
                        "-out", "rogue.crt", "-days", "2", "-subj", "/CN=rogue"], cwd=d, check=True, capture_output=True)
        rctx = ssl.create_default_context(cafile=p("ca.crt"))
        rctx.load_cert_chain(p("rogue.crt"), p("rogue.key"))
        try:
            st, doc = get(s.url, "/api/v1/namespaces", rctx)
            assert st == 401, (st, doc)
        except ssl.SSLError:
            pass  # rejected during the handshake: also fine
        try:
            import kubernetes
        except ImportError:
            return
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=s.kubeconfig, client_configuration=cfg)
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(cfg))
        names = [n.metadata.name for n in core.list_namespace().items]
        assert "kube-system" in names


if __name__ == "__main__":
    run_tests(globals())
