# SPDX-License-Identifier: Apache-2.0
"""kctrld_hook: a kctrld hook (protocol kctrld.io/hook/v1, docs/hooks.md)
written as one Python function.

    import kctrld_hook as kh

    def reconcile(req):
        cm = req["object"]
        if cm is None:
            return kh.done()                      # deleted
        return kh.done(kh.patch(cm, {"metadata": {"labels": {"seen": "yes"}}}),
                       kh.event("Seen", "labelled"))

    kh.run(reconcile)

run() reads one request per line on stdin and writes one response per line
on stdout, so the same program works in both exec modes: persistent (the
daemon keeps it running and writes request after request) and per-call (one
request, then stdin closes). The function gets the request as a dict and
returns a response: what done(), requeue(), requeue_after(), error() or
terminal() build, a dict of the protocol's own, or None (= done()). An
exception it raises answers {"result": "error"} with the exception's text
(the traceback goes to stderr, which the daemon logs with the key), and the
program goes on with the next request. While the function runs, sys.stdout
is stderr: a print() lands in the daemon's log, never in the response.

Installed by the kctrld package as /usr/share/kctrld/python/kctrld_hook.py:
give the hook `env: {PYTHONPATH: /usr/share/kctrld/python}` (or copy the
file next to the hook). Python 3.6 or later, standard library only.
"""
import json
import sys
import traceback

API_VERSION = "kctrld.io/hook/v1"

__all__ = ["run", "handle", "done", "requeue", "requeue_after", "error", "terminal", "ref",
           "create", "update", "update_status", "patch", "apply", "delete", "event"]


# ---- responses ----

def _response(result, actions, **extra):
    resp = {"result": result}
    resp.update({k: v for k, v in extra.items() if v is not None})
    if actions:
        resp["actions"] = list(actions)
    return resp


def done(*actions):
    """Success: run the actions, forget the key's backoff."""
    return _response("done", actions)


def requeue(*actions):
    """Run the actions, then again with the key's per-key backoff."""
    return _response("requeue", actions)


def requeue_after(duration, *actions, priority=None):
    """Run the actions, then again after duration (a Go duration such as
    "30s", or a number of seconds), at queue priority "low", "normal" or
    "high" when given (else the one the key ran at)."""
    if isinstance(duration, (int, float)):
        duration = "%dms" % round(duration * 1000)
    return _response("requeueAfter", actions, requeueAfter=duration, priority=priority)


def error(message, *actions):
    """A failure worth retrying: logged with message, retried with backoff."""
    return _response("error", actions, message=str(message))


def terminal(message, *actions):
    """A failure no retry can fix: logged once, not retried until the key
    is queued again."""
    return _response("terminal", actions, message=str(message))


# ---- actions ----

def ref(obj):
    """The apiVersion, kind, namespace and name of an object (a dict with
    those, or a whole object)."""
    if "metadata" in obj:
        md = obj["metadata"]
        out = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": md["name"]}
        if md.get("namespace"):
            out["namespace"] = md["namespace"]
        return out
    return {k: obj[k] for k in ("apiVersion", "kind", "namespace", "name") if obj.get(k)}


def create(obj):
    return {"action": "create", "object": obj}


def update(obj):
    """A whole-object update; conditional when obj has metadata.resourceVersion."""
    return {"action": "update", "object": obj}


def update_status(obj):
    return {"action": "updateStatus", "object": obj}


def patch(target, body, patch_type="merge", subresource=None):
    """A patch of target (an object or a ref()): patch_type merge, json or
    strategic; subresource "status" or None."""
    act = {"action": "patch"}
    act.update(ref(target))
    act["patch"] = body
    if patch_type != "merge":
        act["patchType"] = patch_type
    if subresource:
        act["subresource"] = subresource
    return act


def apply(obj, field_manager=None, force=False):
    """A server-side apply of the fields obj lists (field manager: the
    controller's name unless given)."""
    act = {"action": "apply", "object": obj}
    if field_manager:
        act["fieldManager"] = field_manager
    if force:
        act["force"] = True
    return act


def delete(target, uid=None, resource_version=None, propagation_policy=None,
           grace_period_seconds=None):
    """A delete of target (an object or a ref()), with optional
    preconditions; an object already gone counts as deleted."""
    act = {"action": "delete"}
    act.update(ref(target))
    pre = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
    if pre:
        act["preconditions"] = pre
    if propagation_policy:
        act["propagationPolicy"] = propagation_policy
    if grace_period_seconds is not None:
        act["gracePeriodSeconds"] = grace_period_seconds
    return act


def event(reason, message, type="Normal", regarding=None):
    """An Event about the reconciled object (or about regarding: an object
    or a ref())."""
    act = {"action": "event", "reason": reason, "message": message, "type": type}
    if regarding is not None:
        act["regarding"] = ref(regarding)
    return act


# ---- the loop ----

def handle(fn, request):
    """The response (a dict) of fn to one request (a dict)."""
    try:
        resp = fn(request)
    except Exception as e:  # the key fails, the program goes on
        traceback.print_exc(file=sys.stderr)
        return error("%s: %s" % (type(e).__name__, e))
    if resp is None:
        return done()
    if not isinstance(resp, dict) or "result" not in resp:
        return error("the reconcile function returned %r, not a response" % (type(resp).__name__,))
    return resp


def run(fn, stdin=None, stdout=None):
    """Answers every request on stdin with fn's response on stdout until
    stdin ends."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    for line in stdin:
        if not line.strip():
            continue
        saved, sys.stdout = sys.stdout, sys.stderr
        try:
            try:
                req = json.loads(line)
            except ValueError as e:
                resp = error("request is not JSON: %s" % e)
            else:
                resp = handle(fn, req)
            sys.stderr.flush()
        finally:
            sys.stdout = saved
        out.write(json.dumps(resp, separators=(",", ":")) + "\n")
        out.flush()
