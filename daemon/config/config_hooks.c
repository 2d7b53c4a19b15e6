/* SPDX-License-Identifier: Apache-2.0 */
/* config_hooks: a controller's `hook:` (docs/hooks.md): the exec form
 * (command, env, mode, limits), the webhook form (URL, TLS files, limits)
 * and the permissions a hook asks for. Called only from config_controllers.c,
 * on the thread that loads the config. */
#include "config/config.h"
#include "config/config_int.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- hooks (docs/hooks.md) -------------------------------------------------- */

/* An environment variable name as POSIX shells take it. */
static bool env_name_ok(const char *s) {
  if (!*s || (*s >= '0' && *s <= '9')) return false;
  for (const char *p = s; *p; p++)
    if (!is_alnum(*p) && *p != '_') return false;
  return true;
}

static const kc_hook_exec_spec *parse_hook_exec(struct ctx *c, const kc_yaml_node *n,
                                                const char *what) {
  static const struct field table[] = {
      CUSTOM("command"),
      CUSTOM("env"),
      FIELD_RANGE("timeout", F_DURATION, kc_hook_exec_spec, timeout_ms, 1, 86400000),
      CUSTOM("mode"),
      FIELD_RANGE("maxResponseBytes", F_INT, kc_hook_exec_spec, max_response_bytes, 64,
                  1LL << 30),
      FIELD_RANGE("stopGracePeriod", F_DURATION, kc_hook_exec_spec, stop_grace_ms, 0, 3600000),
  };
  kc_hook_exec_spec *ex = cfg_xcalloc(c, 1, sizeof *ex);
  if (!ex) return NULL;
  ex->timeout_ms = KC_DEFAULT_HOOK_TIMEOUT_MS;
  ex->max_response_bytes = KC_DEFAULT_HOOK_MAX_RESPONSE;
  ex->stop_grace_ms = KC_DEFAULT_HOOK_STOP_GRACE_MS;
  if (!cfg_apply_table(c, n, what, table, sizeof table / sizeof table[0], ex)) return ex;
  char w[200];
  const kc_yaml_node *v = kc_yaml_map_get(n, "command");
  snprintf(w, sizeof w, "%s.command", what);
  if (!v) {
    cfg_fail(c, n, "%s: missing required key \"command\"", what);
  } else {
    const char **argv = NULL;
    size_t argc = 0;
    if (cfg_string_list(c, v, w, &argv, &argc)) {
      if (!argc) {
        cfg_fail(c, v, "%s: must name a program (a non-empty list)", w);
      } else if (!*argv[0]) {
        cfg_fail(c, &v->u.seq.items[0], "%s[0]: empty program name", w);
      } else {
        /* One more slot: the argv handed to posix_spawn ends with NULL. */
        const char **cmd = cfg_xcalloc(c, argc + 1, sizeof *cmd);
        if (cmd) {
          for (size_t i = 0; i < argc; i++) cmd[i] = argv[i];
          if (strchr(cmd[0], '/')) cmd[0] = cfg_resolve_path(c, cmd[0]);
          ex->command = cmd;
          ex->ncommand = argc;
        }
      }
    }
  }
  if ((v = kc_yaml_map_get(n, "env"))) {
    snprintf(w, sizeof w, "%s.env", what);
    if (cfg_took(c, kc_yaml_expect(v, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp)) && v->u.map.len) {
      const char **env = cfg_xcalloc(c, v->u.map.len + 1, sizeof *env);
      for (size_t i = 0; env && i < v->u.map.len; i++) {
        const kc_yaml_pair *pr = &v->u.map.pairs[i];
        char wk[260];
        const char *key = pr->key.u.scalar.text;
        snprintf(wk, sizeof wk, "%s.%s", w, key);
        const char *val;
        if (strlen(key) != pr->key.u.scalar.len || !env_name_ok(key)) {
          cfg_fail(c, &pr->value, "%s: not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                   wk);
          continue;
        }
        if (!cfg_took(c, kc_yaml_get_string(&pr->value, wk, &val, c->tmp, sizeof c->tmp))) continue;
        size_t len = strlen(key) + strlen(val) + 2;
        char *kv = cfg_xcalloc(c, len, 1);
        if (!kv) break;
        snprintf(kv, len, "%s=%s", key, val);
        env[ex->nenv++] = kv;
      }
      ex->env = env;
    }
  }
  if ((v = kc_yaml_map_get(n, "mode"))) {
    snprintf(w, sizeof w, "%s.mode", what);
    const char *m;
    if (cfg_took(c, kc_yaml_get_string(v, w, &m, c->tmp, sizeof c->tmp))) {
      if (strcmp(m, "persistent") == 0) ex->mode = KC_HOOK_MODE_PERSISTENT;
      else if (strcmp(m, "per-call") == 0) ex->mode = KC_HOOK_MODE_PER_CALL;
      else cfg_fail(c, v, "%s: must be persistent or per-call, not \"%s\"", w, m);
    }
  }
  return ex;
}

/* `permissions: [{group: "", resource: configmaps, verbs: [patch]}, ...]`:
 * the hook's writes, as a plugin declares them in its table (plugin.h). */
static const kctrld_permission *parse_hook_permissions(struct ctx *c, const kc_yaml_node *n,
                                                       const char *what) {
  static const char *const verbs[] = {"get",    "list",   "watch",  "create",          "update",
                                      "patch",  "delete", "deletecollection", NULL};
  if (!cfg_took(c, kc_yaml_expect(n, KC_YAML_SEQUENCE, what, c->tmp, sizeof c->tmp))) return NULL;
  kctrld_permission *perms = cfg_xcalloc(c, n->u.seq.len + 1, sizeof *perms);
  if (!perms) return NULL;
  for (size_t i = 0; i < n->u.seq.len; i++) {
    const kc_yaml_node *it = &n->u.seq.items[i];
    char w[200], wk[220];
    snprintf(w, sizeof w, "%s[%zu]", what, i);
    if (!cfg_took(c, kc_yaml_expect(it, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp))) continue;
    for (size_t k = 0; k < it->u.map.len; k++) {
      const char *key = it->u.map.pairs[k].key.u.scalar.text;
      if (strcmp(key, "group") && strcmp(key, "resource") && strcmp(key, "verbs"))
        cfg_fail(c, &it->u.map.pairs[k].key, "%s: unknown key \"%s\" (group, resource, verbs)", w,
                 key);
    }
    const char *group = "", *resource = NULL;
    const kc_yaml_node *v;
    snprintf(wk, sizeof wk, "%s.group", w);
    if ((v = kc_yaml_map_get(it, "group")) &&
        cfg_took(c, kc_yaml_get_string(v, wk, &group, c->tmp, sizeof c->tmp)))
      group = cfg_xstrdup(c, group);
    snprintf(wk, sizeof wk, "%s.resource", w);
    if (!(v = kc_yaml_map_get(it, "resource")))
      cfg_fail(c, it, "%s: missing required key \"resource\" (the URL plural, e.g. configmaps)", w);
    else if (cfg_took(c, kc_yaml_get_string(v, wk, &resource, c->tmp, sizeof c->tmp)) && !*resource)
      cfg_fail(c, v, "%s: empty resource", wk);
    else if (resource)
      resource = cfg_xstrdup(c, resource);
    snprintf(wk, sizeof wk, "%s.verbs", w);
    const char **vs = NULL;
    size_t nv = 0;
    kc_buf joined = {0};
    if (!(v = kc_yaml_map_get(it, "verbs"))) {
      cfg_fail(c, it, "%s: missing required key \"verbs\"", w);
    } else if (cfg_string_list(c, v, wk, &vs, &nv)) {
      if (!nv) cfg_fail(c, v, "%s: must name at least one verb", wk);
      for (size_t j = 0; j < nv; j++) {
        bool known = false;
        for (const char *const *kv = verbs; *kv && !known; kv++) known = strcmp(*kv, vs[j]) == 0;
        if (!known)
          cfg_fail(c, &v->u.seq.items[j], "%s[%zu]: unknown verb \"%s\" (get, list, watch, create, update, patch, delete, deletecollection)",
                   wk, j, vs[j]);
        kc_buf_printf(&joined, "%s%s", j ? "," : "", vs[j]);
      }
    }
    if (joined.err) cfg_fail(c, it, "out of memory");
    if (resource && joined.len) {
      perms[i].group = group ? group : "";
      perms[i].resource = resource;
      perms[i].verbs = cfg_xstrdup(c, joined.p);
    }
    kc_buf_free(&joined);
  }
  return perms;
}


/* A loopback host as libcurl's URL parser gives it: localhost, 127.0.0.0/8,
 * [::1]. Plain HTTP to these never leaves the machine. */
static bool loopback_host(const char *host) {
  if (strcasecmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0) return true;
  struct in_addr a;
  return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* hook.webhook.url: http(s), a host, no credentials, no fragment; plain
 * HTTP only to loopback unless allowInsecureHTTP. */
static void check_webhook_url(struct ctx *c, const kc_yaml_node *at, const char *w,
                              kc_hook_webhook_spec *wh) {
  CURLU *u = curl_url();
  if (!u) {
    c->oom = true;
    return;
  }
  char *scheme = NULL, *host = NULL, *user = NULL, *frag = NULL;
  if (curl_url_set(u, CURLUPART_URL, wh->url, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
    cfg_fail(c, at, "%s: not an absolute http:// or https:// URL with a host", w);
  } else if (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0) {
    cfg_fail(c, at, "%s: scheme must be https (or http), not \"%s\"", w, scheme);
  } else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
    cfg_fail(c, at,
             "%s: must not contain credentials (user@host): use clientCertFile/clientKeyFile", w);
  } else if (curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
    cfg_fail(c, at, "%s: must not contain a fragment (#...)", w);
  } else if (strcmp(scheme, "http") == 0) {
    if (!loopback_host(host) && !wh->allow_insecure_http)
      cfg_fail(c, at,
               "%s: plain http:// to a host other than loopback sends every object unencrypted: "
               "use https://, or set allowInsecureHTTP: true",
               w);
    if (wh->ca_file || wh->client_cert_file || wh->insecure_skip_tls_verify)
      cfg_fail(c, at,
               "%s: TLS settings (caFile, clientCertFile, insecureSkipTLSVerify) need https://", w);
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(user);
  curl_free(frag);
  curl_url_cleanup(u);
}

static const kc_hook_webhook_spec *parse_hook_webhook(struct ctx *c, const kc_yaml_node *n,
                                                      const char *what) {
  static const struct field table[] = {
      REQUIRED("url", F_STRING, kc_hook_webhook_spec, url),
      FIELD("caFile", F_PATH, kc_hook_webhook_spec, ca_file),
      FIELD("clientCertFile", F_PATH, kc_hook_webhook_spec, client_cert_file),
      FIELD("clientKeyFile", F_PATH, kc_hook_webhook_spec, client_key_file),
      FIELD_RANGE("timeout", F_DURATION, kc_hook_webhook_spec, timeout_ms, 1, 86400000),
      FIELD("insecureSkipTLSVerify", F_BOOL, kc_hook_webhook_spec, insecure_skip_tls_verify),
      FIELD("allowInsecureHTTP", F_BOOL, kc_hook_webhook_spec, allow_insecure_http),
      FIELD_RANGE("maxResponseBytes", F_INT, kc_hook_webhook_spec, max_response_bytes, 64,
                  1LL << 30),
  };
  kc_hook_webhook_spec *wh = cfg_xcalloc(c, 1, sizeof *wh);
  if (!wh) return NULL;
  wh->url = "";
  wh->timeout_ms = KC_DEFAULT_WEBHOOK_TIMEOUT_MS;
  wh->max_response_bytes = KC_DEFAULT_HOOK_MAX_RESPONSE;
  if (!cfg_apply_table(c, n, what, table, sizeof table / sizeof table[0], wh)) return wh;
  char w[200];
  const kc_yaml_node *v = kc_yaml_map_get(n, "url");
  snprintf(w, sizeof w, "%s.url", what);
  if (v && *wh->url) check_webhook_url(c, v, w, wh);
  else if (v) cfg_fail(c, v, "%s: empty URL", w);
  if (!wh->client_cert_file != !wh->client_key_file) {
    const char *has = wh->client_cert_file ? "clientCertFile" : "clientKeyFile";
    cfg_fail(c, kc_yaml_map_get(n, has), "%s.%s: needs %s too", what, has,
             wh->client_cert_file ? "clientKeyFile" : "clientCertFile");
  }
  if (wh->ca_file && wh->insecure_skip_tls_verify)
    cfg_fail(c, kc_yaml_map_get(n, "insecureSkipTLSVerify"),
             "%s.insecureSkipTLSVerify: cannot be combined with caFile (verify with the CA, or "
             "do not verify)",
             what);
  return wh;
}

const kc_hook_spec *cfg_parse_hook(struct ctx *c, const kc_yaml_node *n, const char *ctl) {
  static const struct field table[] = {CUSTOM("exec"), CUSTOM("webhook"), CUSTOM("permissions"),
                                       CUSTOM("style")};
  char what[96];
  snprintf(what, sizeof what, "%s.hook", ctl);
  kc_hook_spec *h = cfg_xcalloc(c, 1, sizeof *h);
  if (!h) return NULL;
  h->at = n;
  if (!cfg_apply_table(c, n, what, table, sizeof table / sizeof table[0], h)) return h;
  const kc_yaml_node *pv = kc_yaml_map_get(n, "permissions");
  if (pv) {
    char wp[120];
    snprintf(wp, sizeof wp, "%s.permissions", what);
    h->permissions = parse_hook_permissions(c, pv, wp);
  }
  const kc_yaml_node *sv = kc_yaml_map_get(n, "style");
  if (sv) {
    char ws[120];
    snprintf(ws, sizeof ws, "%s.style", what);
    const char *st;
    if (cfg_took(c, kc_yaml_get_string(sv, ws, &st, c->tmp, sizeof c->tmp))) {
      if (strcmp(st, "actions") == 0) h->style = KC_HOOK_STYLE_ACTIONS;
      else if (strcmp(st, "desired") == 0) h->style = KC_HOOK_STYLE_DESIRED;
      else cfg_fail(c, sv, "%s: must be actions or desired, not \"%s\"", ws, st);
    }
  }
  const kc_yaml_node *v = kc_yaml_map_get(n, "exec"), *wv = kc_yaml_map_get(n, "webhook");
  if (!v && !wv) {
    cfg_fail(c, n, "%s: missing a hook kind: give \"exec\" or \"webhook\"", what);
    return h;
  }
  if (v && wv) {
    cfg_fail(c, wv, "%s: give either \"exec\" or \"webhook\", not both", what);
    return h;
  }
  char w[120];
  snprintf(w, sizeof w, "%s.%s", what, v ? "exec" : "webhook");
  if (v) h->exec = parse_hook_exec(c, v, w);
  else h->webhook = parse_hook_webhook(c, wv, w);
  return h;
}
