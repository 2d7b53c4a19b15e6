"""Tiny TAP test harness shared by the integration tests.

Each test module defines functions named test_*; run_tests() calls them in
order and prints one TAP line per test ("ok N - name", "not ok N - name",
"ok N - name # SKIP reason"). tests/run-tests counts those lines.

Helpers start the simulator (build/kube-apisim, or $KCTRLD_BUILD/kube-apisim)
on a free loopback port and stop it again, so every test gets a fresh cluster.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("KCTRLD_BUILD", "build"))
FIXTURES = os.path.abspath(os.path.join(ROOT, "..", "shared", "fixtures"))
if not os.path.isdir(FIXTURES):
    FIXTURES = os.path.join(ROOT, "tests", "fixtures")


class Skip(Exception):
    """Raise from a test to report it skipped, with the reason."""


def stop_process(proc, timeout=10, cont=False):
    """SIGTERM (after SIGCONT when cont: a stopped process cannot exit),
    SIGKILL after timeout seconds; returns the exit status."""
    if proc.poll() is None:
        if cont:
            proc.send_signal(signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def make_pki():
    """A throw-away CA with a server certificate for 127.0.0.1/localhost and
    a client certificate (clientAuth), in a fresh directory returned."""
    if not shutil.which("openssl"):
        raise Skip("openssl not installed")
    d = tempfile.mkdtemp(prefix="apisim-pki-")

    def run(*a):
        subprocess.run(["openssl"] + list(a), cwd=d, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=apisim-ca")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                      ("client", "extendedKeyUsage=clientAuth")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
            "-subj", "/CN=" + name)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext + "\n")
        run("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext")
    return d


class Apisim:
    """A running kube-apisim. Use as a context manager."""

    def __init__(self, *args, seeds=()):
        self.tmp = tempfile.mkdtemp(prefix="apisim-")
        self.kubeconfig = os.path.join(self.tmp, "kubeconfig")
        cmd = [os.path.join(BUILD, "kube-apisim"), "--listen", "127.0.0.1:0",
               "--kubeconfig-out", self.kubeconfig]
        for s in seeds:
            cmd += ["--seed", s]
        cmd += list(args)
        self.stderr = open(os.path.join(self.tmp, "stderr"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http"):
            self.stop()
            raise RuntimeError("kube-apisim did not print its URL: %r; stderr: %s" % (line, self.log()))
        self.url = line

    def log(self):
        self.stderr.flush()
        with open(self.stderr.name) as f:
            return f.read()[-4000:]

    def stop(self):
        return stop_process(self.proc)

    # -- raw HTTP helpers (plain http only; tests that use TLS build their own) --

    def request(self, method, path, body=None, headers=None, timeout=30):
        """Sends one request; returns (status, headers dict, body bytes)."""
        import http.client
        import json as _json
        import urllib.parse
        u = urllib.parse.urlparse(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        hdrs = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = _json.dumps(body)
            hdrs.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        hd = {k.lower(): v for k, v in r.getheaders()}
        conn.close()
        return r.status, hd, data

    def json(self, method, path, body=None, headers=None, expect=None):
        """Like request() but decodes the JSON answer; checks the status if expect is set."""
        import json as _json
        st, hd, data = self.request(method, path, body, headers)
        try:
            doc = _json.loads(data) if data else None
        except ValueError:
            doc = data.decode(errors="replace")
        if expect is not None and st != expect:
            raise AssertionError("%s %s: expected %d, got %d: %s" % (method, path, expect, st, data[:500]))
        return st, doc

    def control(self, method, call, body=None):
        """Calls the /_apisim/ control endpoint and returns the decoded answer."""
        st, doc = self.json(method, "/_apisim/" + call, body)
        if st >= 300:
            raise AssertionError("control %s %s: %d %s" % (method, call, st, doc))
        return doc

    def watch(self, path, max_events=None, timeout=10, headers=None):
        """Opens a watch (path includes the query) and returns (status, events):
        events are read until the stream ends, max_events arrive, or timeout."""
        import http.client
        import json as _json
        import socket
        import urllib.parse
        u = urllib.parse.urlparse(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        events = []
        if r.status != 200:
            body = r.read()
            conn.close()
            return r.status, [_json.loads(body)] if body else []
        try:
            while max_events is None or len(events) < max_events:
                line = r.readline()
                if not line:
                    break
                events.append(_json.loads(line))
        except (socket.timeout, TimeoutError):
            pass
        conn.close()
        return r.status, events

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def wait_for(pred, timeout=20.0, interval=0.05, what="condition"):
    """Polls pred() until it returns a true value; raises AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def run_tests(module_globals):
    tests = [(n, f) for n, f in module_globals.items() if n.startswith("test_") and callable(f)]
    print("1..%d" % len(tests), flush=True)
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        try:
            fn()
            print("ok %d - %s" % (i, name), flush=True)
        except Skip as e:
            print("ok %d - %s # SKIP %s" % (i, name, e), flush=True)
        except Exception:  # noqa: BLE001 - report every failure as TAP
            failed += 1
            print("not ok %d - %s" % (i, name), flush=True)
            for line in traceback.format_exc().splitlines():
                print("# " + line, flush=True)
    sys.exit(1 if failed else 0)
