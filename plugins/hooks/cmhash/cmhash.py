#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cmhash: a kctrld exec hook (persistent mode, protocol kctrld.io/hook/v1,
docs/hooks.md) that labels every ConfigMap with a hash of its content:
label kctrld.io/config-hash = the first 16 hex digits of the SHA-256 of
{"binaryData":..., "data":...} as compact JSON with sorted keys. A Deployment
can then select or annotate on it.

One request per line on stdin, one response per line on stdout. The patch
carries the cached resourceVersion, so a cache behind the server gets a 409
and a requeue instead of a label computed from a stale view.

Environment:
  CMHASH_LABEL    the label key (default kctrld.io/config-hash)
  CMHASH_APPLY    1: write the label with a server-side apply (field manager
                  cmhash, force: the hook is the authority for its label)
                  instead of the resourceVersion-guarded merge patch
  CMHASH_VERBOSE  1: one stderr line per request (kctrld logs it with the key)
  CMHASH_FAULTS   1: test hooks; a ConfigMap with data["kctrld-test"] set to
                  crash, hang, garbage or error makes this process exit,
                  stop answering, write a non-JSON line or answer an error
"""
import hashlib
import json
import os
import sys
import time

LABEL = os.environ.get("CMHASH_LABEL", "kctrld.io/config-hash")
VERBOSE = os.environ.get("CMHASH_VERBOSE") == "1"
FAULTS = os.environ.get("CMHASH_FAULTS") == "1"
APPLY = os.environ.get("CMHASH_APPLY") == "1"


def content_hash(cm):
    doc = {"binaryData": cm.get("binaryData") or {}, "data": cm.get("data") or {}}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def reconcile(req):
    cm = req["object"]
    if cm is None:
        return {"result": "done"}  # deleted: nothing to label
    md = cm["metadata"]
    if FAULTS:
        fault = (cm.get("data") or {}).get("kctrld-test")
        if fault == "crash":
            sys.stderr.write("crashing on purpose for %s\n" % req["key"])
            sys.stderr.flush()
            os._exit(3)
        if fault == "hang":
            time.sleep(3600)
        if fault == "garbage":
            return "this is not JSON"
        if fault == "error":
            return {"result": "error", "message": "refusing %s (attempt %d)" % (req["key"], req["attempt"])}
    want = content_hash(cm)
    if (md.get("labels") or {}).get(LABEL) == want:
        return {"result": "done"}
    if APPLY:
        # only the field cmhash owns; the server keeps everything else
        write = {"action": "apply", "fieldManager": "cmhash", "force": True, "object": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": md.get("namespace", ""), "name": md["name"], "labels": {LABEL: want}}}}
    else:
        patch = {"metadata": {"resourceVersion": md["resourceVersion"], "labels": {LABEL: want}}}
        write = {"action": "patch", "apiVersion": "v1", "kind": "ConfigMap",
                 "namespace": md.get("namespace", ""), "name": md["name"], "patch": patch}
    return {"result": "done", "actions": [
        write,
        {"action": "event", "reason": "Hashed", "message": "%s=%s" % (LABEL, want)},
    ]}


def main():
    for line in sys.stdin:
        req = json.loads(line)
        if VERBOSE:
            sys.stderr.write("reconcile key=%s attempt=%d pid=%d\n" % (req["key"], req["attempt"], os.getpid()))
            sys.stderr.flush()
        resp = reconcile(req)
        sys.stdout.write((resp if isinstance(resp, str) else json.dumps(resp, separators=(",", ":"))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
