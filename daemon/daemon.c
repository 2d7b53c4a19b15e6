/* daemon: see daemon.h.
 *
 * Start-up is level-triggered on one 1 s tick: every tick resolves kinds
 * discovery does not know yet (a CRD may be created after we start),
 * creates and starts the informers that can be, creates controllers whose
 * informers all exist, and activates controllers whose informers synced.
 * Nothing needs a restart to notice a CRD that appears later.
 */
#include "daemon.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "controller.h"
#include "discovery.h"
#include "kubeconfig.h"
#include "leader.h"
#include "plugin_host.h"

typedef struct kind_slot {
  kc_daemon *d;
  size_t index;             /* config informer index */
  char api_path[384];
  char plural[256];
  bool namespaced;
  _Atomic bool resolved;
  bool discovering;
  uint64_t last_miss_log_ms;
} kind_slot;

struct kc_daemon {
  uv_loop_t loop;
  kc_daemon_options opts;
  kc_config *cfg;
  kc_kube_creds *creds;
  kc_api *api;
  kc_discovery *discovery;
  kind_slot *kinds;          /* one per config informer */
  kc_informer **informers;   /* one per config informer, NULL until resolved */
  kc_plugin_instance **instances;
  kc_controller **controllers;
  size_t controllers_alive;
  uv_signal_t sig_term, sig_int, sig_hup;
  uv_timer_t tick;
  atomic_bool may_write;
  kc_leader *leader;         /* NULL when leader election is off */
  bool leading;              /* loop view: controllers may be active */
  bool stopping;
  int exit_code;
};

/* --- registry (any thread) -------------------------------------------------- */

kc_informer *kc_daemon_informer_for(kc_daemon *d, const char *api_version, const char *kind) {
  for (size_t i = 0; i < d->cfg->ninformers; i++) {
    const kc_informer_spec *s = &d->cfg->informers[i];
    if (strcmp(s->api_version, api_version) == 0 && strcmp(s->kind, kind) == 0 &&
        atomic_load(&d->kinds[i].resolved))
      return d->informers[i];
  }
  return NULL;
}

int kc_daemon_resource(kc_daemon *d, const char *api_version, const char *kind,
                       kc_resource_ref *out) {
  for (size_t i = 0; i < d->cfg->ninformers; i++) {
    const kc_informer_spec *s = &d->cfg->informers[i];
    kind_slot *k = &d->kinds[i];
    if (strcmp(s->api_version, api_version) == 0 && strcmp(s->kind, kind) == 0 &&
        atomic_load(&k->resolved)) {
      *out = (kc_resource_ref){k->api_path, k->plural, k->namespaced};
      return 0;
    }
  }
  /* Well-known kinds plugins write without caching them. */
  static const struct { const char *av, *kind, *path, *plural; bool ns; } known[] = {
      {"v1", "Event", "/api/v1", "events", true},
      {"v1", "Pod", "/api/v1", "pods", true},
      {"v1", "ConfigMap", "/api/v1", "configmaps", true},
      {"v1", "Secret", "/api/v1", "secrets", true},
      {"coordination.k8s.io/v1", "Lease", "/apis/coordination.k8s.io/v1", "leases", true},
      {"events.k8s.io/v1", "Event", "/apis/events.k8s.io/v1", "events", true},
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (strcmp(known[i].av, api_version) == 0 && strcmp(known[i].kind, kind) == 0) {
      *out = (kc_resource_ref){known[i].path, known[i].plural, known[i].ns};
      return 0;
    }
  }
  return -ENOENT;
}

kc_api *kc_daemon_api(kc_daemon *d) { return d->api; }
bool kc_daemon_may_write(const kc_daemon *d) {
  /* kc_leader_is_leader also checks the renew deadline against the clock, so
   * a worker that runs before the loop noticed the loss is refused too. */
  return atomic_load(&d->may_write) && (!d->leader || kc_leader_is_leader(d->leader));
}

/* --- discovery ---------------------------------------------------------------- */

static void on_resolved(int err, const kc_resource_info *info, const kc_api_status *status,
                        void *ud) {
  kind_slot *k = ud;
  kc_daemon *d = k->d;
  const kc_informer_spec *s = &d->cfg->informers[k->index];
  k->discovering = false;
  if (err == 0) {
    if (info->group[0])
      snprintf(k->api_path, sizeof k->api_path, "/apis/%s/%s", info->group, info->version);
    else
      snprintf(k->api_path, sizeof k->api_path, "/api/%s", info->version);
    snprintf(k->plural, sizeof k->plural, "%s", info->plural);
    k->namespaced = info->namespaced;
    kc_info("discovery", "%s %s -> %s/%s (%s)", s->api_version, s->kind, k->api_path, k->plural,
            k->namespaced ? "namespaced" : "cluster-scoped");
    atomic_store(&k->resolved, true);
    return;
  }
  /* Log a missing kind once a minute, not every tick. */
  uint64_t now = uv_now(&d->loop);
  if (!k->last_miss_log_ms || now - k->last_miss_log_ms >= 60000) {
    k->last_miss_log_ms = now;
    if (status && status->code)
      kc_warn("discovery", "%s %s: HTTP %d %s: %s; retrying", s->api_version, s->kind,
              status->code, status->reason, status->message);
    else
      kc_warn("discovery", "%s %s: %s; retrying", s->api_version, s->kind,
              err == -ENOENT ? "kind not served (yet)" : strerror(-err));
  }
}

static void discover(kc_daemon *d, kind_slot *k) {
  const kc_informer_spec *s = &d->cfg->informers[k->index];
  if (kc_discovery_resolve(d->discovery, s->api_version, s->kind, on_resolved, k) == 0)
    k->discovering = true;
}

/* --- start-up steps --------------------------------------------------------- */

static void on_controller_stopped(void *ud) {
  kc_daemon *d = ud;
  d->controllers_alive--;
}

static bool informers_ready(kc_daemon *d, const kc_controller_spec *c, bool synced) {
  size_t need[1 + 64];
  size_t n = 0;
  need[n++] = c->for_.informer;
  for (size_t i = 0; i < c->nowns && n < 65; i++) need[n++] = c->owns[i].ref.informer;
  for (size_t i = 0; i < c->nwatches && n < 65; i++) need[n++] = c->watches[i].ref.informer;
  for (size_t i = 0; i < n; i++) {
    kc_informer *inf = d->informers[need[i]];
    if (!inf || (synced && !kc_informer_synced(inf))) return false;
  }
  return true;
}

static void on_tick(uv_timer_t *t) {
  kc_daemon *d = t->data;
  if (d->stopping) return;
  for (size_t i = 0; i < d->cfg->ninformers; i++) {
    kind_slot *k = &d->kinds[i];
    if (!atomic_load(&k->resolved)) {
      if (!k->discovering) discover(d, k);
      continue;
    }
    if (d->informers[i]) continue;
    kc_resource_ref ref = {k->api_path, k->plural, k->namespaced};
    int rc = kc_informer_new(&d->loop, d->api, &d->cfg->informers[i], &ref, &d->informers[i]);
    if (rc == 0) rc = kc_informer_start(d->informers[i]);
    if (rc < 0) {
      kc_error("daemon", "informer %s %s: cannot start: %s", d->cfg->informers[i].api_version,
               d->cfg->informers[i].kind, strerror(-rc));
      if (d->informers[i]) kc_informer_close(d->informers[i]);
      d->informers[i] = NULL;
    }
  }
  for (size_t i = 0; i < d->cfg->ncontrollers; i++) {
    const kc_controller_spec *cs = &d->cfg->controllers[i];
    if (!d->controllers[i] && d->instances[i] && informers_ready(d, cs, false)) {
      int rc = kc_controller_new(&d->loop, cs, d->informers, d->instances[i], &d->controllers[i]);
      if (rc < 0) {
        kc_error("daemon", "controller %s: cannot start: %s", cs->name, strerror(-rc));
        continue;
      }
      d->instances[i] = NULL; /* owned by the controller now */
      d->controllers_alive++;
    }
    if (d->controllers[i] && (!d->leader || d->leading) && informers_ready(d, cs, true))
      kc_controller_set_active(d->controllers[i], true);
  }
}

/* --- leader election (wired by wt/leader; see daemon/leader.h) --------------- */

static void on_started_leading(void *ud) {
  kc_daemon *d = ud;
  if (d->stopping) return;
  d->leading = true;
  atomic_store(&d->may_write, true);
  on_tick(&d->tick); /* activate synced controllers now, not at the next tick */
}

static void on_stopped_leading(void *ud) {
  kc_daemon *d = ud;
  /* Writes are already refused (kc_leader_is_leader is false); stop
   * dispatching. Informers keep running for a fast takeover. */
  atomic_store(&d->may_write, false);
  d->leading = false;
  for (size_t i = 0; i < d->cfg->ncontrollers; i++)
    if (d->controllers[i]) kc_controller_set_active(d->controllers[i], false);
}

static int leader_start(kc_daemon *d) {
  if (!d->cfg->leader_election.enabled) {
    atomic_store(&d->may_write, true);
    return 0;
  }
  atomic_store(&d->may_write, false);
  kc_leader_callbacks cb = {on_started_leading, on_stopped_leading, NULL};
  int rc = kc_leader_new(&d->loop, d->api, &d->cfg->leader_election, d->opts.identity, &cb, d,
                         &d->leader);
  if (rc == 0) rc = kc_leader_start(d->leader);
  if (rc < 0) {
    kc_error("daemon", "leader election: cannot start: %s", strerror(-rc));
    kc_leader_close(d->leader);
    d->leader = NULL;
  }
  return rc;
}

static void finish_shutdown(kc_daemon *d);

static void on_finish_tick(uv_timer_t *t) { finish_shutdown(t->data); }

static void on_lease_released(int err, void *ud) {
  kc_daemon *d = ud;
  if (err < 0) kc_warn("daemon", "lease not released: %s", strerror(-err));
  kc_leader_close(d->leader);
  d->leader = NULL;
  /* We are inside an API call's callback: close the API client from the
   * loop, not from here. */
  uv_timer_start(&d->tick, on_finish_tick, 0, 0);
}

/* --- shutdown ----------------------------------------------------------------- */

static void on_closed_noop(uv_handle_t *h) { (void)h; }

static void finish_shutdown(kc_daemon *d) {
  atomic_store(&d->may_write, false);
  for (size_t i = 0; i < d->cfg->ninformers; i++) {
    if (d->informers[i]) kc_informer_close(d->informers[i]);
    d->informers[i] = NULL;
  }
  kc_discovery_free(d->discovery);
  d->discovery = NULL;
  kc_api_close(d->api);
  d->api = NULL;
  uv_close((uv_handle_t *)&d->tick, on_closed_noop);
  uv_close((uv_handle_t *)&d->sig_term, on_closed_noop);
  uv_close((uv_handle_t *)&d->sig_int, on_closed_noop);
  uv_close((uv_handle_t *)&d->sig_hup, on_closed_noop);
}

static void on_shutdown_poll(uv_timer_t *t) {
  kc_daemon *d = t->data;
  if (d->controllers_alive == 0) {
    uv_timer_stop(t);
    /* All guarded work stopped: hand the Lease over at once. */
    if (d->leader && kc_leader_release(d->leader, on_lease_released, d) == 0) return;
    kc_leader_close(d->leader);
    d->leader = NULL;
    finish_shutdown(d);
  }
}

static void begin_shutdown(kc_daemon *d, const char *why) {
  if (d->stopping) return;
  d->stopping = true;
  kc_info("daemon", "%s: stopping (in-flight reconciles get up to %lld ms)", why,
          (long long)d->cfg->shutdown_timeout_ms);
  /* Writes stay allowed while in-flight reconciles drain. */
  for (size_t i = 0; i < d->cfg->ncontrollers; i++) {
    if (d->controllers[i]) {
      kc_controller_stop(d->controllers[i], (uint64_t)d->cfg->shutdown_timeout_ms,
                         on_controller_stopped, d);
      d->controllers[i] = NULL;
    }
  }
  uv_timer_stop(&d->tick);
  uv_timer_start(&d->tick, on_shutdown_poll, 0, 50);
}

static void on_signal(uv_signal_t *s, int signum) {
  kc_daemon *d = s->data;
  if (signum == SIGHUP) {
    kc_warn("daemon", "SIGHUP: live reload is not implemented yet; keeping the running config");
    return;
  }
  begin_shutdown(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* --- run ---------------------------------------------------------------------- */

static int load_plugins(kc_daemon *d) {
  for (size_t i = 0; i < d->cfg->ncontrollers; i++) {
    const kc_controller_spec *cs = &d->cfg->controllers[i];
    char err[1024];
    kc_plugin *p = NULL;
    if (kc_plugin_load(cs->plugin, &p, err, sizeof err) < 0) {
      kc_error("daemon", "controller %s: %s", cs->name, err);
      return -1;
    }
    if (kc_plugin_instance_new(p, cs->name, (const kctrld_settings *)cs->settings, d,
                               &d->instances[i], err, sizeof err) < 0) {
      kc_error("daemon", "controller %s: %s", cs->name, err);
      return -1;
    }
    kc_info("daemon", "controller %s: plugin %s loaded", cs->name, cs->plugin);
  }
  return 0;
}

int kc_daemon_run(const kc_daemon_options *opts) {
  kc_daemon *d = calloc(1, sizeof *d);
  if (!d) return 1;
  d->opts = *opts;
  int code = 1;
  char err[4096];
  if (kc_config_load_file(opts->config_path, &d->cfg, err, sizeof err) < 0) {
    kc_error("config", "%s", err);
    free(d);
    return 1;
  }
  kc_log_set_level(opts->log_level ? opts->log_level : d->cfg->log_level);
  if (kc_kube_resolve(opts->kubeconfig, d->cfg->kubeconfig, &d->creds, err, sizeof err) < 0) {
    kc_error("credentials", "%s", err);
    goto out_cfg;
  }
  kc_info("daemon", "kctrld %s: API server %s (%s)", KCTRLD_VERSION, d->creds->server,
          d->creds->source ? d->creds->source : "credentials");
  size_t ni = d->cfg->ninformers, nc = d->cfg->ncontrollers;
  d->kinds = calloc(ni ? ni : 1, sizeof *d->kinds);
  d->informers = calloc(ni ? ni : 1, sizeof *d->informers);
  d->instances = calloc(nc ? nc : 1, sizeof *d->instances);
  d->controllers = calloc(nc ? nc : 1, sizeof *d->controllers);
  if (!d->kinds || !d->informers || !d->instances || !d->controllers) goto out_creds;
  for (size_t i = 0; i < ni; i++) {
    d->kinds[i].d = d;
    d->kinds[i].index = i;
  }
  if (uv_loop_init(&d->loop) != 0) goto out_creds;
  if (kc_api_new(&d->loop, d->creds, &d->api) < 0 || kc_discovery_new(d->api, &d->discovery) < 0) {
    kc_error("daemon", "cannot create the API client");
    kc_api_close(d->api);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out_loop;
  }
  if (load_plugins(d) < 0) {
    for (size_t i = 0; i < nc; i++) kc_plugin_instance_free(d->instances[i]);
    kc_discovery_free(d->discovery);
    kc_api_close(d->api);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out_loop;
  }
  uv_timer_init(&d->loop, &d->tick);
  d->tick.data = d;
  uv_signal_init(&d->loop, &d->sig_term);
  uv_signal_init(&d->loop, &d->sig_int);
  uv_signal_init(&d->loop, &d->sig_hup);
  d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
  uv_signal_start(&d->sig_term, on_signal, SIGTERM);
  uv_signal_start(&d->sig_int, on_signal, SIGINT);
  uv_signal_start(&d->sig_hup, on_signal, SIGHUP);
  uv_timer_start(&d->tick, on_tick, 0, 1000);
  if (leader_start(d) < 0) {
    d->exit_code = 1;
    begin_shutdown(d, "leader election");
  }
  uv_run(&d->loop, UV_RUN_DEFAULT);
  code = d->exit_code;
  for (size_t i = 0; i < nc; i++) kc_plugin_instance_free(d->instances[i]);
out_loop:
  if (uv_loop_close(&d->loop) != 0) kc_warn("daemon", "event loop still had open handles at exit");
out_creds:
  free(d->kinds), free(d->informers), free(d->instances), free(d->controllers);
  kc_kube_creds_free(d->creds);
out_cfg:
  kc_config_free(d->cfg);
  free(d);
  kc_plugin_host_unload_all();
  if (code == 0) kc_info("daemon", "stopped");
  return code;
}
