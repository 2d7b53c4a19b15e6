# SPDX-License-Identifier: Apache-2.0
"""kube-apisim's KEP-5866 shardSelector (docs/apisim.md "Sharded list and
watch"): with --feature-gates ShardedListAndWatch=true, LIST (paged too) and
WATCH (resumed and streaming list) return exactly the objects whose 64-bit
FNV-1a of metadata.uid / metadata.namespace is in one of the ranges, and a
filtered list carries metadata.shardInfo; bad selectors are 400 BadRequest;
without the gate the parameter is ignored."""
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from taplib import Apisim, run_tests  # noqa: E402

GATE = ("--feature-gates", "ShardedListAndWatch=true")
HALF = 1 << 63


def fnv1a64(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h


def bound(v):
    return "'0x10000000000000000'" if v == 1 << 64 else "'0x%016x'" % v


def sel(ranges, field="object.metadata.uid"):
    return " || ".join("shardRange(%s, %s, %s)" % (field, bound(a), bound(b)) for a, b in ranges)


def inside(value, ranges):
    h = fnv1a64(value)
    return any(a <= h < b for a, b in ranges)


def q(**kw):
    return "?" + urllib.parse.urlencode(kw)


def names(items):
    return {(i["metadata"].get("namespace", ""), i["metadata"]["name"]) for i in items}


def test_list_filters_and_echoes():
    with Apisim("--generate", "configmaps=200", *GATE) as s:
        _, full = s.json("GET", "/api/v1/configmaps", expect=200)
        assert "shardInfo" not in full["metadata"]
        for ranges in ([(0, HALF)], [(HALF, 1 << 64)], [(0, 1 << 62), (3 << 62, 1 << 64)]):
            text = sel(ranges)
            _, part = s.json("GET", "/api/v1/configmaps" + q(shardSelector=text), expect=200)
            assert part["metadata"]["shardInfo"] == {"selector": text}
            want = names(i for i in full["items"] if inside(i["metadata"]["uid"], ranges))
            assert names(part["items"]) == want and 0 < len(want) < len(full["items"])
        # namespace key: all objects of a namespace fall on the same side
        ranges = [(0, HALF)]
        _, part = s.json("GET", "/api/v1/configmaps" + q(shardSelector=sel(ranges, "object.metadata.namespace")),
                         expect=200)
        assert names(part["items"]) == names(i for i in full["items"] if inside(i["metadata"]["namespace"], ranges))


def test_paged_list_with_continue():
    with Apisim("--generate", "configmaps=120", *GATE) as s:
        ranges = [(0, HALF)]
        text = sel(ranges)
        _, full = s.json("GET", "/api/v1/configmaps", expect=200)
        got, cont, pages = [], None, 0
        while True:
            params = {"shardSelector": text, "limit": 7}
            if cont:
                params["continue"] = cont
            _, page = s.json("GET", "/api/v1/configmaps" + q(**params), expect=200)
            assert page["metadata"]["shardInfo"] == {"selector": text}
            assert "remainingItemCount" not in page["metadata"]  # filtered: not counted
            assert len(page["items"]) <= 7
            got += page["items"]
            pages += 1
            cont = page["metadata"].get("continue")
            if not cont:
                break
        assert pages > 2
        assert names(got) == names(i for i in full["items"] if inside(i["metadata"]["uid"], ranges))


def test_watch_streaming_and_resumed():
    with Apisim("--generate", "configmaps=60", *GATE) as s:
        ranges = [(HALF, 1 << 64)]
        text = sel(ranges)
        _, full = s.json("GET", "/api/v1/configmaps", expect=200)
        want = names(i for i in full["items"] if inside(i["metadata"]["uid"], ranges))
        st, evs = s.watch("/api/v1/configmaps" + q(watch=1, allowWatchBookmarks="true", sendInitialEvents="true",
                                                   resourceVersionMatch="NotOlderThan", resourceVersion="",
                                                   shardSelector=text, timeoutSeconds=1))
        assert st == 200
        added = [e for e in evs if e["type"] == "ADDED"]
        assert names(e["object"] for e in added) == want
        ends = [e for e in evs if e["type"] == "BOOKMARK"
                and e["object"]["metadata"].get("annotations", {}).get("k8s.io/initial-events-end") == "true"]
        assert len(ends) == 1
        # a resumed watch sees only the changes of matching objects
        rv = full["metadata"]["resourceVersion"]
        created = []
        for i in range(40):
            _, o = s.json("POST", "/api/v1/namespaces/default/configmaps",
                          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w%d" % i}}, expect=201)
            created.append(o)
        st, evs = s.watch("/api/v1/configmaps" + q(watch=1, resourceVersion=rv, shardSelector=text, timeoutSeconds=1))
        got = {e["object"]["metadata"]["name"] for e in evs if e["type"] == "ADDED"}
        assert got == {o["metadata"]["name"] for o in created if inside(o["metadata"]["uid"], ranges)}
        assert 0 < len(got) < 40


def test_validation_errors():
    with Apisim(*GATE) as s:
        for text, msg in [
            ("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
             "invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" "
             "(did you mean \"0x0000000000000000\"?)"),
            ("shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
             "invalid shard selector: unsupported field path \"object.metadata.name\"; "
             "supported: object.metadata.uid, object.metadata.namespace"),
            ("shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
             "invalid shard selector: shard range start 0x8000000000000000 must be less than end 0x0000000000000000"),
            (" ", "invalid shard selector: empty shard selector is not allowed; omit the parameter for unfiltered lists"),
        ]:
            for extra in ({}, {"watch": 1}):
                st, doc = s.json("GET", "/api/v1/configmaps" + q(shardSelector=text, **extra))
                assert st == 400, (st, doc)
                assert doc["kind"] == "Status" and doc["reason"] == "BadRequest" and doc["code"] == 400
                assert doc["message"] == msg, doc["message"]


def test_gate_off_ignores_parameter():
    with Apisim("--generate", "configmaps=30") as s:
        _, full = s.json("GET", "/api/v1/configmaps", expect=200)
        for text in (sel([(0, HALF)]), "not a selector"):
            _, part = s.json("GET", "/api/v1/configmaps" + q(shardSelector=text), expect=200)
            assert "shardInfo" not in part["metadata"]
            assert names(part["items"]) == names(full["items"])
        assert s.control("GET", "config")["shardedListAndWatch"] is False
        # the gate can be switched at run time
        s.control("POST", "config", {"shardedListAndWatch": True})
        _, part = s.json("GET", "/api/v1/configmaps" + q(shardSelector=sel([(0, HALF)])), expect=200)
        assert "shardInfo" in part["metadata"] and len(part["items"]) < len(full["items"])


if __name__ == "__main__":
    run_tests(globals())
