#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The parsing and aggregation of tests/bench/compare.py (`make bench`) on
canned peer output, /proc texts and results (no peer is started; the
benchmark itself is not part of the test suite), and the kctrld side's bench
plugin on Pods: the noop plugin's syncFile against a small simulated cluster."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import taplib  # noqa: E402
import compare  # noqa: E402


def test_parse_peer_protocol_lines():
    assert compare.parse_line("SYNCED 1764590000.123456 10000 9876\n") == {
        "kind": "SYNCED", "t": 1764590000.123456, "events": 10000, "processed": 9876}
    assert compare.parse_line("STAT 1764590001.5 10020 10020 20") == {
        "kind": "STAT", "t": 1764590001.5, "events": 10020, "processed": 10020, "updates": 20}
    assert compare.parse_line("DONE 1764590002.000001 50000") == {
        "kind": "DONE", "t": 1764590002.000001, "updates": 50000}
    for junk in ("", "watch error: 410", "SYNCED x 1 2", "DONE 1.0", "STAT 1 2 3", "I1201 klog line"):
        assert compare.parse_line(junk) is None, junk


def test_proc_stat_and_status():
    hz = compare.CLK_TCK
    # the command name may hold spaces and parentheses; utime/stime are fields 14/15
    stat = ("4242 (node (peer) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 %d %d 0 0 20 0 11 0 "
            "100 1000000 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0" % (3 * hz, hz // 2))
    assert abs(compare.cpu_seconds(stat) - 3.5) < 1e-9
    status = "Name:\tclientgo-peer\nVmPeak:\t 900 kB\nVmHWM:\t  301234 kB\nVmRSS:\t  290000 kB\nThreads:\t9\n"
    assert compare.status_kib(status) == (290000, 301234)
    assert compare.status_kib("Name:\tx\n") == (0, 0)


def test_summary_cells_and_ratios():
    s = compare.summary([3.0, None, 1.0, 2.0])
    assert s == (2.0, 1.0, 3.0)
    assert compare.summary([None]) is None
    assert compare.fmt_cell(s) == "2.00 (1.00-3.00)"
    assert compare.fmt_cell((48800.0, 48800.0, 48800.0)) == "48,800"
    assert compare.fmt_cell(None) == "-"
    assert compare.ratio((0.23, 0.2, 0.3), (1.92, 1.9, 2.0)) == "0.12x"
    assert compare.ratio((48800.0,) * 3, (3760.0,) * 3) == "13.0x"
    assert compare.ratio(None, s) == "-" and compare.ratio(s, (0.0, 0.0, 0.0)) == "-"


def test_yajl_floor_output():
    assert compare.parse_yajl("yajl alone: 75800000 bytes, best of 3: 0.350 s (CPU 0.310 s)\n") == 0.31
    assert compare.parse_yajl("yajl alone: 10 bytes, best of 3: 0.125 s\n") == 0.125  # older binary
    try:
        compare.parse_yajl("usage: bench_yajl FILE")
    except ValueError:
        pass
    else:
        raise AssertionError("no ValueError for output without a result")


def test_latency_pairing():
    sent = [1_000_000_000, 1_001_000_000, 1_002_000_000]
    seen = [1.0015, 1.0030, 1.0021, 9.0]  # unix s; the extra DONE is ignored
    lat = compare.latencies_in_order(sent, seen)
    assert [round(x, 3) for x in lat] == [0.1, 1.5, 2.0]
    # a millisecond clock (client-node's Date.now()): the update seen in the
    # same millisecond as its patch reads 0, not negative
    sent = [1_000_400_000, 1_001_900_000]
    seen = [1.000, 1.003]
    assert [round(x, 3) for x in compare.latencies_in_order(sent, seen)] == [-0.4, 1.1]
    assert [round(x, 3) for x in compare.latencies_in_order(sent, seen, 1_000_000)] == [0.0, 2.0]
    lines = ["100 5000000\n", "100 7000000\n", "200 1000000\n", "50 1\n", "garbage\n"]
    # the first reconcile of each patch counts; patches sent before t_first are old
    assert compare.first_latency_per_patch(lines, 100) == [1.0, 5.0]


def test_rss_curve():
    series = [(0, 1024), (1, 2048), (2, 4096), (3, 3072)]
    assert compare.curve_summary(series) == (1.0, 4.0, 3.0)
    assert compare.curve_summary([]) is None
    assert compare.growth_last_two_thirds(series) == 4096 - 2048
    assert compare.growth_last_two_thirds([(0, 5), (1, 5)]) == 0
    assert compare.flat_verdict([1432, 0], [96.2, 96.0]) == "flat"       # 1.4 MiB of 96 MiB
    assert compare.flat_verdict([0, 30228], [96.2, 306.0]) == "NOT flat"  # 29.5 MiB of 306 MiB
    assert compare.flat_verdict([2148], [89.3]) == "NOT flat"                # 2.1 MiB of 89 MiB
    assert compare.flat_verdict([2148], [89.3], compare.DECODE_BUDGET_KIB) == "flat"  # + 8 MiB
    assert compare.flat_verdict([12000], [89.3], compare.DECODE_BUDGET_KIB) == "NOT flat"


def test_events_counted_across_reads():
    stream = b'{"type":"MODIFIED"}\n{"type":"MODIFIED"}\n{"type":"MODIFIED"}\n'
    for cut in range(len(stream) + 1):
        a, b = stream[:cut], stream[cut:]
        assert compare.events_ended(b"", a) + compare.events_ended(a, b) == 3, cut


def test_dechunk_watch_stream():
    body = b'{"type":"MODIFIED"}\n{"type":"MODIFIED"}\n'
    raw = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"d\r\n" + body[:13] + b"\r\n" + b"%x\r\n" % (len(body) - 13) + body[13:] + b"\r\n0\r\n\r\n")
    assert compare.dechunk(raw) == body
    # a stream cut in the middle of a chunk keeps what arrived
    assert compare.dechunk(raw[:-20]).startswith(body[:13])
    assert compare.dechunk(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}") == b"{}"


def test_replace_marked_section():
    doc = "# Benchmarks\n\nintro\n\n%s\nold table\n%s\n\n## Later\n" % (compare.BEGIN, compare.END)
    new = compare.replace_section(doc, "new table\n")
    assert "old table" not in new and "new table" in new
    assert new.startswith("# Benchmarks\n\nintro\n\n" + compare.BEGIN) and new.endswith(compare.END + "\n\n## Later\n")
    assert compare.replace_section(new, "new table\n") == new
    appended = compare.replace_section("# Benchmarks\n", "t\n")
    assert appended == "# Benchmarks\n\n%s\nt\n%s\n" % (compare.BEGIN, compare.END)
    # a quick run has its own section: the full run's table stays
    both = compare.replace_section(new, "quick table\n", quick=True)
    assert "new table" in both and both.endswith(compare.END_QUICK + "\n")
    again = compare.replace_section(both, "quick 2\n", quick=True)
    assert "quick table" not in again and "quick 2" in again and "new table" in again


def test_render_table_ratios_and_floors():
    results = {
        "kctrld": {"sync10000.cpu": [0.25, 0.23, 0.30], "watch.drain.eps": [48800.0]},
        "client-go": {"sync10000.cpu": [1.92, 1.90, 2.00], "watch.drain.eps": [3760.0]},
        "client-node": {},
        "floor": {"list10000.yajl_s": [0.10], "list10000.mbs": [500.0], "watch.drain_eps": [60000.0]},
    }
    t = compare.render_table(results, [10000], ["kctrld", "client-go", "client-node"], ["- a note"])
    lines = t.splitlines()
    assert lines[0].startswith("| scenario | metric | kctrld | client-go | client-node | floor |")
    cpu = [ln for ln in lines if "| CPU s |" in ln][0]
    assert "0.250 (0.230-0.300)" in cpu and "1.92 (1.90-2.00)" in cpu
    assert "| 0.13x | - | 2.50x |" in cpu  # kctrld/client-go, kctrld/client-node, kctrld/floor
    drain = [ln for ln in lines if ln.startswith("| watch drained | events/s")][0]
    assert "| 13.0x |" in drain and "| 0.81x |" in drain
    assert any("list 10k Pods MB/s to curl | - | - | - | 500" in ln for ln in lines)
    assert not any("RSS/object" in ln for ln in lines)  # rows without values are left out
    assert lines[-1] == "- a note"


def test_paired_floor_ratio():
    """A CPU row whose kctrld runs carry paired floors shows the median of the
    per-run ratios, not the ratio of the two medians; other rows are as before."""
    results = {
        "kctrld": {"sync10000.cpu": [0.20, 0.40, 0.30],
                   "sync10000.cpu" + compare.PAIRED: [1.25, 1.50, 1.10],
                   "watch.drain.us": [30.0]},
        "floor": {"list10000.yajl_s": [0.10, 0.16, 0.32, 0.20], "watch.yajl_us": [20.0]},
    }
    lines = compare.render_table(results, [10000], ["kctrld"]).splitlines()
    cpu = [ln for ln in lines if "| CPU s |" in ln][0]
    assert cpu.endswith("| 1.25x (paired) |")  # median of 1.10, 1.25, 1.50; 0.30 / 0.18 would be 1.67x
    drain = [ln for ln in lines if "| CPU us/event |" in ln][-1]
    assert drain.endswith("| 1.50x |")

    class A:
        build = "build"
    b = compare.Bench.__new__(compare.Bench)
    b.a, b.results, b.floor_files = A(), {"kctrld": {}, "floor": {}}, {}
    b.paired_floor("sync10000.cpu", 0.3, "list10000.yajl_s", "list10000")  # no file: nothing
    assert b.results == {"kctrld": {}, "floor": {}}


def test_relist_rows_and_watch_counts():
    results = {"kctrld": {"relist10000.before": [96.0], "relist10000.after": [97.0],
                          "relist10000.growth": [102.4]},
               "floor": {"list10000.json_per_obj": [7525.0]}}
    lines = compare.render_table(results, [10000], ["kctrld"]).splitlines()
    assert any(ln.startswith("| relist 10k Pods | RSS MiB before | 96.0 |") for ln in lines)
    growth = [ln for ln in lines if "RSS growth bytes/object" in ln][0]
    assert "| 102 | 7,525 |" in growth and growth.endswith("| 0.01x |")

    class A:
        watch_events, quick, sizes, clients = 10000, True, [10000], list(compare.CLIENTS)
    b = compare.Bench.__new__(compare.Bench)
    b.a = A()
    assert [b.watch_events(c) for c in compare.CLIENTS] == [10000, 5000, 5000, 500]
    assert b.relists_at("kctrld", 10000) and not b.relists_at("client-go", 10000)
    A.quick, A.watch_events = False, 50000
    assert [b.watch_events(c) for c in compare.CLIENTS] == [50000, 50000, 50000, 5000]
    A.sizes = [10000, 50000, 100000]
    assert b.relists_at("kctrld", 100000) and b.relists_at("client-go", 100000)
    assert not b.relists_at("kctrld", 10000) and not b.relists_at("python", 100000)


def bench_idle(k):
    """The bench controller's counters when it is idle after 20 successes, else None."""
    snap = k.scrape()
    c = 'controller="bench"'
    state = {"successes": k.metric(snap, "controller_runtime_reconcile_total", c + ',result="success"'),
             "reconciles": k.metric(snap, "controller_runtime_reconcile_total", c),
             "queued": k.metric(snap, "workqueue_depth", c),
             "busy": k.metric(snap, "controller_runtime_active_workers", c)}
    return state if state["successes"] >= 20 and state["queued"] == 0 and state["busy"] == 0 else None


def test_noop_plugin_on_pods_writes_sync_file():
    tmp = tempfile.mkdtemp(prefix="bench-driver-")
    os.chmod(tmp, 0o700)  # plugin directories must not be writable by others
    so = taplib.build_plugin(os.path.join(HERE, "..", "bench", "plugins", "noop.c"), tmp, "-O2")
    sync_file = os.path.join(tmp, "synced")
    stats = os.path.join(tmp, "stats")
    with taplib.Apisim("--generate", "pods=20") as sim:
        cfg = ("logLevel: info\nshutdownTimeout: 3s\n"
               "metrics: { bindAddress: \"127.0.0.1:0\" }\n"
               "informers:\n  - { apiVersion: v1, kind: Pod }\n"
               "controllers:\n  - name: bench\n    plugin: %s\n"
               "    for: { apiVersion: v1, kind: Pod }\n    workers: 1\n"
               "    settings: {kind: Pod, syncFile: %s, statsFile: %s}\n" % (so, sync_file, stats))
        with taplib.Kctrld(cfg, sim.kubeconfig, dir=os.path.join(tmp, "k")) as k:
            taplib.wait_for(lambda: os.path.exists(sync_file), timeout=20, what="the sync file")
            with open(sync_file) as f:
                line = f.read()
            # The sync file only says the first reconcile ran; the other keys may still be
            # queued (a loaded sanitizer build), and noop writes its count when it is
            # unloaded. Stop only once the controller is idle with every key done: 20
            # successes, nothing queued, no worker busy (one scrape: one snapshot).
            idle = taplib.wait_for(lambda: bench_idle(k), timeout=30, what="20 reconciles, queue empty")
            assert idle["reconciles"] == 20, idle  # one per Pod, none twice
            assert k.stop() == 0, k.log()
    assert line.startswith("SYNCED ") and line.endswith("\n"), line
    assert abs(float(line.split()[1]) - __import__("time").time()) < 60, line
    with open(stats) as f:
        count = int(f.read().split()[0])
    assert count == 20, count  # one reconcile per Pod


if __name__ == "__main__":
    taplib.run_tests(globals())
