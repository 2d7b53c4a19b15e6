#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An exec credential plugin for tests/integration/test_execcred.py.

Works in $EXECCRED_DIR (set through the kubeconfig's exec env). The file
`mode` there picks what it does:
  ok         mint a token, add it to kube-apisim's --token-file as
             "TOKEN EXPIRY" (apisim refuses it after EXPIRY) and print an
             ExecCredential; `lifetime` (seconds, default 4) is the real
             lifetime, `claim` (seconds, default = lifetime) the one announced
             in status.expirationTimestamp (claim > lifetime makes the daemon
             learn of the expiry from a 401)
  fail       a message on stderr, exit status 1
  hang       sleep for an hour (the daemon's timeout kills it)
  slow       sleep `delay` seconds (default 5), then as ok
  unlisted   as ok, but the token is not added to the --token-file: the
             server answers 401 to it (a credential the server revoked)
  malformed  print something that is not JSON
Every run appends its mode to `runs`. Checks KUBERNETES_EXEC_INFO."""
import datetime
import json
import os
import secrets
import sys
import time

d = os.environ["EXECCRED_DIR"]


def read(name, default):
    try:
        with open(os.path.join(d, name)) as f:
            return f.read().strip() or default
    except FileNotFoundError:
        return default


mode = read("mode", "ok")
with open(os.path.join(d, "runs"), "a") as f:
    f.write(mode + "\n")
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
assert info["spec"]["interactive"] is False, info
assert info["spec"]["cluster"]["server"].startswith("http"), info
assert sys.argv[1:] == ["--cluster", "sim"], sys.argv

if mode == "fail":
    sys.stderr.write("cannot reach the identity provider (test mode fail)\n")
    sys.exit(1)
if mode == "hang":
    time.sleep(3600)
if mode == "slow":
    time.sleep(float(read("delay", "5")))
if mode == "malformed":
    print("<html>identity provider maintenance</html>")
    sys.exit(0)

lifetime = int(read("lifetime", "4"))
claim = int(read("claim", str(lifetime)))
now = time.time()
token = "rot-" + secrets.token_hex(16)
tf = read("tokenfile", "") if mode != "unlisted" else ""
keep = []
try:
    with open(tf) as f:
        keep = [ln for ln in f.read().splitlines() if ln and float(ln.split()[1]) > now]
except FileNotFoundError:
    pass
if tf:
    tmp = tf + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(keep[-2:] + ["%s %d" % (token, int(now + lifetime))]) + "\n")
    os.rename(tmp, tf)
sys.stderr.write("issued %s\n" % token)  # the daemon must redact this
exp = datetime.datetime.fromtimestamp(int(now + claim), datetime.timezone.utc)
print(json.dumps({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1",
                  "status": {"token": token,
                             "expirationTimestamp": exp.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
