# SPDX-License-Identifier: Apache-2.0
"""Warm restarts from the state directory (docs/operations.md "State
directory"): kctrld started with --state-directory against kube-apisim with
20,000 ConfigMaps, stopped with SIGTERM and started again

- syncs from its snapshot with no LIST and no initial-events watch (the
  simulator's request log), resumes with a WATCH from the snapshot's
  resourceVersion, sees a ConfigMap created while it was down, and its
  controller reconciles every cached key once more;
- after a compaction while it was down (its resourceVersion gone from the
  history) lists exactly once;
- ignores a corrupted snapshot, or one of another cluster behind the same
  address, with a warning naming the file and the reason, and lists;
- a sharded controller's `for` informer (kube-apisim filtering by
  shardSelector) warm-starts when it starts with the shard selector its
  snapshot was written with (one replica, one range: the same range
  reclaimed, no LIST), and lists once when the ranges differ (sharded by
  namespace instead of uid: another selector).
"""
import glob
import json
import os
import re
import stat
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "plugins", "common"))
import itest  # noqa: E402
import taplib  # noqa: E402

N = 20000

CONFIG = """
logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - { apiVersion: v1, kind: ConfigMap }
controllers:
  - name: ttl
    plugin: %s
    for: { apiVersion: v1, kind: ConfigMap }
    workers: 2
    settings:
      kinds: [ { apiVersion: v1, kind: ConfigMap } ]
"""


def config():
    return CONFIG % itest.plugin_path("ttl")


def cm_requests(sim):
    """(lists, initial-events watches, plain watches) of ConfigMaps since the counters' reset."""
    code, _, body = sim.request("GET", "/_apisim/requests")
    assert code == 200
    lists = streams = watches = 0
    for r in json.loads(body)["requests"]:
        if "/configmaps" not in (r.get("path") or "") or r.get("method") != "GET":
            continue
        q = r.get("query") or ""
        if "watch=true" in q or r.get("verb") == "watch":
            if "sendInitialEvents=true" in q:
                streams += 1
            else:
                watches += 1
        elif r.get("verb") == "list":
            lists += 1
    return lists, streams, watches


def informer(k):
    import urllib.request
    url = "http://127.0.0.1:%d/debug/informers" % k.metrics_port()
    with urllib.request.urlopen(url, timeout=5) as r:
        return [i for i in json.loads(r.read()) if i["kind"] == "ConfigMap"][0]


def synced(k, objects):
    i = informer(k)
    return i["synced"] and i["objects"] == objects and i


def reconciles(k):
    return k.metric(k.scrape(), "controller_runtime_reconcile_total", 'controller="ttl"')


def create_cm(sim, name):
    sim.json("POST", "/api/v1/namespaces/default/configmaps",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
              "data": {"k": "v"}}, expect=201)


def run(sim, state, what, objects):
    """A kctrld that syncs `objects` ConfigMaps; returns it running."""
    k = taplib.Kctrld(config(), kubeconfig=sim.kubeconfig, args=["--state-directory", state])
    taplib.wait_for(lambda: synced(k, objects), timeout=60, what=what)
    return k


def stop(k):
    assert k.stop() == 0, k.log()[-3000:]
    return k.log()


def test_warm_restart():
    itest.require_binaries("ttl")
    state = os.path.join(tempfile.mkdtemp(prefix="kctrld-state-"), "state")
    with taplib.Apisim("--generate", "configmaps=%d" % N) as sim:
        base = len(sim.json("GET", "/api/v1/configmaps")[1]["items"])  # generated + any defaults
        k = run(sim, state, "the cold sync", base)
        log = stop(k)
        m = re.search(r"snapshot (\S+): (\d+) objects at resourceVersion (\d+), (\d+) bytes, written in", log)
        assert m and int(m.group(2)) == base, log[-3000:]
        path, snap_rv = m.group(1), m.group(3)
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o700, oct(os.stat(state).st_mode)
        assert not glob.glob(os.path.join(state, ".*")), os.listdir(state)  # no temporary file left

        # Created while kctrld is down: the resumed watch brings it.
        create_cm(sim, "made-while-down")
        sim.control("DELETE", "counters")
        k = run(sim, state, "the warm start", base + 1)
        lists, streams, watches = cm_requests(sim)
        assert (lists, streams) == (0, 0), (lists, streams, k.log()[-3000:])
        assert watches >= 1
        code, _, body = sim.request("GET", "/_apisim/requests")
        first_watch = [r for r in json.loads(body)["requests"]
                       if "/configmaps" in r.get("path", "") and "watch=true" in (r.get("query") or "")][0]
        assert "resourceVersion=%s&" % snap_rv in first_watch["query"], first_watch
        i = informer(k)
        assert i["snapshotRestores"] == 1 and i["snapshotObjects"] == base, i
        # Every cached key is reconciled once after the warm start, as after a list.
        taplib.wait_for(lambda: reconciles(k) >= base + 1, timeout=60, what="every key reconciled")
        assert "warm start from snapshot " + path in k.log()
        stop(k)


def test_compacted_while_down_lists_once():
    itest.require_binaries("ttl")
    state = os.path.join(tempfile.mkdtemp(prefix="kctrld-state-"), "state")
    # More than the 5,000 objects whose history check is a metadata-only
    # LIST at the snapshot's resourceVersion (reflector.h "History check"):
    # above, witness GETs, so the one list counted is the relist.
    with taplib.Apisim("--generate", "configmaps=6000") as sim:
        base = len(sim.json("GET", "/api/v1/configmaps")[1]["items"])
        stop(run(sim, state, "the cold sync", base))
        create_cm(sim, "made-while-down")
        sim.control("POST", "compact")
        sim.control("DELETE", "counters")
        k = run(sim, state, "the sync after the compaction", base + 1)
        lists, streams, _ = cm_requests(sim)
        assert lists + streams == 1, (lists, streams, k.log()[-3000:])
        stop(k)


def test_corrupt_snapshot_ignored():
    itest.require_binaries("ttl")
    state = os.path.join(tempfile.mkdtemp(prefix="kctrld-state-"), "state")
    with taplib.Apisim("--generate", "configmaps=500") as sim:
        base = len(sim.json("GET", "/api/v1/configmaps")[1]["items"])
        stop(run(sim, state, "the cold sync", base))
        (path,) = glob.glob(os.path.join(state, "*.snapshot"))
        with open(path, "r+b") as f:  # one bit of the body flipped
            f.seek(os.path.getsize(path) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x01]))
        sim.control("DELETE", "counters")
        k = run(sim, state, "the sync after the corrupt snapshot", base)
        log = k.log()
        assert re.search(r"warn .*snapshot %s ignored: body checksum mismatch" % re.escape(path), log), log[-3000:]
        lists, streams, _ = cm_requests(sim)
        assert lists + streams >= 1
        assert informer(k)["snapshotFailures"] == 1
        stop(k)


def test_other_cluster_ignored():
    """Another cluster behind the same address (kube-apisim's reseed with a
    new kube-system uid): the snapshot's objects are never applied."""
    itest.require_binaries("ttl")
    state = os.path.join(tempfile.mkdtemp(prefix="kctrld-state-"), "state")
    with taplib.Apisim("--generate", "configmaps=500") as sim:
        base = len(sim.json("GET", "/api/v1/configmaps")[1]["items"])
        stop(run(sim, state, "the cold sync", base))
        (path,) = glob.glob(os.path.join(state, "*.snapshot"))
        with open(path) as f:
            old_uid = re.search(r"^cluster-uid: (\S+)$", f.read(600), re.M).group(1)
        new_uid = sim.control("POST", "reseed", {"cluster": "new"})["kubeSystemUid"]
        assert new_uid != old_uid
        now = len(sim.json("GET", "/api/v1/configmaps")[1]["items"])
        k = run(sim, state, "the sync in the other cluster", now)
        want = "snapshot %s ignored: of another cluster (kube-system uid %s, the server's is %s)" % (
            path, old_uid, new_uid)
        assert want in k.log(), k.log()[-3000:]
        assert reconciles(k) <= now  # none of the snapshot's objects reached the controller
        stop(k)


SHARDED = """
logLevel: info
metrics: { bindAddress: "127.0.0.1:0" }
sharding: { shards: 1, key: %s, leaseDuration: 3s, renewDeadline: 2s, retryPeriod: 500ms }
controllers:
  - name: ttl
    plugin: %s
    for: { apiVersion: v1, kind: ConfigMap }
    settings:
      kinds: [ { apiVersion: v1, kind: ConfigMap } ]
"""


def run_sharded(sim, state, key, what, objects):
    k = taplib.Kctrld(SHARDED % (key, itest.plugin_path("ttl")), kubeconfig=sim.kubeconfig,
                      args=["--state-directory", state])
    def ready():
        i = synced(k, objects)
        return i and i["shardSelector"] and i
    taplib.wait_for(ready, timeout=60, what=what)
    return k


def test_sharded_informer():
    itest.require_binaries("ttl")
    state = os.path.join(tempfile.mkdtemp(prefix="kctrld-state-"), "state")
    # Above the history check's 5,000 objects (witness GETs, no LIST).
    with taplib.Apisim("--generate", "configmaps=6000", "--feature-gates",
                       "ShardedListAndWatch=true") as sim:
        base = len(sim.json("GET", "/api/v1/configmaps")[1]["items"])
        k = run_sharded(sim, state, "metadata.uid", "the cold sync", base)
        selector = informer(k)["shardSelector"]
        assert informer(k)["shardSupport"] == "server"
        log = stop(k)
        m = re.search(r"snapshot (\S+): (\d+) objects at resourceVersion \d+, \d+ bytes, written in "
                      r"[\d.]+ ms off the loop thread", log)
        assert m and int(m.group(2)) == base, log[-3000:]
        with open(m.group(1)) as f:
            assert ";shardSelector=" + selector + "\n" in f.read(4096)

        # The same range reclaimed: the same selector, no LIST.
        sim.control("DELETE", "counters")
        k = run_sharded(sim, state, "metadata.uid", "the warm start with the same range", base)
        lists, streams, _ = cm_requests(sim)
        assert (lists, streams) == (0, 0), (lists, streams, k.log()[-3000:])
        assert informer(k)["snapshotRestores"] == 1
        stop(k)

        # Another selector (the namespace hashed): the snapshot is not used, one list.
        sim.control("DELETE", "counters")
        k = run_sharded(sim, state, "metadata.namespace", "the start with another selector", base)
        lists, streams, _ = cm_requests(sim)
        assert lists + streams == 1, (lists, streams, k.log()[-3000:])
        assert re.search(r"info .*snapshot %s not used: written for shard selector shardRange\(object\."
                         r"metadata\.uid.* the informer starts with shardRange\(object\.metadata\."
                         r"namespace" % re.escape(m.group(1)), k.log()), k.log()[-3000:]
        stop(k)


if __name__ == "__main__":
    taplib.run_tests(globals())
