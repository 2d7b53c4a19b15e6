#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of webhook hooks (docs/hooks.md) with the cmhash-webhook
example (plugins/hooks/cmhash-webhook/server.py, the cmhash controller
served by http.server) against kube-apisim: ConfigMaps get the hash label on
create and update, a delete is harmless, a 409 on the patch is requeued and
retried; a key the webhook answers with a 500 or with garbage backs off on
its own (growing attempt numbers, the log naming key, URL, status and
reason) while other keys reconcile and /readyz stays 200; over HTTPS with a
CA file and a client certificate, and a wrong CA refused with a clear log
line."""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from itest import Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "cmhash-webhook", "server.py")
sys.path.insert(0, HERE)
from cmhash_common import CMS, NS, cluster, cm, labelled, labels_and_survives_conflict, readyz  # noqa: E402
import cmhash_common  # noqa: E402

HOOK_YAML = """      webhook:
        url: %(url)s
%(extra)s        timeout: 5s
"""


class Server:
    """server.py on a free port; .log() is its stderr."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="cmhash-webhook-")
        self.portfile = os.path.join(self.dir, "port")
        self.logpath = os.path.join(self.dir, "log")
        self.logf = open(self.logpath, "w")
        env = dict(os.environ, CMHASH_FAULTS="1")
        self.proc = subprocess.Popen([sys.executable, SERVER, "--listen", "127.0.0.1:0", "--port-file",
                                      self.portfile] + list(args), stderr=self.logf, env=env)
        wait_for(lambda: os.path.exists(self.portfile) or self.proc.poll() is not None, what="webhook port")
        assert self.proc.poll() is None, self.log()
        with open(self.portfile) as f:
            self.port = int(f.read())

    def log(self):
        self.logf.flush()
        with open(self.logpath) as f:
            return f.read()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.proc.terminate()
        self.proc.wait(10)
        self.logf.close()


def config(url, extra=""):
    return cmhash_common.config(HOOK_YAML % {"url": url, "extra": extra})


def test_webhook_reconciles_and_backs_off_per_key():
    with taplib.Apisim() as sim, Server() as srv:
        c = cluster(sim, "a")
        url = "http://127.0.0.1:%d/sync?token=s3cret" % srv.port
        shown = "http://127.0.0.1:%d/sync" % srv.port
        with Kctrld(config(url), sim.kubeconfig) as k:
            # create, update, conflict (cmhash_common)
            labels_and_survives_conflict(sim, c, k)
            assert "webhook hook %s " % shown in k.log(), k.log()
            # delete: reconciled (object null), nothing written, no error
            seen = srv.log().count("reconcile key=%s/b " % NS)
            c.delete(CMS + "/b")
            wait_for(lambda: srv.log().count("reconcile key=%s/b " % NS) > seen, what="b reconciled after delete",
                     kctrld=k)
            assert "Reconciler error controller=cmhash key=%s/b " % NS not in k.log(), k.log()
            # per-key backoff: a 500 and garbage for one key each, growing attempts
            c.create(CMS, cm("bad500", {"kctrld-test": "http500"}))
            c.create(CMS, cm("garbage", {"kctrld-test": "garbage"}))
            wait_for(lambda: "reconcile key=%s/bad500 attempt=4" % NS in srv.log(), what="4 attempts of bad500",
                     kctrld=k)
            wait_for(lambda: "reconcile key=%s/garbage attempt=3" % NS in srv.log(), what="3 attempts of garbage",
                     kctrld=k)
            log = k.log()
            assert re.search(r"Reconciler error controller=cmhash key=%s/bad500 .*error=\"?webhook %s: HTTP 500 "
                             r"Internal Server Error: refusing %s/bad500 on purpose" % (NS, re.escape(shown), NS),
                             log), log
            assert re.search(r"Reconciler error controller=cmhash key=%s/garbage .*webhook %s: hook response: "
                             r"response is not JSON" % (NS, re.escape(shown)), log), log
            assert "s3cret" not in log, log
            # the good keys reconcile meanwhile, the daemon is ready
            c.merge_patch(CMS + "/a", {"data": {"k": "3"}})
            wait_for(lambda: labelled(c, "a"), what="a relabelled while bad keys back off", kctrld=k)
            wait_for(lambda: readyz(k) == 200, timeout=10, what="/readyz 200: %s" % readyz(k), kctrld=k)
            # fixed: labelled, the backoff ends
            c.merge_patch(CMS + "/bad500", {"data": {"kctrld-test": "fixed"}})
            wait_for(lambda: labelled(c, "bad500"), what="bad500 labelled once fixed", kctrld=k)
            # the webhook gone: errors naming the URL, the daemon keeps serving
            srv.proc.terminate()
            srv.proc.wait(10)
            c.merge_patch(CMS + "/a", {"data": {"k": "4"}})
            wait_for(lambda: re.search(r"Reconciler error controller=cmhash key=%s/a .*webhook %s: "
                                       % (NS, re.escape(shown)), k.log()),
                     what="connection refused logged", kctrld=k)
            assert k.alive(), k.log()
            assert k.stop() == 0, k.log()


def test_webhook_tls_ca_and_client_certificate():
    pki = taplib.make_pki()
    other = taplib.make_pki()
    p = lambda d, n: os.path.join(d, n)  # noqa: E731
    for d in (pki, other):
        for n in os.listdir(d):
            if n.endswith(".key"):
                os.chmod(p(d, n), 0o600)
    with taplib.Apisim() as sim, Server("--tls-cert", p(pki, "server.crt"), "--tls-key", p(pki, "server.key"),
                                        "--client-ca", p(pki, "ca.crt")) as srv:
        c = cluster(sim, "t")
        url = "https://127.0.0.1:%d/sync" % srv.port
        extra = ("        caFile: %s\n        clientCertFile: %s\n        clientKeyFile: %s\n"
                 % (p(pki, "ca.crt"), p(pki, "client.crt"), p(pki, "client.key")))
        with Kctrld(config(url, extra), sim.kubeconfig) as k:
            wait_for(lambda: labelled(c, "t"), what="t labelled over HTTPS", kctrld=k)
            assert k.stop() == 0, k.log()
        # the wrong CA: the server is not trusted, nothing is sent, the log says why
        seen = srv.log().count("reconcile key=")
        c.merge_patch(CMS + "/t", {"data": {"k": "2"}})
        extra = ("        caFile: %s\n        clientCertFile: %s\n        clientKeyFile: %s\n"
                 % (p(other, "ca.crt"), p(pki, "client.crt"), p(pki, "client.key")))
        with Kctrld(config(url, extra), sim.kubeconfig) as k:
            wait_for(lambda: re.search(r"Reconciler error controller=cmhash key=%s/t .*webhook %s: SSL certificate "
                                       r"problem" % (NS, re.escape(url)), k.log()),
                     what="the wrong CA refused", kctrld=k)
            time.sleep(0.5)
            assert srv.log().count("reconcile key=") == seen, srv.log()
            assert not labelled(c, "t")
            # A webhook that cannot be reached is not answering: /readyz says so
            # and why, and the daemon keeps serving.
            wait_for(lambda: "hook not answering: SSL certificate problem" in str(readyz(k)), timeout=10,
                     what="/readyz naming the refused certificate: %s" % readyz(k), kctrld=k)
            assert k.stop() == 0, k.log()


if __name__ == "__main__":
    taplib.run_tests(globals())
