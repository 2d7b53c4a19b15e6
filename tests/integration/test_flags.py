#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The command line end to end:

- one source for the help, the docs and the man page: the synopsis and the
  flag table of docs/operations.md "Command line" and of kctrld(8) (as
  `make man` writes it) are `kctrld --help`'s, flag by flag with the same
  argument, default and meaning; kctrld(8) has no placeholder or source
  file name in a heading, and covers hooks, process isolation, sharding and
  every signal daemon.c handles;
- -h is --help; every command has --help with an example, also as
  `kctrld help COMMAND`; `kctrld version` and --version print the version,
  git commit, plugin ABI, hook protocol and library versions;
- a misspelt flag or command gets a "did you mean";
- --health-probe-bind-address puts /healthz and /readyz on a listener of
  their own, the metrics listener then serves /metrics only;
- --leader-elect turns leader election on for a file that leaves it off (the
  Lease appears on the simulator), --leader-elect=false turns it off for a
  file that has it on (no Lease, no leader_election_master_status);
- --log-format json makes every line a JSON object with zap's field names and
  integers as numbers; the default text format is logfmt that a strict
  reader (taplib.parse_logfmt) takes line by line.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import taplib  # noqa: E402
from taplib import BUILD, ROOT, Apisim, run_tests, wait_for  # noqa: E402

NS, NAME = "default", "kctrld-flags"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (NS, NAME)


KCTRLD = os.path.join(BUILD, "kctrld")


def run(*args):
    return subprocess.run([KCTRLD] + list(args), capture_output=True, text=True, timeout=10)


def norm(text):
    """Markdown cell or help text -> comparable text: no backticks, no table
    escapes, single spaces."""
    return " ".join(text.replace("`", "").replace("\\|", "|").split())


def parse_help(text):
    """(usage lines, [(flag, default, meaning)]) of `kctrld --help`; a usage
    line's indented continuations are joined to it."""
    lines = text.split("\n")
    usage = []
    for l in lines:
        if not l.strip():
            break
        if usage and l.startswith("  ") and not l.strip().startswith("kctrld"):
            usage[-1] += " " + l.strip()
        else:
            usage.append(re.sub(r"^usage:\s*", "", l).strip())
    flags, cur, field = [], None, None
    for l in lines[lines.index("flags:") + 1:]:
        if not l.strip():
            break
        if l.startswith("  --"):
            cur = [l.strip(), "", ""]
            flags.append(cur)
            field = 2
        elif l.startswith("      default: "):
            cur[1] = l[len("      default: "):].strip()
            field = 1
        else:
            cur[field] = (cur[field] + " " + l.strip()).strip()
    return usage, [tuple(norm(x) for x in f) for f in flags]


def md_cells(row):
    """The cells of a Markdown table row (| inside backticks or as \\| stays)."""
    out, cur, code = [], "", False
    row = row.strip().strip("|")
    i = 0
    while i < len(row):
        c = row[i]
        if c == "\\" and row[i + 1:i + 2] == "|":
            cur += "\\|"
            i += 2
            continue
        if c == "`":
            code = not code
        if c == "|" and not code:
            out.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    out.append(cur)
    return [norm(c) for c in out]


def doc_command_line():
    """(usage block lines, [(flag, default, meaning)]) of docs/operations.md
    "Command line"."""
    with open(os.path.join(ROOT, "docs", "operations.md")) as f:
        doc = f.read()
    sec = doc.split("\n## Command line\n", 1)[1].split("\n## ", 1)[0]
    block = sec.split("```\n", 2)[1]
    usage, _ = parse_help(block + "\nflags:\n")
    rows = [l for l in sec.split("\n") if l.startswith("|")]
    start = rows.index(next(r for r in rows if md_cells(r) == ["flag", "default", "meaning"]))
    table = []
    for r in rows[start + 2:]:
        c = md_cells(r)
        if len(c) != 3:
            break
        table.append(tuple(c))
    return usage, table


def unroff(text):
    text = re.sub(r"\\f[BIR]", "", text)
    return text.replace("\\%", "").replace("\\ ", " ").replace("\\-", "-").replace(
        "\\&", "").replace("\\e", "\\")


def man_page(tmp):
    """kctrld(8) as `make man` writes it (into a scratch build directory)."""
    out = subprocess.run(["make", "--no-print-directory", "-s", "B=" + tmp, tmp + "/man/kctrld.8"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    with open(os.path.join(tmp, "man", "kctrld.8")) as f:
        return f.read()


def test_help_docs_and_man_page_are_one_table():
    out = run("--help")
    assert out.returncode == 0, out.stderr
    usage, flags = parse_help(out.stdout)
    assert len(flags) >= 14 and len(usage) >= 5, out.stdout
    assert "127.0.0.1:8080" in out.stdout, out.stdout
    assert run("-h").stdout == out.stdout
    assert run("help").stdout == out.stdout
    doc_usage, doc_flags = doc_command_line()
    assert doc_usage == usage, "docs/operations.md's synopsis differs from --help:\n%s\n%s" % (
        doc_usage, usage)
    for h, d in zip(flags, doc_flags):
        assert h == d, "docs/operations.md flag row %s differs from --help's %s" % (d, h)
    assert len(flags) == len(doc_flags), (flags, doc_flags)
    # Every flag of every synopsis line is in the list.
    named = {m for line in usage for m in re.findall(r"(--[a-z-]+|-h\b)", line)}
    listed = {w for f, _, _ in flags for w in re.findall(r"(--[a-z-]+|-h\b)", f)}
    daemon = {w for f, _, _ in flags for w in re.findall(r"^(--[a-z-]+)", f)}
    assert daemon <= named, daemon - named

    tmp = tempfile.mkdtemp(prefix="kctrld-man.")
    try:
        man = man_page(tmp)
    finally:
        shutil.rmtree(tmp)
    sections = re.split(r"(?m)^\.SH ", man)
    syn = next(s for s in sections if s.startswith("SYNOPSIS"))
    man_usage = [unroff(l) for l in syn.split("\n")[1:] if l and not l.startswith(".")]
    assert man_usage == usage, "kctrld(8) SYNOPSIS differs from --help:\n%s\n%s" % (man_usage, usage)
    assert listed <= {m for l in man_usage for m in re.findall(r"(--[a-z-]+|-h\b)", l)} | {"--help",
                                                                                      "-h"}
    tps = re.findall(r"(?m)^\.TP\n(.*)\n(.*)$", man)
    rows = {norm(unroff(t)): norm(unroff(b)) for t, b in tps}
    for f, default, meaning in flags:
        want = "; ".join(x for x in (default, meaning) if x)
        assert rows.get(f) == want, "kctrld(8) on %s: %r, --help: %r" % (f, rows.get(f), want)
    # No placeholder, no source file in a heading.
    assert "@" not in re.sub(r"(?m)^\.\\\".*$", "", man) and not re.search(r"\bPREFIX/", man), \
        [l for l in man.split("\n") if "@" in l or "PREFIX/" in l]
    heads = [l for l in man.split("\n") if l.startswith((".SH", ".SS"))]
    assert not [h for h in heads if re.search(r"\w/\w|\.(c|h|in|py)\b", h)], heads
    for topic in ("HOOKS", "PROCESS ISOLATION", "SHARDING", "SIGNALS"):
        assert any(topic in h for h in heads), (topic, heads)
    with open(os.path.join(ROOT, "daemon", "daemon.c")) as f:
        handled = set(re.findall(r"uv_signal_start\([^,]+, [^,]+, (SIG[A-Z]+)\)", f.read()))
    assert {"SIGTERM", "SIGINT", "SIGHUP"} <= handled, handled
    signals = next(s for s in sections if s.startswith("SIGNALS"))
    for sig in handled:
        assert sig in signals, "kctrld(8) SIGNALS does not name %s" % sig


def test_every_command_has_help_with_an_example():
    out = run("--help").stdout
    cmds = re.findall(r"(?m)^  ([a-z][a-z-]+)\b", out.split("\ncommands:\n", 1)[1].split("\n\n")[0])
    assert set(cmds) >= {"check-config", "rbac", "version", "help"}, cmds
    for c in cmds:
        h = run(c, "--help")
        assert h.returncode == 0, (c, h.stderr)
        assert h.stdout.startswith("usage: kctrld %s" % c), h.stdout
        assert re.search(r"\nexample:\n  kctrld %s\b" % c, h.stdout), h.stdout
        assert run(c, "-h").stdout == h.stdout
        assert run("help", c).stdout == h.stdout
    assert "--plugin-dir DIR" in run("rbac", "--help").stdout


def test_version():
    out = run("version")
    assert out.returncode == 0, out.stderr
    assert run("--version").stdout == out.stdout
    lines = out.stdout.split("\n")
    with open(os.path.join(ROOT, "Makefile")) as f:
        version = re.search(r"(?m)^VERSION\s*:=\s*(\S+)", f.read()).group(1)
    assert lines[0] == "kctrld " + version, out.stdout
    info = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
    with open(os.path.join(ROOT, "include", "kctrld", "plugin.h")) as f:
        h = f.read()
    abi = "%s.%s" % (re.search(r"KCTRLD_ABI_MAJOR (\d+)", h).group(1),
                     re.search(r"KCTRLD_ABI_MINOR (\d+)", h).group(1))
    assert info["plugin ABI"].startswith(abi + " (build signature kctrld-abi-"), info
    assert info["hook protocol"] == "kctrld.io/hook/v1", info
    for lib in ("libuv", "libcurl", "yajl", "libyaml"):
        assert re.match(r"\d+\.\d+", info.get(lib, "")), (lib, info)
    commit = info["git commit"]
    assert re.match(r"^([0-9a-f]{7,40}(-dirty)?|unknown)$", commit), commit
    # A build of a git checkout names a commit of it.
    if subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode == 0:
        sha = commit.split("-")[0]
        assert commit != "unknown" and subprocess.run(
            ["git", "-C", ROOT, "cat-file", "-e", sha + "^{commit}"]).returncode == 0, commit


def test_did_you_mean():
    for args, want in ((["--confg", "x.yaml"], "unknown flag --confg (did you mean --config?)"),
                       (["--log-levle=debug"], "unknown flag --log-levle (did you mean --log-level?)"),
                       (["rbac", "--plugin-dri", "d"], "did you mean --plugin-dir?"),
                       (["rbca"], "unknown command \"rbca\" (did you mean kctrld rbac?)"),
                       (["--fail-fast=yes"], "--fail-fast takes no argument"),
                       (["--config"], "--config needs an argument"),
                       (["--lo", "x"], "--lo is ambiguous (--log-level, --log-format)"),
                       (["--log-level", "debug", "rbac"], "the command rbac comes first")):
        out = run(*args)
        assert out.returncode == 2 and want in out.stderr, (args, out.returncode, out.stderr)
        assert "usage: kctrld" in out.stderr, out.stderr
    out = run("--frobnicate")
    assert out.returncode == 2 and "unknown flag --frobnicate\n" in out.stderr, out.stderr


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_health_probe_listener():
    with Apisim() as sim:
        with taplib.Kctrld("metrics: { bindAddress: \"127.0.0.1:0\" }\n", sim.kubeconfig,
                           args=["--health-probe-bind-address", "127.0.0.1:0"]) as k:
            mport = k.metrics_port()
            m = wait_for(lambda: re.search(r"httpserver: health probes .* port=(\d+)", k.log()),
                         what="the probe port in the log")
            pport = int(m.group(1))
            assert pport != mport
            wait_for(lambda: get(pport, "/readyz") == 200, what="/readyz on the probe port")
            assert get(pport, "/healthz") == 200
            assert get(pport, "/metrics") == 404
            assert get(mport, "/metrics") == 200
            assert get(mport, "/healthz") == 404
            assert get(mport, "/readyz") == 404
            assert k.stop() == 0, k.log()[-2000:]


LE = ("leaderElection: { %snamespace: %s, name: %s, leaseDuration: 3s, renewDeadline: 2s, "
      "retryPeriod: 500ms }\nmetrics: { bindAddress: \"127.0.0.1:0\" }\n")


def test_leader_elect_overrides_the_file():
    with Apisim() as sim:
        with taplib.Kctrld(LE % ("", NS, NAME), sim.kubeconfig,
                           args=["--leader-elect", "--identity", "flag-a"]) as k:
            wait_for(lambda: sim.request("GET", LEASE_PATH)[0] == 200, timeout=10,
                     what="the Lease --leader-elect asks for")
            code, lease = sim.json("GET", LEASE_PATH)
            assert lease["spec"]["holderIdentity"] == "flag-a", lease
            assert k.stop() == 0, k.log()[-2000:]
    with Apisim() as sim:
        with taplib.Kctrld(LE % ("enabled: true, ", NS, NAME), sim.kubeconfig,
                           args=["--leader-elect=false"]) as k:
            wait_for(lambda: "ready:" in k.log(), what="kctrld ready")
            snap = k.scrape()
            assert not any(n == "leader_election_master_status" for n, _ in snap), snap
            time.sleep(1.0)  # > retryPeriod: an elector would have created the Lease by now
            assert sim.request("GET", LEASE_PATH)[0] == 404
            assert k.stop() == 0, k.log()[-2000:]
    bad = subprocess.run([os.path.join(BUILD, "kctrld"), "--config", "/nonexistent",
                          "--leader-elect=maybe"], capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "--leader-elect" in bad.stderr, bad.stderr


def test_log_format_json():
    with Apisim() as sim:
        with taplib.Kctrld("metrics: { bindAddress: \"127.0.0.1:0\" }\n", sim.kubeconfig,
                           args=["--log-format", "json"]) as k:
            wait_for(lambda: "ready:" in k.log(), what="kctrld ready")
            assert k.stop() == 0, k.log()[-2000:]
            lines = [l for l in k.log().splitlines() if l]
    assert lines
    for line in lines:
        obj = json.loads(line)
        # zap's field names, as a controller-runtime manager's JSON logger writes them
        assert {"ts", "level", "logger", "msg"} <= set(obj) and "component" not in obj, obj
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", obj["ts"]), obj
        assert obj["level"] in ("error", "warn", "info", "debug"), obj
        assert all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in obj.values()), obj
    serving = [json.loads(l) for l in lines if "serving /metrics" in l]
    assert serving and serving[0]["bind"] == "127.0.0.1:0", serving
    # numbers are numbers
    assert isinstance(serving[0]["port"], int) and serving[0]["port"] > 0, serving


def test_log_format_text_is_logfmt():
    """Every line of a run in the default text format is one logfmt record
    (a strict reader, taplib.parse_logfmt), with ts, level, logger and msg
    first, in that order."""
    with Apisim() as sim:
        with taplib.Kctrld("metrics: { bindAddress: \"127.0.0.1:0\" }\n", sim.kubeconfig) as k:
            wait_for(lambda: "ready:" in k.log(), what="kctrld ready")
            assert k.stop() == 0, k.log()[-2000:]
            lines = [l for l in k.raw_log().splitlines() if l]
    assert len(lines) > 3, lines
    for line in lines:
        pairs = taplib.parse_logfmt(line)
        keys = [k for k, _ in pairs]
        assert keys[:3] == ["ts", "level", "logger"] and "msg" in keys, line
        assert len(set(keys)) == len(keys), line
        d = dict(pairs)
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", d["ts"]), line
        assert d["level"] in ("error", "warn", "info", "debug"), line
    serving = [dict(taplib.parse_logfmt(l)) for l in lines if "serving /metrics" in l]
    assert serving and serving[0]["logger"] == "httpserver" and serving[0]["bind"] == "127.0.0.1:0", serving
    assert serving[0]["msg"].startswith("serving /metrics"), serving


if __name__ == "__main__":
    run_tests(globals())
