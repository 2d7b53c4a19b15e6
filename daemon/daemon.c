/* SPDX-License-Identifier: Apache-2.0 */
/* daemon: see daemon.h. This file owns the daemon's life: kc_daemon_run
 * (wiring the config, credentials, API client, decode pool, Event recorder
 * and plugins together), the start-up tick, plugin loading with its retries,
 * leader election, signals and shutdown. The plugins' host environment, the
 * Event fence and the ops view are in daemon_wiring.c; SIGHUP reload is in
 * daemon_reload.c; their shared state in daemon_int.h. Loop thread, except
 * the registry functions (any thread).
 *
 * Start-up is level-triggered on one 1 s tick: every tick resolves kinds
 * discovery does not know yet (a CRD may be created after we start),
 * creates and starts the informers that can be, creates controllers whose
 * informers all exist, and activates controllers whose informers synced.
 * Nothing needs a restart to notice a CRD that appears later.
 *
 * Live reload (SIGHUP) is validate-then-swap: the new file is loaded and
 * validated completely first (a bad file is logged with file:line:col and
 * the old config keeps running). Then controllers that were removed or
 * changed, or that use an informer whose scope changed, are drained and
 * stopped; once they are gone the new config is swapped in: informers with
 * an unchanged scope keep their caches and watches, the others are closed
 * or created, and unchanged controllers keep running (rebound to the new
 * config's equal spec).
 *
 * A controller whose plugin does not load or whose init fails costs only
 * that controller (unless --fail-fast, at start-up): its slot records the
 * error and one timer, init_retry, retries the slots that are due, 1 s
 * doubling to 5 min (kc_backoff_when) with +-10 % jitter. Every attempt
 * logs one line; /readyz, STATUS= and kctrld_controller_* report it; a
 * reload re-instantiates it at once (fixed or removed by the new file).
 */
#include "daemon.h"
#include "daemon_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "config/config.h"
#include "runtime/controller.h"
#include "watch/decodepool.h"
#include "client/discovery.h"
#include "base/hash.h"
#include "hooks/hook_child.h"
#include "hooks/hook_exec.h"
#include "hooks/hook_webhook.h"
#include "hooks/isolate.h"
#include "host/hostenv.h"
#include "client/kubeconfig.h"
#include "kube/kurl.h"
#include "lease/leader.h"
#include "lease/sharding.h"
#include "ops/ops.h"
#include "host/plugin_host.h"
#include "base/ratelimit.h"


/* Discovery of a kind not served (yet): 1 s doubling to 16 s. */
#define KC_RESOLVE_RETRY_BASE_MS 1000ull
#define KC_RESOLVE_RETRY_MAX_MS 16000ull

#define KC_INIT_RETRY_BASE_MS 1000ull
#define KC_INIT_RETRY_MAX_MS (5 * 60 * 1000ull)



/* --- registry (any thread) -------------------------------------------------- */

int kc_daemon_resource(kc_daemon *d, const char *api_version, const char *kind,
                       kc_resource_ref *out) {
  int rc = -ENOENT;
  pthread_rwlock_rdlock(&d->registry_lock);
  for (size_t i = 0; i < d->nkinds && rc; i++) {
    const kind_slot *k = d->kinds[i];
    if (strcmp(k->spec->api_version, api_version) == 0 && strcmp(k->spec->kind, kind) == 0 &&
        atomic_load(&k->resolved)) {
      *out = (kc_resource_ref){k->api_path, k->plural, k->namespaced};
      rc = 0;
    }
  }
  pthread_rwlock_unlock(&d->registry_lock);
  if (rc == 0) return 0;
  /* Well-known kinds plugins write without caching them. */
  static const struct {
    const char *av, *kind, *path, *plural;
    bool ns;
  } known[] = {
      {"v1", "Event", "/api/v1", "events", true},
      {"v1", "Pod", "/api/v1", "pods", true},
      {"v1", "ConfigMap", "/api/v1", "configmaps", true},
      {"v1", "Secret", "/api/v1", "secrets", true},
      {"v1", "Namespace", "/api/v1", "namespaces", false},
      {"apps/v1", "Deployment", "/apis/apps/v1", "deployments", true},
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

bool kc_daemon_may_write(const kc_daemon *d) {
  /* A sharded reconcile is fenced by its key's range alone: sharded
   * controllers run on every replica, leader or not. */
  if (kc_sharding_fence_active()) return kc_sharding_fence_ok();
  /* kc_leader_is_leader also checks the renew deadline against the clock, so
   * a worker that runs before the loop noticed the loss is refused too. */
  return atomic_load(&d->may_write) && (!d->leader || kc_leader_is_leader(d->leader));
}


/* --- discovery ---------------------------------------------------------------- */


/* Runs the start-up tick on the loop's next iteration (never from inside
 * the caller), then every second as before. */
static void tick_now(kc_daemon *d) {
  if (!d->stopping) uv_timer_start(&d->tick, daemon_on_tick, 0, 1000);
}

/* An informer synced: its controllers become active now. */
static void on_informer_synced(void *ud, kc_informer *inf) { tick_now(ud); }

static void on_resolved(int err, const kc_resource_info *info, const kc_status *status,
                        void *ud) {
  kind_slot *k = ud;
  k->discovering = false;
  if (k->orphaned) {
    free(k);
    return;
  }
  kc_daemon *d = k->d;
  const kc_informer_spec *s = k->spec;
  if (err == 0) {
    kc_buf ap = kc_buf_fixed(k->api_path, sizeof k->api_path);
    kc_url_group_version(&ap, kc_str_c(info->group), kc_str_c(info->version));
    snprintf(k->plural, sizeof k->plural, "%s", info->plural);
    k->namespaced = info->namespaced;
    kc_info("discovery", "%s %s -> %s/%s (%s)", s->api_version, s->kind, k->api_path, k->plural,
            k->namespaced ? "namespaced" : "cluster-scoped");
    atomic_store(&k->resolved, true);
    k->answered = true;
    k->miss[0] = '\0';
    kc_backoff_forget(&k->misses);
    tick_now(d); /* list at once, not on the next tick */
    return;
  }
  /* Say what is wrong: a kind the group/version does not serve (with the
   * closest served kind), a group/version the server does not know (a CRD
   * not installed yet), an HTTP error or a transport failure. */
  char why[sizeof k->miss];
  if (err == -ENOENT && status && status->code == 200) {
    char best[64];
    if (kc_discovery_suggest(d->discovery, s->api_version, s->kind, best, sizeof best) == 0)
      snprintf(why, sizeof why, "kind %s is not served by %s (did you mean %s?)", s->kind,
               s->api_version, best);
    else
      snprintf(why, sizeof why, "kind %s is not served by %s (not installed yet?)", s->kind,
               s->api_version);
  } else if (err == -ENOENT) {
    snprintf(why, sizeof why, "kind %s is not served: the server does not serve %s (HTTP %d; a CRD "
             "not installed yet?)", s->kind, s->api_version, status ? status->code : 404);
  } else if (status && status->code) {
    snprintf(why, sizeof why, "kind %s of %s: discovery failed: HTTP %d %s%s%s", s->kind,
             s->api_version, status->code, status->reason, status->message[0] ? ": " : "",
             status->message);
  } else { /* a transport failure: libcurl's text says what failed */
    snprintf(why, sizeof why, "kind %s of %s: discovery failed: %s", s->kind, s->api_version,
             status && status->message[0] ? status->message : strerror(-err));
  }
  if (err == -ENOENT && status && (status->code == 200 || status->code == 404))
    k->answered = true; /* the API server is reachable and says the kind is not there */
  /* Retried with backoff (a CRD may be installed later); the same reason is
   * logged once a minute, a new one at once. */
  const kc_backoff b = {KC_RESOLVE_RETRY_BASE_MS * KC_NS_PER_MS, KC_RESOLVE_RETRY_MAX_MS * KC_NS_PER_MS};
  uint64_t delay = kc_backoff_when(&b, &k->misses) / KC_NS_PER_MS;
  uint64_t now = uv_now(&d->loop);
  k->next_resolve_ms = now + delay;
  if (strcmp(why, k->miss) != 0 || !k->last_miss_log_ms || now - k->last_miss_log_ms >= 60000) {
    k->last_miss_log_ms = now;
    kc_warn("discovery", "%s; retrying (next attempt in %.0f s, this message at most once a minute)",
            why, (double)delay / 1000.0);
  }
  snprintf(k->miss, sizeof k->miss, "%s", why);
}

void daemon_release_slot(kind_slot *k) {
  if (k->informer) kc_informer_close(k->informer);
  k->informer = NULL;
  if (k->discovering)
    k->orphaned = true; /* freed by on_resolved */
  else
    free(k);
}

kind_slot *daemon_new_slot(kc_daemon *d, const kc_informer_spec *spec) {
  kind_slot *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->d = d;
  k->spec = spec;
  return k;
}

/* --- state directory ----------------------------------------------------------- */

/* The directory snapshots go to (--state-directory, else stateDirectory),
 * or NULL when off or unusable. */
static const char *state_directory(const kc_daemon *d) {
  if (d->state_dir_unusable) return NULL;
  const char *dir = d->opts.state_directory ? d->opts.state_directory : d->cfg->state_directory;
  return dir && *dir ? dir : NULL;
}

/* Creates the state directory (0700) when missing. One that cannot be made
 * or is not a directory turns snapshots off, with an error in the log:
 * the daemon still runs, listing as without a state directory. Others
 * being able to read it is a warning (snapshots may hold Secrets). */
static void prepare_state_directory(kc_daemon *d) {
  const char *dir = state_directory(d);
  if (!dir) return;
  struct stat st;
  if (stat(dir, &st) < 0 && errno == ENOENT && mkdir(dir, 0700) < 0 && errno != EEXIST) {
    kc_error("daemon", "state directory %s: cannot create it: %s; snapshots are off", dir,
             strerror(errno));
    d->state_dir_unusable = true;
    return;
  }
  if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
    kc_error("daemon", "state directory %s: not a directory; snapshots are off", dir);
    d->state_dir_unusable = true;
    return;
  }
  if (st.st_mode & 077)
    kc_warn("daemon", "state directory %s: mode %04o lets others in; snapshots hold the cached "
            "objects (Secrets too when Secrets are watched): make it 0700", dir,
            (unsigned)(st.st_mode & 07777));
  kc_info("daemon", "state directory %s: informers start from their snapshots there and write "
          "them at a clean stop", dir);
}

/* --- start-up steps --------------------------------------------------------- */

static void on_controller_stopped(void *ud);

static kc_informer **informer_view(kc_daemon *d) {
  kc_informer **v = calloc(d->nkinds ? d->nkinds : 1, sizeof *v);
  for (size_t i = 0; v && i < d->nkinds; i++) v[i] = d->kinds[i]->informer;
  return v;
}

static bool informers_ready(kc_daemon *d, const kc_controller_spec *c, bool synced) {
  if (!d->kinds[c->for_.informer]->informer) return false;
  if (synced && !kc_informer_synced(d->kinds[c->for_.informer]->informer)) return false;
  for (size_t i = 0; i < c->nowns; i++) {
    kc_informer *inf = d->kinds[c->owns[i].ref.informer]->informer;
    if (!inf || (synced && !kc_informer_synced(inf))) return false;
  }
  for (size_t i = 0; i < c->nwatches; i++) {
    kc_informer *inf = d->kinds[c->watches[i].ref.informer]->informer;
    if (!inf || (synced && !kc_informer_synced(inf))) return false;
  }
  return true;
}

/* True when only controller ci uses its `for` informer, and only as `for`:
 * then its shardSelector may follow the controller's ranges. */
static bool informer_exclusive(const kc_daemon *d, size_t ci) {
  size_t inf = d->ctls[ci].spec->for_.informer;
  for (size_t j = 0; j < d->nctls; j++) {
    const kc_controller_spec *s = d->ctls[j].spec;
    if (j != ci && s->for_.informer == inf) return false;
    for (size_t k = 0; k < s->nowns; k++)
      if (s->owns[k].ref.informer == inf) return false;
    for (size_t k = 0; k < s->nwatches; k++)
      if (s->watches[k].ref.informer == inf) return false;
  }
  return true;
}

/* The sharded controller whose exclusive `for` informer is informer i, or
 * -1: that informer's start may wait for the controller's first range. */
static ssize_t shard_selecting_controller(const kc_daemon *d, size_t i) {
  for (size_t ci = 0; ci < d->nctls; ci++)
    if (d->ctls[ci].spec->for_.informer == i && d->ctls[ci].spec->sharding.shards > 0 &&
        informer_exclusive(d, ci))
      return (ssize_t)ci;
  return -1;
}

/* Starts a deferred informer once its controller holds a range (its
 * selector is set by then: controller.c on_ranges_changed), or when nobody
 * waits for it any more (the controller is gone or not sharded), or after
 * leaseDuration + 2 retryPeriods without a range (then it lists without a
 * selector, as it did before the claim loop ran first; a replica that got
 * no range, e.g. more replicas than shards, must still sync). */
static void start_deferred(kc_daemon *d, size_t i) {
  kind_slot *k = d->kinds[i];
  ssize_t ci = shard_selecting_controller(d, i);
  kc_sharding *sh = ci >= 0 && d->ctls[ci].ctl ? kc_controller_sharding(d->ctls[ci].ctl) : NULL;
  const char *why = NULL;
  if (ci < 0 || (d->ctls[ci].ctl && !sh)) {
    why = "not sharded any more";
  } else if (sh && kc_sharding_held_ranges(sh, NULL, 0) > 0) {
    why = NULL;
  } else {
    const kc_sharding_spec *sp = &d->ctls[ci].spec->sharding;
    uint64_t bound = (uint64_t)sp->lease_duration_ms + 2 * (uint64_t)sp->retry_period_ms;
    if (uv_now(&d->loop) - k->deferred_since_ms < bound) return;
    why = "no shard range claimed yet; listing without a selector";
  }
  int rc = kc_informer_start(k->informer);
  if (rc < 0) { /* retried on the next tick */
    kc_error("daemon", "informer %s %s: cannot start: %s", k->spec->api_version, k->spec->kind,
             strerror(-rc));
    return;
  }
  k->deferred = false;
  kc_info("daemon", "informer %s %s: started after %" PRIu64 " ms of shard claims: %s",
          k->spec->api_version, k->spec->kind, uv_now(&d->loop) - k->deferred_since_ms,
          why ? why : "with the selector of the held ranges");
}

void daemon_on_tick(uv_timer_t *t) {
  kc_daemon *d = t->data;
  if (d->stopping) return;
  kc_isolate_reap_idle(); /* isolated plugins' children that died between reconciles */
  for (size_t i = 0; i < d->nkinds; i++) {
    kind_slot *k = d->kinds[i];
    if (!atomic_load(&k->resolved)) {
      if (!k->discovering && uv_now(&d->loop) >= k->next_resolve_ms &&
          kc_discovery_resolve(d->discovery, k->spec->api_version, k->spec->kind, on_resolved, k) == 0)
        k->discovering = true;
      continue;
    }
    if (k->informer) {
      if (k->deferred) start_deferred(d, i);
      continue;
    }
    kc_resource_ref ref = {k->api_path, k->plural, k->namespaced};
    kc_informer *inf = NULL;
    bool defer = shard_selecting_controller(d, i) >= 0;
    int rc = kc_informer_new(&d->loop, d->api, d->decode_pool, k->spec, &ref, &inf);
    if (rc == 0) rc = kc_informer_set_cluster_identity(inf, d->clusterid);
    if (rc == 0 && state_directory(d)) {
      kc_informer_snapshots snaps = {state_directory(d), d->creds->server,
                                     (uint64_t)d->cfg->snapshot_max_age_ms};
      rc = kc_informer_set_snapshots(inf, &snaps);
    }
    if (rc == 0) kc_informer_on_synced(inf, on_informer_synced, d);
    if (rc == 0 && !defer) rc = kc_informer_start(inf);
    if (rc < 0) {
      kc_error("daemon", "informer %s %s: cannot start: %s", k->spec->api_version, k->spec->kind,
               strerror(-rc));
      if (inf) kc_informer_close(inf);
      continue;
    }
    pthread_rwlock_wrlock(&d->registry_lock); /* workers read k->informer under the read lock */
    k->informer = inf;
    pthread_rwlock_unlock(&d->registry_lock);
    k->deferred = defer;
    k->deferred_since_ms = uv_now(&d->loop);
  }
  if (d->reload_cfg) return; /* controllers are being drained for a reload */
  for (size_t i = 0; i < d->nctls; i++) {
    ctl_slot *cs = &d->ctls[i];
    if (!cs->ctl && cs->inst && informers_ready(d, cs->spec, false)) {
      kc_informer **view = informer_view(d);
      int rc = view ? kc_controller_new(&d->loop, cs->spec, view, cs->inst, &cs->ctl) : -ENOMEM;
      free(view);
      if (rc < 0) {
        kc_error("daemon", "controller %s: cannot start: %s", cs->spec->name, strerror(-rc));
        continue;
      }
      cs->inst = NULL; /* owned by the controller now */
      daemon_pauses_apply(d, cs->ctl);
      d->controllers_alive++;
      if (cs->spec->sharding.shards > 0 &&
          (rc = kc_controller_shard(cs->ctl, d->api, d->identity,
                                    (uint64_t)d->cfg->shutdown_timeout_ms,
                                    informer_exclusive(d, i))) < 0)
        kc_error("daemon", "controller %s: sharding: cannot start: %s (it reconciles nothing)",
                 cs->spec->name, strerror(-rc));
      /* Its `for` informer waits for a range: claim now, not once synced. */
      if (kc_controller_sharding(cs->ctl) && d->kinds[cs->spec->for_.informer]->deferred)
        kc_controller_shard_start(cs->ctl);
    }
    /* A sharded controller runs on every replica (its ranges fence it);
     * the others on the leader only. */
    if (cs->ctl && (!d->leader || d->leading || kc_controller_sharding(cs->ctl)) &&
        informers_ready(d, cs->spec, true))
      kc_controller_set_active(cs->ctl, true);
  }
}

/* --- plugins ------------------------------------------------------------------ */

struct config_hold {
  kc_config *cfg;
  atomic_uint refs;
};

static atomic_uint configs_alive;

unsigned kc_daemon_configs_alive(void) { return atomic_load(&configs_alive); }

struct config_hold *daemon_hold_new(kc_config *cfg) {
  struct config_hold *h = malloc(sizeof *h);
  if (!h) return NULL;
  atomic_fetch_add(&configs_alive, 1);
  h->cfg = cfg;
  atomic_init(&h->refs, 1);
  return h;
}

/* Any thread (a plugin instance's on_free hook). */
void daemon_hold_unref(void *arg) {
  struct config_hold *h = arg;
  if (!h || atomic_fetch_sub(&h->refs, 1) != 1) return;
  kc_config_free(h->cfg);
  free(h);
  atomic_fetch_sub(&configs_alive, 1);
}

static void on_init_retry(uv_timer_t *t);

/* (Re)arms init_retry for the earliest slot waiting for a retry. */
void daemon_arm_init_retry(kc_daemon *d) {
  uint64_t next = 0;
  for (size_t i = 0; i < d->nctls; i++) {
    const ctl_slot *cs = &d->ctls[i];
    if (!cs->ctl && !cs->inst && cs->retry_at_ms && (!next || cs->retry_at_ms < next))
      next = cs->retry_at_ms;
  }
  if (!next || d->stopping) {
    uv_timer_stop(&d->init_retry);
    return;
  }
  uint64_t now = uv_now(&d->loop);
  uv_timer_start(&d->init_retry, on_init_retry, next > now ? next - now : 0, 0);
}

/* Records a failed load or init; with retry, schedules the next attempt. */
static void init_failed(kc_daemon *d, ctl_slot *cs, const char *err, bool retry) {
  snprintf(cs->init_error, sizeof cs->init_error, "%s", err[0] ? err : "unknown error");
  cs->init_failures++;
  if (!retry) {
    kc_error("daemon", "controller %s: %s", cs->spec->name, cs->init_error);
    return;
  }
  const kc_backoff b = {KC_INIT_RETRY_BASE_MS * KC_NS_PER_MS, KC_INIT_RETRY_MAX_MS * KC_NS_PER_MS};
  uint64_t ms = kc_backoff_when(&b, &cs->failed_attempts) / KC_NS_PER_MS;
  /* +-10 %: daemons started together do not retry in step. */
  uint64_t spread = ms / 5;
  if (spread) ms = ms - ms / 10 + kc_mix64(uv_hrtime() ^ (uint64_t)(uintptr_t)cs) % spread;
  cs->retry_delay_ms = ms;
  cs->retry_at_ms = uv_now(&d->loop) + ms;
  kc_error("daemon",
           "controller %s: %s; attempt %u failed, retrying in %.1f s (other controllers keep running)",
           cs->spec->name, cs->init_error, (unsigned)cs->failed_attempts, (double)ms / 1000.0);
  daemon_arm_init_retry(d);
}

/* Loads the slot's plugin and runs its init. On failure: logged, counted,
 * and retried with backoff when retry is true (else the caller gives up:
 * --fail-fast at start-up). Returns 0 or a negative errno. */
int daemon_instantiate(kc_daemon *d, ctl_slot *cs, bool retry) {
  char err[sizeof cs->init_error];
  kc_plugin *p = NULL;
  cs->retry_at_ms = 0;
  /* A hook is a built-in plugin whose init gets the controller spec. */
  const char *what = cs->spec->hook ? "hook" : "plugin";
  const kc_hook_spec *hk = cs->spec->hook;
  const char *which = !hk             ? cs->spec->plugin
                      : hk->webhook   ? hk->webhook->url
                                      : hk->exec->command[0];
  char shown[512];
  if (hk && hk->webhook) { /* no query or credentials in the log */
    kc_hook_webhook_redact(which, shown, sizeof shown);
    which = shown;
  }
  /* isolation: process: the built-in that runs the .so in a child (isolate.h). */
  bool iso = !hk && cs->spec->isolation == KC_ISOLATION_PROCESS;
  int rc = hk ? kc_plugin_builtin(hk->webhook ? kc_hook_webhook_plugin() : kc_hook_exec_plugin(),
                                  &p, err, sizeof err)
           : iso ? kc_plugin_builtin(kc_isolate_plugin(), &p, err, sizeof err)
                 : kc_plugin_load(cs->spec->plugin, &p, err, sizeof err);
  if (rc == 0) {
    const kc_host_env env = {&daemon_env_ops, d->link, cs->spec->settings,
                             d->opts.dry_run || cs->spec->dry_run, cs->spec};
    rc = kc_plugin_instance_new_arg(p, cs->spec->name, &env, hk || iso ? (void *)cs->spec : NULL,
                                    &cs->inst, err, sizeof err);
  }
  if (rc < 0) {
    init_failed(d, cs, err, retry);
    return rc;
  }
  atomic_fetch_add(&d->hold->refs, 1);
  kc_plugin_instance_on_free(cs->inst, daemon_hold_unref, d->hold);
  if (cs->failed_attempts)
    kc_info("daemon", "controller %s: %s %s loaded after %u failed attempts", cs->spec->name,
            what, which, (unsigned)cs->failed_attempts);
  else
    kc_info("daemon", "controller %s: %s %s loaded", cs->spec->name, what, which);
  if (d->opts.dry_run || cs->spec->dry_run)
    kc_info("daemon", "controller %s: dry run: its writes go out with dryRun=All (stored "
            "nowhere), each logged as \"dry run: would ...\"; its Events are not recorded",
            cs->spec->name);
  kc_backoff_forget(&cs->failed_attempts);
  cs->init_error[0] = '\0';
  cs->retry_delay_ms = 0;
  return 0;
}

static void on_init_retry(uv_timer_t *t) {
  kc_daemon *d = t->data;
  /* A reload being applied re-instantiates every slot (and re-arms). */
  if (d->stopping || d->reload_cfg) return;
  uint64_t now = uv_now(&d->loop);
  bool loaded = false;
  for (size_t i = 0; i < d->nctls; i++) {
    ctl_slot *cs = &d->ctls[i];
    if (!cs->ctl && !cs->inst && cs->retry_at_ms && cs->retry_at_ms <= now)
      loaded |= daemon_instantiate(d, cs, true) == 0;
  }
  daemon_arm_init_retry(d);
  if (loaded) daemon_on_tick(&d->tick); /* start its controller now, not at the next tick */
}


/* --- leader election (daemon/lease/leader.h) ----------------------------------------- */

static void on_started_leading(void *ud) {
  kc_daemon *d = ud;
  if (d->stopping) return;
  d->leading = true;
  atomic_store(&d->may_write, true);
  daemon_on_tick(&d->tick); /* activate synced controllers now, not at the next tick */
}

static void on_stopped_leading(void *ud) {
  kc_daemon *d = ud;
  /* Writes are already refused (kc_leader_is_leader is false); stop
   * dispatching. Informers keep running for a fast takeover. Sharded
   * controllers do not follow leadership: they keep their ranges. */
  atomic_store(&d->may_write, false);
  d->leading = false;
  for (size_t i = 0; i < d->nctls; i++)
    if (d->ctls[i].ctl && !kc_controller_sharding(d->ctls[i].ctl))
      kc_controller_set_active(d->ctls[i].ctl, false);
}

/* The replica identity: --identity, leaderElection.identity, else hostname
 * + random suffix, chosen once per run (the elector and every sharded
 * controller use the same one). */
static int choose_identity(kc_daemon *d) {
  const char *id = d->opts.identity ? d->opts.identity : d->cfg->leader_election.identity;
  if (id && *id) {
    int n = snprintf(d->identity, sizeof d->identity, "%s", id);
    return n > 0 && (size_t)n < sizeof d->identity ? 0 : -ENAMETOOLONG;
  }
  int rc = kc_leader_default_identity(d->identity, sizeof d->identity);
  return rc < 0 ? rc : 0;
}

static int leader_start(kc_daemon *d) {
  int irc = choose_identity(d);
  if (irc < 0) {
    kc_error("daemon", "cannot choose the replica identity: %s", strerror(-irc));
    return irc;
  }
  bool enabled = d->opts.leader_elect ? d->opts.leader_elect > 0 : d->cfg->leader_election.enabled;
  if (!enabled) {
    atomic_store(&d->may_write, true);
    return 0;
  }
  atomic_store(&d->may_write, false);
  kc_leader_callbacks cb = {on_started_leading, on_stopped_leading, NULL, NULL};
  int rc = kc_leader_new(&d->loop, d->api, &d->cfg->leader_election, d->identity, &cb, d,
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

#define KC_DAEMON_EVENTS_FLUSH_MS 2000


/* Close the host link first: abandoned workers may still call the event
 * host function. */
static void close_events(kc_daemon *d) {
  daemon_host_link_close(d);
  kc_events_close(d->events);
  d->events = NULL;
}

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

static void on_controller_stopped(void *ud) {
  kc_daemon *d = ud;
  d->controllers_alive--;
}

/* The rest of the stop, once the snapshots (if any) are written: the
 * endpoints answer until here. */
static void finish_closing(kc_daemon *d) {
  close_events(d);
  kc_adminsock_close(d->admin);
  d->admin = NULL;
  /* The endpoints first: the secure metrics filter holds an API worker,
   * which must go before the client. */
  kc_ops_close(d->ops);
  d->ops = NULL;
  kc_api_close(d->api);
  d->api = NULL;
  uv_close((uv_handle_t *)&d->tick, on_closed_noop);
  uv_close((uv_handle_t *)&d->init_retry, on_closed_noop);
  uv_close((uv_handle_t *)&d->sig_term, on_closed_noop);
  uv_close((uv_handle_t *)&d->sig_int, on_closed_noop);
  uv_close((uv_handle_t *)&d->sig_hup, on_closed_noop);
}

static void on_snapshots_written(void *ud, const kc_snapwriter_result *res) {
  kc_daemon *d = ud;
  kc_info("daemon", "snapshots: %zu files written in %.1f ms off the loop thread%s", res->written,
          (double)(uv_hrtime() - d->snap_t0) / 1e6,
          res->cancelled ? " (cancelled by a second signal: the unfinished ones were removed)" : "");
  kc_snapwriter_free(d->snap_writer);
  d->snap_writer = NULL;
  finish_closing(d);
}

/* Every informer is closed; with a state directory each hands its stores
 * to a snapshot writer first, which writes them on a pool thread while the
 * loop keeps serving the probes (snapwriter.h), and the stop goes on once
 * they are written. */
static void finish_shutdown(kc_daemon *d) {
  atomic_store(&d->may_write, false);
  kc_timer_close(&d->cred_timer, on_closed_noop);
  daemon_host_link_close(d); /* before the informers close: abandoned reconciles may read them */
  kc_snapwriter *w = NULL;
  if (state_directory(d) && kc_snapwriter_new(state_directory(d), &w) < 0) {
    kc_error("daemon", "snapshots: out of memory; none written");
    w = NULL;
  }
  for (size_t i = 0; i < d->nkinds; i++) {
    if (d->kinds[i]->informer) kc_informer_close_saving(d->kinds[i]->informer, w);
    d->kinds[i]->informer = NULL;
  }
  kc_discovery_free(d->discovery); /* runs no callback: slots can be freed */
  d->discovery = NULL;
  kc_clusterid_close(d->clusterid); /* every reflector left it */
  d->clusterid = NULL;
  kc_decode_pool_free(d->decode_pool); /* the informers closed every stream */
  d->decode_pool = NULL;
  if (w) {
    if (d->snap_cancelled) kc_snapwriter_cancel(w);
    d->snap_t0 = uv_hrtime();
    int rc = kc_snapwriter_start(w, &d->loop, on_snapshots_written, d);
    if (rc == 0) {
      d->snap_writer = w;
      kc_info("daemon", "snapshots: writing %zu files off the loop thread", kc_snapwriter_files(w));
      return; /* on_snapshots_written goes on */
    }
    kc_error("daemon", "snapshots: cannot start writing: %s; none written", uv_strerror(rc));
    kc_snapwriter_free(w);
  }
  finish_closing(d);
}

static void on_events_flushed(void *ud) {
  kc_daemon *d = ud;
  /* All guarded work stopped: hand the Lease over at once. */
  if (d->leader && kc_leader_release(d->leader, on_lease_released, d) == 0) return;
  kc_leader_close(d->leader);
  d->leader = NULL;
  finish_shutdown(d);
}

static void on_shutdown_poll(uv_timer_t *t) {
  kc_daemon *d = t->data;
  if (d->controllers_alive == 0) {
    uv_timer_stop(t);
    /* Events still queued go out while we may write, briefly. */
    if (d->events) kc_events_flush(d->events, KC_DAEMON_EVENTS_FLUSH_MS, on_events_flushed, d);
    else on_events_flushed(d);
  }
}

static void begin_shutdown(kc_daemon *d, const char *why) {
  if (d->stopping) return;
  d->stopping = true;
  kc_ops_stopping(d->ops);
  /* Controllers go away from here on: kctrld ctl has nothing left to show. */
  kc_adminsock_close(d->admin);
  d->admin = NULL;
  kc_info("daemon", "%s: stopping (in-flight reconciles get up to %lld ms)", why,
          (long long)d->cfg->shutdown_timeout_ms);
  /* Writes stay allowed while in-flight reconciles drain. */
  for (size_t i = 0; i < d->nctls; i++) {
    if (d->ctls[i].ctl)
      kc_controller_stop(d->ctls[i].ctl, (uint64_t)d->cfg->shutdown_timeout_ms,
                         on_controller_stopped, d);
    d->ctls[i].ctl = NULL;
  }
  uv_timer_stop(&d->init_retry);
  kc_timer_stop(&d->cred_timer);
  d->cred_waiting = false;
  uv_timer_stop(&d->tick);
  uv_timer_start(&d->tick, on_shutdown_poll, 0, 50);
}

static void on_signal(uv_signal_t *s, int signum) {
  kc_daemon *d = s->data;
  if (signum == SIGHUP) {
    if (d->stopping) return;
    if (d->reload_cfg) {
      kc_warn("daemon", "SIGHUP: a reload is already in progress");
      return;
    }
    kc_ops_reloading(d->ops);
    bool pending = false; /* apply_reload reports the outcome (now or once controllers drained) */
    if (daemon_reload(d, &pending) < 0)
      kc_ops_reloaded(d->ops, d->reload_error);
    else if (!pending)
      kc_ops_reloaded(d->ops, "config unchanged");
    return;
  }
  const char *name = signum == SIGTERM ? "SIGTERM" : "SIGINT";
  if (d->stopping) {
    /* The stop is bounded by shutdownTimeout, except for the snapshots'
     * write, which grows with the caches: another signal cuts it short. */
    if (!d->snap_cancelled)
      kc_warn("daemon", "%s again: snapshots not written yet are given up (their temporary files "
              "removed; files already complete stay)", name);
    d->snap_cancelled = true;
    kc_snapwriter_cancel(d->snap_writer);
    return;
  }
  begin_shutdown(d, name);
}



/* --- the first credential, and new ones ---------------------------------------- */

#define KC_DAEMON_CRED_WARN_MS 10000 /* the wait is logged at info, then at warn after this */
#define KC_DAEMON_CRED_WAIT_MS 35000 /* the plugin's own 30 s timeout and a margin */

/* Unix seconds as RFC 3339 UTC, for messages. */
static void format_utc(int64_t unix_s, char *buf, size_t cap) {
  time_t t = (time_t)unix_s;
  struct tm tm;
  if (!gmtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf(buf, cap, "%lld", (long long)unix_s);
}

/* Informers (through the tick), discovery and leader election start. */
static void start_running(kc_daemon *d) {
  if (d->running || d->stopping) return;
  d->running = true;
  d->cred_waiting = false;
  kc_timer_stop(&d->cred_timer);
  uv_timer_start(&d->tick, daemon_on_tick, 0, 1000);
  if ((d->run_error = leader_start(d)) < 0) begin_shutdown(d, "leader election");
}

static void on_cred_timer(uv_timer_t *t) {
  kc_daemon *d = t->data;
  if (!d->cred_waiting) return;
  uint64_t waited = kc_clock_now_ms() - d->cred_wait_start_ms;
  if (waited >= KC_DAEMON_CRED_WAIT_MS) {
    kc_warn("credentials", "no credential from the exec plugin after %llu s; starting anyway, "
            "requests go without one until it succeeds", (unsigned long long)waited / 1000);
    start_running(d);
    return;
  }
  kc_warn("credentials", "still waiting for the first credential from the exec plugin after "
          "%llu s (%s); the plugin's own messages are logged when it ends",
          (unsigned long long)waited / 1000, d->creds->source ? d->creds->source : "kubeconfig");
  kc_timer_start(&d->cred_timer, on_cred_timer, KC_DAEMON_CRED_WAIT_MS - waited, 0);
}

/* Loop thread: a different credential is stored (apiclient.h). */
static void on_new_credential(void *ud) {
  kc_daemon *d = ud;
  if (d->stopping) return;
  if (d->cred_waiting) {
    kc_info("credentials", "first credential from the exec plugin after %llu ms; starting",
            (unsigned long long)(kc_clock_now_ms() - d->cred_wait_start_ms));
    start_running(d);
    return;
  }
  /* Whatever waits after a 401/403 tries again now rather than after its
   * backoff (an informer's can have grown to tens of seconds). */
  for (size_t i = 0; i < d->nkinds; i++) {
    kind_slot *k = d->kinds[i];
    if (k->informer) kc_informer_credentials_changed(k->informer);
    else if (!atomic_load(&k->resolved) && !k->discovering) k->next_resolve_ms = 0;
  }
}

/* The exec plugin's first run may take a while (a login, a token
 * exchange): the probes answer meanwhile, /readyz says why it is not ready. */
static void begin_running(kc_daemon *d) {
  if (kc_api_has_credential(d->api)) {
    start_running(d);
    return;
  }
  d->cred_waiting = true;
  d->cred_wait_start_ms = kc_clock_now_ms();
  kc_info("credentials", "waiting for the first credential from the exec plugin (%s); informers "
          "and leader election start when it arrives (at most %d s)",
          d->creds->source ? d->creds->source : "kubeconfig", KC_DAEMON_CRED_WAIT_MS / 1000);
  kc_timer_start(&d->cred_timer, on_cred_timer, KC_DAEMON_CRED_WARN_MS, 0);
}

/* Readiness check "api": the first credential, then whether the API server
 * answers and accepts it (apiclient.h kc_api_health). */
static void check_api(void *ud, kc_health_results *out) {
  kc_daemon *d = ud;
  uint64_t now = kc_clock_now_ms();
  if (d->cred_waiting) {
    kc_health_report(out, NULL, false, "waiting for the first credential from the exec plugin (%llu s)",
                     (unsigned long long)(now - d->cred_wait_start_ms) / 1000);
    return;
  }
  int64_t limit = d->opts.auth_failure_readiness_set ? d->opts.auth_failure_readiness_ms
                                                     : d->cfg->auth_failure_readiness_ms;
  kc_api_health h = {0};
  if (d->api) kc_api_health_get(d->api, &h);
  char since[32];
  if (limit > 0 && h.auth_failing_since_ms && now - h.auth_failing_since_ms >= (uint64_t)limit) {
    format_utc(h.auth_failing_since_unix, since, sizeof since);
    kc_health_report(out, NULL, false, "API authentication failing since %s: %s", since, h.auth_status);
  } else if (limit > 0 && h.unreachable_since_ms && now - h.unreachable_since_ms >= (uint64_t)limit) {
    format_utc(h.unreachable_since_unix, since, sizeof since);
    kc_health_report(out, NULL, false, "API server unreachable since %s: %s", since, h.unreachable_error);
  } else {
    kc_health_report(out, NULL, true, NULL);
  }
}

/* --- run ---------------------------------------------------------------------- */

static void free_daemon(kc_daemon *d) {
  for (size_t i = 0; i < d->nctls; i++) kc_plugin_instance_free(d->ctls[i].inst);
  for (size_t i = 0; i < d->nkinds; i++) free(d->kinds[i]);
  free(d->kinds);
  free(d->ctls);
  kc_config_free(d->reload_cfg);
  kc_config_diff_free(d->reload_diff);
  free(d->ops_specs);
  free(d->ops_informers);
  free(d->ops_waits);
  free(d->ops_controllers);
  free(d->ops_histograms);
  free(d->ops_ctl_states);
  kc_kube_creds_free(d->creds);
  kc_paused_set_free(d->paused);
  if (d->hold)
    daemon_hold_unref(d->hold); /* the config itself goes with its last plugin instance */
  else
    kc_config_free(d->cfg);
  pthread_rwlock_destroy(&d->registry_lock);
  daemon_host_link_close(d);
  daemon_link_release(d->link); /* plugin instances still running keep it */
  free(d);
}

int kc_daemon_run(const kc_daemon_options *opts) {
  kc_daemon *d = calloc(1, sizeof *d);
  if (!d) return -ENOMEM;
  int rc = pthread_rwlock_init(&d->registry_lock, NULL);
  if (rc != 0) {
    free(d);
    return -rc;
  }
  d->opts = *opts;
  char err[4096];
  if ((rc = kc_config_load_file(opts->config_path, &d->cfg, err, sizeof err)) < 0) {
    daemon_log_config_errors(err);
    free_daemon(d);
    return rc;
  }
  if (!(d->hold = daemon_hold_new(d->cfg))) {
    kc_error("daemon", "out of memory");
    free_daemon(d);
    return -ENOMEM;
  }
  kc_log_set_level(opts->log_level ? opts->log_level : d->cfg->log_level);
  kc_log_set_format(opts->log_format ? opts->log_format : d->cfg->log_format);
  if ((rc = kc_kube_resolve_context(opts->kubeconfig, d->cfg->kubeconfig, opts->context, &d->creds,
                                    err, sizeof err)) < 0) {
    kc_error("credentials", "%s", err);
    free_daemon(d);
    return rc;
  }
  kc_info("daemon", "kctrld %s: API server %s (%s)", KCTRLD_VERSION, d->creds->server,
          d->creds->source ? d->creds->source : "credentials");
  prepare_state_directory(d);
  if ((rc = daemon_pauses_start(d, state_directory(d))) < 0) {
    kc_error("daemon", "out of memory");
    free_daemon(d);
    return rc;
  }
  d->nkinds = d->cfg->ninformers;
  d->nctls = d->cfg->ncontrollers;
  d->kinds = calloc(d->nkinds ? d->nkinds : 1, sizeof *d->kinds);
  d->ctls = calloc(d->nctls ? d->nctls : 1, sizeof *d->ctls);
  bool ok = d->kinds && d->ctls;
  for (size_t i = 0; ok && i < d->nkinds; i++) ok = (d->kinds[i] = daemon_new_slot(d, &d->cfg->informers[i]));
  if (!ok) {
    if (!d->kinds) d->nkinds = 0;
    if (!d->ctls) d->nctls = 0;
    kc_error("daemon", "out of memory");
    free_daemon(d);
    return -ENOMEM;
  }
  for (size_t i = 0; i < d->nctls; i++) d->ctls[i].spec = &d->cfg->controllers[i];
  if ((rc = uv_loop_init(&d->loop)) != 0) {
    kc_error("daemon", "cannot create the event loop: %s", uv_strerror(rc));
    free_daemon(d);
    return rc;
  }
  uv_timer_init(&d->loop, &d->init_retry);
  d->init_retry.data = d;
  kc_timer_init(&d->loop, &d->cred_timer);
  d->cred_timer.uv.data = d;
  int code;
  if ((code = kc_api_new(&d->loop, d->creds, &d->api)) < 0 ||
      (code = kc_discovery_new(d->api, &d->discovery)) < 0 ||
      (code = kc_clusterid_new(&d->loop, d->api, &d->clusterid)) < 0) {
    kc_error("daemon", "cannot create the API client");
    goto fail;
  }
  unsigned decode_threads = d->cfg->decode_threads < 0 ? kc_decode_pool_default_threads()
                                                       : (unsigned)d->cfg->decode_threads;
  if ((code = kc_decode_pool_new(&d->loop, decode_threads, &d->decode_pool)) < 0) {
    kc_error("daemon", "cannot start %u decode threads: %s", decode_threads, strerror(-code));
    goto fail;
  }
  kc_info("daemon", "decoding response bodies on %u thread%s%s", decode_threads,
          decode_threads == 1 ? "" : "s", decode_threads ? "" : " (the loop thread)");
  kc_events_options eo = {.api = d->api,
                          .may_write = daemon_events_may_write,
                          .ud = d,
                          .fence_capture = daemon_events_fence_capture,
                          .fence_ok = daemon_events_fence_ok,
                          .fence_free = daemon_events_fence_free};
  if ((code = kc_events_new(&d->loop, &eo, &d->events)) < 0) {
    kc_error("daemon", "cannot create the Event recorder");
    goto fail;
  }
  if (!(d->link = daemon_host_link_new(d))) {
    kc_error("daemon", "out of memory");
    code = -ENOMEM;
    goto fail;
  }
  for (size_t i = 0; i < d->nctls; i++) {
    if ((code = daemon_instantiate(d, &d->ctls[i], !opts->fail_fast)) < 0 && opts->fail_fast) {
      kc_error("daemon", "controller %s cannot start and --fail-fast is set: exiting",
               d->ctls[i].spec->name);
      goto fail;
    }
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
  if ((code = daemon_ops_start(d)) < 0 || (code = daemon_admin_start(d)) < 0) {
    begin_shutdown(d, "startup failed");
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out;
  }
  if ((code = kc_api_on_credentials(d->api, on_new_credential, d)) < 0 ||
      (code = kc_health_add(kc_ops_health(d->ops), "api", check_api, d)) < 0) {
    kc_error("daemon", "cannot watch for new credentials: %s", strerror(-code));
    begin_shutdown(d, "startup failed");
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out;
  }
  begin_running(d);
  uv_run(&d->loop, UV_RUN_DEFAULT);
  code = d->run_error;
  goto out;
fail:
  uv_close((uv_handle_t *)&d->init_retry, on_closed_noop);
  kc_timer_close(&d->cred_timer, on_closed_noop);
  kc_discovery_free(d->discovery);
  kc_clusterid_close(d->clusterid);
  kc_decode_pool_free(d->decode_pool);
  close_events(d);
  kc_api_close(d->api);
  uv_run(&d->loop, UV_RUN_DEFAULT);
out:
  if (uv_loop_close(&d->loop) != 0) kc_warn("daemon", "event loop still had open handles at exit");
  free_daemon(d);
  /* Hook children get SIGTERM, then SIGKILL after their grace period, and
   * are reaped by their stopper threads: wait for those. */
  if (kc_hook_child_drain(60000) < 0)
    kc_warn("daemon", "hook children still being stopped at exit (%u not reaped)",
            kc_hook_children_unreaped());
  kc_plugin_host_unload_all();
  if (code == 0) kc_info("daemon", "stopped");
  return code;
}
