#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A plugin that crashes a reconcile is named (daemon/base/crashreport.c).

tests/integration/plugins/segv.c dereferences NULL on one key while another
worker is busy with a slow key. kctrld must die by SIGSEGV itself (so systemd
sees a signal death and a core dump can be taken), and stderr must name the
signal, the controller, the plugin path and the key being reconciled, the
other reconcile in progress, and carry a backtrace.

Under AddressSanitizer the report is off (ASan's own handler reports the
crash): the daemon says so at start and the test is skipped.
"""
import os
import re
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import ROOT, Apisim, Skip, run_tests, wait_for  # noqa: E402

NS = "default"


def cm(sim, name):
    code, _, body = sim.request("POST", "/api/v1/namespaces/%s/configmaps" % NS,
                                {"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": name}, "data": {"k": "v"}})
    assert code == 201, (code, body)


def test_segfault_in_reconcile_names_the_culprit():
    tmp = tempfile.mkdtemp(prefix="kctrld-crash-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "segv.c"), tmp)
    with Apisim() as sim:
        cm(sim, "slow")
        k = taplib.Kctrld("metrics: { bindAddress: \"127.0.0.1:0\" }\n"
                          "informers:\n  - { apiVersion: v1, kind: ConfigMap, namespaces: [%s] }\n"
                          "controllers:\n"
                          "  - name: crashy\n    plugin: %s\n"
                          "    for: { apiVersion: v1, kind: ConfigMap }\n"
                          "    workers: 2\n"
                          "    settings: { crashKey: %s/boom, slowMs: 20000 }\n" % (NS, so, NS),
                          sim.kubeconfig, dir=os.path.join(tmp, "run"))
        try:
            wait_for(lambda: "ready:" in k.log() or not k.alive(), what="kctrld ready")
            if "fatal-signal report off" in k.log():
                raise Skip("AddressSanitizer build: ASan reports crashes itself")
            assert k.alive(), k.log()[-3000:]
            cm(sim, "boom")
            code = k.proc.wait(30)
        finally:
            k.stop()
    log = k.log()
    assert code == -signal.SIGSEGV, "exit status %r, want death by SIGSEGV:\n%s" % (code, log[-3000:])
    m = re.search(r"^kctrld: fatal signal SIGSEGV .*$", log, re.M)
    assert m, log[-3000:]
    line = m.group(0)
    assert "while reconciling controller=crashy plugin=%s key=%s/boom" % (so, NS) in line, line
    assert re.search(r"^kctrld: also reconciling at the time: controller=crashy plugin=%s key=%s/slow "
                     % (re.escape(so), NS), log, re.M), log[-3000:]
    assert "kctrld: backtrace:\n" in log, log[-3000:]
    # The plugin runs from a private copy (daemon/host/plugin_host.h): its frames
    # read /proc/self/fd/N(+offset), the offset being the one in segv.so.
    assert re.search(r"^(\S*segv\.so|/proc/self/fd/\d+)\(\+0x[0-9a-f]+\)", log, re.M), \
        "no frame of the plugin in the backtrace:\n" + log[-3000:]
    assert "about to crash" in log  # the plugin's own last words came first


if __name__ == "__main__":
    run_tests(globals())
