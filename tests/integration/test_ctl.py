#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`kctrld ctl` against a daemon on kube-apisim (docs/operations.md "kctrld ctl").

tests/integration/plugins/failkey.c fails every reconcile of ConfigMaps
named fail-* and annotates the others (a write), logging each reconcile.
One daemon with adminSocket: in its directory:

- the socket is mode 0600 (not group or world accessible);
- `ctl keys --state failing` lists default/fail-a with its error and
  attempts, in the table and in -o json;
- `ctl trace` shows a key's stages: the watch event that queued it (own
  event, ADDED ConfigMap, its resourceVersion, the informer), its dequeue,
  the write it made (PATCH, 200, resourceVersion) and the result with its
  duration; the failing key's error result and its rate-limited requeue;
- `ctl pause` (once ok-1 has settled: its add and the echo of its own
  write reconciled): a change is queued (ctl keys --state queued shows it, ctl
  queues counts it) and not reconciled; `ctl resume` reconciles it;
- `ctl requeue` reconciles an unchanged key once more (one more log line);
- `ctl queues` and `ctl informers` with -o json parse;
- metrics.debugQueues: /debug/keys, /debug/trace and /debug/queues on the
  metrics listener answer the same documents (404 for an unknown
  controller, 400 for a missing argument);
- errors: an unknown controller (exit 1, named, the controllers listed), no
  socket at the path, a socket nobody serves (connection refused), a bad
  --state (exit 2).
With `isolation: process`, the child's writes (made through the daemon) are
traced as well.

Who may connect (the tests run as root; `kctrld ctl` runs as nobody):
- a 0600 socket: nobody is refused, with the path and "permission denied";
- adminSocketGroup: daemon: the socket is root:daemon 0660; nobody with the
  daemon group among its groups connects, nobody without it is refused (the
  message names the group); an unknown group is reported by check-config at
  its file:line:col and stops the daemon's start-up, naming the key.
A pause outlasts the controller object: a reload that re-creates the
controller keeps it, and with stateDirectory so does a restart (the file
paused-controllers there, 0600); `ctl resume` ends it and removes the
file; a corrupt file is ignored with a warning naming it, the pause of a
controller the config lost is dropped with an info line.
Every wait is on the API object, the log or the socket's answers.
"""
import grp
import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import BUILD, ROOT, Apisim, run_tests, wait_for  # noqa: E402

NS = "default"
CMS = "/api/v1/namespaces/%s/configmaps" % NS
KCTRLD = os.path.join(BUILD, "kctrld")


def put_cm(sim, name, seq):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
            "data": {"seq": str(seq)}}
    st, cur = sim.json("GET", CMS + "/" + name)
    if st == 404:
        sim.json("POST", CMS, body, expect=201)
        return
    cur["data"] = body["data"]
    sim.json("PUT", CMS + "/" + name, cur, expect=200)


def seen(sim, name):
    _, cm = sim.json("GET", CMS + "/" + name, expect=200)
    return (cm["metadata"].get("annotations") or {}).get("test.kctrld.io/seen")


def ctl(sock, *args):
    return subprocess.run([KCTRLD, "ctl"] + list(args) + ["--socket", sock], capture_output=True,
                          text=True, timeout=30)


def ctl_json(sock, *args):
    out = ctl(sock, *(list(args) + ["-o", "json"]))
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return json.loads(out.stdout)


def reconciles(k, key):
    return sum(1 for ln in k.log().splitlines()
               if ": reconciled " in ln and " key=%s " % key in ln)


def test_ctl():
    tmp = tempfile.mkdtemp(prefix="kctrld-ctl-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "failkey.c"), tmp)
    sock = os.path.join(tmp, "admin.sock")
    with Apisim() as sim:
        put_cm(sim, "fail-a", 1)
        put_cm(sim, "ok-1", 1)
        config = ("metrics: { bindAddress: \"127.0.0.1:0\", debugQueues: true }\n"
                  "adminSocket: %s\n"
                  "controllers:\n"
                  "  - name: failkey\n    plugin: %s\n"
                  "    for: { apiVersion: v1, kind: ConfigMap }\n"
                  "    rateLimit: { baseDelay: 50ms, maxDelay: 1s }\n" % (sock, so))
        with taplib.Kctrld(config, sim.kubeconfig, dir=os.path.join(tmp, "d")) as k:
            wait_for(lambda: seen(sim, "ok-1") == "1" or not k.alive(), what="ok-1 reconciled")
            assert k.alive(), k.log()[-3000:]
            wait_for(lambda: os.path.exists(sock), what="the admin socket")
            mode = stat.S_IMODE(os.stat(sock).st_mode)
            assert mode == 0o600, oct(mode)
            assert stat.S_ISSOCK(os.stat(sock).st_mode)

            # The failing key, with its error.
            def failing():
                d = ctl_json(sock, "keys", "failkey", "--state", "failing")
                return [x for x in d["keys"] if x["key"] == "default/fail-a" and x["attempts"] >= 2]
            rows = wait_for(failing, what="fail-a failing twice")
            assert "refusing default/fail-a: its name starts with fail-" in rows[0]["lastError"], rows
            assert rows[0]["state"] in ("backoff", "queued", "inflight"), rows
            table = ctl(sock, "keys", "failkey")
            assert table.returncode == 0, table.stderr
            lines = table.stdout.splitlines()
            assert lines[0].split() == ["KEY", "STATE", "PRIORITY", "ATTEMPTS", "NEXT-RETRY",
                                        "LAST-ERROR"], lines
            assert any(ln.startswith("default/fail-a ") and "refusing default/fail-a" in ln
                       for ln in lines), lines
            assert not any(ln.startswith("default/ok-1 ") for ln in lines), lines

            # The trace of a key that wrote, and of the failing one.
            tr = ctl_json(sock, "trace", "failkey", "default/ok-1")
            stages = [e["stage"] for e in tr["entries"]]
            for want in ("queued", "dequeued", "write", "result"):
                assert want in stages, (want, tr)
            assert stages.index("queued") < stages.index("dequeued") < stages.index("write") \
                < stages.index("result"), stages
            q = next(e for e in tr["entries"] if e["stage"] == "queued")["detail"]
            # Created before the daemon started: its first list delivered it.
            assert q.startswith("own event (low): list ADDED ConfigMap default/ok-1 rv=") and \
                "informer=configmaps" in q, q
            w = next(e for e in tr["entries"] if e["stage"] == "write")["detail"]
            assert w.startswith("PATCH /api/v1/namespaces/default/configmaps/ok-1: 200 rv="), w
            r = next(e for e in tr["entries"] if e["stage"] == "result")["detail"]
            assert r.startswith("success after ") and r.endswith(" ms"), r
            assert tr["ringEntries"] == 1024 and tr["ringBytes"] >= 1024 * 256, tr
            assert all(e["time"].endswith("Z") for e in tr["entries"]), tr
            tf = ctl_json(sock, "trace", "failkey", "default/fail-a")
            details = [(e["stage"], e["detail"]) for e in tf["entries"]]
            assert any(s == "result" and d.startswith("error after ") and "refusing" in d
                       for s, d in details), details
            assert any(s == "requeue" and d.startswith("rate-limited") for s, d in details), details
            text = ctl(sock, "trace", "failkey", "default/ok-1")
            assert text.returncode == 0 and "TIME" in text.stdout and "dequeued" in text.stdout, \
                text.stdout

            # Pause: the change is queued, not reconciled; resume runs it.
            # ok-1 settles first: its add, then the echo of its own write.
            wait_for(lambda: reconciles(k, "default/ok-1") == 2, what="ok-1's two reconciles")
            before = reconciles(k, "default/ok-1")
            assert ctl(sock, "pause", "failkey").stdout == "failkey: paused\n"
            put_cm(sim, "ok-1", 2)

            def queued():
                d = ctl_json(sock, "keys", "failkey", "--state", "queued")
                return [x for x in d["keys"] if x["key"] == "default/ok-1"]
            wait_for(queued, what="ok-1 queued while paused")
            qs = ctl_json(sock, "queues")["controllers"]
            assert qs[0]["name"] == "failkey" and qs[0]["paused"] and qs[0]["depth"] >= 1, qs
            assert qs[0]["failing"] == 1, qs
            assert sum(qs[0]["depthByPriority"].values()) == qs[0]["depth"], qs
            assert "paused" in ctl(sock, "queues").stdout
            assert seen(sim, "ok-1") == "1" and reconciles(k, "default/ok-1") == before
            assert ctl(sock, "resume", "failkey").stdout == "failkey: running\n"
            wait_for(lambda: seen(sim, "ok-1") == "2", what="ok-1 reconciled after resume")
            wait_for(lambda: reconciles(k, "default/ok-1") == before + 2,
                     what="the change and the echo of its write reconciled")

            # Requeue: one more reconcile of an unchanged key.
            n = reconciles(k, "default/ok-1")
            out = ctl(sock, "requeue", "failkey", "default/ok-1")
            assert out.returncode == 0 and out.stdout == "failkey: default/ok-1 queued\n", out
            wait_for(lambda: reconciles(k, "default/ok-1") == n + 1, what="the requeued reconcile")
            tr = ctl_json(sock, "trace", "failkey", "default/ok-1")
            assert any(e["stage"] == "queued" and e["detail"] == "requeue asked for (high)"
                       for e in tr["entries"]), tr

            def debug(path):
                url = "http://127.0.0.1:%d%s" % (k.metrics_port(), path)
                try:
                    with urllib.request.urlopen(url, timeout=10) as r:
                        return r.status, json.loads(r.read())
                except urllib.error.HTTPError as e:
                    return e.code, json.loads(e.read())
            st, d = debug("/debug/keys?controller=failkey&state=failing")
            assert st == 200 and [x["key"] for x in d["keys"]] == ["default/fail-a"], d
            assert d["keys"][0]["lastError"].startswith("refusing default/fail-a"), d
            st, d = debug("/debug/trace?controller=failkey&key=default%2Fok-1")
            assert st == 200 and d == ctl_json(sock, "trace", "failkey", "default/ok-1"), d
            st, d = debug("/debug/queues")
            assert st == 200 and d["controllers"][0]["name"] == "failkey", d
            st, d = debug("/debug/keys?controller=nope")
            assert st == 404 and d["error"].startswith('no such controller "nope"'), d
            st, d = debug("/debug/trace?controller=failkey")
            assert st == 400 and d["error"] == 'trace needs "key"', d

            inf = ctl_json(sock, "informers")["informers"]
            assert inf and inf[0]["kind"] == "ConfigMap" and inf[0]["synced"], inf
            assert "ConfigMap" in ctl(sock, "informers").stdout

            # Errors name what is wrong.
            bad = ctl(sock, "keys", "nope")
            assert bad.returncode == 1 and \
                'no such controller "nope" (controllers: failkey)' in bad.stderr, bad
            bad = ctl(sock, "keys", "failkey", "--state", "sleeping")
            assert bad.returncode == 2 and "--state" in bad.stderr, bad
            missing = ctl(os.path.join(tmp, "none.sock"), "queues")
            assert missing.returncode == 1 and "no admin socket at" in missing.stderr, missing
            stale = os.path.join(tmp, "stale.sock")
            s = socket.socket(socket.AF_UNIX)
            s.bind(stale)
            s.close()
            refused = ctl(stale, "queues")
            assert refused.returncode == 1 and "connection refused" in refused.stderr, refused
            assert k.stop() == 0, k.log()[-3000:]
        assert not os.path.exists(sock), "the socket outlived the daemon"



def test_trace_isolated_writes():
    """An isolation: process plugin's writes are the daemon's too: traced."""
    tmp = tempfile.mkdtemp(prefix="kctrld-ctl-iso-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "failkey.c"), tmp)
    sock = os.path.join(tmp, "admin.sock")
    with Apisim() as sim:
        config = ("metrics: { bindAddress: \"0\" }\n"
                  "adminSocket: %s\n"
                  "controllers:\n"
                  "  - name: failkey\n    plugin: %s\n"
                  "    for: { apiVersion: v1, kind: ConfigMap }\n"
                  "    isolation: process\n" % (sock, so))
        with taplib.Kctrld(config, sim.kubeconfig, dir=os.path.join(tmp, "d")) as k:
            wait_for(lambda: os.path.exists(sock) or not k.alive(), what="the admin socket")
            put_cm(sim, "ok-2", 7)
            wait_for(lambda: seen(sim, "ok-2") == "7" or not k.alive(), what="ok-2 reconciled")
            assert k.alive(), k.log()[-3000:]

            def write():
                tr = ctl_json(sock, "trace", "failkey", "default/ok-2")
                return [e["detail"] for e in tr["entries"] if e["stage"] == "write"]
            w = wait_for(write, what="the isolated plugin's write in the trace")
            assert w[0].startswith("PATCH /api/v1/namespaces/default/configmaps/ok-2: 200 rv="), w
            assert k.stop() == 0, k.log()[-3000:]


def ctl_as(sock, groups, *args):
    """`kctrld ctl` as the user nobody with exactly these supplementary groups."""
    nobody = pwd.getpwnam("nobody")

    def drop():
        os.setgroups(groups)
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
    return subprocess.run([KCTRLD, "ctl"] + list(args) + ["--socket", sock], capture_output=True,
                          text=True, timeout=30, preexec_fn=drop)


def test_socket_access():
    if os.geteuid() != 0:
        raise taplib.Skip("needs root to run kctrld ctl as another user")
    tmp = tempfile.mkdtemp(prefix="kctrld-ctl-perm-")
    os.chmod(tmp, 0o755)  # nobody may pass; the socket's mode decides
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "failkey.c"), tmp)
    sock = os.path.join(tmp, "admin.sock")
    daemon_gid = grp.getgrnam("daemon").gr_gid
    nogroup = pwd.getpwnam("nobody").pw_gid
    base = ("metrics: { bindAddress: \"0\" }\n"
            "adminSocket: %s\n"
            "controllers:\n"
            "  - name: failkey\n    plugin: %s\n"
            "    for: { apiVersion: v1, kind: ConfigMap }\n" % (sock, so))
    with Apisim() as sim:
        # 0600: only the daemon's user (root here).
        with taplib.Kctrld(base, sim.kubeconfig, dir=os.path.join(tmp, "d1")) as k:
            wait_for(lambda: os.path.exists(sock) or not k.alive(), what="the admin socket")
            assert k.alive(), k.log()[-3000:]
            out = ctl_as(sock, [daemon_gid], "queues")
            assert out.returncode == 1, out
            assert "permission denied on %s" % sock in out.stderr and "mode 0600" in out.stderr, \
                out.stderr
            assert k.stop() == 0, k.log()[-3000:]

        # A group: its members connect, others do not.
        with taplib.Kctrld(base + "adminSocketGroup: daemon\n", sim.kubeconfig,
                           dir=os.path.join(tmp, "d2")) as k:
            wait_for(lambda: os.path.exists(sock) or not k.alive(), what="the admin socket")
            assert k.alive(), k.log()[-3000:]
            st = os.stat(sock)
            assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == daemon_gid and \
                st.st_uid == 0, (oct(st.st_mode), st.st_gid, st.st_uid)
            member = ctl_as(sock, [daemon_gid], "queues", "-o", "json")
            assert member.returncode == 0, member
            assert json.loads(member.stdout)["controllers"][0]["name"] == "failkey", member.stdout
            other = ctl_as(sock, [nogroup], "queues")
            assert other.returncode == 1 and "permission denied on %s" % sock in other.stderr \
                and "group daemon" in other.stderr, other
            assert k.stop() == 0, k.log()[-3000:]

        # An unknown group: check-config names it at its place; the daemon
        # does not start.
        bad = base + "adminSocketGroup: no-such-group-kc\n"
        with taplib.Kctrld(bad, sim.kubeconfig, dir=os.path.join(tmp, "d3")) as k:
            wait_for(lambda: not k.alive(), what="the daemon to refuse the start-up")
            assert k.proc.returncode != 0, k.log()[-3000:]
            assert "adminSocketGroup: no such group 'no-such-group-kc'" in k.log(), k.log()[-3000:]
            assert not os.path.exists(sock)
            chk = subprocess.run([KCTRLD, "check-config", k.config], capture_output=True, text=True,
                                 timeout=30)
            assert chk.returncode == 1, chk
            assert "%s:7:19: adminSocketGroup: no such group 'no-such-group-kc'" % k.config \
                in chk.stdout + chk.stderr, chk


def test_pause_survives_reload_and_restart():
    tmp = tempfile.mkdtemp(prefix="kctrld-ctl-pause-")
    so = taplib.build_plugin(os.path.join(ROOT, "tests", "integration", "plugins", "failkey.c"), tmp)
    sock = os.path.join(tmp, "admin.sock")
    state = os.path.join(tmp, "state")
    kept = os.path.join(state, "paused-controllers")

    def config(base_delay):
        return ("metrics: { bindAddress: \"0\" }\n"
                "adminSocket: %s\n"
                "stateDirectory: %s\n"
                "controllers:\n"
                "  - name: failkey\n    plugin: %s\n"
                "    for: { apiVersion: v1, kind: ConfigMap }\n"
                "    rateLimit: { baseDelay: %s, maxDelay: 1s }\n" % (sock, state, so, base_delay))

    def controller():
        return ctl_json(sock, "queues")["controllers"][0]

    def queued(key):
        d = ctl_json(sock, "keys", "failkey", "--state", "queued")
        return [x for x in d["keys"] if x["key"] == key]

    with Apisim() as sim:
        put_cm(sim, "ok-1", 1)
        with taplib.Kctrld(config("50ms"), sim.kubeconfig, dir=os.path.join(tmp, "d1")) as k:
            wait_for(lambda: seen(sim, "ok-1") == "1" or not k.alive(), what="ok-1 reconciled")
            assert k.alive(), k.log()[-3000:]
            assert ctl(sock, "pause", "failkey").stdout == "failkey: paused\n"
            assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
            assert '- "failkey"' in open(kept).read()

            # A reload that changes the controller re-creates it, paused.
            with open(k.config, "w") as f:
                f.write(config("60ms"))
            k.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "reload applied" in k.log(), what="the reload")
            wait_for(lambda: controller()["running"], what="the re-created controller")
            assert controller()["paused"], controller()
            put_cm(sim, "ok-1", 2)
            wait_for(lambda: queued("default/ok-1"), what="ok-1 queued while paused")
            assert seen(sim, "ok-1") == "1"
            assert k.stop() == 0, k.log()[-3000:]

        # A restart: the file keeps the pause; the warm start's keys wait.
        with taplib.Kctrld(config("60ms"), sim.kubeconfig, dir=os.path.join(tmp, "d2")) as k:
            wait_for(lambda: "controller failkey stays paused" in k.log() or not k.alive(),
                     what="the kept pause read")
            assert k.alive(), k.log()[-3000:]
            wait_for(lambda: os.path.exists(sock) and controller()["running"],
                     what="the controller")
            assert controller()["paused"], controller()
            wait_for(lambda: queued("default/ok-1"), what="ok-1 queued while paused")
            assert seen(sim, "ok-1") == "1"
            assert "not running" not in ctl(sock, "queues").stdout
            assert ctl(sock, "resume", "failkey").stdout == "failkey: running\n"
            wait_for(lambda: seen(sim, "ok-1") == "2", what="ok-1 reconciled after resume")
            assert not os.path.exists(kept), "resume left the file"
            assert k.stop() == 0, k.log()[-3000:]

        # A controller the config lost: its pause is dropped. A corrupt file:
        # ignored, with a warning naming it.
        for text, line in (('paused:\n  - "gone"\n',
                            "the pause of controller gone is dropped"),
                           ("paused: [failkey\n", "%s: ignored: " % kept)):
            with open(kept, "w") as f:
                f.write(text)
            with taplib.Kctrld(config("60ms"), sim.kubeconfig, dir=os.path.join(tmp, "d3")) as k:
                wait_for(lambda: line in k.log() or not k.alive(), what=line)
                wait_for(lambda: os.path.exists(sock) and controller()["running"],
                         what="the controller")
                assert not controller()["paused"], controller()
                assert k.stop() == 0, k.log()[-3000:]
            if "gone" in text:
                assert not os.path.exists(kept), "the dropped pause stayed in the file"


if __name__ == "__main__":
    run_tests(globals())
