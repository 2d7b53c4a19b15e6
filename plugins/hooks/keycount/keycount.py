#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""keycount: a kctrld exec hook written with the kctrld_hook helper
(plugins/hooks/helpers/kctrld_hook.py, packaged as
/usr/share/kctrld/python/kctrld_hook.py): labels every ConfigMap with
kctrld.io/keys = the number of its data and binaryData keys and records a
Counted Event. A ConfigMap annotated keycount.kctrld.io/fail=TEXT makes the
function raise, which the helper answers as an error result (retried with
backoff). Works in both exec modes. The shell twin is keycount.sh.
"""
import kctrld_hook as kh

LABEL = "kctrld.io/keys"


def reconcile(req):
    cm = req["object"]
    if cm is None:
        return kh.done()  # deleted: nothing to label
    md = cm["metadata"]
    fail = (md.get("annotations") or {}).get("keycount.kctrld.io/fail")
    if fail:
        raise ValueError(fail)
    n = str(len(cm.get("data") or {}) + len(cm.get("binaryData") or {}))
    if (md.get("labels") or {}).get(LABEL) == n:
        return kh.done()
    print("counting %s: %s keys" % (req["key"], n))  # to the daemon's log
    # the cached resourceVersion: a stale cache gets a 409 and a requeue
    return kh.done(kh.patch(cm, {"metadata": {"resourceVersion": md["resourceVersion"], "labels": {LABEL: n}}}),
                   kh.event("Counted", "%s=%s" % (LABEL, n)))


if __name__ == "__main__":
    kh.run(reconcile)
