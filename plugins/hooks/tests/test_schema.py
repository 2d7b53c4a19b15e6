#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""docs/hook-v1.schema.json agrees with the daemon's parser
(daemon/hooks/hook_proto.c): it is a valid JSON Schema (2020-12), the example
responses of the fuzz corpus (tests/fuzz/corpus/fuzz_hook_response, first
byte = size limit) validate, the malformed one does not, and so do the
requests and responses of the example hooks. Skipped without the
jsonschema module."""
import json
import os
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


if __name__ == "__main__":
    taplib.run_tests(globals())
