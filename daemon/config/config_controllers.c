/* SPDX-License-Identifier: Apache-2.0 */
/* config_controllers: the `controllers:` entries of the configuration
 * (plugin or hook, isolation, for/owns/watches with their mappings and
 * predicates, workers, timeouts, rate limit, settings) and the `sharding:`
 * sections, global and per controller, with their lease timing checks. Called only from the
 * loader in config.c, on the thread that loads the config. */
#include "config/config.h"
#include "config/config_int.h"

#include "json/jsonpath.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- controllers -------------------------------------------------------- */

static const struct {
  const char *name;
  unsigned bit;
} predicate_names[] = {
    {"GenerationChanged", KC_PRED_GENERATION_CHANGED},
    {"LabelsChanged", KC_PRED_LABELS_CHANGED},
    {"AnnotationsChanged", KC_PRED_ANNOTATIONS_CHANGED},
    {"ResourceVersionChanged", KC_PRED_RESOURCE_VERSION_CHANGED},
    {"DeletionStarted", KC_PRED_DELETION_STARTED},
    {"OwnerReferencesChanged", KC_PRED_OWNER_REFERENCES_CHANGED},
    {"FinalizersChanged", KC_PRED_FINALIZERS_CHANGED},
};

static unsigned parse_predicates(struct ctx *c, const kc_yaml_node *n, const char *what) {
  const char **v = NULL;
  size_t cnt = 0;
  unsigned bits = 0;
  if (!cfg_took(c, kc_yaml_get_string_list(n, what, &v, &cnt, c->tmp, sizeof c->tmp))) return 0;
  for (size_t i = 0; i < cnt; i++) {
    unsigned bit = 0;
    for (size_t j = 0; j < sizeof predicate_names / sizeof predicate_names[0]; j++)
      if (strcmp(v[i], predicate_names[j].name) == 0) bit = predicate_names[j].bit;
    if (!bit)
      cfg_fail(c, &n->u.seq.items[i],
               "%s[%zu]: unknown predicate \"%s\" (known: GenerationChanged, LabelsChanged, "
               "AnnotationsChanged, ResourceVersionChanged, DeletionStarted, "
               "OwnerReferencesChanged, FinalizersChanged)",
               what, i, v[i]);
    else if (bits & bit)
      cfg_fail(c, &n->u.seq.items[i], "%s[%zu]: \"%s\" is listed twice", what, i, v[i]);
    bits |= bit;
  }
  free(v);
  return bits;
}

/* Reads apiVersion/kind/informer of a kind reference whose other keys the
 * caller's table already declared. */
static void parse_kind_ref(struct ctx *c, const kc_yaml_node *n, const char *what,
                           kc_kind_ref *ref, const struct field *extra, size_t nextra) {
  struct field t[8] = {
      REQUIRED("apiVersion", F_STRING, kc_kind_ref, api_version),
      REQUIRED("kind", F_STRING, kc_kind_ref, kind),
      FIELD("informer", F_STRING, kc_kind_ref, informer_name),
  };
  size_t nt = 3;
  for (size_t i = 0; i < nextra && nt < 8; i++) {
    t[nt] = extra[i];
    t[nt].type = F_CUSTOM; /* the caller applies those */
    nt++;
  }
  ref->at = n;
  ref->api_version = "";
  ref->kind = "";
  ref->informer = SIZE_MAX;
  if (!cfg_apply_table(c, n, what, t, nt, ref)) return;
  if (*ref->api_version && !cfg_api_version_ok(ref->api_version))
    cfg_fail(c, kc_yaml_map_get(n, "apiVersion"),
             "%s.apiVersion: \"%s\" is not of the form VERSION or GROUP/VERSION", what,
             ref->api_version);
  if (*ref->kind && !cfg_kind_ok(ref->kind))
    cfg_fail(c, kc_yaml_map_get(n, "kind"), "%s.kind: \"%s\" is not a kind (e.g. Pod, Deployment)",
             what, ref->kind);
}

static void parse_watch(struct ctx *c, const kc_yaml_node *n, const char *what,
                        kc_watch_spec *ws) {
  static const struct field extra[] = {CUSTOM("mapping"), CUSTOM("predicates")};
  parse_kind_ref(c, n, what, &ws->ref, extra, 2);
  if (!n || n->type != KC_YAML_MAPPING) return;
  const kc_yaml_node *m = kc_yaml_map_get(n, "mapping");
  char w[200];
  snprintf(w, sizeof w, "%s.mapping", what);
  if (!m) {
    cfg_fail(c, n, "%s: missing required key \"mapping\"", what);
  } else if (cfg_took(c, kc_yaml_expect(m, KC_YAML_MAPPING, w, c->tmp, sizeof c->tmp))) {
    static const char *const mkeys[] = {"label", "annotation", "field", "index"};
    int before = c->nerrors;
    cfg_check_keys(c, m, mkeys, 4, w);
    if (c->nerrors == before) {
      if (m->u.map.len != 1) {
        cfg_fail(c, m, "%s: needs exactly one of label, annotation, field, index", w);
      } else {
        const kc_yaml_pair *p = &m->u.map.pairs[0];
        const char *k = p->key.u.scalar.text;
        char kw[220];
        snprintf(kw, sizeof kw, "%s.%s", w, k);
        ws->mapping = !strcmp(k, "label")        ? KC_MAP_LABEL
                      : !strcmp(k, "annotation") ? KC_MAP_ANNOTATION
                      : !strcmp(k, "field")      ? KC_MAP_FIELD
                                                 : KC_MAP_INDEX;
        if (cfg_took(c, kc_yaml_get_string(&p->value, kw, &ws->key, c->tmp, sizeof c->tmp))) {
          const char *why = NULL;
          if ((ws->mapping == KC_MAP_LABEL || ws->mapping == KC_MAP_ANNOTATION) &&
              !kc_name_is_qualified(ws->key, strlen(ws->key)))
            why = "not a valid label/annotation key ([prefix/]name)";
          else if (ws->mapping == KC_MAP_FIELD)
            why = kc_path_problem(ws->key, true);
          else if (ws->mapping == KC_MAP_INDEX && !cfg_simple_name(ws->key, 63))
            why = "not a valid index name";
          if (why) cfg_fail(c, &p->value, "%s: %s", kw, why);
        }
      }
    }
  }
  const kc_yaml_node *pr = kc_yaml_map_get(n, "predicates");
  if (pr) {
    snprintf(w, sizeof w, "%s.predicates", what);
    ws->predicates = parse_predicates(c, pr, w);
  }
}

/* `updateStrategy: InPlace | Recreate` at n (of map `in`, named what):
 * true and *out when written, false when absent or refused (reported). */
static bool parse_update_strategy(struct ctx *c, const kc_yaml_node *in, const char *what,
                                  enum kc_update_strategy *out) {
  const kc_yaml_node *v = kc_yaml_map_get(in, "updateStrategy");
  if (!v) return false;
  char w[220];
  snprintf(w, sizeof w, "%s.updateStrategy", what);
  const char *m;
  if (!cfg_took(c, kc_yaml_get_string(v, w, &m, c->tmp, sizeof c->tmp))) return false;
  if (strcmp(m, "InPlace") == 0) *out = KC_UPDATE_IN_PLACE;
  else if (strcmp(m, "Recreate") == 0) *out = KC_UPDATE_RECREATE;
  else {
    cfg_fail(c, v, "%s: must be InPlace or Recreate, not \"%s\"", w, m);
    return false;
  }
  return true;
}

/* Set by parse_owns: the item's updateStrategy was written (else the
 * controller's applies, filled in by cfg_parse_controller). */
#define OWNS_STRATEGY_UNSET ((enum kc_update_strategy)-1)

static void parse_owns(struct ctx *c, const kc_yaml_node *n, const char *what, kc_owns_spec *os) {
  static const struct field extra[] = {CUSTOM("predicates"), CUSTOM("updateStrategy")};
  parse_kind_ref(c, n, what, &os->ref, extra, 2);
  const kc_yaml_node *pr = kc_yaml_map_get(n, "predicates");
  if (pr) {
    char w[200];
    snprintf(w, sizeof w, "%s.predicates", what);
    os->predicates = parse_predicates(c, pr, w);
  }
  if (n->type != KC_YAML_MAPPING || !parse_update_strategy(c, n, what, &os->update_strategy))
    os->update_strategy = OWNS_STRATEGY_UNSET;
}

/* One parser of list items, for parse_items. */
typedef void (*item_parser)(struct ctx *c, const kc_yaml_node *n, const char *what, void *out);

static void owns_item(struct ctx *c, const kc_yaml_node *n, const char *what, void *out) {
  parse_owns(c, n, what, out);
}

static void watch_item(struct ctx *c, const kc_yaml_node *n, const char *what, void *out) {
  parse_watch(c, n, what, out);
}

/* The optional sequence `key` of map n (named what): each item, named
 * what.key[i], parsed by `each` into an owned array of `size`-byte items.
 * Returns the array and its length in *count; NULL when the key is absent,
 * empty or not a sequence (reported). */
static void *parse_items(struct ctx *c, const kc_yaml_node *n, const char *what, const char *key,
                         size_t size, item_parser each, size_t *count) {
  const kc_yaml_node *v = kc_yaml_map_get(n, key);
  if (!v) return NULL;
  char w[160];
  snprintf(w, sizeof w, "%s.%s", what, key);
  if (!cfg_took(c, kc_yaml_expect(v, KC_YAML_SEQUENCE, w, c->tmp, sizeof c->tmp)) || !v->u.seq.len)
    return NULL;
  char *items = cfg_xcalloc(c, v->u.seq.len, size);
  if (!items) return NULL;
  for (size_t i = 0; i < v->u.seq.len; i++) {
    snprintf(w, sizeof w, "%s.%s[%zu]", what, key, i);
    each(c, &v->u.seq.items[i], w, items + i * size);
  }
  *count = v->u.seq.len;
  return items;
}


/* ---- sharding ------------------------------------------------------------------ */

/* `sharding:` over *sh, which holds the defaults or the inherited values. */
void cfg_parse_sharding(struct ctx *c, const kc_yaml_node *n, const char *what,
                        kc_sharding_spec *sh) {
  static const struct field table[] = {
      FIELD_RANGE("shards", F_INT, kc_sharding_spec, shards, 0, KC_MAX_SHARDS),
      CUSTOM("key"),
      FIELD("leaseNamespace", F_STRING, kc_sharding_spec, lease_namespace),
      FIELD("leasePrefix", F_STRING, kc_sharding_spec, lease_prefix),
      FIELD_RANGE("leaseDuration", F_DURATION, kc_sharding_spec, lease_duration_ms, 1, 86400000),
      FIELD_RANGE("renewDeadline", F_DURATION, kc_sharding_spec, renew_deadline_ms, 1, 86400000),
      FIELD_RANGE("retryPeriod", F_DURATION, kc_sharding_spec, retry_period_ms, 1, 86400000),
  };
  sh->at = n;
  if (!cfg_apply_table(c, n, what, table, sizeof table / sizeof table[0], sh)) return;
  const kc_yaml_node *v = kc_yaml_map_get(n, "key");
  char w[200];
  snprintf(w, sizeof w, "%s.key", what);
  const char *k;
  if (v && cfg_took(c, kc_yaml_get_string(v, w, &k, c->tmp, sizeof c->tmp))) {
    if (strcmp(k, "metadata.uid") == 0) sh->key = KC_SHARD_KEY_UID;
    else if (strcmp(k, "metadata.namespace") == 0) sh->key = KC_SHARD_KEY_NAMESPACE;
    else cfg_fail(c, v, "%s: expected metadata.uid or metadata.namespace, got \"%s\"", w, k);
  }
}

/* The node to blame for key: where it was written (the controller's
 * section, then the global one), else the controller's section. */
const kc_yaml_node *cfg_shard_blame(const kc_yaml_node *own, const kc_yaml_node *global,
                                    const char *key) {
  if (own && kc_yaml_map_get(own, key)) return kc_yaml_map_get(own, key);
  if (global && kc_yaml_map_get(global, key)) return kc_yaml_map_get(global, key);
  return own ? own : global;
}

static bool written(const kc_yaml_node *own, const kc_yaml_node *global, const char *key) {
  return (own && kc_yaml_map_get(own, key)) || (global && kc_yaml_map_get(global, key));
}

/* Room a Lease name needs beyond the prefix: "-member-" + 16 hex digits
 * (sharding.h names the membership Leases so). */
#define SHARD_NAME_SUFFIX_MAX 24

/* Checks the effective settings of one sharded controller. */
static void check_sharding(struct ctx *c, const kc_sharding_spec *sh, const kc_yaml_node *own,
                           const char *what) {
  const kc_yaml_node *g = c->cfg->sharding.at;
  if (!dns_label(sh->lease_namespace))
    cfg_fail(c, cfg_shard_blame(own, g, "leaseNamespace"),
             "%s.leaseNamespace: \"%s\" is not a valid namespace", what, sh->lease_namespace);
  if (!dns_subdomain(sh->lease_prefix) ||
      strlen(sh->lease_prefix) + SHARD_NAME_SUFFIX_MAX > 253)
    cfg_fail(c, cfg_shard_blame(own, g, "leasePrefix"),
             "%s.leasePrefix: \"%s\" is not a valid Lease name prefix (a DNS subdomain of at most "
             "%d characters)",
             what, sh->lease_prefix, 253 - SHARD_NAME_SUFFIX_MAX);
  char a[32], b[32];
  if (sh->lease_duration_ms <= sh->renew_deadline_ms)
    cfg_fail(c,
             cfg_shard_blame(own, g,
                             written(own, g, "renewDeadline") ? "renewDeadline" : "leaseDuration"),
             "%s: leaseDuration (%s) must be greater than renewDeadline (%s)", what,
             cfg_fmt_ms(sh->lease_duration_ms, a, sizeof a),
             cfg_fmt_ms(sh->renew_deadline_ms, b, sizeof b));
  else if (sh->renew_deadline_ms * 5 <= sh->retry_period_ms * 6)
    cfg_fail(
        c,
        cfg_shard_blame(own, g, written(own, g, "retryPeriod") ? "retryPeriod" : "renewDeadline"),
        "%s: renewDeadline (%s) must be greater than 1.2 x retryPeriod (%s)", what,
        cfg_fmt_ms(sh->renew_deadline_ms, a, sizeof a),
        cfg_fmt_ms(sh->retry_period_ms, b, sizeof b));
}

/* A controller's effective sharding: the global settings, its own on top,
 * and the default prefix "kctrld-<name>" (lowercase, '_' as '-'). */
static void controller_sharding(struct ctx *c, const kc_yaml_node *n, const char *what,
                                kc_controller_spec *ct) {
  ct->sharding = c->cfg->sharding;
  const kc_yaml_node *v = kc_yaml_map_get(n, "sharding");
  char w[160];
  snprintf(w, sizeof w, "%s.sharding", what);
  if (v) cfg_parse_sharding(c, v, w, &ct->sharding);
  if (!ct->sharding.shards) return;
  if (!ct->sharding.lease_prefix) {
    size_t len = strlen(ct->name) + 8;
    char *p = cfg_xcalloc(c, len, 1);
    if (!p) return;
    snprintf(p, len, "kctrld-%s", ct->name);
    for (char *q = p; *q; q++) {
      if (*q >= 'A' && *q <= 'Z') *q = (char)(*q - 'A' + 'a');
      else if (*q == '_') *q = '-';
    }
    ct->sharding.lease_prefix = p;
  }
  check_sharding(c, &ct->sharding, v, w);
}

void cfg_parse_controller(struct ctx *c, const kc_yaml_node *n, size_t idx,
                          kc_controller_spec *ct) {
  static const struct field table[] = {
      REQUIRED("name", F_STRING, kc_controller_spec, name),
      FIELD("plugin", F_PATH, kc_controller_spec, plugin),
      CUSTOM("hook"),
      CUSTOM("isolation"),
      CUSTOM("for"),
      CUSTOM("owns"),
      CUSTOM("watches"),
      FIELD_RANGE("workers", F_INT, kc_controller_spec, workers, 1, 1024),
      FIELD_RANGE("reconcileTimeout", F_DURATION, kc_controller_spec, reconcile_timeout_ms, 1,
                  86400000),
      FIELD("readYourOwnWrites", F_BOOL, kc_controller_spec, read_your_own_writes),
      CUSTOM("rateLimit"),
      CUSTOM("predicates"),
      CUSTOM("sharding"),
      FIELD("dryRun", F_BOOL, kc_controller_spec, dry_run),
      CUSTOM("settings"),
      CUSTOM("finalizer"),
      CUSTOM("updateStrategy"),
  };
  static const struct field rl_table[] = {
      FIELD_RANGE("baseDelay", F_DURATION, kc_rate_limit, base_delay_ms, 1, 86400000),
      FIELD_RANGE("maxDelay", F_DURATION, kc_rate_limit, max_delay_ms, 1, 30LL * 86400000),
      {.key = "qps", .type = F_DOUBLE, .off = offsetof(kc_rate_limit, qps), .dmin = 0.001,
       .dmax = 1e6},
      FIELD_RANGE("burst", F_INT, kc_rate_limit, burst, 1, 1000000),
  };
  char what[64], w[160];
  snprintf(what, sizeof what, "controllers[%zu]", idx);
  memset(ct, 0, sizeof *ct);
  ct->at = n;
  ct->name = "";
  ct->plugin = "";
  ct->workers = KC_DEFAULT_WORKERS;
  ct->reconcile_timeout_ms = KC_DEFAULT_RECONCILE_TIMEOUT_MS;
  ct->read_your_own_writes = true;
  ct->rate_limit.base_delay_ms = KC_DEFAULT_BASE_DELAY_MS;
  ct->rate_limit.max_delay_ms = KC_DEFAULT_MAX_DELAY_MS;
  ct->rate_limit.qps = KC_DEFAULT_QPS;
  ct->rate_limit.burst = KC_DEFAULT_BURST;
  ct->for_.informer = SIZE_MAX;
  ct->for_.api_version = "";
  ct->for_.kind = "";
  ct->dry_run = c->cfg->dry_run; /* the top-level key (parsed before the controllers) */
  if (!cfg_apply_table(c, n, what, table, sizeof table / sizeof table[0], ct)) return;
  const kc_yaml_node *hook = kc_yaml_map_get(n, "hook");
  if (hook && kc_yaml_map_get(n, "plugin"))
    cfg_fail(c, hook, "%s: give either \"plugin\" or \"hook\", not both", what);
  else if (hook)
    ct->hook = cfg_parse_hook(c, hook, what);
  else if (!kc_yaml_map_get(n, "plugin"))
    cfg_fail(c, n, "%s: missing required key \"plugin\" (or \"hook\")", what);
  const kc_yaml_node *iso = kc_yaml_map_get(n, "isolation");
  if (iso) {
    snprintf(w, sizeof w, "%s.isolation", what);
    const char *m;
    if (cfg_took(c, kc_yaml_get_string(iso, w, &m, c->tmp, sizeof c->tmp))) {
      if (strcmp(m, "in-process") == 0)
        ct->isolation = KC_ISOLATION_IN_PROCESS;
      else if (strcmp(m, "process") == 0)
        ct->isolation = KC_ISOLATION_PROCESS;
      else
        cfg_fail(c, iso, "%s: must be in-process or process, not \"%s\"", w, m);
      if (hook && ct->isolation == KC_ISOLATION_PROCESS)
        cfg_fail(c, iso, "%s: only a plugin runs in a process of its own (a hook is one already)",
                 w);
    }
  }
  if (*ct->name && !cfg_simple_name(ct->name, 63))
    cfg_fail(c, kc_yaml_map_get(n, "name"), "%s.name: must be 1-63 characters of [A-Za-z0-9._-]",
             what);

  const kc_yaml_node *v = kc_yaml_map_get(n, "for");
  snprintf(w, sizeof w, "%s.for", what);
  if (!v) cfg_fail(c, n, "%s: missing required key \"for\"", what);
  else parse_kind_ref(c, v, w, &ct->for_, NULL, 0);

  parse_update_strategy(c, n, what, &ct->update_strategy);
  ct->owns = parse_items(c, n, what, "owns", sizeof *ct->owns, owns_item, &ct->nowns);
  for (size_t i = 0; ct->owns && i < ct->nowns; i++) {
    kc_owns_spec *os = (kc_owns_spec *)&ct->owns[i];
    if (os->update_strategy == OWNS_STRATEGY_UNSET) os->update_strategy = ct->update_strategy;
  }
  if ((v = kc_yaml_map_get(n, "finalizer"))) {
    snprintf(w, sizeof w, "%s.finalizer", what);
    const char *f;
    if (cfg_took(c, kc_yaml_get_string(v, w, &f, c->tmp, sizeof c->tmp))) {
      /* The API server takes only a qualified name (kname.h), and the
       * daemon's finalizer patches rely on it. */
      if (!kc_name_is_qualified(f, strlen(f)) || !strchr(f, '/'))
        cfg_fail(c, v, "%s: \"%s\" is not a domain-qualified finalizer name (e.g. example.com/cleanup)",
                 w, f);
      else
        ct->finalizer = cfg_xstrdup(c, f);
    }
  }
  ct->watches = parse_items(c, n, what, "watches", sizeof *ct->watches, watch_item, &ct->nwatches);
  if ((v = kc_yaml_map_get(n, "rateLimit"))) {
    snprintf(w, sizeof w, "%s.rateLimit", what);
    if (cfg_apply_table(c, v, w, rl_table, sizeof rl_table / sizeof rl_table[0], &ct->rate_limit) &&
        ct->rate_limit.base_delay_ms > ct->rate_limit.max_delay_ms) {
      char a[32], b[32];
      cfg_fail(c, cfg_blame(v, "baseDelay"), "%s: baseDelay (%s) must not exceed maxDelay (%s)", w,
               cfg_fmt_ms(ct->rate_limit.base_delay_ms, a, sizeof a),
               cfg_fmt_ms(ct->rate_limit.max_delay_ms, b, sizeof b));
    }
  }
  if ((v = kc_yaml_map_get(n, "predicates"))) {
    snprintf(w, sizeof w, "%s.predicates", what);
    ct->predicates = parse_predicates(c, v, w);
  }
  controller_sharding(c, n, what, ct);
  ct->settings = kc_yaml_map_get(n, "settings");
}
