#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kctrld over HTTP/2, as it talks to a real kube-apiserver (which offers h2
over TLS via ALPN). kube-apisim speaks HTTP/1.1 only, so nghttpx (Debian
package nghttp2-proxy) terminates TLS + HTTP/2 in front of it and logs, per
request, the negotiated protocol and the client's port. The podset
controller must list, watch and write through it, every request must use h2,
and the informers' watches must share one connection (multiplexed streams),
not one TCP connection each."""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins", "common"))
import itest  # noqa: E402
from itest import Cluster, Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

sys.path.insert(0, os.path.join(itest.ROOT, "plugins", "podset", "tests"))
# The podset plugin's own test module: its config, PodSet and Pod helpers.
from test_podset import CONFIG, NS, PODS, PS_PATH, live_pods, podset  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class H2Proxy:
    """nghttpx: TLS + HTTP/2 on a loopback port, proxying to backend_url."""

    def __init__(self, backend_url, pki):
        self.tmp = pki
        self.port = free_port()
        self.access = os.path.join(pki, "access.log")
        backend = backend_url.split("//")[1].replace(":", ",")
        self.proc = subprocess.Popen(
            ["nghttpx", "--conf=/dev/null", "--workers=1", "--no-ocsp",
             "--frontend=127.0.0.1,%d" % self.port, "--backend=%s" % backend,
             "--accesslog-file=" + self.access,
             "--accesslog-format=$alpn $remote_port $method $status $path",
             "--errorlog-file=" + os.path.join(pki, "error.log"),
             "--backend-read-timeout=10m", "--frontend-http2-read-timeout=10m",
             os.path.join(pki, "server.key"), os.path.join(pki, "server.crt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.listening, timeout=10, what="nghttpx listening")

    def listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def kubeconfig(self):
        path = os.path.join(self.tmp, "kubeconfig")
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: h2\n  cluster:\n"
                    "    server: https://127.0.0.1:%d\n    certificate-authority: %s\n"
                    "users:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  context: {cluster: h2, user: u}\n"
                    "current-context: c\n" % (self.port, os.path.join(self.tmp, "ca.crt")))
        return path

    def requests(self):
        """(alpn, client port, method, status, path) per finished request."""
        try:
            with open(self.access) as f:
                return [tuple(line.split(" ", 4)) for line in f.read().splitlines() if line]
        except FileNotFoundError:
            return []

    def stop(self):
        taplib.stop_process(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def test_controller_over_http2():
    itest.require_binaries("podset")
    if not shutil.which("nghttpx"):
        raise taplib.Skip("nghttpx not installed (Debian package nghttp2-proxy; .ci/install-deps installs it)")
    pki = taplib.make_pki()
    with taplib.Apisim(seeds=[os.path.join(itest.ROOT, "config", "podset-crd.yaml")]) as sim, \
            H2Proxy(sim.url, pki) as proxy:
        c = Cluster(sim)
        c.namespace(NS)
        c.create(PS_PATH, podset("web", 2))
        with Kctrld(CONFIG % (itest.plugin_path("podset"), "in-process"), proxy.kubeconfig()) as k:
            wait_for(lambda: len(live_pods(c, "web")) == 2, what="2 pods through HTTP/2", kctrld=k)
            # A change seen only through the watch: scale to 3.
            c.merge_patch(PS_PATH + "/web", {"spec": {"replicas": 3}})
            wait_for(lambda: len(live_pods(c, "web")) == 3, what="3 pods after a watch event over HTTP/2", kctrld=k)
            assert k.stop() == 0, k.log()[-2000:]
        # Watches are logged when they end (at the daemon's exit).
        wait_for(lambda: any("watch=" in r[4] for r in proxy.requests()), timeout=10, what="watches logged")
        time.sleep(0.5)
        reqs = proxy.requests()
    assert reqs, "nghttpx logged no requests"
    not_h2 = [r for r in reqs if r[0] != "h2"]
    assert not not_h2, "requests not over HTTP/2: %s" % not_h2[:5]
    writes = [r for r in reqs if r[2] == "POST" and r[4].startswith(PODS)]
    assert len(writes) == 3 and all(r[3] == "201" for r in writes), "pod creates: %s" % writes
    watches = [r for r in reqs if r[2] == "GET" and "watch=" in r[4]]
    resources = {r[4].split("?")[0].rsplit("/", 1)[1] for r in watches}
    assert resources == {"podsets", "pods"}, "watched: %s" % sorted(resources)
    ports = {r[1] for r in watches}
    assert len(ports) == 1, "watches spread over %d connections: %s" % (len(ports), watches)


if __name__ == "__main__":
    taplib.run_tests(globals())
