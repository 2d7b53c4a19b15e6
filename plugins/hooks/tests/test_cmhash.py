#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Integration test of the cmhash exec hook (plugins/hooks/cmhash, Python,
persistent mode) against kube-apisim: ConfigMaps get the hash label on
create and update, deletes are harmless, a 409 on the patch is requeued
and retried, an error result backs off per key with a growing attempt
number; and a hook child that crashes, hangs or writes garbage costs only
its key: the daemon keeps serving (other keys reconcile, /readyz is 200),
the log names controller and key, the child is restarted and no zombie is
left behind, at run time or after the stop. Poison keys never cost healthy
keys an error, an attempt or more than 2 s; a hook crashing on every key
backs off as a whole."""
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from itest import Kctrld, wait_for  # noqa: E402
import taplib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.join(HERE, "..", "cmhash", "cmhash.py")
sys.path.insert(0, HERE)
from cmhash_common import CMS, LABEL, NS, cluster, cm, label_of, labelled, labels_and_survives_conflict, readyz  # noqa: E402
import cmhash_common  # noqa: E402

HOOK_YAML = """      exec:
        command: [python3, %(hook)s]
        env: { CMHASH_VERBOSE: "1", CMHASH_FAULTS: "1", CMHASH_APPLY: "%(apply)s" }
        timeout: %(timeout)s
        stopGracePeriod: 2s
"""



def attempts_of(log, name):
    """The attempt numbers of the hook's "reconcile key=... attempt=N" lines
    for NS/name, as kctrld logs them (its reconcile fields come first)."""
    return re.findall(r"hook stderr: reconcile (?:\S+ )*?key=%s/%s attempt=(\d+)" % (NS, re.escape(name)), log)

def config(timeout="10s", apply=False):
    return cmhash_common.config(HOOK_YAML % {"hook": os.path.abspath(HOOK), "timeout": timeout,
                                             "apply": "1" if apply else "0"})


def assert_gone(pids):
    alive = [p for p in pids if os.path.exists("/proc/%d" % p)
             and b"cmhash.py" in open("/proc/%d/cmdline" % p, "rb").read()]
    assert not alive, "hook children outlived kctrld: %s" % alive


def hook_children(k):
    return [c for c in taplib.children(k.proc.pid) if "cmhash.py" in c[2] or c[1] == "Z"]


def test_cmhash_labels_configmaps():
    with taplib.Apisim() as sim:
        c = cluster(sim, "a")
        with Kctrld(config(), sim.kubeconfig) as k:
            # create, update, conflict (cmhash_common); an Event on create
            labels_and_survives_conflict(sim, c, k)
            evs = c.items("/api/v1/namespaces/%s/events" % NS)
            assert any(e.get("reason") == "Hashed" and e["involvedObject"]["name"] == "a" for e in evs), evs
            # delete: reconciled once more (object null), nothing written, no error
            seen = len(attempts_of(k.log(), "b"))
            writes = len([r for r in sim.control("GET", "requests")["requests"] if r["path"] == CMS + "/b"])
            c.delete(CMS + "/b")
            wait_for(lambda: len(attempts_of(k.log(), "b")) > seen, what="b reconciled after delete",
                     kctrld=k)
            after = [r for r in sim.control("GET", "requests")["requests"] if r["path"] == CMS + "/b"]
            assert [r["method"] for r in after[writes:]] == ["DELETE"], after[writes:]  # only the test's own
            assert "Reconciler error controller=cmhash key=%s/b " % NS not in k.log(), k.log()
            # per-key backoff: an error result is retried with a growing attempt number
            c.create(CMS, cm("bad", {"kctrld-test": "error"}))
            wait_for(lambda: "4" in attempts_of(k.log(), "bad"), what="4 attempts of bad", kctrld=k)
            assert "refusing %s/bad (attempt 1)" % NS in k.log(), k.log()
            # the good keys still work meanwhile
            c.merge_patch(CMS + "/a", {"data": {"k": "3"}})
            wait_for(lambda: labelled(c, "a"), what="a relabelled while bad backs off", kctrld=k)
            # fixing it ends the backoff: labelled, attempt counter gone
            c.merge_patch(CMS + "/bad", {"data": {"kctrld-test": "fixed"}})
            wait_for(lambda: labelled(c, "bad"), what="bad labelled once fixed", kctrld=k)
            # (the health answer is a snapshot the loop renders: it may lag a moment)
            wait_for(lambda: readyz(k) == 200, timeout=10, what="/readyz 200: %s" % readyz(k), kctrld=k)
            # running children at the stop: SIGTERM (stdin closed), reaped, none outlives kctrld
            kids = [ch[0] for ch in hook_children(k)]
            assert kids, taplib.children(k.proc.pid)
            assert k.stop() == 0, k.log()
            assert_gone(kids)


def owners(c, name):
    """manager -> fieldsV1 of a ConfigMap's managedFields."""
    return {m["manager"]: m for m in c.get(CMS + "/" + name)["metadata"].get("managedFields", [])}


def test_cmhash_apply_variant():
    """CMHASH_APPLY=1: the same controller through the `apply` action: the
    label is owned by field manager cmhash in managedFields, follows the
    content, and another manager's change of it is taken back (force)."""
    with taplib.Apisim() as sim:
        c = cluster(sim, "a")
        with Kctrld(config(apply=True), sim.kubeconfig) as k:
            wait_for(lambda: labelled(c, "a"), what="a labelled", kctrld=k)
            o = owners(c, "a")
            assert o["cmhash"]["operation"] == "Apply", o
            assert o["cmhash"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:" + LABEL: {}}}}, o
            reqs = [r for r in sim.control("GET", "requests")["requests"]
                    if r["method"] == "PATCH" and r["path"] == CMS + "/a"]
            assert reqs and all("fieldManager=cmhash" in r["query"] and "force=true" in r["query"]
                                for r in reqs), reqs
            h1 = label_of(c, "a")
            c.merge_patch(CMS + "/a", {"data": {"k": "2"}})
            wait_for(lambda: label_of(c, "a") not in (None, h1) and labelled(c, "a"), what="a relabelled", kctrld=k)
            # someone else sets the label: a field conflict the hook wins with force
            sim.json("PATCH", CMS + "/a?fieldManager=tamper", {"metadata": {"labels": {LABEL: "bogus"}}},
                     headers={"Content-Type": "application/merge-patch+json"}, expect=200)
            wait_for(lambda: labelled(c, "a"), what="a relabelled after tampering", kctrld=k)
            o = owners(c, "a")
            assert "f:" + LABEL in o["cmhash"]["fieldsV1"]["f:metadata"]["f:labels"], o
            assert "tamper" not in o, o  # force moved the field back: tamper owns nothing
            assert "Reconciler error controller=cmhash" not in k.log(), k.log()
            assert k.stop() == 0, k.log()


def test_cmhash_bad_children_cost_only_their_key():
    with taplib.Apisim() as sim:
        c = cluster(sim, "good")
        with Kctrld(config(timeout="1s"), sim.kubeconfig) as k:
            wait_for(lambda: labelled(c, "good"), what="good labelled", kctrld=k)
            started = len(re.findall(r"hook child started .*pid=\d+", k.log()))
            for fault in ("crash", "hang", "garbage"):
                c.create(CMS, cm(fault, {"kctrld-test": fault}))
            log = lambda: k.log()  # noqa: E731
            wait_for(lambda: re.search(r"Reconciler error controller=cmhash key=%s/crash .*error=hook pid=\d+ exited with status 3 before answering" % NS, log()),
                     what="the crash logged with controller and key", kctrld=k)
            wait_for(lambda: re.search(r"Reconciler error controller=cmhash key=%s/hang .*error=hook pid=\d+ timed out after 1000ms; killed" % NS, log()),
                     what="the hang logged", kctrld=k)
            # garbage waits its turn behind crash and hang (each costs only
            # its own key: no restart wait is charged to garbage)
            wait_for(lambda: re.search(r"Reconciler error controller=cmhash key=%s/garbage .*error=hook response: response is not JSON" % NS, log()),
                     what="the garbage logged", kctrld=k)
            # the crashing child's stderr is in the log with its key
            wait_for(lambda: re.search(r"cmhash/exec-hook\]: hook stderr: crashing on purpose for %s/crash .*key=%s/crash" % (NS, NS), log()),
                     what="the crashing child's stderr with its key", kctrld=k)
            # other keys still reconcile; the daemon is ready
            for i in range(3):
                c.merge_patch(CMS + "/good", {"data": {"k": "v%d" % i}})
                wait_for(lambda: labelled(c, "good"), what="good relabelled", kctrld=k)
            # (the health answer is a snapshot the loop renders: it may lag a moment)
            wait_for(lambda: readyz(k) == 200, timeout=10, what="/readyz 200: %s" % readyz(k), kctrld=k)
            # the bad keys back off and are retried; children were restarted for
            # them (four failures, each killing a child: at least two new ones)
            wait_for(lambda: len(re.findall(r"Reconciler error controller=cmhash key=%s/crash .*error=hook pid=\d+ exited with status 3" % NS, log())) >= 2,
                     what="crash retried", kctrld=k)
            assert len(re.findall(r"hook child started .*pid=\d+", log())) >= started + 2, log()
            # no zombie left behind (a child that died a moment ago may not
            # be reaped yet: a zombie that stays is the failure)
            wait_for(lambda: not [ch for ch in taplib.children(k.proc.pid) if ch[1] == "Z"], timeout=10,
                     what="no zombie children: %s" % (taplib.children(k.proc.pid),), kctrld=k)
            pids = [int(p) for p in re.findall(r"hook child started .*?pid=(\d+)", log())]
            assert k.stop() == 0, k.log()
            assert_gone(pids)


def labelled_within(c, names, seconds, k):
    """Polls until every ConfigMap of names is labelled, at most seconds
    after the last was created; returns {name: seconds it took}."""
    t0 = time.monotonic()
    took = {}
    while len(took) < len(names) and time.monotonic() - t0 < seconds + 1.0:
        for n in names:
            if n not in took and labelled(c, n):
                took[n] = time.monotonic() - t0
        time.sleep(0.02)
    assert len(took) == len(names), ("not labelled: %s" % sorted(set(names) - set(took)), k.log()[-3000:])
    return took


def test_cmhash_poison_keys_cost_healthy_keys_nothing():
    """7 ConfigMaps whose request kills the hook's child and 5 healthy ones,
    on 2 workers: every healthy key is labelled within 2 s, on its first
    attempt, never failed; each poison key pays alone (its own backoff)."""
    with taplib.Apisim() as sim:
        c = cluster(sim, "warm")
        with Kctrld(config(), sim.kubeconfig) as k:
            wait_for(lambda: labelled(c, "warm"), what="warm labelled", kctrld=k)
            poison = ["p%d" % i for i in range(7)]
            healthy = ["h%d" % i for i in range(5)]
            for n in poison:  # first: the healthy keys queue behind them
                c.create(CMS, cm(n, {"kctrld-test": "crash"}))
            for n in healthy:
                c.create(CMS, cm(n, {"k": n}))
            took = labelled_within(c, healthy, 2.0, k)
            print("# healthy keys labelled after %s s" % ", ".join("%.2f" % took[n] for n in healthy), flush=True)
            assert max(took.values()) <= 2.0, (took, k.log()[-3000:])
            # the poison keys keep crashing children meanwhile, each on its own backoff
            wait_for(lambda: all(re.search(r"Reconciler error controller=cmhash key=%s/%s .*attempt=2 " % (NS, n),
                                           k.log()) for n in poison),
                     what="every poison key failed twice", kctrld=k)
            log = k.log()
            for n in healthy:
                attempts = attempts_of(log, n)
                assert attempts and set(attempts) == {"1"}, (n, attempts, log[-3000:])
                assert "Reconciler error controller=cmhash key=%s/%s " % (NS, n) not in log, log[-3000:]
            assert "backs off" not in log, log[-3000:]  # 7 poison keys: the program works
            assert readyz(k) == 200, readyz(k)  # and one bad object does not make it unready
            assert k.stop() == 0, k.log()


def test_cmhash_hook_failing_every_key_backs_off():
    """A hook that crashes on every key backs off as a whole once 10
    distinct keys in a row lost their child: children are then started at
    most about once per slot per backoff (250 ms doubling), not once per
    key and retry; the keys meanwhile are held, not failed."""
    with taplib.Apisim() as sim:
        c = cluster(sim, "warm")
        with Kctrld(config(), sim.kubeconfig) as k:
            wait_for(lambda: labelled(c, "warm"), what="warm labelled", kctrld=k)
            for i in range(16):
                c.create(CMS, cm("bad%d" % i, {"kctrld-test": "crash"}))
            wait_for(lambda: "keys in a row lost their hook child: the program backs off, no new child for 0.2s"
                     in k.log(), what="the program backing off", kctrld=k)
            at_break = len(re.findall(r"hook child started", k.log()))
            wait_for(lambda: "the program backs off, no new child for 2.0s" in k.log(),
                     what="the backoff doubled to 2 s", kctrld=k)
            log = k.log()
            started = len(re.findall(r"hook child started", log)) - at_break
            # four backoffs (0.25, 0.5, 1, 2 s) passed or began: each lets at
            # most one new child per slot (2) start
            assert started <= 8, (started, log[-3000:])
            errors = len(re.findall(r"Reconciler error controller=cmhash key=%s/bad" % NS, log))
            assert errors <= 10 + 8, (errors, log[-3000:])
            # The program backs off as a whole: readiness says the hook is
            # not answering (one poison key alone would not: test 4).
            got = str(readyz(k))
            assert got.startswith("503") and "[-]controller/cmhash failed: hook not answering" in got, got
            assert k.stop() == 0, k.log()


def test_cmhash_reload_replaces_children():
    """A SIGHUP that changes the hook stops the old children (reaped: no
    zombie) and the new ones serve; an unchanged reload keeps them."""
    with taplib.Apisim() as sim:
        c = cluster(sim, "r")
        with Kctrld(config(), sim.kubeconfig) as k:
            wait_for(lambda: labelled(c, "r"), what="r labelled", kctrld=k)
            old = [ch[0] for ch in hook_children(k)]
            assert old, taplib.children(k.proc.pid)

            def reload(text, done="reload applied"):
                n = k.log().count(done)
                with open(k.config, "w") as f:
                    f.write(text)
                k.proc.send_signal(signal.SIGHUP)
                wait_for(lambda: k.log().count(done) > n, what=done, kctrld=k)

            reload(config(), "config unchanged")  # the same children keep serving
            c.merge_patch(CMS + "/r", {"data": {"k": "2"}})
            wait_for(lambda: labelled(c, "r"), what="r relabelled", kctrld=k)
            assert set(old) <= {ch[0] for ch in hook_children(k)}, (old, taplib.children(k.proc.pid))
            reload(config().replace("timeout: 10s", "timeout: 9s"))  # the hook changed: restarted
            assert "~cmhash(hook)" in k.log(), k.log()
            c.merge_patch(CMS + "/r", {"data": {"k": "3"}})
            wait_for(lambda: labelled(c, "r"), what="r relabelled by the new children", kctrld=k)
            wait_for(lambda: not [p for p in old if os.path.exists("/proc/%d" % p)],
                     what="the old children gone and reaped", kctrld=k)
            assert not [ch for ch in taplib.children(k.proc.pid) if ch[1] == "Z"], taplib.children(k.proc.pid)
            new = [ch[0] for ch in hook_children(k)]
            assert new and not set(new) & set(old), (old, new)
            assert k.stop() == 0, k.log()
            assert_gone(new)


if __name__ == "__main__":
    taplib.run_tests(globals())
