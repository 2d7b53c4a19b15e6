#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Scrapes a running kctrld (against kube-apisim) over HTTP: /metrics is parsed
line by line with a strict Prometheus text-format (0.0.4) parser written here,
the required metric names and labels must be present with sane values,
/debug/informers has the documented JSON shape, /healthz and /readyz answer,
anything else is 404. The controller runs tests/unit/plugins/sample.c, built
here like an out-of-tree plugin, over ConfigMaps made from a real fixture.
Every series the kubebuilder-generated Grafana dashboards and client-go's
usual alerts query is there, read by prometheus_client's own text parser
(Debian's python3-prometheus-client; the test is skipped without it)."""
import copy
import json
import math
import os
import re
import socket
import struct
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import taplib  # noqa: E402
from taplib import BUILD, FIXTURES, ROOT, Apisim, Skip, run_tests, wait_for  # noqa: E402

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
SAMPLE_RE = re.compile(r"^(%s)(\{.*\})? (\S+)$" % NAME)
LABEL_RE = re.compile(r'(%s)="((?:[^"\\\n]|\\[\\"n])*)"' % LABEL)


def parse_value(s):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?", s):
        raise ValueError("bad value %r" % s)
    return float(s)


def unescape(v):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], v)


def parse_labels(block):
    """Strict: {k="v",k2="v2"}; no trailing comma, no duplicates."""
    if block is None:
        return {}
    inner = block[1:-1]
    labels, pos = {}, 0
    while pos < len(inner):
        m = LABEL_RE.match(inner, pos)
        if not m:
            raise ValueError("bad label block %r at %d" % (block, pos))
        if m.group(1) in labels:
            raise ValueError("duplicate label %s" % m.group(1))
        labels[m.group(1)] = unescape(m.group(2))
        pos = m.end()
        if pos < len(inner):
            if inner[pos] != ",":
                raise ValueError("expected ',' in %r" % block)
            pos += 1
            if pos == len(inner):
                raise ValueError("trailing comma in %r" % block)
    return labels


def parse_exposition(text):
    """Returns {family: {"type", "help", "samples": [(name, labels, value)]}}.
    Raises ValueError on anything the text format does not allow."""
    if text == "":
        return {}  # no family has samples yet: valid, empty exposition
    if not text.endswith("\n"):
        raise ValueError("exposition must end with a newline")
    families, current, seen_series = {}, None, set()
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            if not re.fullmatch(NAME, name) or name in families:
                raise ValueError("line %d: bad or repeated HELP %r" % (n, line))
            families[name] = {"help": help_, "type": None, "samples": []}
            current = name
            continue
        if line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            if name != current or typ not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise ValueError("line %d: TYPE %r does not follow its HELP" % (n, line))
            if families[name]["type"] or families[name]["samples"]:
                raise ValueError("line %d: TYPE after samples" % n)
            families[name]["type"] = typ
            continue
        if line.startswith("#") or not line:
            raise ValueError("line %d: unexpected %r" % (n, line))
        m = SAMPLE_RE.match(line)
        if not m:
            raise ValueError("line %d: not a sample: %r" % (n, line))
        name, labels, value = m.group(1), parse_labels(m.group(2)), parse_value(m.group(3))
        fam = families.get(current)
        if fam is None:
            raise ValueError("line %d: sample before any HELP" % n)
        typ = fam["type"]
        if typ == "histogram":
            suffix = name[len(current):]
            if not name.startswith(current) or suffix not in ("_bucket", "_sum", "_count"):
                raise ValueError("line %d: %s is not part of histogram %s" % (n, name, current))
            if suffix == "_bucket" and "le" not in labels:
                raise ValueError("line %d: bucket without le" % n)
        elif name != current:
            raise ValueError("line %d: %s outside its family %s" % (n, name, current))
        if typ == "counter" and (value < 0 or math.isnan(value)):
            raise ValueError("line %d: negative counter" % n)
        key = (name, tuple(sorted(labels.items())))
        if key in seen_series:
            raise ValueError("line %d: duplicate series %r" % (n, key))
        seen_series.add(key)
        fam["samples"].append((name, labels, value))
    for name, fam in families.items():
        if fam["type"] is None:
            raise ValueError("family %s has no TYPE" % name)
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return families


def check_histogram(name, samples):
    series = {}
    for sname, labels, value in samples:
        base = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(base, {"buckets": [], "sum": None, "count": None})
        if sname.endswith("_bucket"):
            s["buckets"].append((parse_value(labels["le"]), value))
        elif sname.endswith("_sum"):
            s["sum"] = value
        else:
            s["count"] = value
    for base, s in series.items():
        les = [le for le, _ in s["buckets"]]
        if not les or les[-1] != math.inf or les != sorted(les) or len(set(les)) != len(les):
            raise ValueError("%s%r: buckets must increase and end with +Inf: %r" % (name, base, les))
        counts = [c for _, c in s["buckets"]]
        if counts != sorted(counts):
            raise ValueError("%s%r: buckets are not cumulative" % (name, base))
        if s["count"] is None or s["sum"] is None or s["count"] != counts[-1]:
            raise ValueError("%s%r: _count must equal the +Inf bucket" % (name, base))


REQUIRED = {
    "workqueue_depth": ("gauge", {"name", "controller"}),
    "workqueue_adds_total": ("counter", {"name", "controller"}),
    "workqueue_queue_duration_seconds": ("histogram", {"name", "controller"}),
    "workqueue_work_duration_seconds": ("histogram", {"name", "controller"}),
    "workqueue_unfinished_work_seconds": ("gauge", {"name", "controller"}),
    "workqueue_longest_running_processor_seconds": ("gauge", {"name", "controller"}),
    "workqueue_retries_total": ("counter", {"name", "controller"}),
    "workqueue_depth_by_priority": ("gauge", {"name", "controller", "priority"}),
    "kctrld_workqueue_aged_total": ("counter", {"name", "controller"}),
    "controller_runtime_reconcile_total": ("counter", {"controller", "result"}),
    "controller_runtime_reconcile_errors_total": ("counter", {"controller"}),
    "controller_runtime_terminal_reconcile_errors_total": ("counter", {"controller"}),
    "controller_runtime_reconcile_time_seconds": ("histogram", {"controller"}),
    "controller_runtime_max_concurrent_reconciles": ("gauge", {"controller"}),
    "controller_runtime_active_workers": ("gauge", {"controller"}),
    "kctrld_reflector_lists_total": ("counter", {"resource", "namespace"}),
    "kctrld_reflector_watches_total": ("counter", {"resource", "namespace"}),
    "kctrld_reflector_relists_total": ("counter", {"resource", "namespace"}),
    "kctrld_reflector_events_total": ("counter", {"resource", "namespace"}),
    "kctrld_informer_objects": ("gauge", {"resource", "namespace"}),
    "kctrld_informer_bytes": ("gauge", {"resource", "namespace"}),
    "kctrld_informer_backlog": ("gauge", {"resource", "namespace"}),
    "kctrld_reflector_streaming_lists_total": ("counter", {"resource", "namespace"}),
    "kctrld_reflector_streaming_list_attempts_total": ("counter", {"resource", "namespace"}),
    "kctrld_reflector_streaming_list_fallbacks_total": ("counter", {"resource", "namespace"}),
    "kctrld_reflector_decode_pauses_total": ("counter", {"resource", "namespace"}),
    "kctrld_loop_lag_seconds": ("histogram", set()),
    "kctrld_loop_lag_max_seconds": ("gauge", set()),
}


def http(port, path, method="GET"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def api(url, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


class Kctrld(taplib.Kctrld):
    """kctrld with the sample plugin over labelled ConfigMaps in ns, metrics on a free port."""

    def __init__(self, sim, tmp):
        so = taplib.build_plugin(os.path.join(ROOT, "tests/unit/plugins/sample.c"), tmp)
        super().__init__("informers:\n"
                         "  - apiVersion: v1\n    kind: ConfigMap\n    namespaces: [ns]\n"
                         "    labelSelector: \"app=k9s\"\n"
                         "controllers:\n"
                         "  - name: sample\n    plugin: %s\n"
                         "    for: { apiVersion: v1, kind: ConfigMap }\n"
                         "    workers: 2\n"
                         "    settings: { greeting: hi }\n" % so,
                         sim.kubeconfig, args=["--metrics-bind-address", "127.0.0.1:0"], dir=tmp)
        self.sim_host = urllib.parse.urlparse(sim.url).netloc
        self.metrics_port()

    def text(self):
        return self.log()

    def stop(self):
        return super().stop(15)


def with_daemon(fn):
    def run():
        if not os.path.exists(os.path.join(BUILD, "kctrld")):
            raise Skip("no %s/kctrld" % BUILD)
        tmp = tempfile.mkdtemp(prefix="kctrld-metrics-")
        with Apisim() as sim:
            api(sim.url, "POST", "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
            with open(os.path.join(FIXTURES, "objects", "configmap-k9s.json")) as f:
                fixture = json.load(f)
            for name in ("ok", "error", "requeue", "after"):
                cm = copy.deepcopy(fixture)
                meta = cm["metadata"]
                for k in ("resourceVersion", "uid", "selfLink", "creationTimestamp"):
                    meta.pop(k, None)
                meta.update({"name": name, "namespace": "ns", "labels": {"app": "k9s"}})
                st = api(sim.url, "POST", "/api/v1/namespaces/ns/configmaps", cm)
                assert st == 201, "create configmap %s: HTTP %d" % (name, st)
            d = Kctrld(sim, tmp)
            try:
                fn(d)
                assert d.proc.poll() is None, "kctrld exited early:\n" + d.text()[-3000:]
            except BaseException:
                sys.stderr.write(d.text()[-3000:])
                raise
            finally:
                rc = d.stop()
            assert rc == 0, "kctrld exit status %r:\n%s" % (rc, d.text()[-3000:])
    return run


def scrape(d):
    st, ctype, body = http(d.port, "/metrics")
    assert st == 200, (st, body)
    assert ctype == "text/plain; version=0.0.4; charset=utf-8", ctype
    return parse_exposition(body)


def _metrics(d):
    def reconciled():
        fams = scrape(d)
        tot = {s[1]["result"]: s[2] for s in fams.get("controller_runtime_reconcile_total", {"samples": []})["samples"]}
        return fams if tot.get("success", 0) >= 1 and tot.get("error", 0) >= 1 else None
    fams = wait_for(reconciled, timeout=30, interval=0.3, what="reconciles counted in /metrics")
    for name, (typ, labels) in REQUIRED.items():
        assert name in fams, "missing metric family %s" % name
        assert fams[name]["type"] == typ, (name, fams[name]["type"])
        for sname, lab, _ in fams[name]["samples"]:
            assert labels <= set(lab), (name, lab)
    results = {s[1]["result"] for s in fams["controller_runtime_reconcile_total"]["samples"]}
    assert results == {"success", "error", "requeue", "requeue_after"}, results
    wq = {s[1]["name"]: s[1]["controller"] for s in fams["workqueue_adds_total"]["samples"]}
    assert wq == {"sample": "sample"}, wq
    adds = [s[2] for s in fams["workqueue_adds_total"]["samples"]][0]
    assert adds >= 4, adds
    errors = [s[2] for s in fams["controller_runtime_reconcile_errors_total"]["samples"]][0]
    assert errors >= 1
    objs = [s for s in fams["kctrld_informer_objects"]["samples"]]
    assert len(objs) == 1 and objs[0][2] == 4, objs
    assert objs[0][1]["resource"] == "configmaps" and objs[0][1]["namespace"] == "ns", objs[0][1]
    assert objs[0][1]["label_selector"] == "app=k9s", objs[0][1]
    # The daemon lists with the streaming list (sendInitialEvents): it counts
    # as a streaming list and a watch, not as a LIST request.
    lists = [s[2] for s in fams["kctrld_reflector_lists_total"]["samples"]][0]
    streamed = [s[2] for s in fams["kctrld_reflector_streaming_lists_total"]["samples"]][0]
    attempts = [s[2] for s in fams["kctrld_reflector_streaming_list_attempts_total"]["samples"]][0]
    assert lists + streamed >= 1 and attempts >= streamed, (lists, streamed, attempts)
    maxc = [s[2] for s in fams["controller_runtime_max_concurrent_reconciles"]["samples"]][0]
    assert maxc == 2, maxc
    # The Event recorder's outcomes (the sample plugin records none).
    assert fams["kctrld_events_total"]["type"] == "counter"
    ev = {s[1]["result"]: s[2] for s in fams["kctrld_events_total"]["samples"]}
    assert ev == {"created": 0, "patched": 0, "dropped": 0, "skipped": 0, "failed": 0}, ev
    assert [s[2] for s in fams["kctrld_events_queued"]["samples"]] == [0], fams["kctrld_events_queued"]
    # The controller-runtime bucket layout for the work queue histograms.
    les = [s[1]["le"] for s in fams["workqueue_work_duration_seconds"]["samples"] if s[0].endswith("_bucket")]
    assert les == ["1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1", "10", "100",
                   "1000", "+Inf"], les


def _endpoints(d):
    st, _, body = http(d.port, "/healthz")
    assert st == 200 and body == "ok\n", (st, body)
    wait_for(lambda: http(d.port, "/readyz")[0] == 200, timeout=20, what="/readyz 200")
    for path in ("/", "/metricsx", "/debug", "/debug/informers/x"):
        assert http(d.port, path)[0] == 404, path
    assert http(d.port, "/metrics", method="POST")[0] == 405
    st, ctype, body = http(d.port, "/debug/informers")
    assert st == 200 and ctype == "application/json", (st, ctype)
    doc = json.loads(body)
    assert isinstance(doc, list) and len(doc) == 1, doc
    inf = doc[0]
    want = {"resource": str, "namespaces": list, "labelSelector": str, "fieldSelector": str, "synced": bool,
            "objects": int, "resourceVersion": str, "lists": int, "watches": int, "relists": int,
            "backlog": int}
    for k, t in want.items():
        assert isinstance(inf.get(k), t), (k, inf.get(k))
    assert inf["resource"] == "configmaps" and inf["namespaces"] == ["ns"], inf
    assert inf["labelSelector"] == "app=k9s" and inf["fieldSelector"] == "", inf
    assert inf["synced"] is True and inf["objects"] == 4, inf
    assert inf["lists"] + inf["streamingLists"] >= 1 and inf["watches"] >= 1, inf
    assert inf["resourceVersion"] != "", inf


def _scraper_resets(d):
    # A scraper that sends its request and resets the connection at once:
    # the daemon's reply then goes to a dead socket. That must cost an
    # EPIPE on one connection, not a SIGPIPE that ends the process. Whether
    # a reset lands between two writes is up to the scheduler, so the signal
    # disposition is checked as well.
    with open("/proc/%d/status" % d.proc.pid) as f:
        ign = int([ln.split()[1] for ln in f if ln.startswith("SigIgn:")][0], 16)
    assert ign & (1 << (13 - 1)), "kctrld does not ignore SIGPIPE (SigIgn %x)" % ign
    for _ in range(100):
        s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        try:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass  # the client's side of a reset is not what is tested
        finally:
            s.close()
    assert d.proc.poll() is None, "kctrld died after reset scrapes (status %r)" % d.proc.poll()
    # Up to 32 connections are served at once (httpserver.c); on a loaded
    # machine the burst's threads may still hold them, and a probe beyond
    # the limit is closed, as a kubelet probe would be and then retried.
    deadline = time.monotonic() + 20
    while True:
        try:
            st, _, body = http(d.port, "/healthz")
        except OSError as e:
            st, body = None, repr(e)
        if st == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert st == 200, (st, body)
    assert d.proc.poll() is None


# Every series the two Grafana dashboards kubebuilder generates (its grafana
# plugin: controller-runtime metrics and controller resources) and the
# usual client-go alerts (API errors by code, request latency) query, with
# the labels their queries select or group by. Target labels (job,
# namespace, pod, instance) come from the scrape, not from /metrics.
DASHBOARD_SERIES = {
    # controller-runtime metrics dashboard
    "controller_runtime_active_workers": ("gauge", {"controller"}),
    "controller_runtime_reconcile_total": ("counter", {"controller", "result"}),
    "controller_runtime_reconcile_errors_total": ("counter", {"controller"}),
    "workqueue_depth": ("gauge", {"name"}),
    "workqueue_queue_duration_seconds_bucket": ("histogram", {"name", "le"}),
    "workqueue_adds_total": ("counter", {"name"}),
    "workqueue_unfinished_work_seconds": ("gauge", {"name"}),
    "workqueue_work_duration_seconds_bucket": ("histogram", {"name", "le"}),
    "workqueue_retries_total": ("counter", {"name"}),
    # controller resources dashboard
    "process_cpu_seconds_total": ("counter", set()),
    "process_resident_memory_bytes": ("gauge", set()),
    # the rest of the process collector and of controller-runtime's set
    "process_virtual_memory_bytes": ("gauge", set()),
    "process_open_fds": ("gauge", set()),
    "process_max_fds": ("gauge", set()),
    "process_start_time_seconds": ("gauge", set()),
    "controller_runtime_max_concurrent_reconciles": ("gauge", {"controller"}),
    "controller_runtime_reconcile_time_seconds_bucket": ("histogram", {"controller", "le"}),
    "controller_runtime_terminal_reconcile_errors_total": ("counter", {"controller"}),
    "workqueue_longest_running_processor_seconds": ("gauge", {"name"}),
    # client-go's REST client (alerts on API errors and latency)
    "rest_client_requests_total": ("counter", {"code", "method", "host"}),
    "rest_client_request_duration_seconds_bucket": ("histogram", {"verb", "host", "le"}),
}

REST_LATENCY_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, math.inf]


def _dashboard_series(d):
    from prometheus_client.parser import text_string_to_metric_families

    def families():
        st, _, body = http(d.port, "/metrics")
        assert st == 200, (st, body)
        fams = {f.name: f for f in text_string_to_metric_families(body)}
        samples = [(f.type, s) for f in fams.values() for s in f.samples]
        rec = [s.value for t, s in samples if s.name == "controller_runtime_reconcile_total"]
        return samples if sum(rec) >= 4 else None
    samples = wait_for(families, timeout=30, interval=0.3, what="reconciles counted in /metrics")
    by_name = {}
    for typ, s in samples:
        by_name.setdefault(s.name, []).append((typ, s))
    for name, (typ, labels) in DASHBOARD_SERIES.items():
        assert name in by_name, "a dashboard series is missing: %s" % name
        for t, s in by_name[name]:
            assert t == typ, "%s is a %s, dashboards expect a %s" % (name, t, typ)
            assert labels <= set(s.labels), "%s lacks labels %s: %r" % (name, labels - set(s.labels), s.labels)
    one = {name: by_name[name][0][1].value for name in by_name}
    now = time.time()
    assert now - 600 < one["process_start_time_seconds"] <= now + 1, one["process_start_time_seconds"]
    assert 3 <= one["process_open_fds"] <= one["process_max_fds"], (one["process_open_fds"], one["process_max_fds"])
    assert one["process_resident_memory_bytes"] > 1 << 20, one["process_resident_memory_bytes"]
    assert one["process_virtual_memory_bytes"] >= one["process_resident_memory_bytes"]
    assert one["process_cpu_seconds_total"] >= 0
    # The informer's LIST/WATCH: GETs answered 200 by this server.
    reqs = {(s.labels["code"], s.labels["method"], s.labels["host"]): s.value
            for _, s in by_name["rest_client_requests_total"]}
    assert reqs.get(("200", "GET", d.sim_host), 0) >= 1, reqs
    # client-go's latency buckets, watches not timed (a LIST or discovery GET is).
    les = [float(s.labels["le"]) for _, s in by_name["rest_client_request_duration_seconds_bucket"]
           if s.labels["verb"] == "GET" and s.labels["host"] == d.sim_host]
    assert les == REST_LATENCY_BUCKETS, les
    workers = [s.value for _, s in by_name["controller_runtime_max_concurrent_reconciles"]]
    assert workers == [2], workers


test_metrics_scrape_parses_and_has_required_names = with_daemon(_metrics)


def test_dashboard_series_present_and_parsed():
    """/metrics read by Prometheus's own Python text parser carries every
    series of DASHBOARD_SERIES."""
    try:
        import prometheus_client.parser  # noqa: F401
    except ImportError:
        raise Skip("python3-prometheus-client is not installed (.ci/install-deps installs it)")
    with_daemon(_dashboard_series)()
test_health_ready_debug_and_404 = with_daemon(_endpoints)
test_scraper_reset_does_not_kill_daemon = with_daemon(_scraper_resets)


def test_parser_rejects_bad_text():
    good = "# HELP a x\n# TYPE a counter\na{l=\"v\"} 1\n"
    parse_exposition(good)
    bad = [
        good[:-1],                                                   # no final newline
        "# HELP a x\n# TYPE a counter\na{l=\"v\",} 1\n",             # trailing comma
        "# HELP a x\n# TYPE a counter\na{l=\"v\"} -1\n",             # negative counter
        "# HELP a x\n# TYPE a counter\na{l=\"v\"} 1\na{l=\"v\"} 2\n",  # duplicate series
        "# HELP a x\n# TYPE a counter\nb 1\n",                       # outside family
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",  # no +Inf
        "# HELP a x\n# TYPE a counter\na{l=\"\\x\"} 1\n",             # bad escape
    ]
    for text in bad:
        try:
            parse_exposition(text)
        except ValueError:
            continue
        raise AssertionError("accepted invalid exposition: %r" % text)


if __name__ == "__main__":
    run_tests(globals())
