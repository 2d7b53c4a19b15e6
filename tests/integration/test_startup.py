# SPDX-License-Identifier: Apache-2.0
"""Start-up of build/kctrld against kube-apisim when kinds are wrong or not
there yet:

- a misspelt kind (`kind: ConfigMaps`) is logged as "kind ConfigMaps is not
  served by v1 (did you mean ConfigMap?)", not as "HTTP 200 : ; retrying",
  and `--check-config` refuses it at the file:line:col of its `kind:`;
- systemd start with a CRD not installed yet: READY=1 comes once the daemon
  serves (a fake NOTIFY_SOCKET, a unix datagram socket the test reads), with
  STATUS= naming the kind that is not served; once the CRD is created the
  kind is discovered, its informer syncs and STATUS= says "ready: ...".
"""
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402

KCTRLD = os.path.join(taplib.BUILD, "kctrld")

MISSPELT = """
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - apiVersion: v1
    kind: ConfigMaps
  - { apiVersion: v1, kind: Secret }
controllers: []
"""


def require_binaries():
    for p in (KCTRLD, os.path.join(taplib.BUILD, "kube-apisim")):
        if not os.access(p, os.X_OK):
            raise taplib.Skip("%s not built" % p)


def test_misspelt_kind_named():
    require_binaries()
    with taplib.Apisim() as sim, taplib.Kctrld(MISSPELT, kubeconfig=sim.kubeconfig) as k:
        want = "kind ConfigMaps is not served by v1 (did you mean ConfigMap?)"
        taplib.wait_for(lambda: want in k.log(), what="the misspelt kind to be named")
        log = k.log()
        assert "HTTP 200" not in log, log
        # Said once, not on every retry.
        assert log.count(want) == 1, log
        assert k.stop() == 0, k.log()


def test_check_config_misspelt_kind():
    require_binaries()
    d = tempfile.mkdtemp(prefix="kctrld-check-")
    path = os.path.join(d, "kctrld.yaml")
    with open(path, "w") as f:
        f.write(MISSPELT)
    r = subprocess.run([KCTRLD, "--check-config", path], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "%s:5:11: kind ConfigMaps is not served by v1 (did you mean ConfigMap?)" % path in r.stderr, r.stderr
    assert "OK" not in r.stdout


MISSING_CRD = """
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { apiVersion: v1, kind: ConfigMap }
  - { apiVersion: widgets.example.io/v1, kind: Widget }
controllers: []
"""

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.widgets.example.io"},
    "spec": {"group": "widgets.example.io", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


class NotifySocket:
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []

    def wait(self, pred, what, timeout=60):
        def poll():
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass
            return next((m for m in self.messages if pred(m)), None)
        return taplib.wait_for(poll, timeout=timeout, interval=0, what=what)


def status_of(msg):
    return next((l[len("STATUS="):] for l in msg.split("\n") if l.startswith("STATUS=")), None)


def test_ready_with_crd_not_installed():
    require_binaries()
    d = tempfile.mkdtemp(prefix="kctrld-notify-")
    n = NotifySocket(os.path.join(d, "notify"))
    os.environ["NOTIFY_SOCKET"] = os.path.join(d, "notify")
    try:
        with taplib.Apisim() as sim, taplib.Kctrld(MISSING_CRD, kubeconfig=sim.kubeconfig, dir=d) as k:
            ready = n.wait(lambda m: "READY=1" in m.split("\n"), "READY=1 with a CRD missing")
            st = status_of(ready) or ""
            assert "waiting for kind widgets.example.io/v1 Widget (not served)" in st, (st, n.messages)
            assert st.startswith("syncing: "), st
            assert "kind Widget is not served: the server does not serve widgets.example.io/v1" in k.log()
            sim.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", WIDGET_CRD, expect=201)
            done = n.wait(lambda m: (status_of(m) or "").startswith("ready: "), "STATUS=ready once the CRD exists")
            assert "informers 2/2 synced" in status_of(done), done
            assert k.stop() == 0, k.log()
    finally:
        del os.environ["NOTIFY_SOCKET"]


if __name__ == "__main__":
    taplib.run_tests(globals())
