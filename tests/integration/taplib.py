# SPDX-License-Identifier: Apache-2.0
"""Tiny TAP test harness shared by the integration tests.

Each test module defines functions named test_*; run_tests() calls them in
order and prints one TAP line per test ("ok N - name", "not ok N - name",
"ok N - name # SKIP reason"). tests/run-tests counts those lines.

Helpers start the simulator (build/kube-apisim, or $KCTRLD_BUILD/kube-apisim)
on a free loopback port and stop it again, so every test gets a fresh cluster.
"""
import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("KCTRLD_BUILD", "build"))
# Real API objects and watch streams (tests/fixtures/SOURCES.md); a test that
# names a file missing here fails when it opens it.
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


def build_plugin(src, out_dir, *cflags):
    """Compiles one plugin source like an out-of-tree plugin (cc -shared
    -fPIC -fvisibility=hidden -Iinclude) into out_dir, mode 0755 (kctrld
    refuses plugins writable by others). Returns the .so path."""
    so = os.path.join(out_dir, os.path.splitext(os.path.basename(src))[0] + ".so")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-fvisibility=hidden"] + list(cflags)
                   + ["-I" + os.path.join(ROOT, "include"), "-o", so, src], check=True, timeout=60)
    os.chmod(so, 0o755)
    return so


_STAGED_SDK = {}


def staged_sdk():
    """Runs `make install` of this build once into a scratch DESTDIR (the
    tree the tests run: $KCTRLD_BUILD) and returns the environment in which
    `pkg-config --cflags kctrld-plugin` names the installed headers there,
    as a plugin author's machine does after `make install` (PKG_CONFIG_PATH
    at the installed .pc file, PKG_CONFIG_SYSROOT_DIR at the DESTDIR).
    Skips when pkg-config is missing."""
    if "env" in _STAGED_SDK:
        return _STAGED_SDK["env"]
    if not shutil.which("pkg-config"):
        raise Skip("pkg-config not installed")
    san = {"build-asan": "address", "build-tsan": "thread", "build-cov": "coverage"}.get(
        os.path.basename(BUILD), "")
    dest = tempfile.mkdtemp(prefix="kctrld-sdk-")
    atexit.register(shutil.rmtree, dest, True)
    prefix = "/usr/local"
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "install", "SAN=" + san, "DESTDIR=" + dest,
                        "PREFIX=" + prefix], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("make install DESTDIR=%s failed:\n%s" % (dest, (r.stdout + r.stderr)[-3000:]))
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = dest + prefix + "/lib/pkgconfig"
    env["PKG_CONFIG_SYSROOT_DIR"] = dest
    _STAGED_SDK["env"] = env
    _STAGED_SDK["dest"] = dest
    return env


def pkg_cflags(env):
    """`pkg-config --cflags kctrld-plugin` in env (from staged_sdk()), split."""
    r = subprocess.run(["pkg-config", "--cflags", "kctrld-plugin"], env=env, capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        raise AssertionError("pkg-config --cflags kctrld-plugin: %s" % r.stderr.strip())
    return r.stdout.split()


# A log line at level error, in the text format with or without the
# timestamp (journald mode prefixes "<3>" instead).
ERROR_LINE = re.compile(r"^(?:<3>|\S+ )?error ", re.M)


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')


_LOGFMT_ESC = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def parse_logfmt(line):
    """A strict logfmt reader: [(key, value)] of one line, or ValueError.
    Pairs are separated by one space; a key is one or more bytes other than
    space, '=' and '"'; a value is bare (no space or control character, no
    '=', '"') or double-quoted with the escapes \\" \\\\ \\n \\r \\t
    \\uXXXX and no raw control character."""
    pairs, i, n = [], 0, len(line)
    if not line:
        raise ValueError("empty line")
    while i < n:
        j = i
        while j < n and line[j] not in ' ="':
            j += 1
        if j == i or j >= n or line[j] != "=":
            raise ValueError("no key=value at %d: %r" % (i, line))
        key, i = line[i:j], j + 1
        if i < n and line[i] == '"':
            i += 1
            out = []
            while True:
                if i >= n:
                    raise ValueError("unterminated quoted value: %r" % line)
                c = line[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\":
                    e = line[i + 1:i + 2]
                    if e in _LOGFMT_ESC:
                        out.append(_LOGFMT_ESC[e])
                        i += 2
                    elif e == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", line[i + 2:i + 6]):
                        out.append(chr(int(line[i + 2:i + 6], 16)))
                        i += 6
                    else:
                        raise ValueError("bad escape at %d: %r" % (i, line))
                    continue
                if ord(c) < 0x20 or c == "\x7f":
                    raise ValueError("raw control character in a quoted value: %r" % line)
                out.append(c)
                i += 1
            value = "".join(out)
        else:
            j = i
            while j < n and line[j] != " ":
                if line[j] in '="' or ord(line[j]) < 0x20 or line[j] == "\x7f":
                    raise ValueError("a bare value holds %r at %d: %r" % (line[j], j, line))
                j += 1
            if j == i:
                raise ValueError("empty bare value at %d: %r" % (i, line))
            value, i = line[i:j], j
        pairs.append((key, value))
        if i < n:
            if line[i] != " " or i + 1 >= n:
                raise ValueError("pairs not separated by one space at %d: %r" % (i, line))
            i += 1
    return pairs


def plain_log_line(line):
    """One kctrld logfmt line as "[<N>][TS ]LEVEL LOGGER[CONTEXT]: MSG key=value ..."
    (values unquoted); any other line (JSON, a crash report's raw lines) as is."""
    prefix = ""
    m = re.match(r"<\d>", line)
    if m:
        prefix, line = m.group(0), line[m.end():]
    try:
        pairs = parse_logfmt(line)
    except ValueError:
        return prefix + line
    d = dict(pairs)
    if "level" not in d or "msg" not in d:
        return prefix + line
    head = (d["ts"] + " " if "ts" in d else "") + d["level"] + " " + d.get("logger", "-")
    if "context" in d:
        head += "[%s]" % d["context"]
    rest = "".join(" %s=%s" % (k, v) for k, v in pairs if k not in ("ts", "level", "logger", "context", "msg"))
    return prefix + head + ": " + d["msg"] + rest


class Kctrld:
    """A running build/kctrld ($KCTRLD_BUILD) with config_text, written to
    directory `dir` (a fresh temp dir by default); stdout and stderr go to
    dir/log. args: more command-line arguments; wrap: a command that runs
    kctrld (its argv prefix, e.g. a sandbox). Context manager; stop()
    sends SIGTERM and returns the exit code (also kept in .code)."""

    def __init__(self, config_text, kubeconfig=None, args=(), dir=None, wrap=()):
        self.dir = dir or tempfile.mkdtemp(prefix="kctrld-test-")
        os.makedirs(self.dir, 0o700, exist_ok=True)
        self.config = os.path.join(self.dir, "kctrld.yaml")
        with open(self.config, "w") as f:
            f.write(config_text)
        self.logpath = os.path.join(self.dir, "log")
        self.logf = open(self.logpath, "w")
        cmd = list(wrap) + [os.path.join(BUILD, "kctrld"), "--config", self.config]
        if kubeconfig:
            cmd += ["--kubeconfig", kubeconfig]
        self.proc = subprocess.Popen(cmd + list(args), stdout=self.logf, stderr=subprocess.STDOUT)
        self.code = None
        self.port = None

    def raw_log(self):
        """The log file as written (logfmt lines, or JSON with --log-format json)."""
        if not self.logf.closed:
            self.logf.flush()
        with open(self.logpath) as f:
            return f.read()

    def log(self):
        """The log with each logfmt line shown as "TS LEVEL LOGGER[CONTEXT]: MSG
        key=value ..." with values unquoted (plain_log_line), for the tests
        that look for what a line says rather than how it is written."""
        return "\n".join(plain_log_line(ln) for ln in self.raw_log().split("\n"))

    def alive(self):
        return self.proc.poll() is None

    def metrics_port(self, timeout=20):
        """The /metrics port kctrld logs once it serves (config bindAddress
        "127.0.0.1:0" picks a free one)."""
        if self.port is None:
            m = wait_for(lambda: re.search(r"httpserver: serving .* port=(\d+)", self.log()),
                         timeout=timeout, what="kctrld to log its metrics port")
            self.port = int(m.group(1))
        return self.port

    def scrape(self):
        """{(name, labels text): value} of the current /metrics."""
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port()
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            m = SAMPLE.match(line)
            if m:
                out[(m.group(1), m.group(2) or "")] = float(m.group(3))
        return out

    @staticmethod
    def metric(snap, name, contains=""):
        """Sum of the samples of `name` in a scrape() whose labels contain `contains`."""
        return sum(v for (n, lb), v in snap.items() if n == name and contains in lb)

    def stop(self, timeout=30, cont=False):
        if self.code is None:
            self.code = stop_process(self.proc, timeout, cont)
        if not self.logf.closed:
            self.logf.close()
        return self.code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


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

    def ca_data(self):
        """The base64 certificate-authority-data of its kubeconfig, or None."""
        with open(self.kubeconfig) as f:
            for ln in f:
                ln = ln.strip()
                if ln.startswith("certificate-authority-data:"):
                    return ln.split(":", 1)[1].strip()
        return None

    def cluster(self):
        """A kubeconfig cluster entry as YAML flow mapping text: server and,
        when it serves TLS, certificate-authority-data."""
        ca = self.ca_data()
        return "{server: '%s'%s}" % (self.url, ", certificate-authority-data: " + ca if ca else "")

    def ssl_context(self):
        """For an https:// simulator: an SSL context trusting the CA of its
        kubeconfig (its own generated CA with --token/--rbac); None for http."""
        if not self.url.startswith("https:"):
            return None
        import base64
        import ssl
        ca = self.ca_data()
        if not ca:
            return ssl.create_default_context()
        return ssl.create_default_context(cadata=base64.b64decode(ca).decode())

    def connection(self, timeout=30):
        """A new http.client connection to the simulator (HTTPS when it serves TLS)."""
        import http.client
        import urllib.parse
        u = urllib.parse.urlparse(self.url)
        if u.scheme == "https":
            return http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout,
                                               context=self.ssl_context())
        return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)

    def log(self):
        self.stderr.flush()
        with open(self.stderr.name) as f:
            return f.read()[-4000:]

    def stop(self):
        return stop_process(self.proc)

    # -- raw HTTP helpers (HTTPS with the kubeconfig's CA when the simulator serves TLS) --

    def request(self, method, path, body=None, headers=None, timeout=30):
        """Sends one request; returns (status, headers dict, body bytes)."""
        import json as _json
        conn = self.connection(timeout)
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

    def json(self, method, path, body=None, headers=None, expect=None, timeout=30):
        """Like request() but decodes the JSON answer; checks the status if expect is set."""
        import json as _json
        st, hd, data = self.request(method, path, body, headers, timeout=timeout)
        try:
            doc = _json.loads(data) if data else None
        except ValueError:
            doc = data.decode(errors="replace")
        if expect is not None and st != expect:
            raise AssertionError("%s %s: expected %d, got %d: %s" % (method, path, expect, st, data[:500]))
        return st, doc

    def control(self, method, call, body=None, timeout=30):
        """Calls the /_apisim/ control endpoint and returns the decoded answer
        (timeout: seconds for the answer; changing 100k objects takes longer)."""
        st, doc = self.json(method, "/_apisim/" + call, body, timeout=timeout)
        if st >= 300:
            raise AssertionError("control %s %s: %d %s" % (method, call, st, doc))
        return doc

    def watch(self, path, max_events=None, timeout=10, headers=None):
        """Opens a watch (path includes the query) and returns (status, events):
        events are read until the stream ends, max_events arrive, or timeout."""
        import json as _json
        import socket
        conn = self.connection(timeout)
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
        # A simulator that died mid-test (a crash, a sanitizer report) shows
        # up as the test's failure, with its own last words, not as a
        # connection reset somewhere in the test.
        died = self.proc.poll()
        self.stop()
        if died is not None:
            sys.stderr.write("# kube-apisim exited early (status %s):\n%s\n" % (died, self.log()))
            if exc[0] is None:
                raise AssertionError("kube-apisim exited early with status %s" % died)
        return False


def children(pid):
    """(pid, state, cmdline) of the processes whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        rest = st[st.rindex(")") + 2:].split()
        if int(rest[1]) == pid:
            out.append((int(d), rest[0], cmd))
    return out


def run_lint(script, daemon_dir):
    """Runs tests/lint/SCRIPT on daemon_dir; the CompletedProcess (text)."""
    return subprocess.run([sys.executable, os.path.join(ROOT, "tests", "lint", script), daemon_dir],
                          capture_output=True, text=True, timeout=60)


def lint_copy(script, edit):
    """Copies daemon/ into a temporary folder, calls edit(copy) and runs
    tests/lint/SCRIPT on the copy. Returns (CompletedProcess, copy path,
    what edit returned); the copy is removed before returning."""
    tmp = tempfile.mkdtemp(prefix="kctrld-lint.")
    try:
        dst = os.path.join(tmp, "daemon")
        shutil.copytree(os.path.join(ROOT, "daemon"), dst)
        expect = edit(dst)
        return run_lint(script, dst), dst, expect
    finally:
        shutil.rmtree(tmp)


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
