#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The probe endpoints explain themselves: /readyz?verbose lists every check
("[+]informers ok", one "controller/NAME" per controller), a controller whose
exec hook never answers (it reads nothing, writes nothing: killed after its
1 s timeout) shows "[-]controller/silent failed: hook not answering: ...",
while one whose hook answers (even with nonsense) is "[+]"; per-check paths
answer alone; ?exclude= makes /readyz pass without it; /livez and /healthz
stay 200 (a readiness failure must not restart the Pod). About 3 s."""
import os
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from taplib import Apisim, Kctrld, run_tests, wait_for  # noqa: E402

CONFIG = """
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - apiVersion: v1
    kind: ConfigMap
controllers:
  - name: silent
    for: { apiVersion: v1, kind: ConfigMap }
    hook:
      exec: { command: [sleep, "3600"], timeout: 1s }
  - name: echo
    for: { apiVersion: v1, kind: ConfigMap }
    hook:
      exec: { command: [cat], timeout: 1s }
"""


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_verbose_readyz_and_a_hook_that_never_answers():
    with Apisim() as sim:
        st, _, body = sim.request("POST", "/api/v1/namespaces/default/configmaps",
                                  {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "one", "namespace": "default"}})
        assert st == 201, (st, body)
        with Kctrld(CONFIG, sim.kubeconfig) as k:
            port = k.metrics_port()
            body = wait_for(lambda: (lambda r: "[-]controller/silent" in r[1] and r)(get(port, "/readyz?verbose")),
                            timeout=15, interval=0.1, what="controller/silent to fail")
            st, text = body
            print("# " + text.replace("\n", "\n# "))
            assert st == 503, body
            lines = text.splitlines()
            for want in ("[+]ping ok", "[+]shutdown ok", "[+]informers ok", "[+]controller/echo ok",
                         "[+]leader-election ok", "[+]api ok"):
                assert want in lines, (want, text)
            assert any(ln.startswith("[-]controller/silent failed: hook not answering: hook pid=")
                       and "timed out after 1000ms" in ln for ln in lines), text
            assert lines[-1] == "readyz check failed", text
            st, text = get(port, "/readyz/controller/silent")
            assert st == 503 and text.startswith("controller/silent failed: hook not answering"), (st, text)
            assert get(port, "/readyz/controller/echo") == (200, "ok\n")
            assert get(port, "/readyz/informers") == (200, "ok\n")
            assert get(port, "/readyz/nope")[0] == 404
            assert get(port, "/readyz?exclude=controller/silent") == (200, "ok\n")
            # Liveness is the loop alone.
            assert get(port, "/livez") == (200, "ok\n")
            assert get(port, "/healthz") == (200, "ok\n")
            assert get(port, "/livez?verbose") == (200, "[+]ping ok\nlivez check passed\n")
        assert k.code == 0, k.log()[-3000:]


if __name__ == "__main__":
    run_tests(globals())
