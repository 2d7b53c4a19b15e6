# SPDX-License-Identifier: Apache-2.0
"""Every code snippet of README.md and docs/*.md works as shown:

- ```c blocks compile with -std=c11 -Wall -Wextra -Wshadow -Werror against
  include/: a block with an #include is a whole file (built as a plugin .so,
  as docs/plugins.md says to build one); a block without is a fragment and is
  compiled as the body of a function that has `host`, `ctx` and `settings`;
- each complete C plugin (a whole file with KCTRLD_PLUGIN_DEFINE) runs as a
  reader would run it: built by the first shell block after it that builds
  a .so (`cc ... -o hello.so hello.c`, run in a scratch directory with the
  SDK `make install`ed into a scratch DESTDIR, so `pkg-config --cflags
  kctrld-plugin` finds it, and -Wall -Wextra -Wshadow -Werror added to cc),
  loaded with the first config block after it that names that .so, against
  kube-apisim; an object of each such controller's `for` kind is created
  and the test waits until it reconciled (success counted, queue empty):
  the daemon must still run and must not have logged an error line;
- ```yaml blocks parse (python3-yaml, from .ci/install-deps); a block whose
  top-level keys are config keys and which has `informers:` or
  `controllers:` is a whole config and must pass `kctrld --check-config`
  (which also loads its plugins: a `plugin:` path is mapped to the plugin
  of that file name built from a docs C block, e.g. hello.so from
  KCTRLD_PLUGIN_DEFINE(host, "hello", ...), else to the build's
  plugins/NAME.so);
- ```json blocks parse and validate against docs/hook-v1.schema.json (a
  request or a response); each hook example (a block marked
  `<!-- snippet: hook persistent -->`, `hook per-call` or `hook webhook`)
  runs, is sent the request of docs/hooks.md and answers a response that
  validates (without python3-jsonschema the validation is skipped); one
  marked `hook desired` (a persistent Python hook of style desired) is
  sent the desired-state request of docs/hooks.md (the one with
  `children`) and must answer with `children`;
- a shell block marked `<!-- snippet: run -->` runs with bash -e from the
  top of the tree (`build/` read as the tested build) and exits 0; every
  shell block is marked run, hook or illustration, or is the build command
  of a plugin above;
- every `make TARGET` in a ```sh block, or in `make ...` inline code of
  README.md, names a target of the Makefile;
- every name in backticks in docs/design.md's "The route of one watch
  event" (a function, a callback member, a type or a constant) is defined
  in daemon/ or include/, so the route does not outlive a rename.

A block preceded by the line `<!-- snippet: illustration -->` is not
checked (for text that shows output or deliberately wrong input, or a
command that takes minutes or root; keep such blocks few). Prints TAP.
"""
import json
import os
import re
import shutil
import signal
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
MARKER = re.compile(r"^<!-- snippet: ([a-z -]+?) -->$")
SHELLS = ("sh", "bash", "shell")
SCHEMA = os.path.join(ROOT, "docs", "hook-v1.schema.json")


def doc_files():
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def parse_doc(path):
    """[(file, line of the opening fence, lang, text, marker)] of every
    fenced block of one file, in order; marker is what the line before the
    fence says after `snippet:` (None without one)."""
    with open(path) as f:
        lines = f.read().split("\n")
    out, i = [], 0
    rel = os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path
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
        mk = MARKER.match(lines[start - 1].strip()) if start > 0 else None
        out.append((rel, start + 1, m.group(1), "\n".join(body) + "\n", mk.group(1) if mk else None))
    return out


def blocks(lang, paths=None):
    """(file, line of the opening fence, text) of every ```lang block not
    marked illustration."""
    return [(f, line, text) for path in (paths or doc_files()) for f, line, lg, text, mk in parse_doc(path)
            if lg == lang and mk != "illustration"]


def where(f, line):
    return "%s:%d" % (f, line)


PLUGINS = {}  # file name -> .so built from a docs C block


def compile_c(tmp, name, text):
    cc = os.environ.get("CC", "cc")
    flags = ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wshadow", "-Werror", "-fPIC", "-fvisibility=hidden",
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


# -- complete C plugins: built, loaded and reconciling -----------------------

BUILD_CMD = re.compile(r"-o\s+(\S+\.so)\s+(\S+\.c)\b")
# The docs' `cc` with the warnings a careful author turns on; the rest of
# the command is run as the docs write it.
CC_STRICT = 'cc() { command "${CC:-cc}" -std=c11 -Wall -Wextra -Wshadow -Werror "$@"; }\n'
ERROR_LINE = taplib.ERROR_LINE


def doc_plugin_examples(paths):
    """(plugin block, its build block or None, its config block or None)
    for every complete C plugin in paths."""
    out = []
    for path in paths:
        bl = parse_doc(path)
        for i, b in enumerate(bl):
            if b[2] != "c" or b[4] == "illustration" or "#include" not in b[3] or "KCTRLD_PLUGIN_DEFINE" not in b[3]:
                continue
            build = next((x for x in bl[i + 1:] if x[2] in SHELLS and BUILD_CMD.search(x[3])), None)
            config = None
            if build:
                so = BUILD_CMD.search(build[3]).group(1)
                config = next((x for x in bl[i + 1:] if x[2] == "yaml" and x[4] != "illustration"
                               and re.search(r"plugin:\s*\S*\b%s\s" % re.escape(so), x[3])), None)
            out.append((b, build, config))
    return out


def resource_path(api_version, kind):
    """The collection path of a namespaced kind in namespace default (the
    plural as the API server forms it for the kinds the docs use)."""
    plural = kind.lower() + ("es" if kind.lower().endswith("s") else "s")
    base = "/api/v1" if api_version == "v1" else "/apis/" + api_version
    return base + "/namespaces/default/" + plural


def reconciled(k, names):
    """True when each controller of names counted a success and has nothing
    queued or running (or when kctrld died: the caller looks at that)."""
    if not k.alive():
        return True
    try:
        snap = k.scrape()
    except OSError:
        return False
    for n in names:
        lb = 'controller="%s"' % n
        if k.metric(snap, "controller_runtime_reconcile_total", lb + ',result="error"') > 0:
            return True  # the error line is in the log
        if (k.metric(snap, "controller_runtime_reconcile_total", lb + ',result="success"') < 1
                or k.metric(snap, "workqueue_depth", lb) > 0
                or k.metric(snap, "controller_runtime_active_workers", lb) > 0):
            return False
    return True


def run_doc_plugin(c, build, config, env):
    """Builds, loads and reconciles one docs plugin; returns the problems."""
    import yaml
    f, line = c[0], c[1]
    if not build:
        return ["%s: plugin with no shell block after it that builds it (cc ... -o X.so X.c)" % where(f, line)]
    so_name, src_name = BUILD_CMD.search(build[3]).groups()
    if not config:
        return ["%s: plugin with no config block after it naming %s" % (where(f, line), so_name)]
    tmp = tempfile.mkdtemp(prefix="kctrld-docs-plugin-")
    os.chmod(tmp, 0o755)
    try:
        with open(os.path.join(tmp, src_name), "w") as out:
            out.write(c[3])
        r = subprocess.run(["bash", "-e", "-c", CC_STRICT + build[3]], cwd=tmp, env=env, capture_output=True,
                           text=True, timeout=120)
        so = os.path.join(tmp, so_name)
        if r.returncode != 0 or not os.path.exists(so):
            return ["%s: %s does not build with %s:\n%s" % (where(f, line), src_name, where(build[0], build[1]),
                                                             (r.stdout + r.stderr)[-2000:])]
        os.chmod(so, 0o755)
        text = re.sub(r"(plugin:\s*)(\S+\.so)",
                      lambda m: m.group(1) + (so if os.path.basename(m.group(2)) == so_name else m.group(2)),
                      config[3])
        doc = yaml.safe_load(text)
        ctls = [x for x in doc.get("controllers") or [] if os.path.basename(str(x.get("plugin", ""))) == so_name]
        if "metrics" not in doc:
            text = 'metrics: { bindAddress: "127.0.0.1:0" }\n' + text
        with taplib.Apisim() as sim, taplib.Kctrld(text, kubeconfig=sim.kubeconfig, dir=tmp + "/run") as k:
            for x in ctls:
                kind = x["for"]
                path = resource_path(kind["apiVersion"], kind["kind"])
                st, body = sim.json("POST", path, {"apiVersion": kind["apiVersion"], "kind": kind["kind"],
                                                   "metadata": {"name": "docs-" + x["name"]}})
                if st != 201:
                    return ["%s: cannot create a %s to reconcile: %d %s" % (where(config[0], config[1]),
                                                                           kind["kind"], st, body)]
            taplib.wait_for(lambda: reconciled(k, [x["name"] for x in ctls]), timeout=30,
                            what="the %s controllers of %s to reconcile" % (so_name, where(config[0], config[1])))
            problems = []
            if not k.alive():
                problems.append("%s (config %s): kctrld died (status %s) reconciling with it:\n%s" % (
                    where(f, line), where(config[0], config[1]), k.proc.poll(), k.log()[-2500:]))
            code = k.stop()
            errors = [l for l in k.log().splitlines() if ERROR_LINE.match(l)]
            if errors:
                problems.append("%s (config %s): error lines:\n%s" % (where(f, line), where(config[0], config[1]),
                                                                      "\n".join(errors[:10])))
            if not problems and code != 0:
                problems.append("%s: kctrld exited %s:\n%s" % (where(f, line), code, k.log()[-2500:]))
            return problems
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_doc_plugins(paths):
    """Problems of every complete C plugin of paths (run_doc_plugin)."""
    try:
        import yaml  # noqa: F401
    except ImportError:
        raise taplib.Skip("python3-yaml not installed (.ci/install-deps installs it)")
    for p in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(taplib.BUILD, p), os.X_OK):
            raise taplib.Skip("%s not built" % p)
    env = taplib.staged_sdk()
    problems, n = [], 0
    for c, build, config in doc_plugin_examples(paths):
        n += 1
        problems += run_doc_plugin(c, build, config, env)
    return n, problems


def test_doc_plugins_build_load_and_reconcile():
    n, problems = check_doc_plugins(doc_files())
    assert n, "no complete C plugin found in the docs: the extraction is broken"
    assert not problems, "\n".join(problems)


# A doc with two plugins a reader would copy, one crashing and one failing
# every reconcile: the checker must report both.
BAD_DOC = """# A doc

```c
#include <kctrld/plugin.h>
#include <kctrld/plugin_util.h>

static const struct kctrld_host_api *host;

static int bad_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **instance) {
  (void)ctx, (void)settings;
  *instance = NULL;
  return 0;
}

static int bad_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  (void)instance;
  @BODY@
}

KCTRLD_PLUGIN_DEFINE(host, "@NAME@", "1.0.0", bad_init, bad_reconcile, NULL);
```

```sh
cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags kctrld-plugin) -o @NAME@.so @NAME@.c
```

```yaml
controllers:
  - name: @NAME@
    plugin: /usr/local/lib/kctrld/plugins/@NAME@.so
    for: { apiVersion: v1, kind: ConfigMap }
```
"""


def test_doc_plugin_checker_fails_on_crash_and_error():
    tmp = tempfile.mkdtemp(prefix="kctrld-docs-bad-")
    try:
        docs = []
        for name, body in (("crasher", "(void)ctx, (void)key;\n  volatile int *nowhere = NULL;\n"
                                       "  return *nowhere;"),
                           ("failer", 'return host->result_error(ctx, "cannot reconcile %s", key);')):
            path = os.path.join(tmp, name + ".md")
            with open(path, "w") as f:
                f.write(BAD_DOC.replace("@NAME@", name).replace("@BODY@", body))
            docs.append(path)
        n, problems = check_doc_plugins(docs)
        assert n == 2, n
        text = "\n".join(problems)
        assert re.search(r"crasher\.md:3 .*kctrld died", text), text
        assert re.search(r"failer\.md:3 .*error lines:\n.*cannot reconcile", text), text
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- hook examples: JSON blocks, and the hooks answering the documented request --

def hook_validator():
    """(validate(doc, what) -> error text or None), or None without
    python3-jsonschema."""
    try:
        import jsonschema
    except ImportError:
        return None
    with open(SCHEMA) as f:
        schema = json.load(f)

    def validate(doc, what):
        sub = dict(schema)
        sub.pop("oneOf", None)
        sub["$ref"] = "#/$defs/" + what
        errs = sorted(jsonschema.Draft202012Validator(sub).iter_errors(doc), key=str)
        return "; ".join("%s: %s" % ("/".join(map(str, e.absolute_path)), e.message) for e in errs) or None
    return validate


def is_request(doc):
    return isinstance(doc, dict) and "controller" in doc and "key" in doc


def doc_request(style="actions"):
    """The request document of docs/hooks.md "Request" (style actions: with
    `owned`), or of "Desired state" (style desired: with `children`)."""
    member = "children" if style == "desired" else "owned"
    for f, line, text in blocks("json", [os.path.join(ROOT, "docs", "hooks.md")]):
        doc = json.loads(text)
        if is_request(doc) and member in doc:
            return doc
    raise AssertionError("docs/hooks.md has no complete %s request example (```json with controller, key and %s)"
                         % (style, member))


def answer_of(kind, text, req, tmp):
    """Runs one hook example of kind (persistent, per-call, webhook) and
    returns its answer to req as text."""
    if kind == "desired":
        req = doc_request("desired")
    line = json.dumps(req) + "\n"
    # The hook helpers (docs/hooks.md "Helpers") where the package installs
    # them are the source tree's here.
    helpers = os.path.join(ROOT, "plugins", "hooks", "helpers")
    env = dict(os.environ, PYTHONPATH=helpers, KCTRLD_HOOK_SH=os.path.join(helpers, "hook.sh"))
    if kind in ("persistent", "desired"):
        src = os.path.join(tmp, "hook.py")
        with open(src, "w") as f:
            f.write(text)
        r = subprocess.run([sys.executable, src], input=line, capture_output=True, text=True, timeout=30, env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout.split("\n")[0]
    if kind == "per-call":
        if not shutil.which("jq") and "jq " in text:
            raise taplib.Skip("jq not installed")
        src = os.path.join(tmp, "hook.sh")
        with open(src, "w") as f:
            f.write(text)
        r = subprocess.run(["bash", src], input=line, capture_output=True, text=True, timeout=30, env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout
    if kind == "webhook":
        import socket
        import urllib.request
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        src = os.path.join(tmp, "server.py")
        with open(src, "w") as f:  # the documented port, moved to a free one
            f.write(re.sub(r'\("127\.0\.0\.1", 8080\)', '("127.0.0.1", %d)' % port, text))
        proc = subprocess.Popen([sys.executable, src], stderr=subprocess.PIPE)
        try:
            def post():
                try:
                    rq = urllib.request.Request("http://127.0.0.1:%d/sync" % port, data=line.encode(),
                                                headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(rq, timeout=5) as r:
                        return r.read().decode()
                except OSError:
                    assert proc.poll() is None, proc.stderr.read().decode()
                    return None
            return taplib.wait_for(post, timeout=15, what="the webhook example to answer")
        finally:
            taplib.stop_process(proc)
    raise AssertionError("unknown hook example kind %r (persistent, per-call, webhook, desired)" % kind)


def test_json_blocks_and_hook_examples():
    validate = hook_validator()
    bad, hooks = [], 0
    for f, line, text in blocks("json"):
        try:
            doc = json.loads(text)
        except ValueError as e:
            bad.append("%s: ```json block does not parse (%s): complete it or mark it illustration" % (
                where(f, line), e))
            continue
        err = validate and validate(doc, "request" if is_request(doc) else "response")
        if err:
            bad.append("%s: not a valid hook %s: %s" % (where(f, line), "request" if is_request(doc) else "response",
                                                         err))
    req = doc_request()
    tmp = tempfile.mkdtemp(prefix="kctrld-docs-hooks-")
    try:
        for path in doc_files():
            for f, line, lang, text, mk in parse_doc(path):
                if not mk or not mk.startswith("hook "):
                    continue
                hooks += 1
                answer = answer_of(mk[5:], text, req, tmp)
                try:
                    resp = json.loads(answer)
                except ValueError:
                    bad.append("%s: hook example answers no JSON: %r" % (where(f, line), answer[:300]))
                    continue
                err = validate and validate(resp, "response")
                if mk == "hook desired" and "children" not in resp:
                    err = "a desired-state hook answers no children"
                if err:
                    bad.append("%s: hook example's answer %s is not a valid response: %s" % (where(f, line), answer,
                                                                                            err))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert hooks >= 3, "only %d hook examples marked: the markers are gone" % hooks
    assert not bad, "\n".join(bad)
    if not validate:
        raise taplib.Skip("python3-jsonschema not installed: %d hook examples ran, answers not validated" % hooks)


# -- shell blocks ---------------------------------------------------------------

def test_shell_blocks_run_or_are_marked():
    builds = {(b[0], b[1]) for path in doc_files() for c, b, cfg in doc_plugin_examples([path]) if b}
    bad, ran = [], 0
    for path in doc_files():
        for f, line, lang, text, mk in parse_doc(path):
            if lang not in SHELLS + ("python",) or mk == "illustration" or (mk or "").startswith("hook "):
                continue
            if (f, line) in builds:
                continue
            if mk != "run":
                bad.append("%s: ```%s block is neither marked run, hook or illustration nor a plugin's build "
                           "command" % (where(f, line), lang))
                continue
            if re.search(r"^\s*kubectl\b", text, re.M) and not shutil.which("kubectl"):
                continue  # what the reader needs: kubectl (test_apisim_kubectl.py checks its version)
            ran += 1
            script = re.sub(r"(?<![\w/.-])build/", os.path.relpath(taplib.BUILD, ROOT) + "/", text)
            # Output to a file, not a pipe: what the block starts in the
            # background (a simulator) keeps its stdout open after bash exits.
            with tempfile.TemporaryFile("w+") as out:
                proc = subprocess.Popen(["bash", "-e", "-c", script], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                        text=True, start_new_session=True)
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                finally:
                    try:  # what the block left running in the background
                        os.killpg(proc.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
                out.seek(0)
                text_out = out.read()
            if proc.returncode != 0:
                bad.append("%s: runnable block exits %s:\n%s" % (where(f, line), proc.returncode, text_out[-2000:]))
    assert not bad, "\n".join(bad)
    if not ran:
        raise taplib.Skip("no block marked run could run here (kubectl not installed?)")


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
    # Marked blocks too: a command too long to run still names a real target.
    for f, line, lang, text, mk in [b for path in doc_files() for b in parse_doc(path)]:
        if lang in SHELLS:
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
