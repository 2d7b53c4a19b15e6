# SPDX-License-Identifier: Apache-2.0
"""`kctrld --check-config` reports every problem of a file in one run, and
a selector the API server refuses is a configuration error at run time:

- two unknown keys of one mapping are both reported, each at file:line:col;
  a tab used for indentation is named as such;
- the credentials the daemon would use are checked: a kubeconfig the
  config names that does not exist is an error at its `kubeconfig:` key, a
  --context the kubeconfig does not have is an error, a user without any
  credential (on https) is an error;
- `--online` against kube-apisim: a misspelt field selector
  (metadata.nmae) is refused by the server (HTTP 400, "field label not
  supported") and reported at the selector's position; a config the server
  accepts is OK;
- the daemon with that selector logs one error line with the server's
  message (not a warning per retry) and /readyz says why it is not ready.
"""
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402

KCTRLD = os.path.join(taplib.BUILD, "kctrld")


def require_binaries():
    for p in (KCTRLD, os.path.join(taplib.BUILD, "kube-apisim")):
        if not os.access(p, os.X_OK):
            raise taplib.Skip("%s not built" % p)


def env_without_credentials():
    """No KUBECONFIG, no in-cluster variables, a HOME without .kube."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    env["HOME"] = tempfile.mkdtemp(prefix="kctrld-home-")
    return env


def check(text, *args, name="kctrld.yaml"):
    d = tempfile.mkdtemp(prefix="kctrld-check-")
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([KCTRLD, "--check-config", path] + list(args), capture_output=True,
                       text=True, timeout=60, env=env_without_credentials())
    return path, r


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def test_every_unknown_key_and_tabs():
    require_binaries()
    path, r = check("informers:\n"
                    "  - apiVersion: v1\n"
                    "    kind: Pod\n"
                    "    bogus: 1\n"
                    "    labelSelectr: app=web\n"
                    "controllers: []\n")
    assert r.returncode == 1, r
    assert '%s:4:5: unknown key "bogus" in informers[0]' % path in r.stderr, r.stderr
    assert ('%s:5:5: unknown key "labelSelectr" in informers[0] (did you mean "labelSelector"?)'
            % path) in r.stderr, r.stderr
    path, r = check("informers:\n\t- apiVersion: v1\n")
    assert r.returncode == 1, r
    assert r.stderr.strip() == \
        "%s:2:1: tabs are not allowed for indentation in YAML; use spaces" % path, r.stderr


def test_credentials_checked():
    require_binaries()
    d = tempfile.mkdtemp(prefix="kctrld-creds-")
    # A kubeconfig the config names that is not there.
    path, r = check("kubeconfig: %s/nope\ninformers: []\ncontrollers: []\n" % d)
    assert r.returncode == 1, r
    assert "%s:1:13: kubeconfig: %s/nope: kubeconfig file not found" % (path, d) in r.stderr, \
        r.stderr
    kc = write(os.path.join(d, "kubeconfig"),
               "apiVersion: v1\nkind: Config\n"
               "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
               "users: [{name: u, user: {token: abc}}, {name: anon, user: {}}]\n"
               "contexts: [{name: ok, context: {cluster: c, user: u}},\n"
               "           {name: anon, context: {cluster: c, user: anon}}]\n"
               "current-context: ok\n")
    good = "kubeconfig: %s\ninformers: []\ncontrollers: []\n" % kc
    path, r = check(good)
    assert r.returncode == 0, r
    assert "credentials: kubeconfig %s (context ok)" % kc in r.stdout, r.stdout
    path, r = check(good, "--context", "nope")
    assert r.returncode == 1, r
    assert 'context "nope" not found' in r.stderr, r.stderr
    path, r = check(good, "--context", "anon")
    assert r.returncode == 1, r
    assert "the user has no credentials" in r.stderr, r.stderr
    # Nothing names credentials and none are here: where it will run decides.
    path, r = check("informers: []\ncontrollers: []\n")
    assert r.returncode == 0, r
    assert "credentials: none here" in r.stdout, r.stdout
    # ... but --online needs some.
    path, r = check("informers: []\ncontrollers: []\n", "--online")
    assert r.returncode == 1, r
    assert "no credentials" in r.stderr, r.stderr


MISSPELT_SELECTOR = """metrics: { bindAddress: "127.0.0.1:0" }
informers:
  - apiVersion: apps/v1
    kind: Deployment
    fieldSelector: metadata.nmae=web
controllers: []
"""


def test_online_misspelt_field_selector():
    require_binaries()
    with taplib.Apisim() as sim:
        path, r = check(MISSPELT_SELECTOR, "--online", "--kubeconfig", sim.kubeconfig)
        assert r.returncode == 1, r
        assert ('%s:5:20: informers[0].fieldSelector: the API server rejects "metadata.nmae=web" '
                'for deployments: HTTP 400 BadRequest: ' % path) in r.stderr, r.stderr
        assert '"metadata.nmae" is not a known field selector' in r.stderr, r.stderr
        fixed = MISSPELT_SELECTOR.replace("nmae", "name") + \
            "  # and a kind discovery does not know\n"
        fixed = fixed.replace("controllers: []\n",
                              "  - { apiVersion: demo.kctrld.io/v1, kind: PodSett }\n"
                              "controllers: []\n")
        path, r = check(fixed, "--online", "--kubeconfig", sim.kubeconfig)
        assert r.returncode == 1, r
        assert "%s:6:44: informers[1]: kind PodSett is not served by demo.kctrld.io/v1" % path \
            in r.stderr, r.stderr
        path, r = check(MISSPELT_SELECTOR.replace("nmae", "name"), "--online", "--kubeconfig",
                        sim.kubeconfig)
        assert r.returncode == 0, r
        assert "OK online (1 informers, 0 controllers)" in r.stdout, r.stdout


def readyz(k):
    url = "http://127.0.0.1:%d/readyz" % k.metrics_port()
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_runtime_refused_selector():
    require_binaries()
    with taplib.Apisim() as sim, taplib.Kctrld(MISSPELT_SELECTOR, kubeconfig=sim.kubeconfig) as k:
        st = taplib.wait_for(lambda: (lambda s: s if s[0] == 503 and "nmae" in s[1] else None)(
            readyz(k)), what="/readyz to name the refused selector")
        assert "the API server refuses its selector" in st[1], st
        assert 'apps/v1 Deployment' in st[1], st
        assert '"metadata.nmae" is not a known field selector' in st[1], st
        # The streaming list fell back to LIST; both were refused: one error line.
        k.stop()
        log = k.log()
        lines = [ln for ln in log.splitlines() if "metadata.nmae" in ln and "reflector" in ln]
        errors = [ln for ln in lines if " error " in ln]
        warns = [ln for ln in lines if " warn " in ln]
        assert len(errors) == 1, log
        assert not warns, log


if __name__ == "__main__":
    taplib.run_tests(globals())
