/* SPDX-License-Identifier: Apache-2.0 */
/* ops: what an operator sees of the running daemon: the Prometheus metrics
 * of controllers, workqueues, informers/reflectors and leader election; the
 * /debug/informers document; readiness; the systemd notifications. It ties
 * metrics (registry), httpserver (endpoints) and notify (sd_notify) to the
 * daemon's objects, which it reads through a view the daemon fills on
 * request (so reloads that replace arrays need no re-registration).
 *
 * Metric names and labels (docs/api-contract.md 9.3 and 10.3):
 *  workqueue_{depth,adds_total,retries_total,unfinished_work_seconds,
 *    longest_running_processor_seconds}{name,controller},
 *  workqueue_{queue,work}_duration_seconds histograms (1e-8 .. 1e3 s),
 *  controller_runtime_reconcile_total{controller,result=success|error|
 *    requeue|requeue_after}, controller_runtime_reconcile_errors_total,
 *  controller_runtime_reconcile_time_seconds (0.005 .. 60 s),
 *  controller_runtime_max_concurrent_reconciles, controller_runtime_active_workers
 *    {controller}, leader_election_master_status{name} (only with leader
 *    election on, as controller-runtime),
 *  kctrld_reflector_{lists,watches,relists,events,errors,history_checks,
 *    history_changes}_total, kctrld_informer_consistency_{checks,diffs}_total and
 *  kctrld_informer_{objects,bytes,backlog,synced}
 *    {informer,resource,namespace,label_selector,field_selector};
 *  the process collector's process_* and client-go's rest_client_* (selfmetrics.h).
 * Informer backlog = keys queued (not yet handed to a worker) in the
 * fullest workqueue fed by the informer: handlers collapse events to keys
 * synchronously, so that queue IS the per-listener backlog.
 *
 * Context: loop thread only, every function. Errors: 0 or a negative errno.
 * kc_ops_reloading/reloaded/stopping/close accept NULL (no-op).
 * Ownership: views borrow the daemon's objects for the call only.
 */
#ifndef KC_OPS_H
#define KC_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "client/apiclient.h"
#include "runtime/controller.h"
#include "runtime/pausedset.h"
#include "ops/httpserver.h"
#include "client/events.h"
#include "cache/informer.h"
#include "ops/looplag.h"
#include "base/metrics.h"
#include "ops/notify.h"
#include "ops/healthcheck.h"

/* One configured controller's start-up state (the daemon retries a plugin
 * that fails to load or init; see daemon.h). */
typedef struct kc_ops_controller_state {
  const char *name;
  bool running;           /* its controller exists: kctrld_controller_ready 1 */
  const char *init_error; /* NULL, or why its plugin did not load or init (being retried) */
  uint32_t failed_attempts; /* consecutive failures of load/init */
  uint64_t retry_delay_ms;  /* the next attempt comes this long after the last one */
  uint64_t init_failures;   /* kctrld_controller_init_failures_total */
} kc_ops_controller_state;

/* Why a config informer does not exist yet (its kind is not resolved). */
typedef struct kc_ops_informer_wait {
  const char *reason; /* the last discovery failure for its kind, NULL: no answer yet */
  bool not_served;    /* the server answered: the kind is not served (a CRD not installed
                       * yet, a misspelt kind); READY=1 does not wait for it */
} kc_ops_informer_wait;

typedef struct kc_ops_view {
  /* Config informers (may be NULL); informers[] runs parallel to it, with
   * NULL for an informer not created yet (kind not discovered). Controller
   * specs index informers by this position. */
  const kc_informer_spec *const *specs;
  kc_informer *const *informers;
  size_t ninformers;
  /* Parallel to informers (may be NULL: every missing one is still being
   * discovered): for an informer not created yet, why. */
  const kc_ops_informer_wait *informer_waits;
  kc_controller *const *controllers; /* NULL entries are skipped */
  size_t ncontrollers;
  /* Per controller (parallel to controllers; the array or an entry may be
   * NULL): its reconcile-time distribution. Without one, the histogram is
   * rendered from the controller's count and sum with le="+Inf" only. */
  const kc_reconcile_histogram *const *reconcile_histograms;
  /* Every configured controller (the array may be NULL), running or not. */
  const kc_ops_controller_state *controller_states;
  size_t ncontroller_states;
  /* Leader election: lease_name NULL when it is off. */
  const char *lease_name;      /* "namespace/name" or "name": the metric's name label */
  bool leading;
  bool standby;                /* the lease is observed held by another process */
  const char *leader;          /* current holder identity, or NULL */
  bool stopping;
  /* The Event recorder's counters; has_events false: no recorder. */
  bool has_events;
  kc_events_stats events;
  /* How late the loop runs its timers (NULL: not measured). */
  const kc_looplag *loop_lag;
  /* The controllers kctrld ctl paused, running or not (NULL: none kept
   * beyond the controller objects). */
  kc_paused_set *paused;
} kc_ops_view;

/* Fills *out (loop thread) with borrowed pointers valid until return. */
typedef void (*kc_ops_view_fn)(void *ud, kc_ops_view *out);

/* --- building blocks (usable without kc_ops) ----------------------------------- */

typedef struct kc_ops_families kc_ops_families;
/* Registers every family above in reg; *out freed with kc_ops_families_free. */
int kc_ops_families_new(kc_metrics *reg, kc_ops_families **out);
void kc_ops_families_free(kc_ops_families *f);
/* Sets every sample from the view (the registry must have been reset). */
int kc_ops_fill_metrics(const kc_ops_families *f, const kc_ops_view *v);
/* Appends the /debug/informers JSON array. */
int kc_ops_informers_json(const kc_ops_view *v, kc_buf *out);
/* The view's part of readiness, for STATUS= (/readyz runs kc_ops_health's
 * checks, which include these): no controller failing its plugin's load or init, every
 * informer created and synced, leader election off, leading or standby,
 * and not stopping. why gets the reason not to be: every failing
 * controller with its error, else the first other reason (an informer the
 * server refuses to list names the server's message: informer.h
 * kc_informer_config_error). */
bool kc_ops_ready(const kc_ops_view *v, char *why, size_t cap);
/* What READY=1 to systemd waits for: the daemon serves. Not stopping;
 * every informer created and started (not necessarily synced) or its kind
 * answered as not served by the API server (a CRD installed later must not
 * make systemd time the start out); leader election off, leading or
 * standby. Controllers are not waited for (one whose init keeps failing
 * must not make systemd kill the daemon that runs the others). why: as
 * kc_ops_ready, "ok" when started. */
bool kc_ops_started(const kc_ops_view *v, char *why, size_t cap);
/* One-line summary for STATUS=, e.g. "leading lease=ns/name; informers 3/3
 * synced; controllers 2". Stable while nothing changes state. */
void kc_ops_summary(const kc_ops_view *v, char *buf, size_t cap);
/* The STATUS= line: "ready: SUMMARY" once kc_ops_ready holds, else
 * "syncing: SUMMARY; WHY" (e.g. "...; waiting for kind demo.io/v1 Foo (not
 * served)"), "stopping; ..." while stopping. */
void kc_ops_status_line(const kc_ops_view *v, char *buf, size_t cap);
/* The line logged once when READY=1 goes out: "ready: SUMMARY", or
 * "ready: SUMMARY; still WHY" while /readyz would still refuse (e.g. "still
 * waiting for kind demo.io/v1 Foo (not served)"). */
void kc_ops_ready_message(const kc_ops_view *v, char *buf, size_t cap);

/* --- the assembled component ------------------------------------------------- */

typedef struct kc_ops kc_ops;

typedef struct kc_ops_options {
  const char *bind;       /* metrics (and health) bind address; "0" disables the server */
  /* --health-probe-bind-address: NULL serves /healthz and /readyz on `bind`
   * (with /metrics); otherwise they get a listener of their own there ("0":
   * none) and `bind` serves /metrics and /debug/informers only. */
  const char *probe_bind;
  uint64_t heartbeat_ms;  /* loop heartbeat and state check period; 0: 1000 */
  /* Secure metrics: `bind` speaks HTTPS with the certificate in cert_file
   * and key_file (tlscert.h: reloaded when they change), or a self-signed
   * one when both are NULL; and with api set, /metrics and the debug
   * documents answer only bearer tokens the API server authenticates and
   * authorizes (metricsauth.h). The probes are never behind either. */
  bool secure;
  const char *cert_file, *key_file;
  kc_api *api; /* borrowed: kc_ops_close must come before kc_api_close */
  /* metrics.debugQueues: also serve /debug/queues, /debug/keys and
   * /debug/trace (kctrld ctl's read-only answers, ops/admin.h) on `bind`. */
  bool debug_queues;
} kc_ops_options;

/* Registers the metrics, starts the HTTP server (unless disabled) and the
 * systemd notifier, and a timer that sends READY=1 once started
 * (kc_ops_started) and STATUS= (kc_ops_status_line) on every change. Returns 0 or a negative errno (a bind
 * failure is an error: the operator asked for that address). */
int kc_ops_start(uv_loop_t *loop, const kc_ops_options *o, kc_ops_view_fn view, void *ud,
                 kc_ops **out);
/* The readiness checks behind /readyz: "shutdown", "informers",
 * "controller" (controller/NAME: plugin loaded and started, its hook
 * answering, hooks/hook_health.h) and "leader-election" are built in;
 * components add theirs with kc_health_add (loop thread). NULL for NULL. */
kc_health *kc_ops_health(kc_ops *ops);
/* SIGHUP: RELOADING=1 + MONOTONIC_USEC; then kc_ops_reloaded with the outcome
 * ("reload applied" / "reload rejected: file:line:col: ..."), READY=1. */
void kc_ops_reloading(kc_ops *ops);
void kc_ops_reloaded(kc_ops *ops, const char *outcome);
/* SIGTERM: STOPPING=1 first thing; /readyz then fails. */
void kc_ops_stopping(kc_ops *ops);
/* Stops the server (joins its threads) and timers; frees after close. */
void kc_ops_close(kc_ops *ops);

#endif
