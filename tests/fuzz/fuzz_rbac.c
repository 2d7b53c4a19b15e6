/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/rbac.c: arbitrary bytes as a kctrld config;
 * when valid, generate its RBAC with plugin declarations taken from each
 * controller's plugin file name (the resource, the verbs, `@for` with it as
 * a subresource), so the fuzzer drives kinds, namespaces, resources and
 * verbs. A success is deterministic (a second run gives the same YAML) and
 * starts with the ServiceAccount; a refusal says why. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rbac.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Thread_local kctrld_permission perms[4];

static int fuzz_perms(void *ud, const kc_controller_spec *c, const kctrld_permission **out,
                      char *err, size_t errlen) {
  (void)ud;
  (void)err;
  (void)errlen;
  const char *base = strrchr(c->plugin, '/');
  base = base ? base + 1 : c->plugin;
  if (!*base) {
    *out = NULL; /* undeclared */
    return 0;
  }
  static _Thread_local char forsub[300];
  snprintf(forsub, sizeof forsub, "%s/%.200s", KCTRLD_RESOURCE_FOR, base);
  perms[0] = (kctrld_permission){"", base, "get,patch"};
  perms[1] = (kctrld_permission){"x.io", "things", base};
  perms[2] = (kctrld_permission){NULL, forsub, "update"};
  perms[3] = (kctrld_permission)KCTRLD_PERMISSIONS_END;
  *out = perms;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[4096];
  kc_config *cfg = NULL;
  if (kc_config_load_buffer("fuzz.yaml", "/etc/kctrld", (const char *)data, size, &cfg, err,
                            sizeof err) != 0)
    return 0;
  kc_rbac_options o = {.perms = fuzz_perms};
  kc_buf a = {0}, b = {0};
  int ra = kc_rbac_generate(cfg, &o, &a, NULL, err, sizeof err);
  if (ra == -EINVAL && !err[0]) abort(); /* every refusal says why */
  if (ra != 0 && ra != -EINVAL && ra != -ENOMEM) abort();
  int rb = kc_rbac_generate(cfg, &o, &b, NULL, err, sizeof err);
  if (ra != rb) abort();
  if (ra == 0) {
    if (a.len != b.len || memcmp(a.p, b.p, a.len) != 0) abort();
    if (!strstr(a.p, "\n---\napiVersion: v1\nkind: ServiceAccount\n")) abort();
  }
  kc_buf_free(&a);
  kc_buf_free(&b);
  kc_config_free(cfg);
  return 0;
}
