/* SPDX-License-Identifier: Apache-2.0 */
/* configonline: see configonline.h. */
#include "configonline.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/buf.h"
#include "client/apiclient.h"
#include "client/discovery.h"
#include "kube/kurl.h"

#define ONLINE_TIMEOUT_MS 30000

/* What one dry LIST checks. */
enum probe_kind { PROBE_LIST = 0, PROBE_LABELS, PROBE_FIELDS };

/* One problem, kept until all answers came so that the report reads in
 * file order whatever order the answers arrive in. */
struct finding {
  size_t order;
  char *line;
};

struct online {
  uv_loop_t loop;
  kc_api *api;
  kc_discovery *disc;
  const kc_config *cfg;
  const char *server;
  size_t pending;
  struct finding *found;
  size_t nfound, capfound;
  bool oom;
};

/* One informer's discovery, then its probes. */
struct inf_check {
  struct online *o;
  size_t idx;
  char api_path[320];
  char plural[64];
  bool namespaced;
};

struct probe {
  struct inf_check *ic;
  enum probe_kind kind;
};

static void finish_one(struct online *o) {
  if (--o->pending == 0) uv_stop(&o->loop);
}

/* Records "file:line:col: message" (at NULL: the message alone). */
__attribute__((format(printf, 4, 5))) static void found(struct online *o, size_t order,
                                                        const kc_yaml_node *at, const char *fmt,
                                                        ...) {
  char msg[1400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *line = NULL;
  int n = at ? asprintf(&line, "%s:%u:%u: %s", at->file, at->line, at->column, msg)
             : asprintf(&line, "%s", msg);
  if (n < 0 || KC_ARRAY_ROOM(o->found, o->capfound, o->nfound, 8) < 0) {
    if (n >= 0) free(line);
    o->oom = true;
    return;
  }
  o->found[o->nfound++] = (struct finding){order, line};
}

static void describe(const kc_status *st, char *buf, size_t cap) {
  snprintf(buf, cap, "HTTP %d %s: %s", st->code, st->reason[0] ? st->reason : "(no reason)",
           st->message[0] ? st->message : "(no message)");
}

/* "informers[2]" or "informers[2] (name web)"; an implicit informer is
 * named by the first controller reference that made it. */
static void inf_name(const kc_config *cfg, size_t i, char *buf, size_t cap) {
  const kc_informer_spec *s = &cfg->informers[i];
  if (!s->implicit) {
    snprintf(buf, cap, "informers[%zu]%s%s%s", i, s->name ? " (" : "", s->name ? s->name : "",
             s->name ? ")" : "");
    return;
  }
  snprintf(buf, cap, "the default informer of %s %s", s->api_version, s->kind);
}

/* Where to report a problem of informer i: its entry, or for a default
 * informer the first controller reference bound to it. */
static const kc_yaml_node *inf_at(const kc_config *cfg, size_t i) {
  const kc_informer_spec *s = &cfg->informers[i];
  if (s->at) return s->at;
  for (size_t c = 0; c < cfg->ncontrollers; c++) {
    const kc_controller_spec *ct = &cfg->controllers[c];
    if (ct->for_.informer == i) return ct->for_.at;
    for (size_t k = 0; k < ct->nowns; k++)
      if (ct->owns[k].ref.informer == i) return ct->owns[k].ref.at;
    for (size_t k = 0; k < ct->nwatches; k++)
      if (ct->watches[k].ref.informer == i) return ct->watches[k].ref.at;
  }
  return NULL;
}

static const kc_yaml_node *key_or(const kc_yaml_node *map, const char *key) {
  const kc_yaml_node *v = kc_yaml_map_get(map, key);
  return v ? v : map;
}

static void on_probe_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  (void)call;
  struct probe *p = ud;
  struct inf_check *ic = p->ic;
  struct online *o = ic->o;
  const kc_informer_spec *s = &o->cfg->informers[ic->idx];
  const kc_yaml_node *at = inf_at(o->cfg, ic->idx);
  size_t order = ic->idx * 4 + 1 + (size_t)p->kind;
  char name[160], what[700];
  inf_name(o->cfg, ic->idx, name, sizeof name);
  const kc_status *st = &res->status;
  if (res->error) {
    found(o, order, at, "%s: LIST %s: %s", name, ic->plural,
          st->message[0] ? st->message : strerror(-res->error));
  } else if (st->code >= 300) {
    describe(st, what, sizeof what);
    if (p->kind == PROBE_LABELS && st->code == 400)
      found(o, order, key_or(at, "labelSelector"),
            "%s.labelSelector: the API server rejects \"%s\" for %s: %s", name,
            s->label_selector, ic->plural, what);
    else if (p->kind == PROBE_FIELDS && st->code == 400)
      found(o, order, key_or(at, "fieldSelector"),
            "%s.fieldSelector: the API server rejects \"%s\" for %s: %s", name,
            s->field_selector, ic->plural, what);
    else if (st->code == 403)
      found(o, order, at, "%s: these credentials may not list %s: %s", name, ic->plural, what);
    else
      found(o, order, at, "%s: LIST %s: %s", name, ic->plural, what);
  }
  free(p);
  finish_one(o);
}

/* GET <resource>?limit=1[&labelSelector=..|&fieldSelector=..]: the server
 * parses the selector as it would for the informer, and answers at most
 * one object. */
static void start_probe(struct inf_check *ic, enum probe_kind kind) {
  struct online *o = ic->o;
  const kc_informer_spec *s = &o->cfg->informers[ic->idx];
  struct probe *p = malloc(sizeof *p);
  if (!p) {
    o->oom = true;
    return;
  }
  *p = (struct probe){ic, kind};
  char url[4096];
  kc_buf u = kc_buf_fixed(url, sizeof url);
  char sep = '?';
  const char *ns = ic->namespaced && s->nnamespaces ? s->namespaces[0] : NULL;
  kc_url_resource(&u, ic->api_path, ic->plural, kc_str_c(ns), (kc_str){NULL, 0}, NULL);
  if (kind == PROBE_FIELDS) kc_url_param(&u, &sep, "fieldSelector", s->field_selector);
  if (kind == PROBE_LABELS) kc_url_param(&u, &sep, "labelSelector", s->label_selector);
  kc_url_param_uint(&u, &sep, "limit", 1);
  kc_api_request_opts opts = {.path = url, .timeout_ms = ONLINE_TIMEOUT_MS,
                              .on_done = on_probe_done, .ud = p};
  int rc = u.err ? -ENOSPC : kc_api_request(o->api, &opts, NULL);
  if (rc < 0) {
    char name[160];
    inf_name(o->cfg, ic->idx, name, sizeof name);
    found(o, ic->idx * 4 + 1 + (size_t)kind, inf_at(o->cfg, ic->idx), "%s: LIST %s: %s", name,
          ic->plural, strerror(-rc));
    free(p);
    return;
  }
  o->pending++;
}

static void on_resolved(int err, const kc_resource_info *info, const kc_status *status,
                        void *ud) {
  struct inf_check *ic = ud;
  struct online *o = ic->o;
  const kc_informer_spec *s = &o->cfg->informers[ic->idx];
  const kc_yaml_node *at = inf_at(o->cfg, ic->idx);
  char name[160], what[700];
  inf_name(o->cfg, ic->idx, name, sizeof name);
  if (err == -ENOENT) {
    char best[64];
    bool hint = kc_discovery_suggest(o->disc, s->api_version, s->kind, best, sizeof best) == 0;
    found(o, ic->idx * 4, key_or(at, "kind"), "%s: kind %s is not served by %s%s%s%s", name,
          s->kind, s->api_version, hint ? " (did you mean " : "", hint ? best : "",
          hint ? "?)" : "");
  } else if (err < 0) {
    if (status && status->code) describe(status, what, sizeof what);
    else snprintf(what, sizeof what, "%s", status && status->message[0] ? status->message : strerror(-err));
    found(o, ic->idx * 4, at, "%s: discovery of %s: %s", name, s->api_version, what);
  } else {
    kc_buf ap = kc_buf_fixed(ic->api_path, sizeof ic->api_path);
    kc_url_group_version(&ap, kc_str_c(info->group), kc_str_c(info->version));
    snprintf(ic->plural, sizeof ic->plural, "%s", info->plural);
    ic->namespaced = info->namespaced;
    if (*s->label_selector) start_probe(ic, PROBE_LABELS);
    if (*s->field_selector) start_probe(ic, PROBE_FIELDS);
    if (!*s->label_selector && !*s->field_selector) start_probe(ic, PROBE_LIST);
  }
  finish_one(o);
}

static void start_discovery(struct online *o, struct inf_check *checks) {
  for (size_t i = 0; i < o->cfg->ninformers; i++) {
    checks[i] = (struct inf_check){.o = o, .idx = i};
    const kc_informer_spec *s = &o->cfg->informers[i];
    int rc = kc_discovery_resolve(o->disc, s->api_version, s->kind, on_resolved, &checks[i]);
    if (rc < 0) {
      char name[160];
      inf_name(o->cfg, i, name, sizeof name);
      found(o, i * 4, inf_at(o->cfg, i), "%s: discovery of %s: %s", name, s->api_version,
            strerror(-rc));
      continue;
    }
    o->pending++;
  }
}

struct auth_check {
  struct online *o;
  struct inf_check *checks;
};

static void on_auth_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  (void)call;
  struct auth_check *a = ud;
  struct online *o = a->o;
  const kc_status *st = &res->status;
  char what[700];
  if (res->error) {
    found(o, 0, NULL, "%s: cannot reach the API server: %s", o->server,
          st->message[0] ? st->message : strerror(-res->error));
  } else if (st->code == 401 || st->code == 403) {
    describe(st, what, sizeof what);
    found(o, 0, NULL, "%s: the API server does not accept these credentials: %s", o->server,
          what);
  } else if (st->code >= 300) {
    describe(st, what, sizeof what);
    found(o, 0, NULL, "%s: GET /api: %s", o->server, what);
  } else {
    start_discovery(o, a->checks);
  }
  finish_one(o);
}

static int cmp_finding(const void *a, const void *b) {
  const struct finding *x = a, *y = b;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* Whether `already` has a line starting with the position of `line`
 * ("file:line:col: "). */
static bool reported(const char *already, const char *line) {
  if (!already) return false;
  const char *colon = strstr(line, ": ");
  if (!colon || colon == line) return false;
  size_t n = (size_t)(colon - line) + 2;
  for (const char *p = already; p && *p;) {
    if (strncmp(p, line, n) == 0) return true;
    p = strchr(p, '\n');
    if (p) p++;
  }
  return false;
}

int kc_configonline_run(const kc_config *cfg, const kc_kube_creds *creds, const char *already,
                        char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  struct online o = {.cfg = cfg, .server = creds->server ? creds->server : "(no server)"};
  struct inf_check *checks = calloc(cfg->ninformers ? cfg->ninformers : 1, sizeof *checks);
  if (!checks) return -ENOMEM;
  if (uv_loop_init(&o.loop) != 0) {
    free(checks);
    return -ENOMEM;
  }
  int rc = kc_api_new(&o.loop, creds, &o.api);
  if (rc == 0) rc = kc_discovery_new(o.api, &o.disc);
  if (rc == 0 && creds->exec && kc_api_prime_credentials(o.api, ONLINE_TIMEOUT_MS) < 0)
    found(&o, 0, NULL, "%s: the exec credential plugin gave no credential within %d s",
          creds->exec->where ? creds->exec->where : o.server, ONLINE_TIMEOUT_MS / 1000);
  struct auth_check auth = {&o, checks};
  if (rc == 0 && !o.nfound) {
    kc_api_request_opts opts = {.path = "/api", .timeout_ms = ONLINE_TIMEOUT_MS,
                                .on_done = on_auth_done, .ud = &auth};
    rc = kc_api_request(o.api, &opts, NULL);
    if (rc == 0) {
      o.pending = 1;
      uv_run(&o.loop, UV_RUN_DEFAULT);
    }
  }
  kc_discovery_free(o.disc);
  kc_api_close(o.api);
  uv_run(&o.loop, UV_RUN_DEFAULT);
  (void)uv_loop_close(&o.loop);
  free(checks);
  if (o.nfound > 1) qsort(o.found, o.nfound, sizeof *o.found, cmp_finding); /* NULL when none */
  size_t used = 0, n = 0;
  for (size_t i = 0; i < o.nfound; i++) {
    if (reported(already, o.found[i].line)) {
      free(o.found[i].line);
      continue;
    }
    if (n++ < KC_CONFIG_MAX_ERRORS && used + 1 < errlen) {
      int w = snprintf(err + used, errlen - used, "%s%s", used ? "\n" : "", o.found[i].line);
      if (w > 0) used += (size_t)w < errlen - used ? (size_t)w : errlen - used - 1;
    }
    free(o.found[i].line);
  }
  free(o.found);
  if (o.oom) return -ENOMEM;
  if (rc < 0) return rc;
  return n ? -EINVAL : 0;
}
