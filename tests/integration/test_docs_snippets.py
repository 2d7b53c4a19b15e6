# SPDX-License-Identifier: Apache-2.0
"""Every code snippet of README.md and docs/*.md works as shown:

- ```c blocks compile with -std=c11 -Wall -Wextra -Werror against include/:
  a block with an #include is a whole file (built as a plugin .so, as
  docs/plugins.md says to build one); a block without is a fragment and is
  compiled as the body of a function that has `host`, `ctx` and `settings`;
- ```yaml blocks parse (python3-yaml, from .ci/install-deps); a block whose
  top-level keys are config keys and which has `informers:` or
  `controllers:` is a whole config and must pass `kctrld --check-config`
  (which also loads its plugins: a `plugin:` path is mapped to the plugin
  of that file name built from a docs C block, e.g. hello.so from
  KCTRLD_PLUGIN_DEFINE(host, "hello", ...), else to the build's
  plugins/NAME.so);
- every `make TARGET` in a ```sh block, or in `make ...` inline code of
  README.md, names a target of the Makefile;
- every name in backticks in docs/design.md's "The route of one watch
  event" (a function, a callback member, a type or a constant) is defined
  in daemon/ or include/, so the route does not outlive a rename.

A block preceded by the line `<!-- snippet: illustration -->` is not
checked (for text that shows output or deliberately wrong input; keep such
blocks few). Prints TAP.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402

ROOT = taplib.ROOT
KCTRLD = os.path.join(taplib.BUILD, "kctrld")
CONFIG_KEYS = {"kubeconfig", "leaderElection", "metrics", "logLevel", "shutdownTimeout",
               "decodeThreads", "informers", "controllers"}
FENCE = re.compile(r"^```(\w*)\s*$")
MARK = "<!-- snippet: illustration -->"


def doc_files():
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def blocks(lang):
    """(file, line of the opening fence, text) of every ```lang block."""
    out = []
    for path in doc_files():
        with open(path) as f:
            lines = f.read().split("\n")
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            start, body = i, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            i += 1
            skipped = start > 0 and lines[start - 1].strip() == MARK
            if m.group(1) == lang and not skipped:
                out.append((os.path.relpath(path, ROOT), start + 1, "\n".join(body) + "\n"))
    return out


def where(f, line):
    return "%s:%d" % (f, line)


PLUGINS = {}  # file name -> .so built from a docs C block


def compile_c(tmp, name, text):
    cc = os.environ.get("CC", "cc")
    flags = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-fPIC", "-fvisibility=hidden",
             "-I" + os.path.join(ROOT, "include")]
    if "#include" in text:
        src, so = os.path.join(tmp, name + ".c"), os.path.join(tmp, name + ".so")
        with open(src, "w") as f:
            f.write(text)
        r = subprocess.run([cc] + flags + ["-shared", "-o", so, src], capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            os.chmod(so, 0o755)
            m = re.search(r'KCTRLD_PLUGIN_DEFINE\(\s*\w+\s*,\s*"([^"]+)"', text)
            if m:
                PLUGINS[m.group(1) + ".so"] = so
        return r
    src = os.path.join(tmp, name + ".c")
    if "KCTRLD_PLUGIN_DEFINE" in text:
        # A file-scope fragment of the hello plugin (the table at the end of
        # a plugin file): compiled after stub hello_* functions.
        with open(src, "w") as f:
            f.write("#include <kctrld/plugin.h>\n#include <kctrld/plugin_util.h>\n"
                    "static const struct kctrld_host_api *host;\n"
                    "static int hello_init(kctrld_ctx *c, const kctrld_settings *s, void **i) {\n"
                    "  (void)c, (void)s, (void)i;\n  return 0;\n}\n"
                    "static int hello_reconcile(void *i, kctrld_ctx *c, const char *k) {\n"
                    "  (void)i, (void)c, (void)k, (void)host;\n  return KCTRLD_RESULT_DONE;\n}\n%s" % text)
        return subprocess.run([cc] + flags + ["-c", "-o", os.devnull, src], capture_output=True, text=True,
                              timeout=60)
    with open(src, "w") as f:
        f.write("#include <errno.h>\n#include <stdio.h>\n#include <string.h>\n"
                "#include <kctrld/plugin.h>\n#include <kctrld/plugin_util.h>\n"
                "static const struct kctrld_host_api *host;\n"
                "int kc_snippet(kctrld_ctx *ctx, const kctrld_settings *settings);\n"
                "int kc_snippet(kctrld_ctx *ctx, const kctrld_settings *settings) {\n"
                "  (void)host, (void)ctx, (void)settings;\n%s\n  return 0;\n}\n" % text)
    return subprocess.run([cc] + flags + ["-c", "-o", os.devnull, src], capture_output=True, text=True, timeout=60)


def test_c_blocks_compile():
    found = blocks("c")
    assert found, "no ```c block found: the extraction is broken"
    tmp = tempfile.mkdtemp(prefix="kctrld-snippets-c-")
    bad = []
    for n, (f, line, text) in enumerate(found):
        r = compile_c(tmp, "snippet%d" % n, text)
        if r.returncode != 0:
            bad.append("%s: does not compile:\n%s" % (where(f, line), r.stderr[-1500:]))
    assert not bad, "\n".join(bad)


def is_config(doc):
    return isinstance(doc, dict) and doc and set(doc) <= CONFIG_KEYS and ("informers" in doc or "controllers" in doc)


def test_yaml_blocks_parse_and_configs_check():
    try:
        import yaml
    except ImportError:
        raise taplib.Skip("python3-yaml not installed (.ci/install-deps installs it)")
    if not os.access(KCTRLD, os.X_OK):
        raise taplib.Skip("%s not built" % KCTRLD)
    if not PLUGINS:  # the plugins the configs name may come from the C blocks
        tmp = tempfile.mkdtemp(prefix="kctrld-snippets-c-")
        for n, (f, line, text) in enumerate(blocks("c")):
            compile_c(tmp, "snippet%d" % n, text)
    found = blocks("yaml")
    assert found, "no ```yaml block found: the extraction is broken"
    bad = []
    for n, (f, line, text) in enumerate(found):
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            bad.append("%s: does not parse: %s" % (where(f, line), str(e).replace("\n", " ")))
            continue
        if not is_config(doc):
            continue
        tmp = tempfile.mkdtemp(prefix="kctrld-snippets-yaml-")
        os.chmod(tmp, 0o700)

        def plugin_for(m):
            base = os.path.basename(m.group(2))
            so = PLUGINS.get(base) or os.path.join(taplib.BUILD, "plugins", base)
            if not os.path.exists(so):
                bad.append("%s: plugin %s is neither built (%s) nor a docs C block" % (where(f, line), base, so))
            return m.group(1) + so
        text2 = re.sub(r"(plugin:\s*)(\S+\.so)", plugin_for, text)
        path = os.path.join(tmp, "snippet%d.yaml" % n)
        with open(path, "w") as out:
            out.write(text2)
        r = subprocess.run([KCTRLD, "--check-config", path], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            bad.append("%s: kctrld --check-config refuses it:\n%s" % (where(f, line), r.stderr.strip()))
        shutil.rmtree(tmp, ignore_errors=True)
    assert not bad, "\n".join(bad)


def make_targets():
    targets = set()
    with open(os.path.join(ROOT, "Makefile")) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", line)
            if m:
                targets.add(m.group(1))
    return targets


def test_make_targets_exist():
    targets = make_targets()
    assert {"all", "test", "install"} <= targets, targets
    named = []  # (where, target)
    for lang in ("sh", "bash", "shell"):
        for f, line, text in blocks(lang):
            for k, l in enumerate(text.split("\n")):
                m = re.match(r"^\s*(?:sudo\s+)?make\s+(.*)$", l)
                if m:
                    args = re.split(r"&&|\|\||;|\|", m.group(1).split("#")[0])[0]
                    for w in args.split():
                        if "=" not in w and not w.startswith("-"):
                            named.append((where(f, line + 1 + k), w))
    with open(os.path.join(ROOT, "README.md")) as f:
        for k, l in enumerate(f.read().split("\n")):
            for m in re.finditer(r"`make ([a-z][a-z0-9-]*)", l):
                named.append((where("README.md", k + 1), m.group(1)))
    assert named, "no make command found in README.md: the extraction is broken"
    bad = ["%s: make %s: no such target in the Makefile" % (w, t) for w, t in named if t not in targets]
    assert not bad, "\n".join(bad)


# Libraries the route passes through (their names are not ours to check).
EXTERNAL = ("curl_", "yajl_", "uv_")


def defined_in(name, text):
    """Whether text (C sources) defines name: a function at column 0, a
    callback member, a struct/typedef name, a constant, or a string the
    code compares with."""
    n = re.escape(name)
    pats = (r"(?m)^[A-Za-z][^;\n]*[\s*]%s\(" % n,  # int f(  /  static void *f(
            r"\(\*%s\)\s*\(" % n,  # a function-pointer member
            r"(?m)^\s+[A-Za-z_][\w \t*]*[\s*]%s;" % n,  # a struct member
            r"(?m)^typedef [^;]*\b%s\b|^struct %s\b|^\}\s*%s;" % (n, n, n),
            r"(?m)^#define %s\b|^\s*%s\s*(?:=|,|$)" % (n, n),
            r'"%s"' % n)  # a wire value the code compares with (MODIFIED)
    return any(re.search(p, text) for p in pats)


def test_design_route_names_exist():
    sources = []
    for d in ("daemon", os.path.join("include", "kctrld")):
        for top, _, files in sorted(os.walk(os.path.join(ROOT, d))):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    with open(os.path.join(top, f)) as fh:
                        sources.append(fh.read())
    text = "\n".join(sources)
    with open(os.path.join(ROOT, "docs", "design.md")) as f:
        doc = f.read()
    m = re.search(r"^## The route of one watch event\n(.*?)^## ", doc, re.S | re.M)
    assert m, "docs/design.md has no section \"The route of one watch event\""
    names = set()
    for tok in re.findall(r"`([^`]+)`", m.group(1)):
        tok = re.sub(r"\(.*\)$", "", tok)  # reconcile(ctx, key) -> reconcile
        for part in tok.split("."):  # sink.upsert: the member
            if re.fullmatch(r"[A-Za-z_]\w*", part) and not part.startswith(EXTERNAL):
                names.add(part)
    assert len(names) > 30, "only %d names found: the extraction is broken" % len(names)
    missing = sorted(n for n in names if not defined_in(n, text))
    assert not missing, "docs/design.md route names defined nowhere in daemon/ or include/: %s" % missing


if __name__ == "__main__":
    taplib.run_tests(globals())
