/* SPDX-License-Identifier: Apache-2.0 */
/* daemon_int: the state of the running daemon (struct kc_daemon and its
 * informer and controller slots) and the functions its files call in one
 * another: daemon.c (start-up tick, plugins, leader election, shutdown,
 * kc_daemon_run), daemon_wiring.c (the plugins' host environment, the Event
 * recorder's fence, the ops view) and daemon_reload.c (SIGHUP reload).
 * Included only by those files; daemon.h is the interface.
 *
 * Threads: everything here runs on the loop thread unless its comment says
 * otherwise. Worker threads reach the slots only through the registry
 * (kc_daemon_resource) and the host link, under their locks. */
#ifndef KC_DAEMON_INT_H
#define KC_DAEMON_INT_H

#include "daemon.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "base/clock.h"
#include "cache/snapwriter.h"
#include "client/clusterid.h"
#include "client/discovery.h"
#include "client/events.h"
#include "client/kubeconfig.h"
#include "config/config.h"
#include "host/hostenv.h"
#include "host/plugin_host.h"
#include "lease/leader.h"
#include "ops/adminsock.h"
#include "ops/ops.h"
#include "runtime/controller.h"
#include "runtime/pausedset.h"
#include "watch/decodepool.h"

struct host_link;
struct config_hold;

typedef struct kind_slot {
  kc_daemon *d;
  const kc_informer_spec *spec; /* in the current config */
  char api_path[384];
  char plural[256];
  bool namespaced;
  atomic_bool resolved;
  bool discovering;
  bool orphaned; /* removed by a reload while discovery was in flight */
  bool answered;  /* the server answered discovery for it at least once */
  char miss[768]; /* why it is not resolved ("" while unknown or resolved) */
  uint64_t last_miss_log_ms;
  uint32_t misses;          /* consecutive failed resolves: kc_backoff_when's counter */
  uint64_t next_resolve_ms; /* loop time of the next discovery attempt */
  kc_informer *informer;
  /* Created but not started: the `for` informer of a sharded controller
   * that has it alone waits for the first claimed range, so that its first
   * list already carries the shardSelector (start_deferred). */
  bool deferred;
  uint64_t deferred_since_ms;
} kind_slot;

typedef struct ctl_slot {
  const kc_controller_spec *spec;
  kc_plugin_instance *inst; /* until the controller exists, then owned by it */
  kc_controller *ctl;
  /* Plugin load/init failures (no inst, no ctl): retried on d->init_retry. */
  char init_error[1024];    /* "" once loaded and initialised */
  uint32_t failed_attempts; /* consecutive: kc_backoff_when's counter */
  uint64_t retry_at_ms;     /* loop time of the next attempt; 0: none */
  uint64_t retry_delay_ms;  /* the delay chosen after the last failure */
  uint64_t init_failures;   /* kctrld_controller_init_failures_total, kept across reloads */
} ctl_slot;

struct kc_daemon {
  uv_loop_t loop;
  kc_daemon_options opts;
  kc_config *cfg;
  kc_kube_creds *creds;
  kc_api *api;
  kc_clusterid *clusterid; /* which cluster the endpoint leads to, for every informer */
  kc_events *events; /* the Event recorder behind the `event` host function */
  struct host_link *link; /* what the plugins' host environments point at */
  kc_discovery *discovery;
  kc_decode_pool *decode_pool; /* response bodies are decoded here */
  /* Guards cfg, kinds and their resolution for worker-thread lookups; the
   * loop takes it for writing only while swapping a reloaded config. */
  pthread_rwlock_t registry_lock;
  kind_slot **kinds; /* one per config informer */
  size_t nkinds;
  ctl_slot *ctls;    /* one per config controller */
  size_t nctls;
  size_t controllers_alive;
  /* The running config with a reference count: each plugin instance holds
   * the config its settings point into, so a config replaced by a reload is
   * freed when the last instance created from it goes (possibly on an
   * abandoned worker's thread), not kept until exit. */
  struct config_hold *hold;
  kc_config *reload_cfg; /* validated, waiting for controllers to drain */
  kc_config_diff *reload_diff;
  size_t reload_waiting;
  char reload_error[512];
  uv_signal_t sig_term, sig_int, sig_hup;
  uv_timer_t tick;
  uv_timer_t init_retry; /* the next due plugin load/init retry (ctl_slot) */
  /* Start-up with an exec credential plugin: informers, discovery and
   * leader election wait (at most KC_DAEMON_CRED_WAIT_MS) for its first
   * credential while the probes already answer; cred_timer logs the wait. */
  kc_timer cred_timer;
  bool cred_waiting;
  bool running;             /* informers and leader election started */
  uint64_t cred_wait_start_ms;
  int run_error; /* leader election could not start: kc_daemon_run's result */
  atomic_bool may_write;
  kc_leader *leader; /* NULL when leader election is off */
  char identity[320]; /* the replica identity (leader election's; sharding uses it too) */
  bool leading;      /* loop view: controllers may be active */
  bool stopping;
  bool state_dir_unusable; /* the state directory could not be made: snapshots off */
  kc_snapwriter *snap_writer; /* the stop's snapshots while they are written; NULL otherwise */
  bool snap_cancelled;        /* a second SIGTERM/SIGINT: snapshots are given up */
  uint64_t snap_t0;           /* uv_hrtime() when their write started */
  /* Metrics, health endpoints and sd_notify (daemon/ops/ops.h); the arrays are
   * scratch space for the view, rebuilt on each request. */
  kc_ops *ops;
  kc_adminsock *admin; /* NULL: no admin socket */
  kc_paused_set *paused; /* kctrld ctl pause, kept across reloads (and restarts with a state dir) */
  const kc_informer_spec **ops_specs;
  kc_informer **ops_informers;
  kc_ops_informer_wait *ops_waits;
  kc_controller **ops_controllers;
  const kc_reconcile_histogram **ops_histograms;
  kc_ops_controller_state *ops_ctl_states;
  size_t ops_cap_informers, ops_cap_controllers, ops_cap_histograms, ops_cap_ctl_states, ops_cap_waits;
  char ops_lease_name[256];
};

/* ---- daemon.c ---------------------------------------------------------------- */

/* Where objects of apiVersion+kind live: fills *out with borrowed strings
 * (api_path, plural, namespaced). Returns 0, or -ENOENT when discovery does
 * not know the kind. Any thread. */
int kc_daemon_resource(kc_daemon *d, const char *api_version, const char *kind,
                       kc_resource_ref *out);
/* True while this process may write (leading, or leader election off); on
 * a thread running a sharded reconcile: while its key's range is held, leader
 * or not. Host services refuse writes when false. Any thread. */
bool kc_daemon_may_write(const kc_daemon *d);
/* The start-up tick (every second; see daemon.c). */
void daemon_on_tick(uv_timer_t *t);
/* A slot for informer spec; NULL when out of memory. */
kind_slot *daemon_new_slot(kc_daemon *d, const kc_informer_spec *spec);
/* Closes the slot's informer and frees it, or leaves that to the discovery
 * callback in flight (no other thread may reach it). */
void daemon_release_slot(kind_slot *k);
/* The running config with one reference; NULL when out of memory. */
struct config_hold *daemon_hold_new(kc_config *cfg);
/* Any thread (a plugin instance's on_free hook). */
void daemon_hold_unref(void *arg);
/* (Re)arms init_retry for the earliest slot waiting for a retry. */
void daemon_arm_init_retry(kc_daemon *d);
/* Loads the slot's plugin and runs its init. On failure: logged, counted,
 * and retried with backoff when retry is true. Returns 0 or a negative errno. */
int daemon_instantiate(kc_daemon *d, ctl_slot *cs, bool retry);

/* ---- daemon_wiring.c ------------------------------------------------------- */

/* What every plugin instance's kc_host_env calls, with a struct host_link as ud. */
extern const kc_host_env_ops daemon_env_ops;
/* The link the plugins' host environments point at; NULL when out of memory. */
struct host_link *daemon_host_link_new(kc_daemon *d);
/* Any thread: drops one reference to the link (ud); the last one frees it. */
void daemon_link_release(void *ud);
/* Cuts the link from the daemon: lookups, writes and Events fail from now. */
void daemon_host_link_close(kc_daemon *d);
/* The Event recorder's write gate and fence (events.h); recording thread. */
bool daemon_events_may_write(void *ud);
void *daemon_events_fence_capture(void *ud, bool *refused);
bool daemon_events_fence_ok(void *token);
void daemon_events_fence_free(void *token);
/* Starts the metrics and health endpoints over the daemon's view. */
int daemon_ops_start(kc_daemon *d);
/* The admin socket (`kctrld ctl`), when one is configured; 0 or the error
 * of a socket the operator asked for (the default one only warns). */
int daemon_admin_start(kc_daemon *d);
/* The paused controllers: read from state_dir (NULL: kept in memory only),
 * those the config no longer has dropped. 0 or -ENOMEM. */
int daemon_pauses_start(kc_daemon *d, const char *state_dir);
/* A controller just created starts paused when kctrld ctl paused it. */
void daemon_pauses_apply(kc_daemon *d, kc_controller *c);
/* After a reload: drops the pauses of controllers the config lost. */
void daemon_pauses_retain(kc_daemon *d);

/* ---- daemon_reload.c ------------------------------------------------------- */

/* One log record per "file:line:col: message" line of err. */
void daemon_log_config_errors(const char *err);
/* SIGHUP: loads and compares the file; see daemon_reload.c. Called only
 * while no reload is in progress. */
int daemon_reload(kc_daemon *d, bool *pending);

#endif
