/* SPDX-License-Identifier: Apache-2.0 */
/* daemon_wiring: what the daemon hands to the components it wires together:
 * the plugins' host environment (daemon_env_ops over a refcounted host link:
 * cache lookups across informers, resource lookup, API requests, the write
 * gate, Events), the Event recorder's write gate and sharding fence, and the
 * view the metrics and health endpoints read (ops.h). The env functions run
 * on worker threads under the link's lock; the ops view on the loop thread.
 */
#include "daemon.h"
#include "daemon_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "cache/cacheview.h"
#include "lease/sharding.h"

/* --- the plugins' host environment (hostenv.h) -------------------------------- */

/* Every plugin instance's kc_host_env points here (ud), and retains it: an
 * instance freed after the daemon (by an abandoned reconcile) finds a closed
 * link, not freed memory. Once daemon_host_link_close ran nothing is cached,
 * nothing may be written, no Event is recorded and requests fail. The lock
 * is held for each lookup (informers, discovery, leadership, the recorder),
 * not across an API request: the daemon closes its API client only after
 * every controller stopped or was abandoned (as kc_controller_stop
 * documents). */
struct host_link {
  atomic_uint refs;
  pthread_rwlock_t lock;
  kc_daemon *d; /* NULL once closed */
};

struct host_link *daemon_host_link_new(kc_daemon *d) {
  struct host_link *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  if (pthread_rwlock_init(&l->lock, NULL) != 0) {
    free(l);
    return NULL;
  }
  atomic_init(&l->refs, 1);
  l->d = d;
  return l;
}

static void link_retain(void *ud) { atomic_fetch_add(&((struct host_link *)ud)->refs, 1); }

void daemon_link_release(void *ud) {
  struct host_link *l = ud;
  if (!l || atomic_fetch_sub(&l->refs, 1) != 1) return;
  pthread_rwlock_destroy(&l->lock);
  free(l);
}

/* Loop thread; returns once no host function still uses the daemon. */
void daemon_host_link_close(kc_daemon *d) {
  if (!d->link) return;
  pthread_rwlock_wrlock(&d->link->lock);
  d->link->d = NULL;
  pthread_rwlock_unlock(&d->link->lock);
}

static kc_daemon *link_enter(struct host_link *l) {
  pthread_rwlock_rdlock(&l->lock);
  return l->d;
}
static void link_leave(struct host_link *l) { pthread_rwlock_unlock(&l->lock); }

/* The plugins' reads of a kind go to the union of its informers
 * (cacheview.h), not only to the first one declared: with one informer per
 * namespace (`name:`, `namespaces:`), a controller bound to the second one
 * must find its objects. The informers are collected and read under the
 * registry lock (a reload swaps them under the write lock). */
struct kind_view {
  kc_informer *small[8];
  kc_informer **v;
  size_t n;
};

static bool slot_caches(const kind_slot *k, const char *av, const char *kind) {
  return k && !strcmp(k->spec->api_version, av) && !strcmp(k->spec->kind, kind);
}

/* Fills kv with the informers of apiVersion+kind in config order (NULL
 * entries: not started). registry_lock held. 0 or -ENOMEM. */
static int kind_view_of(kc_daemon *d, const char *av, const char *kind, struct kind_view *kv) {
  size_t n = 0;
  for (size_t i = 0; i < d->nkinds; i++)
    n += slot_caches(d->kinds[i], av, kind);
  kv->v = n <= sizeof kv->small / sizeof kv->small[0] ? kv->small : calloc(n, sizeof *kv->v);
  if (!kv->v) return -ENOMEM;
  kv->n = 0;
  for (size_t i = 0; i < d->nkinds; i++) {
    const kind_slot *k = d->kinds[i];
    if (slot_caches(k, av, kind)) kv->v[kv->n++] = atomic_load(&k->resolved) ? k->informer : NULL;
  }
  return 0;
}

static void kind_view_free(struct kind_view *kv) {
  if (kv->v != kv->small) free(kv->v);
}

static int env_cache_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name,
                         kc_obj **out) {
  kc_daemon *d = link_enter(ud);
  int rc = -ENOTSUP;
  *out = NULL;
  if (d) {
    struct kind_view kv;
    pthread_rwlock_rdlock(&d->registry_lock);
    if ((rc = kind_view_of(d, av, kind, &kv)) == 0) {
      rc = kc_cacheview_get(kv.v, kv.n, ns, name, out);
      kind_view_free(&kv);
    }
    pthread_rwlock_unlock(&d->registry_lock);
  }
  link_leave(ud);
  return rc;
}

static int env_cache_list(void *ud, const char *av, const char *kind, kc_str ns,
                          const kc_label_selector *sel, kc_obj_vec *out) {
  kc_daemon *d = link_enter(ud);
  int rc = -ENOTSUP;
  if (d) {
    struct kind_view kv;
    pthread_rwlock_rdlock(&d->registry_lock);
    if ((rc = kind_view_of(d, av, kind, &kv)) == 0) {
      rc = kc_cacheview_list(kv.v, kv.n, ns, sel, out);
      kind_view_free(&kv);
    }
    pthread_rwlock_unlock(&d->registry_lock);
  }
  link_leave(ud);
  return rc;
}

static int env_cache_by_index(void *ud, const char *av, const char *kind, const char *index,
                              kc_str value, kc_obj_vec *out) {
  kc_daemon *d = link_enter(ud);
  int rc = -ENOTSUP;
  if (d) {
    struct kind_view kv;
    pthread_rwlock_rdlock(&d->registry_lock);
    if ((rc = kind_view_of(d, av, kind, &kv)) == 0) {
      rc = kc_cacheview_by_index(kv.v, kv.n, index, value, out);
      kind_view_free(&kv);
    }
    pthread_rwlock_unlock(&d->registry_lock);
  }
  link_leave(ud);
  return rc;
}

static int env_resource(void *ud, const char *av, const char *kind, kc_resource_ref *out) {
  kc_daemon *d = link_enter(ud);
  int rc = d ? kc_daemon_resource(d, av, kind, out) : -ENOENT;
  link_leave(ud);
  return rc;
}

static int env_request(void *ud, const char *method, const char *path, const char *content_type,
                       const void *body, size_t len, uint64_t timeout_ms, kc_api_response *out) {
  kc_daemon *d = link_enter(ud);
  kc_api *api = d ? d->api : NULL;
  link_leave(ud);
  if (!api) {
    *out = (kc_api_response){0};
    return -ESHUTDOWN;
  }
  return kc_host_env_api_request(api, method, path, content_type, body, len, timeout_ms, out);
}

static bool env_may_write(void *ud) {
  kc_daemon *d = link_enter(ud);
  bool ok = d && kc_daemon_may_write(d);
  link_leave(ud);
  return ok;
}

static int env_event(void *ud, const char *controller, const kc_obj *o, int type,
                     const char *reason, const char *message) {
  kc_daemon *d = link_enter(ud);
  /* No recorder (shutting down): the event is lost, which plugin.h allows. */
  int rc = d && d->events ? kc_events_record(d->events, controller, o, type, reason, message) : 0;
  link_leave(ud);
  return rc;
}

const kc_host_env_ops daemon_env_ops = {
    .cache_get = env_cache_get,
    .cache_list = env_cache_list,
    .cache_by_index = env_cache_by_index,
    .resource = env_resource,
    .request = env_request,
    .may_write = env_may_write,
    .event = env_event,
    .retain = link_retain,
    .release = daemon_link_release,
};


bool daemon_events_may_write(void *ud) { return kc_daemon_may_write(ud); }

/* An Event recorded by a sharded reconcile is fenced by its key's range:
 * refused when the range does not admit writes now, and dropped when it is
 * sent after the range was lost (kc_sharding_fence_check). Others follow
 * daemon_events_may_write (leadership). Recording thread. */
void *daemon_events_fence_capture(void *ud, bool *refused) {
  (void)ud;
  *refused = false;
  if (!kc_sharding_fence_active()) return NULL;
  kc_shard_fence *f = kc_sharding_fence_ok() ? malloc(sizeof *f) : NULL;
  if (!f || !kc_sharding_fence_capture(f)) {
    free(f);
    *refused = true; /* a lost Event (no memory) is allowed: plugin.h */
    return NULL;
  }
  return f;
}

bool daemon_events_fence_ok(void *token) { return kc_sharding_fence_check(token); }

void daemon_events_fence_free(void *token) {
  kc_sharding_fence_drop(token);
  free(token);
}

/* --- ops: metrics, health endpoints, systemd notifications ------------------------ */

/* Loop thread: what kc_ops reads (see ops.h). Leader election fills
 * lease_name/leading/standby/leader once it exists. */
static void ops_view(void *ud, kc_ops_view *v) {
  kc_daemon *d = ud;
  size_t ci = d->ops_cap_informers;
  if (KC_ARRAY_RESERVE(d->ops_informers, ci, d->nkinds, 4) < 0 ||
      KC_ARRAY_RESERVE(d->ops_specs, d->ops_cap_informers, d->nkinds, 4) < 0 ||
      KC_ARRAY_RESERVE(d->ops_waits, d->ops_cap_waits, d->nkinds, 4) < 0 ||
      KC_ARRAY_RESERVE(d->ops_histograms, d->ops_cap_histograms, d->nctls, 4) < 0 ||
      KC_ARRAY_RESERVE(d->ops_controllers, d->ops_cap_controllers, d->nctls, 4) < 0 ||
      KC_ARRAY_RESERVE(d->ops_ctl_states, d->ops_cap_ctl_states, d->nctls, 4) < 0)
    return; /* empty view: metrics show nothing rather than garbage */
  for (size_t i = 0; i < d->nkinds; i++) {
    d->ops_specs[i] = d->kinds[i] ? d->kinds[i]->spec : &d->cfg->informers[i];
    d->ops_informers[i] = d->kinds[i] ? d->kinds[i]->informer : NULL;
    const kind_slot *k = d->kinds[i];
    d->ops_waits[i] = (kc_ops_informer_wait){
        .reason = k && k->miss[0] ? k->miss : NULL,
        .not_served = k && k->answered && !atomic_load(&k->resolved),
    };
  }
  v->informer_waits = d->ops_waits;
  for (size_t i = 0; i < d->nctls; i++) {
    d->ops_controllers[i] = d->ctls[i].ctl;
    d->ops_histograms[i] = d->ctls[i].ctl ? kc_controller_reconcile_histogram(d->ctls[i].ctl) : NULL;
    const ctl_slot *cs = &d->ctls[i];
    d->ops_ctl_states[i] = (kc_ops_controller_state){
        .name = cs->spec->name,
        .running = cs->ctl != NULL,
        .init_error = !cs->ctl && !cs->inst && cs->init_error[0] ? cs->init_error : NULL,
        .failed_attempts = cs->failed_attempts,
        .retry_delay_ms = cs->retry_delay_ms,
        .init_failures = cs->init_failures,
    };
  }
  v->controller_states = d->ops_ctl_states;
  v->ncontroller_states = d->nctls;
  v->reconcile_histograms = d->ops_histograms;
  v->specs = d->ops_specs;
  v->informers = d->ops_informers;
  v->ninformers = d->nkinds;
  v->controllers = d->ops_controllers;
  v->ncontrollers = d->nctls;
  v->stopping = d->stopping;
  v->paused = d->paused;
  if (d->events) {
    v->has_events = true;
    kc_events_get_stats(d->events, &v->events);
  }
  if (d->leader) {
    snprintf(d->ops_lease_name, sizeof d->ops_lease_name, "%s", d->cfg->leader_election.name);
    v->lease_name = d->ops_lease_name;
    v->leading = kc_leader_is_leader(d->leader);
    const char *holder = kc_leader_holder(d->leader);
    v->leader = holder && *holder ? holder : NULL;
    v->standby = !v->leading && v->leader != NULL;
  }
}

static bool configured_controller(const char *name, void *ud) {
  return kc_config_find_controller(ud, name) >= 0;
}

int daemon_pauses_start(kc_daemon *d, const char *state_dir) {
  if (!(d->paused = kc_paused_set_new(state_dir))) return -ENOMEM;
  kc_paused_set_load(d->paused); /* a bad file is logged and ignored */
  kc_paused_set_retain(d->paused, configured_controller, d->cfg);
  return 0;
}

void daemon_pauses_apply(kc_daemon *d, kc_controller *c) {
  if (kc_paused_set_has(d->paused, kc_controller_name(c))) kc_controller_set_paused(c, true);
}

void daemon_pauses_retain(kc_daemon *d) {
  if (d->paused) kc_paused_set_retain(d->paused, configured_controller, d->cfg);
}

int daemon_admin_start(kc_daemon *d) {
  const char *path = d->opts.admin_socket ? d->opts.admin_socket : d->cfg->admin_socket;
  bool asked = path != NULL;
  char def[KC_CONFIG_SOCKET_PATH_MAX + 32];
  if (!path) { /* systemd's RuntimeDirectory= (the first, when it lists several) */
    const char *rt = getenv("RUNTIME_DIRECTORY");
    if (!rt || rt[0] != '/') return 0;
    size_t n = strcspn(rt, ":");
    int k = snprintf(def, sizeof def, "%.*s/admin.sock", (int)n, rt);
    if (k < 0 || (size_t)k >= sizeof def) return 0;
    path = def;
  }
  if (strcmp(path, "0") == 0) return 0;
  /* A group the operator named must exist: the socket is not served
   * otherwise, and the start-up stops (as for a socket path named that
   * cannot be served), rather than running with a socket its members
   * cannot reach. */
  const char *group = d->opts.admin_socket_group ? d->opts.admin_socket_group
                                                 : d->cfg->admin_socket_group;
  gid_t gid = KC_ADMINSOCK_NO_GROUP;
  if (group) {
    asked = true;
    int grc = kc_adminsock_group_id(group, &gid);
    if (grc < 0) {
      const char *key = d->opts.admin_socket_group ? "--admin-socket-group" : "adminSocketGroup";
      if (grc == -ENOENT)
        kc_error("daemon", "%s: no such group '%s'; the admin socket %s is not served", key,
                 group, path);
      else
        kc_error("daemon", "%s: cannot look the group '%s' up: %s; the admin socket %s is not "
                 "served", key, group, strerror(-grc), path);
      return grc;
    }
  }
  int rc = kc_adminsock_start(&d->loop, path, gid, ops_view, d, &d->admin);
  if (rc < 0) {
    char perm[160];
    snprintf(perm, sizeof perm, "cannot give it the group '%s': the daemon's user is neither root "
             "nor a member", group ? group : "");
    const char *why = rc == -EADDRINUSE         ? "another process serves it"
                      : rc == -EEXIST           ? "a file that is not a socket is there"
                      : rc == -EPERM && group   ? perm
                                                : strerror(-rc);
    if (asked) {
      kc_error("daemon", "cannot serve the admin socket %s: %s", path, why);
      return rc;
    }
    kc_warn("daemon", "no admin socket: cannot serve %s: %s", path, why);
  }
  return 0;
}

int daemon_ops_start(kc_daemon *d) {
  const kc_config *cfg = d->cfg;
  const kc_daemon_options *opt = &d->opts;
  bool secure = opt->metrics_secure ? opt->metrics_secure > 0 : cfg->metrics_secure;
  /* Secure metrics move the default address to kubebuilder's :8443. */
  const char *bind = opt->metrics_bind                         ? opt->metrics_bind
                     : cfg->metrics_bind_set || !secure         ? cfg->metrics_bind
                                                                : KC_DEFAULT_SECURE_METRICS_BIND;
  kc_ops_options o = {.bind = bind, .probe_bind = opt->probe_bind, .secure = secure, .api = d->api,
                      .debug_queues = cfg->metrics_debug_queues};
  const char *dir = opt->metrics_cert_path ? opt->metrics_cert_path : cfg->metrics_cert_path;
  char cert[4096], key[4096];
  if (secure && dir) {
    const char *cn = opt->metrics_cert_name ? opt->metrics_cert_name : cfg->metrics_cert_name;
    const char *kn = opt->metrics_cert_key ? opt->metrics_cert_key : cfg->metrics_cert_key;
    if ((size_t)snprintf(cert, sizeof cert, "%s/%s", dir, cn) >= sizeof cert ||
        (size_t)snprintf(key, sizeof key, "%s/%s", dir, kn) >= sizeof key) {
      kc_error("daemon", "metrics certificate path too long: %s", dir);
      return -ENAMETOOLONG;
    }
    o.cert_file = cert;
    o.key_file = key;
  }
  int rc = kc_ops_start(&d->loop, &o, ops_view, d, &d->ops);
  if (rc < 0) kc_error("daemon", "cannot start the metrics and health endpoints: %s", strerror(-rc));
  return rc;
}
