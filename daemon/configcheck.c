/* SPDX-License-Identifier: Apache-2.0 */
/* configcheck: see configcheck.h. */
#include "configcheck.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "client/discovery.h"
#include "client/http.h"
#include "client/kubeconfig.h"
#include "configonline.h"
#include "hooks/hook_exec.h"
#include "hooks/hook_webhook.h"
#include "host/plugin_host.h"
#include "kube/selector.h"
#include "ops/adminsock.h"
#include "rbac.h"

struct report {
  char *err;
  size_t cap, len;
  unsigned n;
};

/* Appends one line (no position) to the report. */
static void add_text(struct report *r, const char *line) {
  if (r->n++ >= KC_CONFIG_MAX_ERRORS || !r->cap || r->len + 1 >= r->cap) return;
  int w = snprintf(r->err + r->len, r->cap - r->len, "%s%s", r->len ? "\n" : "", line);
  if (w > 0) r->len += (size_t)w < r->cap - r->len ? (size_t)w : r->cap - r->len - 1;
}

/* Appends "file:line:col: message" (kc_yaml_error's form) as one more line. */
static void add(struct report *r, const kc_yaml_node *at, const char *msg) {
  char line[1400];
  kc_yaml_error(line, sizeof line, at, "%s", msg);
  add_text(r, line);
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

/* The field selector of an informer of a kind whose selectable fields
 * selector.h knows in full (v1 Pod and Node): a field the API server would
 * refuse is reported here, before the daemon's LIST gets a 400. Other
 * kinds' fields only the server can judge (--online). */
static void check_field_selector(struct report *r, size_t i, const kc_informer_spec *s) {
  static const struct {
    const char *kind, *resource;
    bool namespaced;
  } known[] = {{"Pod", "pods", true}, {"Node", "nodes", false}};
  if (!*s->field_selector || strcmp(s->api_version, "v1") != 0) return;
  for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
    if (strcmp(s->kind, known[k].kind) != 0) continue;
    kc_field_selector *sel = NULL;
    kc_sel_error e;
    if (kc_field_selector_parse(s->field_selector, strlen(s->field_selector), &sel, &e) < 0)
      return; /* the loader checked the syntax */
    if (kc_field_selector_check(sel, "", known[k].resource, known[k].namespaced, &e) < 0) {
      char msg[1200];
      snprintf(msg, sizeof msg, "informers[%zu].fieldSelector: %s (the API server refuses it)", i,
               e.msg);
      add(r, key_or(s->at, "fieldSelector"), msg);
    }
    kc_field_selector_free(sel);
    return;
  }
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

/* adminSocketGroup names a group of this machine (the daemon looks it up
 * at start and does not start without it). */
static void check_admin_group(struct report *r, const kc_config *cfg) {
  if (!cfg->admin_socket_group) return;
  gid_t gid;
  int rc = kc_adminsock_group_id(cfg->admin_socket_group, &gid);
  if (rc == 0) return;
  char msg[256];
  if (rc == -ENOENT)
    snprintf(msg, sizeof msg, "adminSocketGroup: no such group '%s'", cfg->admin_socket_group);
  else
    snprintf(msg, sizeof msg, "adminSocketGroup: cannot look the group '%s' up: %s",
             cfg->admin_socket_group, strerror(-rc));
  add(r, kc_yaml_map_get(kc_yaml_root(cfg->doc), "adminSocketGroup"), msg);
}

int kc_configcheck_run(const kc_config *cfg, char *err, size_t errlen) {
  struct report r = {err, errlen, 0, 0};
  if (errlen) err[0] = '\0';
  check_admin_group(&r, cfg);
  for (size_t i = 0; i < cfg->ninformers; i++) {
    const kc_informer_spec *s = &cfg->informers[i];
    if (s->implicit) continue;
    check_kind(&r, s->api_version, s->kind, s->at);
    check_field_selector(&r, i, s);
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

/* ---- credentials ---------------------------------------------------------- */

/* A program an exec credential plugin names: with a '/', that file; else
 * found in PATH, as the spawn will look it up. */
static bool program_found(const char *cmd) {
  if (strchr(cmd, '/')) return access(cmd, X_OK) == 0;
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/bin:/bin";
  for (const char *p = path; *p;) {
    const char *end = strchr(p, ':');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    char full[4096];
    if (snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? p : ".", cmd) < (int)sizeof full &&
        access(full, X_OK) == 0)
      return true;
    p += n;
    if (*p == ':') p++;
  }
  return false;
}

/* The files and programs the credentials name are there: the user has a
 * token, token file, client certificate or exec plugin, and every file
 * among them can be read. */
static void check_creds(struct report *r, const kc_kube_creds *c) {
  char line[1400];
  /* Plain http:// is a local proxy (kubectl proxy) or simulator, which
   * authenticates for us: no credentials of our own is normal there. */
  bool plain_http = c->server && strncmp(c->server, "http://", 7) == 0;
  if (!plain_http && !c->token && !c->token_file && !c->cert_file && !c->cert_data && !c->exec) {
    snprintf(line, sizeof line,
             "%s: the user has no credentials (token, tokenFile, client-certificate/client-key "
             "or exec): every request would be anonymous",
             c->source);
    add_text(r, line);
  }
  const char *files[] = {c->token_file, c->cert_file, c->key_file, c->ca_file};
  const char *whats[] = {"token file", "client certificate", "client key", "certificate authority"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    if (!files[i] || access(files[i], R_OK) == 0) continue;
    snprintf(line, sizeof line, "%s: %s %s: %s", c->source, whats[i], files[i], strerror(errno));
    add_text(r, line);
  }
  if (c->exec && !program_found(c->exec->command)) {
    snprintf(line, sizeof line, "%s: exec credential plugin \"%s\" not found%s%s%s",
             c->exec->where ? c->exec->where : c->source, c->exec->command,
             strchr(c->exec->command, '/') ? "" : " in PATH",
             c->exec->install_hint ? ": " : "", c->exec->install_hint ? c->exec->install_hint : "");
    add_text(r, line);
  }
}

int kc_configcheck_credentials(const kc_config *cfg, const char *flag_kubeconfig,
                               const char *context, bool required, kc_kube_creds **out,
                               char *err, size_t errlen) {
  struct report r = {err, errlen, 0, 0};
  if (errlen) err[0] = '\0';
  *out = NULL;
  char msg[1024];
  kc_kube_creds *creds = NULL;
  int rc = kc_kube_resolve_context(flag_kubeconfig, cfg->kubeconfig, context, &creds, msg,
                                   sizeof msg);
  const char *env = getenv("KUBECONFIG");
  bool named = (flag_kubeconfig && *flag_kubeconfig) || (env && *env) || cfg->kubeconfig;
  if (rc == -ENOMEM) return -ENOMEM;
  if (rc == -ENOENT && !named && !required) return 0; /* credentials of where it will run */
  if (rc < 0) {
    /* The config's kubeconfig: blame its key too. */
    const kc_yaml_node *at = kc_yaml_map_get(kc_yaml_root(cfg->doc), "kubeconfig");
    bool from_config = at && !(flag_kubeconfig && *flag_kubeconfig) && strstr(msg, cfg->kubeconfig);
    char line[1200];
    snprintf(line, sizeof line, "%s%s", from_config ? "kubeconfig: " : "", msg);
    if (from_config) add(&r, at, line);
    else add_text(&r, line);
    return -EINVAL;
  }
  check_creds(&r, creds);
  if (r.n) {
    kc_kube_creds_free(creds);
    return -EINVAL;
  }
  *out = creds;
  return 0;
}

/* ---- the command ---------------------------------------------------------- */

int kc_configcheck_main(const char *path, const char *flag_kubeconfig, const char *context,
                        bool online) {
  char err[8192], offline[8192];
  kc_config *cfg = NULL;
  if (kc_config_load_file(path, &cfg, err, sizeof err) < 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  /* Beyond the schema; only warnings are logged. Every check runs and
   * reports, whatever the others found. */
  kc_log_set_level(KC_LOG_WARN);
  int crc = kc_configcheck_run(cfg, offline, sizeof offline);
  kc_plugin_host_unload_all();
  if (crc < 0) fprintf(stderr, "%s\n", offline);
  kc_kube_creds *creds = NULL;
  int krc = kc_configcheck_credentials(cfg, flag_kubeconfig, context, online, &creds, err,
                                       sizeof err);
  if (krc < 0) fprintf(stderr, "%s\n", krc == -ENOMEM ? "out of memory" : err);
  int orc = 0;
  if (online && creds) {
    if (kc_http_global_init() < 0) {
      fprintf(stderr, "kctrld: cannot initialise libcurl\n");
      orc = -EIO;
    } else if ((orc = kc_configonline_run(cfg, creds, crc < 0 ? offline : NULL, err,
                                          sizeof err)) < 0) {
      fprintf(stderr, "%s\n", orc == -EINVAL ? err : strerror(-orc));
    }
  }
  int code = 1;
  if (crc == 0 && krc == 0 && orc == 0) {
    printf("%s: credentials: %s\n", path,
           creds ? creds->source
                 : "none here (no --kubeconfig, KUBECONFIG, kubeconfig:, service account or "
                   "$HOME/.kube/config); where it runs, the in-cluster service account");
    kc_rbac_check_plugins(cfg, stderr); /* warnings only: the exit code stays 0 */
    printf("%s: OK%s (%zu informers, %zu controllers)\n", path, online ? " online" : "",
           cfg->ninformers, cfg->ncontrollers);
    code = 0;
  }
  kc_kube_creds_free(creds);
  kc_config_free(cfg);
  return code;
}
