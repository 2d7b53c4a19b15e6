/* SPDX-License-Identifier: Apache-2.0 */
/* configcheck: see configcheck.h. */
#include "configcheck.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/discovery.h"
#include "hooks/hook_exec.h"
#include "hooks/hook_webhook.h"
#include "host/plugin_host.h"

struct report {
  char *err;
  size_t cap, len;
  unsigned n;
};

/* Appends "file:line:col: message" (kc_yaml_error's form) as one more line. */
static void add(struct report *r, const kc_yaml_node *at, const char *msg) {
  if (r->n++ >= KC_CONFIG_MAX_ERRORS || !r->cap || r->len + 1 >= r->cap) return;
  char line[1024];
  kc_yaml_error(line, sizeof line, at, "%s", msg);
  int w = snprintf(r->err + r->len, r->cap - r->len, "%s%s", r->len ? "\n" : "", line);
  if (w > 0) r->len += (size_t)w < r->cap - r->len ? (size_t)w : r->cap - r->len - 1;
}

static const kc_yaml_node *key_or(const kc_yaml_node *map, const char *key) {
  const kc_yaml_node *v = kc_yaml_map_get(map, key);
  return v ? v : map;
}

static void check_kind(struct report *r, const char *api_version, const char *kind,
                       const kc_yaml_node *at) {
  char msg[512];
  if (kc_discovery_builtin_check(api_version, kind, msg, sizeof msg) < 0)
    add(r, key_or(at, "kind"), msg);
}

/* A reference bound to an explicit informer was checked with it. */
static void check_ref(struct report *r, const kc_config *cfg, const kc_kind_ref *ref) {
  if (ref->informer < cfg->ninformers && !cfg->informers[ref->informer].implicit) return;
  check_kind(r, ref->api_version, ref->kind, ref->at);
}

/* The plugin file loads: exists, passes the file rules, dlopens, exports
 * kctrld_plugin_entry with a matching ABI (plugin_host.h). Its init is not
 * run (it would talk to the cluster). */
static void check_plugin(struct report *r, const kc_controller_spec *ct) {
  char msg[1024];
  kc_plugin *p = NULL;
  /* A hook has no file to load: its program is checked as its init would. */
  if (ct->hook ? (ct->hook->webhook ? kc_hook_webhook_check(ct->hook->webhook, msg, sizeof msg)
                                    : kc_hook_exec_check(ct->hook->exec, msg, sizeof msg)) < 0
               : kc_plugin_load(ct->plugin, &p, msg, sizeof msg) < 0) {
    char line[1200];
    snprintf(line, sizeof line, "controller %s: %s", ct->name, msg);
    add(r, ct->hook ? ct->hook->at : key_or(ct->at, "plugin"), line);
  }
}

int kc_configcheck_run(const kc_config *cfg, char *err, size_t errlen) {
  struct report r = {err, errlen, 0, 0};
  if (errlen) err[0] = '\0';
  for (size_t i = 0; i < cfg->ninformers; i++) {
    const kc_informer_spec *s = &cfg->informers[i];
    if (!s->implicit) check_kind(&r, s->api_version, s->kind, s->at);
  }
  for (size_t c = 0; c < cfg->ncontrollers; c++) {
    const kc_controller_spec *ct = &cfg->controllers[c];
    check_plugin(&r, ct);
    check_ref(&r, cfg, &ct->for_);
    for (size_t i = 0; i < ct->nowns; i++)
      check_ref(&r, cfg, &ct->owns[i].ref);
    for (size_t i = 0; i < ct->nwatches; i++)
      check_ref(&r, cfg, &ct->watches[i].ref);
  }
  return r.n ? -EINVAL : 0;
}
