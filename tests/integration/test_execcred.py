#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kctrld with an exec credential plugin (tests/integration/execcred_plugin.py)
against kube-apisim whose tokens expire (--token-file lines "TOKEN EXPIRY"):
the plugin is re-run before expiry and after a 401, and the daemon keeps
listing; a failing, a hanging and a malformed plugin each give a clear log
line, the daemon keeps running and recovers when the plugin works again.
Tokens never reach the log. Also a rotated --token-file token (no plugin)
is picked up after a 401 without a restart."""
import json
import os
import re
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from taplib import Apisim, Kctrld, make_pki, run_tests, wait_for  # noqa: E402

ADMIN = {"Authorization": "Bearer admin-token-for-the-test"}
PLUGIN = os.path.join(HERE, "execcred_plugin.py")

CONFIG = """
logLevel: debug
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - apiVersion: v1
    kind: ConfigMap
controllers: []
"""


def kubeconfig(path, sim, d):
    with open(path, "w") as f:
        f.write("""apiVersion: v1
kind: Config
current-context: sim
clusters:
- name: sim
  cluster: %s
contexts:
- name: sim
  context: {cluster: sim, user: plugin}
users:
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: python3
      args: [%s, --cluster, sim]
      env: [{name: EXECCRED_DIR, value: "%s"}]
      provideClusterInfo: true
      interactiveMode: Never
      installHint: "see tests/integration/execcred_plugin.py"
""" % (sim.cluster(), PLUGIN, d))
    os.chmod(path, 0o600)


def put(d, name, value):
    with open(os.path.join(d, name), "w") as f:
        f.write(value)


def runs(d):
    try:
        with open(os.path.join(d, "runs")) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def cm(sim, name):
    st, _, body = sim.request("POST", "/api/v1/namespaces/default/configmaps",
                              {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": name, "namespace": "default"}}, headers=ADMIN)
    assert st == 201, (st, body)


def objects(k):
    url = "http://127.0.0.1:%d/debug/informers" % k.metrics_port()
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)[0]["objects"]


def count_cms(sim):
    st, _, body = sim.request("GET", "/api/v1/configmaps", headers=ADMIN)
    assert st == 200, st
    return len(json.loads(body)["items"])


def poke(sim):
    """Ends every watch, so that the daemon sends new requests (an open
    watch outlives its token, as on a real API server)."""
    sim.control("POST", "drop-watches")
    return True


def sees_all(k, sim):
    """The daemon's cache holds every ConfigMap the server has."""
    want = count_cms(sim)
    return wait_for(lambda: objects(k) == want, timeout=40, interval=0.5,
                    what="the informer to hold %d ConfigMaps" % want)


def got_401(sim):
    st, _, body = sim.request("GET", "/_apisim/requests")
    return any(r["code"] == 401 for r in json.loads(body)["requests"])


def test_exec_plugin_rotation_401_and_failures():
    d = tempfile.mkdtemp(prefix="execcred-")
    tf = os.path.join(d, "apisim-tokens")
    put(d, "tokenfile", tf)
    put(d, "mode", "ok")
    open(tf, "w").close()
    os.environ["KCTRLD_EXEC_TIMEOUT_SECONDS"] = "2"
    try:
        with Apisim("--token", ADMIN["Authorization"][7:], "--token-file", tf) as sim:
            kc = os.path.join(d, "kubeconfig")
            kubeconfig(kc, sim, d)
            cm(sim, "before")
            with Kctrld(CONFIG, kc) as k:
                # 1. Tokens live 4 s and say so: re-run before expiry.
                sees_all(k, sim)
                wait_for(lambda: len(runs(d)) >= 4, timeout=40, what="4 plugin runs")
                cm(sim, "after-rotations")
                sees_all(k, sim)
                assert "exec plugin gave a token expiring in" in k.log()
                # 2. Tokens live 3 s but claim an hour: the 401 re-runs it.
                put(d, "lifetime", "3")
                put(d, "claim", "3600")
                wait_for(lambda: re.search(r"expiring in 3[56]\d\ds", k.log()), timeout=40,
                         what="a token claiming an hour")
                n = len(runs(d))
                sim.request("DELETE", "/_apisim/counters")
                wait_for(lambda: poke(sim) and len(runs(d)) >= n + 2, timeout=40, interval=1,
                         what="re-runs after 401s (%s)" % runs(d))
                assert got_401(sim)
                # Tokens that outlive the reflector's backoff again.
                put(d, "lifetime", "60")
                put(d, "claim", "3600")
                cm(sim, "after-401")
                sees_all(k, sim)
                # 3. A failing, a hanging, a malformed plugin: clear lines, no crash.
                for mode, line in (("fail", r"exec plugin failed: python3 exited with status 1; retrying"),
                                   ("hang", r"exec plugin failed: python3 did not finish within 2 s; its "
                                            r"process group was killed"),
                                   ("malformed", r"exec plugin failed: python3: plugin output is not JSON")):
                    put(d, "mode", mode)
                    open(tf, "w").close()  # revoke every token: the next request gets a 401
                    wait_for(lambda: poke(sim) and re.search(line, k.log()), timeout=60, interval=1,
                             what="%r in the log" % line)
                    assert k.alive(), k.log()[-3000:]
                assert "exec plugin stderr: cannot reach the identity provider" in k.log()
                # Each outcome in client-go's terms; the 401s among the requests.
                snap = k.scrape()
                for labels in ('code="0",call_status="no_error"', 'code="1",call_status="plugin_execution_error"',
                               'code="-1",call_status="plugin_execution_error"'):
                    assert k.metric(snap, "rest_client_exec_plugin_call_total", labels) >= 1, (labels, snap)
                assert k.metric(snap, "rest_client_requests_total", 'code="401"') >= 1
                assert k.metric(snap, "rest_client_exec_plugin_ttl_seconds") == float("inf")
                # 4. It works again: the daemon recovers.
                put(d, "mode", "ok")
                put(d, "lifetime", "30")
                put(d, "claim", "30")
                cm(sim, "recovered")
                sees_all(k, sim)
                assert k.alive()
                log = k.log()
                assert "rot-" not in log, "a token reached the log"
                assert "issued [REDACTED]" in log, log[-3000:]
            assert k.code == 0, k.log()[-3000:]
    finally:
        del os.environ["KCTRLD_EXEC_TIMEOUT_SECONDS"]


def test_token_file_rotation_after_401():
    d = tempfile.mkdtemp(prefix="tokfile-")
    server_tokens = os.path.join(d, "server-tokens")
    client_token = os.path.join(d, "token")
    put(d, "server-tokens", "first-token-aaaaaaaa\n")
    put(d, "token", "first-token-aaaaaaaa\n")
    os.chmod(client_token, 0o600)
    with Apisim("--token", ADMIN["Authorization"][7:], "--token-file", server_tokens) as sim:
        kc = os.path.join(d, "kubeconfig")
        with open(kc, "w") as f:
            f.write("current-context: s\nclusters: [{name: s, cluster: %s}]\n"
                    "users: [{name: u, user: {tokenFile: %s}}]\n"
                    "contexts: [{name: s, context: {cluster: s, user: u}}]\n" % (sim.cluster(), client_token))
        os.chmod(kc, 0o600)
        cm(sim, "one")
        with Kctrld(CONFIG, kc) as k:
            sees_all(k, sim)
            # Rotate: the server accepts only the new token, the file holds it.
            put(d, "token", "second-token-bbbbbbbb\n")
            put(d, "server-tokens", "second-token-bbbbbbbb\n")
            poke(sim)
            cm(sim, "two")
            sees_all(k, sim)
            assert "first-token" not in k.log()
            assert "second-token" not in k.log()
        assert k.code == 0


def tls_create_cm(url, ca, name):
    import http.client
    import ssl
    host, port = url.split("//")[1].split(":")
    c = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=ca),
                                    timeout=10)
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": "default"}})
    c.request("POST", "/api/v1/namespaces/default/configmaps", body=body,
              headers=dict(ADMIN, **{"Content-Type": "application/json"}))
    r = c.getresponse()
    r.read()
    c.close()
    assert r.status == 201, r.status


def test_ca_file_rotation():
    """The API server's CA changes and the kubeconfig's certificate-authority
    file is rewritten: new connections verify with the new file (libcurl's
    24 h CA cache would keep the old one)."""
    p1, p2 = make_pki(), make_pki()
    d = tempfile.mkdtemp(prefix="cafile-")
    ca = os.path.join(d, "ca.crt")
    with open(os.path.join(p1, "ca.crt")) as f, open(ca, "w") as g:
        g.write(f.read())
    tls = lambda p: ("--tls-cert", os.path.join(p, "server.crt"), "--tls-key",  # noqa: E731
                     os.path.join(p, "server.key"), "--tls-ca", os.path.join(p, "ca.crt"))
    sim1 = Apisim("--token", ADMIN["Authorization"][7:], *tls(p1))
    url = sim1.url
    port = url.rsplit(":", 1)[1]
    kc = os.path.join(d, "kubeconfig")
    with open(kc, "w") as f:
        f.write("current-context: s\nclusters: [{name: s, cluster: {server: '%s', "
                "certificate-authority: ca.crt}}]\n"
                "users: [{name: u, user: {token: %s}}]\n"
                "contexts: [{name: s, context: {cluster: s, user: u}}]\n" % (url, ADMIN["Authorization"][7:]))
    os.chmod(kc, 0o600)
    try:
        tls_create_cm(url, os.path.join(p1, "ca.crt"), "one")
        with Kctrld(CONFIG, kc) as k:
            wait_for(lambda: objects(k) == 1, timeout=30, what="the first ConfigMap")
            sim1.stop()
            with open(os.path.join(p2, "ca.crt")) as f, open(ca + ".tmp", "w") as g:
                g.write(f.read())
            os.rename(ca + ".tmp", ca)
            with Apisim("--token", ADMIN["Authorization"][7:], "--listen", "127.0.0.1:" + port,
                        *tls(p2)) as sim2:
                assert sim2.url == url, (sim2.url, url)
                tls_create_cm(url, os.path.join(p2, "ca.crt"), "two-a")
                tls_create_cm(url, os.path.join(p2, "ca.crt"), "two-b")
                wait_for(lambda: objects(k) == 2, timeout=60, interval=0.5,
                         what="the ConfigMaps of the server with the new CA")
                assert k.alive()
            assert k.stop() == 0
    finally:
        sim1.stop()


def test_exec_plugin_client_certificate():
    """The plugin answers a client certificate and key (no token): the
    daemon authenticates over TLS with them."""
    p = make_pki()
    d = tempfile.mkdtemp(prefix="execcert-")
    with open(os.path.join(p, "client.crt")) as f:
        cert = f.read()
    with open(os.path.join(p, "client.key")) as f:
        key = f.read()
    cred = os.path.join(d, "cred.json")
    with open(cred, "w") as f:
        json.dump({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1",
                   "status": {"clientCertificateData": cert, "clientKeyData": key}}, f)
    os.chmod(cred, 0o600)
    pp = lambda n: os.path.join(p, n)  # noqa: E731
    with Apisim("--token", ADMIN["Authorization"][7:], "--tls-cert", pp("server.crt"), "--tls-key",
                pp("server.key"), "--client-ca", pp("ca.crt"), "--tls-ca", pp("ca.crt")) as sim:
        kc = os.path.join(d, "kubeconfig")
        with open(kc, "w") as f:
            f.write("current-context: s\nclusters: [{name: s, cluster: {server: '%s', "
                    "certificate-authority: %s}}]\n"
                    "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                    "command: cat, args: [%s]}}}]\n"
                    "contexts: [{name: s, context: {cluster: s, user: u}}]\n" % (sim.url, pp("ca.crt"), cred))
        os.chmod(kc, 0o600)
        tls_create_cm(sim.url, pp("ca.crt"), "one")
        with Kctrld(CONFIG, kc) as k:
            wait_for(lambda: objects(k) == 1, timeout=30, what="the ConfigMap, listed with the plugin's certificate")
            assert "exec plugin gave a client certificate without expiry" in k.log()
            assert "PRIVATE KEY" not in k.log()
            # The certificate's time to live (make_pki: 2 days).
            snap = k.scrape()
            ttl = k.metric(snap, "rest_client_exec_plugin_ttl_seconds")
            assert 2 * 86400 - 600 < ttl <= 2 * 86400, ttl
            assert k.metric(snap, "rest_client_exec_plugin_call_total", 'code="0",call_status="no_error"') >= 1
            assert k.metric(snap, "rest_client_requests_total", 'code="200"') >= 1
        assert k.code == 0, k.log()[-3000:]


if __name__ == "__main__":
    run_tests(globals())
