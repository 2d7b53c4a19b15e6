/* SPDX-License-Identifier: Apache-2.0 */
/* config_reload: the comparison of two loaded configs for live reload
 * (kc_config_compare, config.h): which informers and controllers were
 * added, removed, kept or changed and in which fields, and the one-line
 * summary the daemon logs. Reads two immutable configs and touches no
 * shared state; any thread may call it. */
#include "config/config.h"

#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- diff ------------------------------------------------------------------ */

static bool str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

static unsigned informer_fields(const kc_informer_spec *a, const kc_informer_spec *b) {
  unsigned f = 0;
  if (!str_eq(a->name, b->name)) f |= KC_INF_NAME;
  if (a->resync_ms != b->resync_ms) f |= KC_INF_RESYNC;
  bool ix = a->nindexes == b->nindexes;
  for (size_t i = 0; ix && i < a->nindexes; i++) {
    const kc_index_spec *x = &a->indexes[i], *y = &b->indexes[i];
    ix = str_eq(x->name, y->name) && x->npaths == y->npaths;
    /* The paths of one index are unique and their order does not matter
     * (the index is their union): compare as sets. */
    for (size_t p = 0; ix && p < x->npaths; p++) {
      bool found = false;
      for (size_t q = 0; !found && q < y->npaths; q++) found = str_eq(x->paths[p], y->paths[q]);
      ix = found;
    }
  }
  if (!ix) f |= KC_INF_INDEXES;
  if (a->page_size != b->page_size || a->watch_timeout_ms != b->watch_timeout_ms ||
      a->watch_inactivity_ms != b->watch_inactivity_ms || a->streaming_list != b->streaming_list)
    f |= KC_INF_WATCH_OPTIONS;
  if (a->implicit != b->implicit) f |= KC_INF_IMPLICIT;
  return f;
}

static bool ref_eq(const kc_kind_ref *a, const kc_kind_ref *b) {
  return str_eq(a->api_version, b->api_version) && str_eq(a->kind, b->kind) &&
         str_eq(a->informer_name, b->informer_name);
}

static bool ref_scope_eq(const kc_config *oc, const kc_kind_ref *a, const kc_config *nc,
                         const kc_kind_ref *b) {
  return str_eq(oc->informers[a->informer].identity, nc->informers[b->informer].identity);
}

static unsigned controller_fields(const kc_config *oc, const kc_controller_spec *a,
                                  const kc_config *nc, const kc_controller_spec *b) {
  unsigned f = 0;
  if (!str_eq(a->plugin, b->plugin) || a->isolation != b->isolation) f |= KC_CTL_PLUGIN;
  if (!kc_yaml_equal(a->hook ? a->hook->at : NULL, b->hook ? b->hook->at : NULL)) f |= KC_CTL_HOOK;
  if (!kc_yaml_equal(a->settings, b->settings)) f |= KC_CTL_SETTINGS;
  if (!ref_eq(&a->for_, &b->for_)) f |= KC_CTL_FOR;
  bool eq = a->nowns == b->nowns;
  for (size_t i = 0; eq && i < a->nowns; i++)
    eq = ref_eq(&a->owns[i].ref, &b->owns[i].ref) && a->owns[i].predicates == b->owns[i].predicates;
  if (!eq) f |= KC_CTL_OWNS;
  eq = str_eq(a->finalizer, b->finalizer) && a->update_strategy == b->update_strategy;
  for (size_t i = 0; eq && i < a->nowns && i < b->nowns; i++)
    eq = a->owns[i].update_strategy == b->owns[i].update_strategy;
  if (!eq) f |= KC_CTL_CHILDREN;
  eq = a->nwatches == b->nwatches;
  for (size_t i = 0; eq && i < a->nwatches; i++)
    eq = ref_eq(&a->watches[i].ref, &b->watches[i].ref) &&
         a->watches[i].mapping == b->watches[i].mapping &&
         str_eq(a->watches[i].key, b->watches[i].key) &&
         a->watches[i].predicates == b->watches[i].predicates;
  if (!eq) f |= KC_CTL_WATCHES;
  if (a->workers != b->workers) f |= KC_CTL_WORKERS;
  if (a->reconcile_timeout_ms != b->reconcile_timeout_ms) f |= KC_CTL_TIMEOUT;
  if (a->read_your_own_writes != b->read_your_own_writes) f |= KC_CTL_READ_OWN_WRITES;
  if (a->rate_limit.base_delay_ms != b->rate_limit.base_delay_ms ||
      a->rate_limit.max_delay_ms != b->rate_limit.max_delay_ms ||
      a->rate_limit.qps != b->rate_limit.qps || a->rate_limit.burst != b->rate_limit.burst)
    f |= KC_CTL_RATE_LIMIT;
  if (a->predicates != b->predicates) f |= KC_CTL_PREDICATES;
  if (a->dry_run != b->dry_run) f |= KC_CTL_DRY_RUN;
  const kc_sharding_spec *sa = &a->sharding, *sb = &b->sharding;
  if (sa->shards != sb->shards ||
      (sa->shards && (sa->key != sb->key || !str_eq(sa->lease_namespace, sb->lease_namespace) ||
                      !str_eq(sa->lease_prefix, sb->lease_prefix) ||
                      sa->lease_duration_ms != sb->lease_duration_ms ||
                      sa->renew_deadline_ms != sb->renew_deadline_ms ||
                      sa->retry_period_ms != sb->retry_period_ms)))
    f |= KC_CTL_SHARDING;
  /* Same references, but does each still land on the same scope? */
  if (!(f & (KC_CTL_FOR | KC_CTL_OWNS | KC_CTL_WATCHES))) {
    bool same = ref_scope_eq(oc, &a->for_, nc, &b->for_);
    for (size_t i = 0; same && i < a->nowns; i++)
      same = ref_scope_eq(oc, &a->owns[i].ref, nc, &b->owns[i].ref);
    for (size_t i = 0; same && i < a->nwatches; i++)
      same = ref_scope_eq(oc, &a->watches[i].ref, nc, &b->watches[i].ref);
    if (!same) f |= KC_CTL_INFORMERS;
  }
  return f;
}

static bool push_change(kc_config_change **v, size_t *n, enum kc_change ch, ssize_t oi,
                        ssize_t ni, unsigned fields) {
  kc_config_change *nv = realloc(*v, (*n + 1) * sizeof *nv);
  if (!nv) return false;
  *v = nv;
  nv[*n] = (kc_config_change){.change = ch, .old_index = oi, .new_index = ni, .fields = fields};
  (*n)++;
  return true;
}

int kc_config_compare(const kc_config *oc, const kc_config *nc, kc_config_diff **out) {
  *out = NULL;
  kc_config_diff *d = calloc(1, sizeof *d);
  if (!d) return -ENOMEM;
  bool ok = true;
  for (size_t i = 0; ok && i < oc->ninformers; i++)
    if (kc_config_find_informer(nc, oc->informers[i].identity) < 0)
      ok = push_change(&d->informers, &d->ninformers, KC_CHANGE_REMOVED, (ssize_t)i, -1, 0);
  for (size_t i = 0; ok && i < nc->ninformers; i++) {
    ssize_t oi = kc_config_find_informer(oc, nc->informers[i].identity);
    if (oi < 0) {
      ok = push_change(&d->informers, &d->ninformers, KC_CHANGE_ADDED, -1, (ssize_t)i, 0);
    } else {
      unsigned f = informer_fields(&oc->informers[oi], &nc->informers[i]);
      if (f) ok = push_change(&d->informers, &d->ninformers, KC_CHANGE_CHANGED, oi, (ssize_t)i, f);
    }
  }
  for (size_t i = 0; ok && i < oc->ncontrollers; i++)
    if (kc_config_find_controller(nc, oc->controllers[i].name) < 0)
      ok = push_change(&d->controllers, &d->ncontrollers, KC_CHANGE_REMOVED, (ssize_t)i, -1, 0);
  for (size_t i = 0; ok && i < nc->ncontrollers; i++) {
    ssize_t oi = kc_config_find_controller(oc, nc->controllers[i].name);
    if (oi < 0) {
      ok = push_change(&d->controllers, &d->ncontrollers, KC_CHANGE_ADDED, -1, (ssize_t)i, 0);
    } else {
      unsigned f = controller_fields(oc, &oc->controllers[oi], nc, &nc->controllers[i]);
      if (f)
        ok = push_change(&d->controllers, &d->ncontrollers, KC_CHANGE_CHANGED, oi, (ssize_t)i, f);
    }
  }
  if (!ok) {
    kc_config_diff_free(d);
    return -ENOMEM;
  }
  if (!str_eq(oc->kubeconfig, nc->kubeconfig)) d->global |= KC_GLOBAL_KUBECONFIG;
  const kc_leader_election *a = &oc->leader_election, *b = &nc->leader_election;
  if (a->enabled != b->enabled || !str_eq(a->namespace_, b->namespace_) ||
      !str_eq(a->name, b->name) || !str_eq(a->identity, b->identity) ||
      a->lease_duration_ms != b->lease_duration_ms ||
      a->renew_deadline_ms != b->renew_deadline_ms || a->retry_period_ms != b->retry_period_ms)
    d->global |= KC_GLOBAL_LEADER_ELECTION;
  if (!str_eq(oc->metrics_bind, nc->metrics_bind) || oc->metrics_secure != nc->metrics_secure ||
      !str_eq(oc->metrics_cert_path, nc->metrics_cert_path) ||
      !str_eq(oc->metrics_cert_name, nc->metrics_cert_name) || !str_eq(oc->metrics_cert_key, nc->metrics_cert_key) ||
      oc->metrics_debug_queues != nc->metrics_debug_queues)
    d->global |= KC_GLOBAL_METRICS;
  if (!str_eq(oc->admin_socket, nc->admin_socket) ||
      !str_eq(oc->admin_socket_group, nc->admin_socket_group))
    d->global |= KC_GLOBAL_ADMIN_SOCKET;
  if (oc->log_level != nc->log_level) d->global |= KC_GLOBAL_LOG_LEVEL;
  if (oc->log_format != nc->log_format) d->global |= KC_GLOBAL_LOG_FORMAT;
  if (oc->shutdown_timeout_ms != nc->shutdown_timeout_ms) d->global |= KC_GLOBAL_SHUTDOWN_TIMEOUT;
  if (oc->decode_threads != nc->decode_threads) d->global |= KC_GLOBAL_DECODE_THREADS;
  if (oc->auth_failure_readiness_ms != nc->auth_failure_readiness_ms)
    d->global |= KC_GLOBAL_AUTH_READINESS;
  if (!str_eq(oc->state_directory, nc->state_directory) ||
      oc->snapshot_max_age_ms != nc->snapshot_max_age_ms)
    d->global |= KC_GLOBAL_STATE_DIRECTORY;
  *out = d;
  return 0;
}

void kc_config_diff_free(kc_config_diff *d) {
  if (!d) return;
  free(d->informers);
  free(d->controllers);
  free(d);
}

bool kc_config_diff_empty(const kc_config_diff *d) {
  return d->ninformers == 0 && d->ncontrollers == 0 && d->global == 0;
}

int kc_config_diff_summary(const kc_config_diff *d, const kc_config *oc, const kc_config *nc,
                           char *buf, size_t cap) {
  static const char *const ctl_names[] = {"plugin",  "settings", "for",       "owns",
                                          "watches", "workers",  "timeout",   "rateLimit",
                                          "predicates", "informers", "hook",
                                          "sharding", "dryRun",
                                          "children", "readYourOwnWrites"};
  size_t add[2] = {0}, rem[2] = {0}, chg[2] = {0};
  for (size_t i = 0; i < d->ninformers; i++) {
    if (d->informers[i].change == KC_CHANGE_ADDED) add[0]++;
    else if (d->informers[i].change == KC_CHANGE_REMOVED) rem[0]++;
    else chg[0]++;
  }
  for (size_t i = 0; i < d->ncontrollers; i++) {
    if (d->controllers[i].change == KC_CHANGE_ADDED) add[1]++;
    else if (d->controllers[i].change == KC_CHANGE_REMOVED) rem[1]++;
    else chg[1]++;
  }
  kc_buf b = {0};
  char tmp[128];
  snprintf(tmp, sizeof tmp, "informers: +%zu -%zu ~%zu; controllers: +%zu -%zu ~%zu", add[0],
           rem[0], chg[0], add[1], rem[1], chg[1]);
  kc_buf_puts(&b, tmp);
  for (size_t i = 0; i < d->ncontrollers; i++) {
    const kc_config_change *ch = &d->controllers[i];
    const char *name = ch->new_index >= 0 ? nc->controllers[ch->new_index].name
                                          : oc->controllers[ch->old_index].name;
    kc_buf_puts(&b, ch->change == KC_CHANGE_ADDED     ? " +"
               : ch->change == KC_CHANGE_REMOVED ? " -"
                                                 : " ~");
    kc_buf_puts(&b, name);
    if (ch->change == KC_CHANGE_CHANGED) {
      kc_buf_puts(&b, "(");
      bool first = true;
      for (size_t k = 0; k < sizeof ctl_names / sizeof ctl_names[0]; k++)
        if (ch->fields & (1u << k)) {
          if (!first) kc_buf_puts(&b, ",");
          kc_buf_puts(&b, ctl_names[k]);
          first = false;
        }
      kc_buf_puts(&b, ")");
    }
  }
  if (d->global) {
    kc_buf_puts(&b, "; global:");
    static const char *const gnames[] = {"kubeconfig", "leaderElection", "metrics", "logLevel",
                                         "shutdownTimeout", "decodeThreads", "logFormat",
                                         "authFailureReadinessTimeout", "stateDirectory",
                                         "adminSocket"};
    for (size_t k = 0; k < sizeof gnames / sizeof gnames[0]; k++)
      if (d->global & (1u << k)) {
        kc_buf_puts(&b, " ");
        kc_buf_puts(&b, gnames[k]);
      }
  }
  int rc;
  if (b.err || !b.p) {
    rc = -ENOMEM;
    if (cap) buf[0] = '\0';
  } else if (b.len + 1 > cap) {
    if (cap) {
      memcpy(buf, b.p, cap - 1);
      buf[cap - 1] = '\0';
    }
    rc = -ENOSPC;
  } else {
    memcpy(buf, b.p, b.len + 1);
    rc = (int)b.len;
  }
  free(b.p);
  return rc;
}
