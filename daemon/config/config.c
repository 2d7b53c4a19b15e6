/* SPDX-License-Identifier: Apache-2.0 */
/* config: see config.h. This file owns the loader (file and buffer to
 * kc_config), the top-level keys (leaderElection, metrics, log settings)
 * and the helpers every section parser shares (config_int.h): the owned
 * allocations, the error lines, the small validators and the table-driven
 * key checks. The sections live in config_informers.c,
 * config_controllers.c and config_hooks.c; the reload diff in
 * config_reload.c.
 *
 * Threads: any thread may load or free a config (no shared state). */
#include "config/config.h"
#include "config/config_int.h"

#include "base/buf.h"
#include "base/fileperm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- owned allocations ----------------------------------------------------- */

/* kc_config is the first member, so a kc_config * is a struct config_priv *. */
struct config_priv {
  kc_config pub;
  void **allocs;
  size_t nallocs, cap;
};


void *cfg_keep(struct ctx *c, void *p) {
  if (!p) {
    c->oom = true;
    return NULL;
  }
  struct config_priv *pv = c->priv;
  if (KC_ARRAY_ROOM(pv->allocs, pv->cap, pv->nallocs, 32) < 0) {
    free(p);
    c->oom = true;
    return NULL;
  }
  pv->allocs[pv->nallocs++] = p;
  return p;
}

void *cfg_xcalloc(struct ctx *c, size_t n, size_t size) {
  if (n == 0) n = 1;
  return cfg_keep(c, calloc(n, size));
}

char *cfg_xstrdup(struct ctx *c, const char *s) { return cfg_keep(c, strdup(s)); }

/* ---- errors ---------------------------------------------------------------- */

static void add_line(struct ctx *c, const char *line) {
  c->nerrors++;
  if (!c->err || c->errlen == 0 || c->nerrors > KC_CONFIG_MAX_ERRORS) return;
  size_t room = c->errlen - c->used;
  int w = snprintf(c->err + c->used, room, "%s%s", c->used ? "\n" : "", line);
  if (w < 0) return;
  c->used += (size_t)w < room ? (size_t)w : room - 1;
}

void cfg_fail(struct ctx *c, const kc_yaml_node *at, const char *fmt, ...) {
  char line[768];
  int n = 0;
  if (at) n = snprintf(line, sizeof line, "%s:%u:%u: ", at->file, at->line, at->column);
  else n = snprintf(line, sizeof line, "%s: ", c->cfg->file);
  if (n < 0) n = 0;
  va_list ap;
  va_start(ap, fmt);
  if ((size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  add_line(c, line);
}

/* Folds a yamltree getter's result into the context: -EINVAL becomes an
 * error line, -ENOMEM marks the load as failed. Returns true on success. */
bool cfg_took(struct ctx *c, int rc) {
  if (rc == 0) return true;
  if (rc == -ENOMEM) c->oom = true;
  else add_line(c, c->tmp);
  return false;
}

/* Duration in a compact Go-like form for messages: 1h30m, 15s, 2s500ms. */
const char *cfg_fmt_ms(int64_t ms, char *buf, size_t cap) {
  if (ms == 0) {
    snprintf(buf, cap, "0s");
    return buf;
  }
  int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, r = ms % 1000;
  size_t o = 0;
  buf[0] = '\0';
#define PART(v, u)                                                              \
  if ((v) && o < cap) {                                                         \
    int w_ = snprintf(buf + o, cap - o, "%lld%s", (long long)(v), u);           \
    if (w_ > 0) o += (size_t)w_;                                                \
  }
  PART(h, "h")
  PART(m, "m")
  PART(s, "s")
  PART(r, "ms")
#undef PART
  return buf;
}

/* ---- small validators ------------------------------------------------------- */

/* "v1" or "group/version"; group is a DNS subdomain, version [a-z0-9]+. */
bool cfg_api_version_ok(const char *s) {
  kc_str g, v;
  if (!kc_name_split_api_version(s, strlen(s), &g, &v)) return false;
  for (size_t i = 0; i < v.len; i++)
    if (!is_lower_alnum(v.ptr[i])) return false;
  return !g.len || kc_name_is_dns_subdomain(g.ptr, g.len);
}

bool cfg_kind_ok(const char *s) {
  if (!(s[0] >= 'A' && s[0] <= 'Z')) return false;
  for (const char *p = s; *p; p++)
    if (!is_alnum(*p)) return false;
  return strlen(s) <= 63;
}

bool cfg_simple_name(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n > max) return false;
  for (size_t i = 0; i < n; i++)
    if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return false;
  return true;
}

int cfg_str_cmp_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---- table-driven sections -------------------------------------------------- */


const char *cfg_resolve_path(struct ctx *c, const char *p) {
  if (p[0] == '/' || !c->cfg->dir) return p;
  size_t n = strlen(c->cfg->dir) + strlen(p) + 2;
  char *r = cfg_xcalloc(c, n, 1);
  if (!r) return p;
  snprintf(r, n, "%s/%s", c->cfg->dir, p);
  return r;
}

/* Checks keys, required keys and types of one mapping and stores every
 * non-custom value at base + off. Returns false when `map` is not a mapping
 * (the caller then skips the section). */
bool cfg_apply_table(struct ctx *c, const kc_yaml_node *map, const char *what,
                     const struct field *t, size_t n, void *base) {
  if (!cfg_took(c, kc_yaml_expect(map, KC_YAML_MAPPING, what, c->tmp, sizeof c->tmp))) return false;
  const char *keys[32];
  for (size_t i = 0; i < n && i < 32; i++) keys[i] = t[i].key;
  cfg_check_keys(c, map, keys, n < 32 ? n : 32, what);
  for (size_t i = 0; i < n; i++) {
    const kc_yaml_node *v = kc_yaml_map_get(map, t[i].key);
    char w[200];
    snprintf(w, sizeof w, "%s.%s", what, t[i].key);
    if (!v) {
      if (t[i].required) cfg_fail(c, map, "%s: missing required key \"%s\"", what, t[i].key);
      continue;
    }
    char *dst = (char *)base + t[i].off;
    switch (t[i].type) {
    case F_STRING:
    case F_PATH: {
      const char *s;
      if (cfg_took(c, kc_yaml_get_string(v, w, &s, c->tmp, sizeof c->tmp))) {
        if (t[i].type == F_PATH && !*s) {
          cfg_fail(c, v, "%s: empty path", w);
          break;
        }
        if (t[i].type == F_PATH) s = cfg_resolve_path(c, s);
        memcpy(dst, &s, sizeof s);
      }
      break;
    }
    case F_BOOL: {
      bool b;
      if (cfg_took(c, kc_yaml_get_bool(v, w, &b, c->tmp, sizeof c->tmp))) memcpy(dst, &b, sizeof b);
      break;
    }
    case F_INT: {
      int64_t x;
      if (cfg_took(c, kc_yaml_get_int(v, w, t[i].min, t[i].max, &x, c->tmp, sizeof c->tmp)))
        memcpy(dst, &x, sizeof x);
      break;
    }
    case F_DOUBLE: {
      double x;
      if (cfg_took(c, kc_yaml_get_double(v, w, t[i].dmin, t[i].dmax, &x, c->tmp, sizeof c->tmp)))
        memcpy(dst, &x, sizeof x);
      break;
    }
    case F_DURATION: {
      int64_t x;
      if (cfg_took(c, kc_yaml_get_duration_ms(v, w, t[i].min, t[i].max, &x, c->tmp, sizeof c->tmp)))
        memcpy(dst, &x, sizeof x);
      break;
    }
    case F_CUSTOM: break;
    }
  }
  return true;
}

void cfg_check_keys(struct ctx *c, const kc_yaml_node *map, const char *const *allowed,
                    size_t nallowed, const char *what) {
  if (!map || map->type != KC_YAML_MAPPING) return;
  for (size_t i = 0; i < map->u.map.len; i++)
    cfg_took(c, kc_yaml_check_key(&map->u.map.pairs[i].key, allowed, nallowed, what, c->tmp,
                                  sizeof c->tmp));
}

/* Position to blame for a key: its value if present, else the section. */
const kc_yaml_node *cfg_blame(const kc_yaml_node *map, const char *key) {
  const kc_yaml_node *v = kc_yaml_map_get(map, key);
  return v ? v : map;
}

/* A YAML string list, kept with the config. Returns false when it is not
 * one (reported) or out of memory. */
bool cfg_string_list(struct ctx *c, const kc_yaml_node *node, const char *what,
                     const char ***v, size_t *n) {
  *v = NULL;
  *n = 0;
  if (!cfg_took(c, kc_yaml_get_string_list(node, what, v, n, c->tmp, sizeof c->tmp))) return false;
  return !*v || cfg_keep(c, *v);
}


/* ---- top level -------------------------------------------------------------- */

static void parse_leader_election(struct ctx *c, const kc_yaml_node *n) {
  static const struct field table[] = {
      FIELD("enabled", F_BOOL, kc_leader_election, enabled),
      FIELD("namespace", F_STRING, kc_leader_election, namespace_),
      FIELD("name", F_STRING, kc_leader_election, name),
      FIELD("identity", F_STRING, kc_leader_election, identity),
      FIELD_RANGE("leaseDuration", F_DURATION, kc_leader_election, lease_duration_ms, 1,
                  86400000),
      FIELD_RANGE("renewDeadline", F_DURATION, kc_leader_election, renew_deadline_ms, 1,
                  86400000),
      FIELD_RANGE("retryPeriod", F_DURATION, kc_leader_election, retry_period_ms, 1, 86400000),
  };
  kc_leader_election *le = &c->cfg->leader_election;
  if (!cfg_apply_table(c, n, "leaderElection", table, sizeof table / sizeof table[0], le)) return;
  if (!dns_label(le->namespace_))
    cfg_fail(c, cfg_blame(n, "namespace"),
             "leaderElection.namespace: \"%s\" is not a valid namespace", le->namespace_);
  if (!dns_subdomain(le->name))
    cfg_fail(c, cfg_blame(n, "name"), "leaderElection.name: \"%s\" is not a valid Lease name",
             le->name);
  if (le->identity && !*le->identity)
    cfg_fail(c, cfg_blame(n, "identity"), "leaderElection.identity: must not be empty");
  /* client-go's rules: LeaseDuration > RenewDeadline > JitterFactor(1.2) *
   * RetryPeriod > 0, so the leader gives up before anyone may take over and
   * gets more than one jittered retry before it must give up. */
  char a[32], b[32];
  if (le->lease_duration_ms <= le->renew_deadline_ms) {
    cfg_fail(c,
             cfg_blame(n, kc_yaml_map_get(n, "renewDeadline") ? "renewDeadline" : "leaseDuration"),
             "leaderElection: leaseDuration (%s) must be greater than renewDeadline (%s)",
             cfg_fmt_ms(le->lease_duration_ms, a, sizeof a),
             cfg_fmt_ms(le->renew_deadline_ms, b, sizeof b));
  } else if (le->renew_deadline_ms * 5 <= le->retry_period_ms * 6) {
    cfg_fail(c, cfg_blame(n, kc_yaml_map_get(n, "retryPeriod") ? "retryPeriod" : "renewDeadline"),
             "leaderElection: renewDeadline (%s) must be greater than 1.2 x retryPeriod (%s)",
             cfg_fmt_ms(le->renew_deadline_ms, a, sizeof a),
             cfg_fmt_ms(le->retry_period_ms, b, sizeof b));
  }
}

bool kc_config_group_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > KC_CONFIG_GROUP_NAME_MAX) return false;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p <= ' ' || *p == 0x7f || *p == ':' || *p == ',' || *p == '/') return false;
  return true;
}

static bool bind_address_ok(const char *s) {
  if (strcmp(s, "0") == 0) return true;
  const char *colon = strrchr(s, ':');
  if (!colon || !colon[1] || strlen(colon + 1) > 5) return false;
  for (const char *p = colon + 1; *p; p++)
    if (*p < '0' || *p > '9') return false;
  if (atoi(colon + 1) > 65535) return false;
  size_t hl = (size_t)(colon - s);
  if (hl == 0) return true; /* ":9090": every address */
  char host[256];
  if (hl >= sizeof host) return false;
  memcpy(host, s, hl);
  host[hl] = '\0';
  unsigned char buf[16];
  if (host[0] == '[') {
    if (hl < 3 || host[hl - 1] != ']') return false;
    host[hl - 1] = '\0';
    return inet_pton(AF_INET6, host + 1, buf) == 1;
  }
  if (inet_pton(AF_INET, host, buf) == 1) return true;
  return dns_subdomain(host); /* e.g. localhost */
}

static void parse_metrics(struct ctx *c, const kc_yaml_node *n) {
  static const struct field table[] = {
      FIELD("bindAddress", F_STRING, kc_config, metrics_bind),
      FIELD("secure", F_BOOL, kc_config, metrics_secure),
      FIELD("certPath", F_PATH, kc_config, metrics_cert_path),
      FIELD("certName", F_STRING, kc_config, metrics_cert_name),
      FIELD("certKey", F_STRING, kc_config, metrics_cert_key),
      FIELD("debugQueues", F_BOOL, kc_config, metrics_debug_queues),
  };
  if (!cfg_apply_table(c, n, "metrics", table, sizeof table / sizeof table[0], c->cfg)) return;
  c->cfg->metrics_bind_set = kc_yaml_map_get(n, "bindAddress") != NULL;
  if (!c->cfg->metrics_bind_set && c->cfg->metrics_secure) c->cfg->metrics_bind = KC_DEFAULT_SECURE_METRICS_BIND;
  static const char *const names[] = {"certName", "certKey"};
  const char *vals[] = {c->cfg->metrics_cert_name, c->cfg->metrics_cert_key};
  for (size_t i = 0; i < 2; i++)
    if (!*vals[i] || strchr(vals[i], '/'))
      cfg_fail(c, cfg_blame(n, names[i]), "metrics.%s: expected a file name in certPath, got \"%s\"", names[i],
               vals[i]);
  if (!bind_address_ok(c->cfg->metrics_bind))
    cfg_fail(c, cfg_blame(n, "bindAddress"),
             "metrics.bindAddress: expected HOST:PORT, :PORT or \"0\" (disabled), got \"%s\"",
             c->cfg->metrics_bind);
}

static void parse_root(struct ctx *c, const kc_yaml_node *root) {
  static const struct field table[] = {
      FIELD("kubeconfig", F_PATH, kc_config, kubeconfig),
      CUSTOM("leaderElection"),
      CUSTOM("sharding"),
      CUSTOM("metrics"),
      FIELD("adminSocket", F_STRING, kc_config, admin_socket),
      FIELD("adminSocketGroup", F_STRING, kc_config, admin_socket_group),
      CUSTOM("logLevel"),
      CUSTOM("logFormat"),
      FIELD_RANGE("shutdownTimeout", F_DURATION, kc_config, shutdown_timeout_ms, 0, 3600000),
      FIELD_RANGE("decodeThreads", F_INT, kc_config, decode_threads, 0, 64),
      FIELD_RANGE("authFailureReadinessTimeout", F_DURATION, kc_config, auth_failure_readiness_ms, 0,
                  86400000),
      FIELD("dryRun", F_BOOL, kc_config, dry_run),
      FIELD("stateDirectory", F_PATH, kc_config, state_directory),
      FIELD_RANGE("snapshotMaxAge", F_DURATION, kc_config, snapshot_max_age_ms, 0, 7 * 86400000LL),
      CUSTOM("informers"),
      CUSTOM("controllers"),
  };
  kc_config *cfg = c->cfg;
  if (!root) {
    cfg_fail(c, NULL, "empty configuration (expected a mapping with informers: and controllers:)");
    return;
  }
  if (!cfg_apply_table(c, root, "config", table, sizeof table / sizeof table[0], cfg)) return;
  const kc_yaml_node *v;
  if ((v = kc_yaml_map_get(root, "leaderElection"))) parse_leader_election(c, v);
  if (!cfg->sharding.lease_namespace) cfg->sharding.lease_namespace = cfg->leader_election.namespace_;
  if ((v = kc_yaml_map_get(root, "sharding"))) cfg_parse_sharding(c, v, "sharding", &cfg->sharding);
  if ((v = kc_yaml_map_get(root, "metrics"))) parse_metrics(c, v);
  if (cfg->admin_socket && strcmp(cfg->admin_socket, "0") != 0 &&
      (cfg->admin_socket[0] != '/' || strlen(cfg->admin_socket) > KC_CONFIG_SOCKET_PATH_MAX))
    cfg_fail(c, kc_yaml_map_get(root, "adminSocket"),
             "adminSocket: expected an absolute path of at most %d bytes or \"0\" (off), got \"%s\"",
             KC_CONFIG_SOCKET_PATH_MAX, cfg->admin_socket);
  if (cfg->admin_socket_group && !kc_config_group_name_ok(cfg->admin_socket_group))
    cfg_fail(c, kc_yaml_map_get(root, "adminSocketGroup"),
             "adminSocketGroup: expected a group name (1-%d characters, no ':', ',', '/', space "
             "or control character), got \"%s\"",
             KC_CONFIG_GROUP_NAME_MAX, cfg->admin_socket_group);
  if ((v = kc_yaml_map_get(root, "logLevel"))) {
    const char *s;
    if (cfg_took(c, kc_yaml_get_string(v, "logLevel", &s, c->tmp, sizeof c->tmp)) &&
        kc_log_parse_level(s, &cfg->log_level) != 0)
      cfg_fail(c, v, "logLevel: expected error, warn, info or debug, got \"%s\"", s);
  }
  if ((v = kc_yaml_map_get(root, "logFormat"))) {
    const char *s;
    if (cfg_took(c, kc_yaml_get_string(v, "logFormat", &s, c->tmp, sizeof c->tmp)) &&
        kc_log_parse_format(s, &cfg->log_format) != 0)
      cfg_fail(c, v, "logFormat: expected text or json, got \"%s\"", s);
  }

  struct infvec iv = {0};
  if ((v = kc_yaml_map_get(root, "informers")) &&
      cfg_took(c, kc_yaml_expect(v, KC_YAML_SEQUENCE, "informers", c->tmp, sizeof c->tmp))) {
    for (size_t i = 0; i < v->u.seq.len; i++) {
      kc_informer_spec *inf = cfg_infvec_push(c, &iv);
      if (!inf) break;
      cfg_parse_informer(c, &v->u.seq.items[i], i, inf);
      for (size_t j = 0; j + 1 < iv.n; j++) {
        if (inf->identity && iv.v[j].identity && !strcmp(inf->identity, iv.v[j].identity)) {
          cfg_fail(c, inf->at, "informers[%zu]: watches the same scope as informers[%zu] (line %u)",
                   i, j, iv.v[j].at->line);
          break;
        }
        if (inf->name && iv.v[j].name && !strcmp(inf->name, iv.v[j].name)) {
          cfg_fail(c, kc_yaml_map_get(inf->at, "name"),
                   "informers[%zu].name: \"%s\" is already used by informers[%zu] (line %u)", i,
                   inf->name, j, iv.v[j].at->line);
          break;
        }
      }
    }
  }

  if ((v = kc_yaml_map_get(root, "controllers")) &&
      cfg_took(c, kc_yaml_expect(v, KC_YAML_SEQUENCE, "controllers", c->tmp, sizeof c->tmp)) &&
      v->u.seq.len) {
    kc_controller_spec *cts = cfg_xcalloc(c, v->u.seq.len, sizeof *cts);
    if (cts) {
      cfg->controllers = cts;
      cfg->ncontrollers = v->u.seq.len;
      for (size_t i = 0; i < v->u.seq.len; i++) {
        kc_controller_spec *ct = &cts[i];
        cfg_parse_controller(c, &v->u.seq.items[i], i, ct);
        for (size_t j = 0; j < i; j++)
          if (*ct->name && !strcmp(ct->name, cts[j].name)) {
            cfg_fail(c, kc_yaml_map_get(ct->at, "name"),
                     "controllers[%zu].name: \"%s\" is already used by controllers[%zu] (line %u)",
                     i, ct->name, j, cts[j].at->line);
            break;
          }
        for (size_t j = 0; ct->sharding.shards && j < i; j++)
          if (cts[j].sharding.shards && ct->sharding.lease_prefix && cts[j].sharding.lease_prefix &&
              !strcmp(ct->sharding.lease_prefix, cts[j].sharding.lease_prefix) &&
              !strcmp(ct->sharding.lease_namespace, cts[j].sharding.lease_namespace)) {
            const kc_yaml_node *own = kc_yaml_map_get(ct->at, "sharding");
            cfg_fail(c, cfg_shard_blame(own, cfg->sharding.at, "leasePrefix"),
                     "controllers[%zu].sharding.leasePrefix: \"%s\" is already used by "
                     "controllers[%zu] (line %u); give each sharded controller its own",
                     i, ct->sharding.lease_prefix, j, cts[j].at->line);
            break;
          }
        char w[160];
        snprintf(w, sizeof w, "controllers[%zu].for", i);
        cfg_bind_ref(c, &iv, &ct->for_, w);
        for (size_t k = 0; k < ct->nowns; k++) {
          snprintf(w, sizeof w, "controllers[%zu].owns[%zu]", i, k);
          cfg_bind_ref(c, &iv, (kc_kind_ref *)&ct->owns[k].ref, w);
        }
        for (size_t k = 0; k < ct->nwatches; k++) {
          kc_watch_spec *ws = (kc_watch_spec *)&ct->watches[k];
          snprintf(w, sizeof w, "controllers[%zu].watches[%zu]", i, k);
          cfg_bind_ref(c, &iv, &ws->ref, w);
          /* An index mapping looks up for-objects by the index, so the
           * index must exist on the informer of the `for` kind. */
          if (ws->mapping == KC_MAP_INDEX && ws->key && ct->for_.informer != SIZE_MAX &&
              ct->for_.informer < iv.n && !cfg_has_index(&iv.v[ct->for_.informer], ws->key)) {
            const kc_informer_spec *fi = &iv.v[ct->for_.informer];
            const kc_yaml_node *m = kc_yaml_map_get(ws->ref.at, "mapping");
            cfg_fail(c, kc_yaml_map_get(m, "index"),
                     "%s.mapping.index: the informer for %s %s has no index \"%s\"%s", w,
                     fi->api_version, fi->kind, ws->key,
                     fi->implicit ? " (list the kind under informers: with indexes:)" : "");
          }
        }
      }
    }
  }
  /* The vector may have moved while growing: keep the final array. */
  if (iv.n) {
    if (!cfg_keep(c, iv.v)) return;
    cfg->informers = iv.v;
    cfg->ninformers = iv.n;
  } else {
    free(iv.v);
  }
}

static void config_set_defaults(kc_config *cfg) {
  cfg->leader_election.enabled = false;
  cfg->leader_election.namespace_ = "kube-system";
  cfg->leader_election.name = "kctrld";
  cfg->leader_election.lease_duration_ms = KC_DEFAULT_LEASE_DURATION_MS;
  cfg->leader_election.renew_deadline_ms = KC_DEFAULT_RENEW_DEADLINE_MS;
  cfg->leader_election.retry_period_ms = KC_DEFAULT_RETRY_PERIOD_MS;
  cfg->sharding = (kc_sharding_spec){
      .key = KC_SHARD_KEY_UID,
      .lease_duration_ms = KC_DEFAULT_LEASE_DURATION_MS,
      .renew_deadline_ms = KC_DEFAULT_RENEW_DEADLINE_MS,
      .retry_period_ms = KC_DEFAULT_RETRY_PERIOD_MS,
  };
  cfg->metrics_bind = KC_DEFAULT_METRICS_BIND;
  cfg->metrics_cert_name = KC_DEFAULT_METRICS_CERT_NAME;
  cfg->metrics_cert_key = KC_DEFAULT_METRICS_CERT_KEY;
  cfg->log_level = KC_LOG_INFO;
  cfg->log_format = KC_LOG_FORMAT_TEXT;
  cfg->shutdown_timeout_ms = KC_DEFAULT_SHUTDOWN_TIMEOUT_MS;
  cfg->decode_threads = -1;
  cfg->auth_failure_readiness_ms = KC_DEFAULT_AUTH_FAILURE_READINESS_MS;
  cfg->snapshot_max_age_ms = KC_DEFAULT_SNAPSHOT_MAX_AGE_MS;
}

void kc_config_free(kc_config *cfg) {
  if (!cfg) return;
  struct config_priv *pv = (struct config_priv *)cfg;
  kc_yaml_free(cfg->doc);
  for (size_t i = 0; i < pv->nallocs; i++) free(pv->allocs[i]);
  free(pv->allocs);
  free(pv);
}

/* Builds the config from a loaded document; takes ownership of doc. */
static int config_from_doc(kc_yaml_doc *doc, const char *dir, kc_config **out, char *err,
                           size_t errlen) {
  struct config_priv *pv = calloc(1, sizeof *pv);
  if (!pv) {
    kc_yaml_free(doc);
    return -ENOMEM;
  }
  struct ctx c = {.priv = pv, .cfg = &pv->pub, .err = err, .errlen = errlen};
  if (err && errlen) err[0] = '\0';
  kc_config *cfg = &pv->pub;
  cfg->doc = doc;
  cfg->file = kc_yaml_file(doc);
  config_set_defaults(cfg);
  if (dir) {
    cfg->dir = cfg_xstrdup(&c, dir);
  } else {
    char *cwd = getcwd(NULL, 0);
    cfg->dir = cwd ? cfg_keep(&c, cwd) : NULL;
  }
  if (!c.oom) parse_root(&c, kc_yaml_root(doc));
  if (c.oom) {
    kc_config_free(cfg);
    return -ENOMEM;
  }
  if (c.nerrors) {
    if (c.nerrors > KC_CONFIG_MAX_ERRORS) {
      char more[64];
      snprintf(more, sizeof more, "... and %d more errors", c.nerrors - KC_CONFIG_MAX_ERRORS);
      c.nerrors = 0; /* let add_line append this last one */
      add_line(&c, more);
    }
    kc_config_free(cfg);
    return -EINVAL;
  }
  *out = cfg;
  return 0;
}

int kc_config_load_buffer(const char *name, const char *dir, const char *buf, size_t len,
                          kc_config **out, char *err, size_t errlen) {
  *out = NULL;
  kc_yaml_doc *doc = NULL;
  int rc = kc_yaml_load_buffer(name, buf, len, &doc, err, errlen);
  if (rc) return rc;
  return config_from_doc(doc, dir, out, err, errlen);
}

int kc_config_load_file(const char *path, kc_config **out, char *err, size_t errlen) {
  *out = NULL;
  kc_yaml_doc *doc = NULL;
  /* A config others can write can re-point the daemon's credentials. */
  int rc = kc_fileperm_check_path("config file", path,
                                  "use settings others can change (kubeconfig, plugins)", 0, err,
                                  errlen);
  if (rc < 0 && rc != -ENOENT) return rc;
  rc = kc_yaml_load_file(path, &doc, err, errlen);
  if (rc) return rc;
  /* Relative paths resolve against the file's directory, made absolute so
   * a later chdir does not change their meaning. */
  char *copy = strdup(path);
  if (!copy) {
    kc_yaml_free(doc);
    return -ENOMEM;
  }
  char *slash = strrchr(copy, '/');
  const char *d = ".";
  if (slash == copy) d = "/";
  else if (slash) {
    *slash = '\0';
    d = copy;
  }
  char *abs = realpath(d, NULL);
  rc = config_from_doc(doc, abs ? abs : d, out, err, errlen);
  free(abs);
  free(copy);
  return rc;
}

ssize_t kc_config_find_informer(const kc_config *cfg, const char *identity) {
  for (size_t i = 0; i < cfg->ninformers; i++)
    if (strcmp(cfg->informers[i].identity, identity) == 0) return (ssize_t)i;
  return -1;
}

ssize_t kc_config_find_controller(const kc_config *cfg, const char *name) {
  for (size_t i = 0; i < cfg->ncontrollers; i++)
    if (strcmp(cfg->controllers[i].name, name) == 0) return (ssize_t)i;
  return -1;
}
