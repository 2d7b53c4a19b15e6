/* SPDX-License-Identifier: Apache-2.0 */
// A C++17 example plugin on kctrld/plugin_util.h (built and loaded by
// tests/unit/test_plugin_sdk.c with g++ -std=c++17 -Wall -Wextra -Werror):
// reconcile reads the cached object of the key and merge-patches its status
// with one condition built by pu_condition, the message escaped by
// pu_json_str. Shows that the SDK header and KCTRLD_PLUGIN_DEFINE compile as
// C++ and that the entry point keeps C linkage.
#include <cerrno>
#include <cstring>
#include <string>

#include "kctrld/plugin.h"
#include "kctrld/plugin_util.h"

namespace {

const struct kctrld_host_api *H;

struct instance {
  std::string kind;
};

int cxx_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **out) {
  const char *kind = "ConfigMap";
  int rc = H->settings_string(settings, "kind", &kind);
  if (rc < 0 && rc != -ENOENT) return rc;
  instance *in = new (std::nothrow) instance{kind};
  if (!in) return -ENOMEM;
  H->log(KCTRLD_LOG_INFO, "cxx example controller=%s kind=%s", H->ctx_controller(ctx), in->kind.c_str());
  *out = in;
  return 0;
}

int cxx_reconcile(void *inst, kctrld_ctx *ctx, const char *key) {
  const instance *in = static_cast<const instance *>(inst);
  char ns[64], name[254];
  if (pu_split_key(key, ns, sizeof ns, name, sizeof name) < 0) return H->result_error(ctx, "bad key %s", key);
  kctrld_ref ref = {"v1", in->kind.c_str(), ns[0] ? ns : nullptr, name};
  const kctrld_object *obj = nullptr;
  int rc = H->cache_get(ctx, &ref, &obj);
  if (rc == -ENOENT) return KCTRLD_RESULT_DONE;
  if (rc < 0) return H->result_error(ctx, "cache_get %s: %d", key, rc);
  std::string msg = "seen by C++: \"" + std::string(name) + "\"";
  pu_buf b;
  pu_buf_init(&b);
  pu_str(&b, "{\"status\":{\"conditions\":[");
  pu_condition(&b, "Seen", "True", "Reconciled", msg.c_str(), nullptr, H->object_generation(obj));
  pu_str(&b, "]}}");
  H->object_release(obj);
  if (b.oom) {
    pu_buf_free(&b);
    return H->result_error(ctx, "out of memory");
  }
  rc = H->api_patch(ctx, &ref, KCTRLD_PATCH_MERGE, b.p, b.n, true, nullptr);
  pu_buf_free(&b);
  return rc < 0 ? H->result_error(ctx, "patch %s: %d", key, rc) : KCTRLD_RESULT_DONE;
}

void cxx_fini(void *inst) { delete static_cast<instance *>(inst); }

}  // namespace

KCTRLD_PLUGIN_DEFINE(H, "cxx-example", "1.0.0", cxx_init, cxx_reconcile, cxx_fini);
