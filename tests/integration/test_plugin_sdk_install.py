# SPDX-License-Identifier: Apache-2.0
"""The installed plugin SDK cannot capture a plugin's names: plugins built
out of tree against the headers `make install` put in a scratch DESTDIR,
found with `pkg-config --cflags kctrld-plugin`, compiled with
-Wall -Wextra -Wshadow -Werror, each naming its host-table pointer (the
first argument of KCTRLD_PLUGIN_DEFINE) after a name a macro could have
taken (`host`, `ctx`, `p`, `plugin`, `table_`), all load into one daemon
against kube-apisim and annotate the ConfigMap: no crash, no error line.
The headers come in with -I, not as system headers, so a macro local
shadowing the plugin's pointer fails the build (-Wshadow); the `host` plugin
is built once more with the headers as system headers (-isystem, as
/usr/include is), where -Wshadow is silent and only running it shows the
capture.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import taplib  # noqa: E402

CM = "/api/v1/namespaces/default/configmaps"
# The plugin's host pointer is @H@; the ctx parameters are called `c` where
# the pointer is `ctx`, so the plugin's own code does not shadow itself.
SOURCE = r'''#include <errno.h>
#include <string.h>

#include <kctrld/plugin.h>
#include <kctrld/plugin_util.h>

static const struct kctrld_host_api *@H@;

static int sdk_init(kctrld_ctx *c, const kctrld_settings *settings, void **instance) {
  (void)c, (void)settings;
  *instance = NULL;
  return 0;
}

static int sdk_reconcile(void *instance, kctrld_ctx *c, const char *key) {
  (void)instance;
  char ns[64], name[254];
  if (pu_split_key(key, ns, sizeof ns, name, sizeof name) < 0) return KCTRLD_RESULT_DONE;
  kctrld_ref ref = {"v1", "ConfigMap", ns[0] ? ns : NULL, name};
  const kctrld_object *obj = NULL;
  int rc = @H@->cache_get(c, &ref, &obj);
  if (rc == -ENOENT) return KCTRLD_RESULT_DONE;
  if (rc < 0) return @H@->result_error(c, "cache_get %s: %d", key, rc);
  char seen[8];
  int have = @H@->object_string(obj, "metadata.annotations[\"sdk.kctrld.io/@N@\"]", seen, sizeof seen);
  @H@->object_release(obj);
  if (have >= 0 && !strcmp(seen, "seen")) return KCTRLD_RESULT_DONE;
  static const char patch[] = "{\"metadata\":{\"annotations\":{\"sdk.kctrld.io/@N@\":\"seen\"}}}";
  rc = @H@->api_patch(c, &ref, KCTRLD_PATCH_MERGE, patch, sizeof patch - 1, false, NULL);
  return rc < 0 ? @H@->result_error(c, "patch %s: %d %s", key, rc, @H@->ctx_api_error(c)) : KCTRLD_RESULT_DONE;
}

KCTRLD_PLUGIN_DEFINE(@H@, "sdk-@N@", "1.0.0", sdk_init, sdk_reconcile, NULL);
'''
# (host pointer name, headers as system headers)
PLUGINS = (("host", False), ("ctx", False), ("p", False), ("plugin", False), ("table_", False), ("host", True))


def annotations(sim):
    st, doc = sim.json("GET", CM + "/cm")
    return ((doc or {}).get("metadata") or {}).get("annotations") or {}


def test_installed_sdk_plugins_named_like_macro_locals_reconcile():
    for prog in ("kctrld", "kube-apisim"):
        if not os.access(os.path.join(taplib.BUILD, prog), os.X_OK):
            raise taplib.Skip("%s not built" % prog)
    env = taplib.staged_sdk()
    cflags = taplib.pkg_cflags(env)
    assert any(f.startswith("-I") and f.endswith("/include") for f in cflags), cflags
    d = tempfile.mkdtemp(prefix="kctrld-sdk-plugins-")
    os.chmod(d, 0o755)
    config = "logLevel: info\ncontrollers:\n"
    for i, (h, system) in enumerate(PLUGINS):
        n = "n%d" % i
        flags = [("-isystem" + f[2:]) if system and f.startswith("-I") else f for f in cflags]
        src = os.path.join(d, "sdk_%s.c" % n)
        so = os.path.join(d, "sdk_%s.so" % n)
        with open(src, "w") as f:
            f.write(SOURCE.replace("@H@", h).replace("@N@", n))
        r = subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Wshadow", "-Werror",
                            "-shared", "-fPIC", "-fvisibility=hidden"] + flags + ["-o", so, src],
                           env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, "host pointer named %r does not build:\n%s" % (h, r.stderr[-2000:])
        os.chmod(so, 0o755)
        config += ("  - name: sdk-%s\n    plugin: %s\n    for: { apiVersion: v1, kind: ConfigMap }\n" % (n, so))
    want = {"sdk.kctrld.io/n%d" % i: "seen" for i in range(len(PLUGINS))}
    with taplib.Apisim() as sim, taplib.Kctrld(config, kubeconfig=sim.kubeconfig) as k:
        sim.json("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}, expect=201)
        taplib.wait_for(lambda: not k.alive() or all(annotations(sim).get(a) == v for a, v in want.items()),
                        what="every plugin's annotation (have %r)" % annotations(sim))
        assert k.alive(), "kctrld died:\n%s" % k.log()[-3000:]
        assert k.stop() == 0, k.log()[-3000:]
        errors = [l for l in k.log().splitlines() if taplib.ERROR_LINE.match(l)]
        assert not errors, "error lines:\n%s" % "\n".join(errors)
        assert all(annotations(sim).get(a) == v for a, v in want.items()), annotations(sim)


if __name__ == "__main__":
    taplib.run_tests(globals())
