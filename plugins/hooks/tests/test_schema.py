#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""docs/hook-v1.schema.json agrees with the daemon's parser
(daemon/hooks/hook_proto.c): it is a valid JSON Schema (2020-12), the example
responses of the fuzz corpus (tests/fuzz/corpus/fuzz_hook_response, first
byte = size limit) validate, the malformed one does not, and so do the
requests and responses of the example hooks. Skipped without the
jsonschema module."""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import itest  # noqa: E402,F401  (puts tests/integration on the path)
import taplib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "fuzz_hook_response")

REQUEST = {"apiVersion": "kctrld.io/hook/v1", "controller": "cmhash", "key": "a/b", "attempt": 1,
           "expectationsSatisfied": True,
           "object": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
                      "metadata": {"name": "b", "namespace": "a", "uid": "u", "resourceVersion": "3"}},
           "owned": []}


def validator():
    try:
        import jsonschema
    except ImportError:
        raise taplib.Skip("python jsonschema module not installed")
    with open(os.path.join(ROOT, "docs", "hook-v1.schema.json")) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_corpus_matches_schema():
    v = validator()
    for name in sorted(os.listdir(CORPUS)):
        with open(os.path.join(CORPUS, name), "rb") as f:
            doc = json.loads(f.read()[1:])
        want = not name.startswith("bad-")
        assert v.is_valid(doc) == want, (name, [e.message for e in v.iter_errors(doc)])
    assert v.is_valid(REQUEST), [e.message for e in v.iter_errors(REQUEST)]


def test_example_hooks_match_schema():
    v = validator()
    env = dict(os.environ, CMHASH_FAULTS="0")
    out = subprocess.run([sys.executable, os.path.join(HERE, "..", "cmhash", "cmhash.py")], env=env,
                         input=json.dumps(REQUEST) + "\n", capture_output=True, text=True, timeout=30).stdout
    resp = json.loads(out)
    assert resp["actions"][0]["action"] == "patch", resp
    assert v.is_valid(resp), [e.message for e in v.iter_errors(resp)]
    out = subprocess.run([sys.executable, os.path.join(HERE, "..", "cmhash", "cmhash.py")],
                         env=dict(env, CMHASH_APPLY="1"), input=json.dumps(REQUEST) + "\n",
                         capture_output=True, text=True, timeout=30).stdout
    resp = json.loads(out)
    assert resp["actions"][0]["action"] == "apply" and resp["actions"][0]["force"] is True, resp
    assert v.is_valid(resp), [e.message for e in v.iter_errors(resp)]
    ns = dict(REQUEST, object={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "uid": "u"}})
    try:
        out = subprocess.run(["bash", os.path.join(HERE, "..", "nsdefault", "nsdefault.sh")],
                             input=json.dumps(ns), capture_output=True, text=True, timeout=30).stdout
    except FileNotFoundError:
        raise taplib.Skip("bash not installed")
    if not out:
        raise taplib.Skip("nsdefault.sh gave no answer (jq missing?)")
    resp = json.loads(out)
    assert resp["actions"][0]["action"] == "create", resp
    assert v.is_valid(resp), [e.message for e in v.iter_errors(resp)]


def test_helpers_build_valid_responses():
    """Every builder of the Python helper and of the shell helper
    (plugins/hooks/helpers) makes responses the schema accepts."""
    v = validator()
    sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
    import kctrld_hook as kh
    obj = REQUEST["object"]
    acts = [kh.create(obj), kh.update(obj), kh.update_status(obj),
            kh.patch(obj, {"metadata": {"labels": {"a": "b"}}}),
            kh.patch(kh.ref(obj), [{"op": "remove", "path": "/metadata/finalizers/0"}], "json", "status"),
            kh.apply(obj, "mgr", force=True), kh.delete(obj, uid="u", resource_version="3",
                                                         propagation_policy="Foreground", grace_period_seconds=0),
            kh.event("Seen", "text", "Warning", regarding=obj)]
    with contextlib.redirect_stderr(io.StringIO()) as tb:  # the tracebacks of 1 / 0
        raised = kh.handle(lambda r: 1 / 0, REQUEST)
    assert "ZeroDivisionError" in tb.getvalue(), tb.getvalue()
    assert raised["message"].startswith("ZeroDivisionError: "), raised
    for resp in (kh.done(*acts), kh.requeue(), kh.requeue_after(1.5), kh.requeue_after("2m", priority="low"),
                 kh.error("x", acts[0]), kh.terminal("y"), raised,
                 kh.handle(lambda r: None, REQUEST), kh.handle(lambda r: "text", REQUEST)):
        assert v.is_valid(resp), (resp, [e.message for e in v.iter_errors(resp)])
    assert kh.requeue_after(1.5)["requeueAfter"] == "1500ms"
    if not shutil.which("jq") or not shutil.which("bash"):
        raise taplib.Skip("bash or jq not installed")
    script = r"""
. "$1"
all() {
  kctrld_create "$(kctrld_req_json .object)"
  kctrld_update "$(kctrld_req_json .object)"
  kctrld_update_status "$(kctrld_req_json .object)"
  kctrld_patch v1 ConfigMap a b '{"data":{"k":"v"}}'
  kctrld_patch v1 Namespace "" a '[{"op":"remove","path":"/metadata/labels/x"}]' json
  kctrld_patch_object '{"status":{"x":1}}' merge status
  kctrld_apply "$(kctrld_req_json .object)" mgr force
  kctrld_delete v1 ConfigMap a b u
  kctrld_event Seen "a \"quoted\" message" Warning
  kctrld_action '{"action":"event","reason":"Raw","message":"m"}'
  kctrld_action 'not json' && return 9
  kctrld_result requeueAfter 30s high
}
results() {
  case $(kctrld_req .key) in
    a/1) kctrld_result requeue ;;
    a/2) kctrld_result error "it broke" ;;
    a/3) kctrld_result terminal "never" ;;
    a/4) echo "printed, not answered"; return 3 ;;
  esac
}
kctrld_run "$2"
"""
    helper = os.path.join(HERE, "..", "helpers", "hook.sh")
    out = subprocess.run(["bash", "-c", script, "test", helper, "all"], input=json.dumps(REQUEST) + "\n",
                         capture_output=True, text=True, timeout=30)
    resp = json.loads(out.stdout)
    assert [a["action"] for a in resp["actions"]] == [
        "create", "update", "updateStatus", "patch", "patch", "patch", "apply", "delete", "event", "event"], resp
    assert resp["result"] == "requeueAfter" and resp["requeueAfter"] == "30s" and resp["priority"] == "high", resp
    assert resp["actions"][8]["message"] == 'a "quoted" message', resp
    assert resp["actions"][5] == {"action": "patch", "apiVersion": "v1", "kind": "ConfigMap", "namespace": "a",
                                  "name": "b", "patch": {"status": {"x": 1}}, "subresource": "status"}, resp
    assert "not an action object" in out.stderr, out.stderr
    assert v.is_valid(resp), [e.message for e in v.iter_errors(resp)]
    reqs = "".join(json.dumps(dict(REQUEST, key="a/%d" % i)) + "\n" for i in range(5))
    out = subprocess.run(["bash", "-c", script, "test", helper, "results"], input=reqs + "garbage\n",
                         capture_output=True, text=True, timeout=30)
    resps = [json.loads(ln) for ln in out.stdout.splitlines()]
    assert [r["result"] for r in resps] == ["done", "requeue", "error", "terminal", "error", "error"], resps
    assert resps[4]["message"] == "results returned status 3", resps
    assert "printed, not answered" in out.stderr, out.stderr
    for r in resps:
        assert v.is_valid(r), (r, [e.message for e in v.iter_errors(r)])


if __name__ == "__main__":
    taplib.run_tests(globals())
