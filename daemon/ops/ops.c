/* SPDX-License-Identifier: Apache-2.0 */
/* ops: see ops.h. */
#include "ops/ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/hook_health.h"
#include "host/applymemo.h"
#include "host/dryrun.h"
#include "hooks/isolate.h"
#include "base/log.h"
#include "base/tlscert.h"
#include "ops/metricsauth.h"
#include "lease/sharding.h"
#include "ops/admin.h"
#include "ops/selfmetrics.h"
#include "base/sharedtext.h"

/* --- families ----------------------------------------------------------------- */

struct kc_ops_families {
  kc_metric_family *wq_depth, *wq_adds, *wq_queue_dur, *wq_work_dur, *wq_unfinished, *wq_longest,
      *wq_retries, *wq_depth_prio, *wq_aged;
  kc_metric_family *rec_total, *rec_errors, *rec_terminal, *rec_panics, *child_idle_exits, *rec_time, *rec_max, *rec_active;
  kc_metric_family *ctl_ready, *ctl_init_failures, *dry_run_writes, *desired_skips;
  kc_metric_family *ryow_skips, *ryow_wait, *ryow_timeouts, *ryow_overflow;
  kc_metric_family *le_master;
  kc_metric_family *ev_total, *ev_queued;
  kc_metric_family *rf_lists, *rf_watches, *rf_relists, *rf_events, *rf_errors, *rf_rejected;
  kc_metric_family *rf_stream_lists, *rf_stream_attempts, *rf_stream_fallbacks, *rf_pauses;
  kc_metric_family *loop_lag, *loop_lag_max;
  kc_metric_family *shared_pieces, *shared_bytes, *shared_refs;
  kc_metric_family *inf_objects, *inf_bytes, *inf_backlog, *inf_synced;
  kc_metric_family *rf_hist_checks, *rf_hist_changes, *inf_cons_checks, *inf_cons_diffs;
  kc_metric_family *sh_owned, *sh_handoffs, *sh_keys, *sh_cached, *sh_members;
  kc_selfmetrics *self; /* process_* and rest_client_* */
};

static const char *const wq_labels[] = {"name", "controller"};
static const char *const wq_prio_labels[] = {"name", "controller", "priority"};
static const char *const ctl_labels[] = {"controller"};
static const char *const result_labels[] = {"controller", "result"};
static const char *const dry_run_labels[] = {"controller", "verb"};
static const char *const le_labels[] = {"name"};
static const char *const ev_labels[] = {"result"};
static const char *const shard_labels[] = {"controller", "shard"};
static const char *const inf_labels[] = {"informer", "resource", "namespace", "label_selector",
                                         "field_selector"};
#define NINF_LABELS (sizeof inf_labels / sizeof inf_labels[0])

/* The workqueue, controller, leader election and Event families. */
static int register_runtime_families(kc_metrics *reg, kc_ops_families *f) {
  double wq_bounds[KC_WQ_HIST_BUCKETS];
  for (unsigned i = 0; i < KC_WQ_HIST_BUCKETS; i++)
    wq_bounds[i] = (double)kc_wq_histogram_bound_ns(i) / 1e9;
  const kc_metric_def defs[] = {
      {&f->wq_depth, "workqueue_depth", "Current depth of workqueue", KC_METRIC_GAUGE, wq_labels, 2, NULL, 0},
      {&f->wq_adds, "workqueue_adds_total", "Total number of adds handled by workqueue", KC_METRIC_COUNTER,
       wq_labels, 2, NULL, 0},
      {&f->wq_queue_dur, "workqueue_queue_duration_seconds",
       "How long in seconds an item stays in workqueue before being requested", KC_METRIC_HISTOGRAM, wq_labels,
       2, wq_bounds, KC_WQ_HIST_BUCKETS},
      {&f->wq_work_dur, "workqueue_work_duration_seconds",
       "How long in seconds processing an item from workqueue takes.", KC_METRIC_HISTOGRAM, wq_labels, 2,
       wq_bounds, KC_WQ_HIST_BUCKETS},
      {&f->wq_unfinished, "workqueue_unfinished_work_seconds",
       "How many seconds of work has been done that is in progress and hasn't been observed by "
       "work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads "
       "by observing the rate at which this increases.",
       KC_METRIC_GAUGE, wq_labels, 2, NULL, 0},
      {&f->wq_longest, "workqueue_longest_running_processor_seconds",
       "How many seconds has the longest running processor for workqueue been running.", KC_METRIC_GAUGE,
       wq_labels, 2, NULL, 0},
      {&f->wq_retries, "workqueue_retries_total", "Total number of retries handled by workqueue",
       KC_METRIC_COUNTER, wq_labels, 2, NULL, 0},
      {&f->wq_depth_prio, "workqueue_depth_by_priority",
       "Current depth of workqueue by priority (low, normal, high); the sum is workqueue_depth",
       KC_METRIC_GAUGE, wq_prio_labels, 3, NULL, 0},
      {&f->wq_aged, "kctrld_workqueue_aged_total",
       "Keys handed out ahead of a higher priority because they waited their priority's max wait",
       KC_METRIC_COUNTER, wq_labels, 2, NULL, 0},
      {&f->rec_total, "controller_runtime_reconcile_total", "Total number of reconciliations per controller",
       KC_METRIC_COUNTER, result_labels, 2, NULL, 0},
      {&f->rec_errors, "controller_runtime_reconcile_errors_total",
       "Total number of reconciliation errors per controller", KC_METRIC_COUNTER, ctl_labels, 1, NULL, 0},
      {&f->rec_terminal, "controller_runtime_terminal_reconcile_errors_total",
       "Total number of terminal reconciliation errors per controller", KC_METRIC_COUNTER, ctl_labels, 1,
       NULL, 0},
      {&f->rec_panics, "controller_runtime_reconcile_panics_total",
       "Total number of reconciliation panics per controller (isolation: process: the plugin child "
       "crashed, hung or broke the protocol)",
       KC_METRIC_COUNTER, ctl_labels, 1, NULL, 0},
      {&f->child_idle_exits, "kctrld_plugin_child_idle_exits_total",
       "Plugin children (isolation: process) found dead while idle, between reconciles, and reaped; "
       "not a reconcile panic",
       KC_METRIC_COUNTER, ctl_labels, 1, NULL, 0},
      {&f->rec_time, "controller_runtime_reconcile_time_seconds",
       "Length of time per reconciliation per controller", KC_METRIC_HISTOGRAM, ctl_labels, 1,
       kc_metrics_reconcile_buckets, KC_RECONCILE_BUCKETS},
      {&f->rec_max, "controller_runtime_max_concurrent_reconciles",
       "Maximum number of concurrent reconciles per controller", KC_METRIC_GAUGE, ctl_labels, 1, NULL, 0},
      {&f->rec_active, "controller_runtime_active_workers", "Number of currently used workers per controller",
       KC_METRIC_GAUGE, ctl_labels, 1, NULL, 0},
      {&f->ryow_skips, "kctrld_stale_sync_skips_total",
       "Keys not handed to a worker because an informer had not observed the writes of their last "
       "reconcile yet (read your own writes); each waited until it had or timed out",
       KC_METRIC_COUNTER, ctl_labels, 1, NULL, 0},
      {&f->ryow_wait, "kctrld_read_your_writes_wait_seconds",
       "How long keys waited for the writes of their last reconcile to be observed",
       KC_METRIC_HISTOGRAM, ctl_labels, 1, kc_metrics_reconcile_buckets, KC_RECONCILE_BUCKETS},
      {&f->ryow_timeouts, "kctrld_read_your_writes_timeouts_total",
       "Waits for observed writes that ended at the timeout (10 s): the key ran on the cache as it was",
       KC_METRIC_COUNTER, ctl_labels, 1, NULL, 0},
      {&f->ryow_overflow, "kctrld_read_your_writes_records_dropped_total",
       "Recorded writes dropped unobserved, oldest first, because the controller's table was full",
       KC_METRIC_COUNTER, ctl_labels, 1, NULL, 0},
      {&f->ctl_ready, "kctrld_controller_ready",
       "1 while the controller runs; 0 while its plugin's load or init fails (retried with backoff) "
       "or its kinds are not discovered yet",
       KC_METRIC_GAUGE, ctl_labels, 1, NULL, 0},
      {&f->ctl_init_failures, "kctrld_controller_init_failures_total",
       "Failed attempts to load the controller's plugin or run its init", KC_METRIC_COUNTER, ctl_labels, 1,
       NULL, 0},
      {&f->dry_run_writes, "kctrld_dry_run_writes_total",
       "Writes sent with dryRun=All (dry-run mode: the server stored nothing), by controller and "
       "verb (create, update, patch, apply, delete; event: an Event not recorded)",
       KC_METRIC_COUNTER, dry_run_labels, 2, NULL, 0},
      {&f->desired_skips, "kctrld_desired_applies_skipped_total",
       "Desired-state children not applied again because neither their desired body nor the "
       "cached object changed since the controller's last apply of them",
       KC_METRIC_COUNTER, ctl_labels, 1, NULL, 0},
      {&f->le_master, "leader_election_master_status",
       "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
       "indicates master. 'name' is the string used to identify the lease. Please make sure to group "
       "by name.",
       KC_METRIC_GAUGE, le_labels, 1, NULL, 0},
      {&f->ev_total, "kctrld_events_total",
       "Kubernetes Events recorded by plugins, by outcome: created (POST), patched (count+1 of an "
       "identical Event), dropped (queue full or spam filter), skipped (not the leader), failed "
       "(given up after retries)",
       KC_METRIC_COUNTER, ev_labels, 1, NULL, 0},
      {&f->ev_queued, "kctrld_events_queued", "Events waiting to be written", KC_METRIC_GAUGE, NULL, 0, NULL,
       0},
  };
  return kc_metrics_register_all(reg, defs, sizeof defs / sizeof defs[0]);
}

/* The reflector, informer, event loop, shared text and shard families. */
static int register_cache_families(kc_metrics *reg, kc_ops_families *f) {
  const kc_metric_def defs[] = {
      {&f->rf_lists, "kctrld_reflector_lists_total", "LIST requests sent (each page counts one)",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_watches, "kctrld_reflector_watches_total", "WATCH requests sent", KC_METRIC_COUNTER, inf_labels,
       NINF_LABELS, NULL, 0},
      {&f->rf_relists, "kctrld_reflector_relists_total", "Complete lists after the first (410 Gone, errors)",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_events, "kctrld_reflector_events_total", "Watch events applied to the cache (ADDED, MODIFIED, "
       "DELETED)", KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_errors, "kctrld_reflector_errors_total", "Failed requests and broken watch streams",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_stream_lists, "kctrld_reflector_streaming_lists_total",
       "Streaming lists (WATCH with sendInitialEvents) that reached the initial-events-end bookmark; "
       "each goes on as a watch and counts in kctrld_reflector_watches_total too",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_stream_attempts, "kctrld_reflector_streaming_list_attempts_total",
       "Streaming-list requests sent (neither LIST nor WATCH until the server accepted one)",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_stream_fallbacks, "kctrld_reflector_streaming_list_fallbacks_total",
       "Times the streaming list was given up for LIST+WATCH (server without WatchList)",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_pauses, "kctrld_reflector_decode_pauses_total",
       "Times a response was paused because its decode budget was full", KC_METRIC_COUNTER, inf_labels,
       NINF_LABELS, NULL, 0},
      {&f->loop_lag, "kctrld_loop_lag_seconds",
       "How long the event loop kept timers and sockets waiting, per 100 ms probe",
       KC_METRIC_HISTOGRAM, NULL, 0, kc_looplag_bounds, KC_LOOPLAG_BUCKETS},
      {&f->loop_lag_max, "kctrld_loop_lag_max_seconds", "The largest kctrld_loop_lag_seconds sample so far",
       KC_METRIC_GAUGE, NULL, 0, NULL, 0},
      {&f->shared_pieces, "kctrld_shared_text_pieces",
       "Distinct pieces of object text kept once for all cached objects that contain them "
       "(managedFields[].fieldsV1)", KC_METRIC_GAUGE, NULL, 0, NULL, 0},
      {&f->shared_bytes, "kctrld_shared_text_bytes",
       "Bytes of those pieces (not in kctrld_informer_bytes)", KC_METRIC_GAUGE, NULL, 0, NULL, 0},
      {&f->shared_refs, "kctrld_shared_text_references",
       "Places cached objects use a shared piece", KC_METRIC_GAUGE, NULL, 0, NULL, 0},
      {&f->rf_rejected, "kctrld_objects_rejected_total",
       "Objects from LIST or WATCH responses skipped for a shape the API server never sends (labels "
       "not an object, a non-string label value, a name with '/')",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->inf_objects, "kctrld_informer_objects", "Objects in the informer's cache", KC_METRIC_GAUGE,
       inf_labels, NINF_LABELS, NULL, 0},
      {&f->inf_bytes, "kctrld_informer_bytes", "Bytes held by the informer's cached objects",
       KC_METRIC_GAUGE, inf_labels, NINF_LABELS, NULL, 0},
      {&f->inf_backlog, "kctrld_informer_backlog",
       "Keys from this informer's events not yet handed to a worker (fullest consuming workqueue)",
       KC_METRIC_GAUGE, inf_labels, NINF_LABELS, NULL, 0},
      {&f->inf_synced, "kctrld_informer_synced", "1 once the informer's first complete list is cached",
       KC_METRIC_GAUGE, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_hist_checks, "kctrld_reflector_history_checks_total",
       "History checks (GETs of the newest cached object and a sample of others) before resuming a "
       "watch after a connection failure", KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->rf_hist_changes, "kctrld_reflector_history_changes_total",
       "History checks that found another server history (relisted instead of resuming the watch)",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->inf_cons_checks, "kctrld_informer_consistency_checks_total",
       "Completed comparisons of the cache with a metadata-only LIST of the scope",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->inf_cons_diffs, "kctrld_informer_consistency_diffs_total",
       "Keys found different from the server by consistency checks (each check repairs by relisting)",
       KC_METRIC_COUNTER, inf_labels, NINF_LABELS, NULL, 0},
      {&f->sh_owned, "kctrld_shard_ranges_owned", "Shard ranges (Leases) this replica holds",
       KC_METRIC_GAUGE, ctl_labels, 1, NULL, 0},
      {&f->sh_members, "kctrld_shard_replicas", "Live replicas counted through membership Leases",
       KC_METRIC_GAUGE, ctl_labels, 1, NULL, 0},
      {&f->sh_handoffs, "kctrld_shard_handoffs_total",
       "Shard ranges this replica stopped owning (given up to rebalance, lost, or at shutdown)",
       KC_METRIC_COUNTER, ctl_labels, 1, NULL, 0},
      {&f->sh_keys, "kctrld_shard_keys", "Cached `for` objects (keys) per shard range; with "
       "shard=\"owned\" the sum over the ranges this replica owns", KC_METRIC_GAUGE, shard_labels, 2,
       NULL, 0},
      {&f->sh_cached, "kctrld_shard_objects_cached",
       "Objects in the sharded controller's `for` informer cache on this replica", KC_METRIC_GAUGE,
       ctl_labels, 1, NULL, 0},
  };
  return kc_metrics_register_all(reg, defs, sizeof defs / sizeof defs[0]);
}

int kc_ops_families_new(kc_metrics *reg, kc_ops_families **out) {
  kc_ops_families *f = calloc(1, sizeof *f);
  if (!f) return -ENOMEM;
  int rc = register_runtime_families(reg, f);
  if (rc == 0) rc = register_cache_families(reg, f);
  if (rc == 0) rc = kc_selfmetrics_new(reg, &f->self);
  if (rc < 0) {
    free(f);
    return rc;
  }
  *out = f;
  return 0;
}

void kc_ops_families_free(kc_ops_families *f) {
  if (!f) return;
  kc_selfmetrics_free(f->self);
  free(f);
}

/* --- informer descriptions ------------------------------------------------------ */

typedef struct inf_desc {
  char informer[128];
  const char *resource;
  char namespace_[512];
  const char *label_selector, *field_selector;
} inf_desc;

static void describe(const kc_ops_view *v, size_t i, inf_desc *d) {
  const kc_informer_spec *s = v->specs ? v->specs[i] : NULL;
  kc_informer *inf = v->informers[i];
  if (!s && inf) s = kc_informer_spec_get(inf);
  if (s && s->name)
    snprintf(d->informer, sizeof d->informer, "%s", s->name);
  else
    snprintf(d->informer, sizeof d->informer, "%zu", i);
  d->resource = inf ? kc_informer_resource(inf) : "";
  d->namespace_[0] = '\0';
  size_t len = 0;
  for (size_t n = 0; s && n < s->nnamespaces && len < sizeof d->namespace_; n++)
    len += (size_t)snprintf(d->namespace_ + len, sizeof d->namespace_ - len, "%s%s", n ? "," : "",
                            s->namespaces[n]);
  d->label_selector = s && s->label_selector ? s->label_selector : "";
  d->field_selector = s && s->field_selector ? s->field_selector : "";
}

/* backlog[i] for every informer: the fullest queue among its consumers. */
static uint64_t *compute_backlog(const kc_ops_view *v) {
  uint64_t *b = calloc(v->ninformers ? v->ninformers : 1, sizeof *b);
  if (!b) return NULL;
  for (size_t c = 0; c < v->ncontrollers; c++) {
    kc_controller *ctl = v->controllers[c];
    if (!ctl) continue;
    const kc_controller_spec *cs = kc_controller_spec_get(ctl);
    uint64_t q = kc_workqueue_len(kc_controller_queue(ctl));
    if (cs->for_.informer < v->ninformers && q > b[cs->for_.informer]) b[cs->for_.informer] = q;
    for (size_t k = 0; k < cs->nowns; k++)
      if (cs->owns[k].ref.informer < v->ninformers && q > b[cs->owns[k].ref.informer])
        b[cs->owns[k].ref.informer] = q;
    for (size_t k = 0; k < cs->nwatches; k++)
      if (cs->watches[k].ref.informer < v->ninformers && q > b[cs->watches[k].ref.informer])
        b[cs->watches[k].ref.informer] = q;
  }
  return b;
}

/* --- metrics ------------------------------------------------------------------ */

struct family_fill {
  kc_metric_family *fam;
  int rc;
};

static void fill_dry_run(const char *controller, const char *verb, uint64_t n, void *ud) {
  struct family_fill *d = ud;
  const char *labels[] = {controller, verb};
  int r = kc_metrics_set(d->fam, labels, (double)n);
  if (r < 0 && d->rc == 0) d->rc = r;
}

static void fill_desired_skips(const char *controller, uint64_t n, void *ud) {
  struct family_fill *d = ud;
  const char *labels[] = {controller};
  int r = kc_metrics_set(d->fam, labels, (double)n);
  if (r < 0 && d->rc == 0) d->rc = r;
}

/* The sharding series of every sharded controller. */
static int fill_shard_metrics(const kc_ops_families *f, const kc_ops_view *v) {
  int rc = 0;
#define SET(fam, labels, value)                                   \
  do {                                                            \
    int r_ = kc_metrics_set((fam), (labels), (double)(value));    \
    if (r_ < 0 && rc == 0) rc = r_;                               \
  } while (0)
  for (size_t c = 0; c < v->ncontrollers; c++) {
    kc_sharding *sh = v->controllers[c] ? kc_controller_sharding(v->controllers[c]) : NULL;
    if (!sh) continue;
    const char *name = kc_controller_name(v->controllers[c]);
    const char *cl[] = {name};
    kc_sharding_stats ss;
    kc_sharding_get_stats(sh, &ss);
    SET(f->sh_owned, cl, ss.owned);
    SET(f->sh_members, cl, ss.members);
    SET(f->sh_handoffs, cl, ss.handoffs);
    uint64_t *per = calloc(ss.shards, sizeof *per);
    kc_shard_range *own = calloc(ss.shards, sizeof *own);
    if (!per || !own || kc_sharding_count_cached(sh, per, ss.shards) < 0) {
      free(per), free(own);
      if (rc == 0) rc = -ENOMEM;
      continue;
    }
    uint64_t total = 0, owned = 0;
    for (unsigned i = 0; i < ss.shards; i++) {
      char idx[16];
      snprintf(idx, sizeof idx, "%u", i);
      const char *sl[] = {name, idx};
      SET(f->sh_keys, sl, per[i]);
      total += per[i];
    }
    size_t no = kc_sharding_owned_ranges(sh, own, ss.shards);
    for (size_t k = 0; k < no && k < ss.shards; k++) {
      kc_shard_range probe = own[k];
      owned += per[kc_sharding_range_of(sh, probe.start)];
    }
    const char *ol[] = {name, "owned"};
    SET(f->sh_keys, ol, owned);
    SET(f->sh_cached, cl, total);
    free(per), free(own);
  }
#undef SET
  return rc;
}

/* Read your own writes of one controller (nothing when it is off). */
static int fill_own_writes(const kc_ops_families *f, const kc_controller *ctl, const char *const *cl) {
  kc_ownwrites_stats ow;
  if (!kc_controller_own_writes_stats(ctl, &ow)) return 0;
  int rc = kc_metrics_set(f->ryow_skips, cl, (double)ow.waits);
  if (rc == 0) rc = kc_metrics_set(f->ryow_timeouts, cl, (double)ow.timeouts);
  if (rc == 0) rc = kc_metrics_set(f->ryow_overflow, cl, (double)ow.overflow);
  if (rc == 0)
    rc = kc_metrics_set_histogram(f->ryow_wait, cl, ow.wait_time.counts, ow.wait_time.sum_seconds);
  return rc;
}

int kc_ops_fill_metrics(const kc_ops_families *f, const kc_ops_view *v) {
  int rc = 0;
  struct family_fill dr = {f->dry_run_writes, 0};
  kc_dry_run_each(fill_dry_run, &dr);
  struct family_fill ds = {f->desired_skips, 0};
  kc_applymemo_each_skips(fill_desired_skips, &ds);
  rc = dr.rc ? dr.rc : ds.rc;
#define SET(fam, labels, value)                                   \
  do {                                                            \
    int r_ = kc_metrics_set((fam), (labels), (double)(value));    \
    if (r_ < 0 && rc == 0) rc = r_;                               \
  } while (0)
  for (size_t c = 0; c < v->ncontrollers; c++) {
    kc_controller *ctl = v->controllers[c];
    if (!ctl) continue;
    const char *name = kc_controller_name(ctl);
    const char *wl[] = {name, name};
    const char *cl[] = {name};
    kc_workqueue *wq = kc_controller_queue(ctl);
    const kc_wq_metrics *m = kc_workqueue_metrics(wq);
    SET(f->wq_depth, wl, m->depth);
    SET(f->wq_adds, wl, m->adds_total);
    SET(f->wq_retries, wl, m->retries_total);
    SET(f->wq_aged, wl, m->aged_total);
    for (int lv = 0; lv < KC_WQ_LEVELS; lv++) {
      const char *pl[] = {name, name, kc_wq_priority_name(lv)};
      SET(f->wq_depth_prio, pl, m->depth_by_priority[lv]);
    }
    SET(f->wq_unfinished, wl, (double)kc_workqueue_unfinished_work_ns(wq) / 1e9);
    SET(f->wq_longest, wl, (double)kc_workqueue_longest_running_ns(wq) / 1e9);
    int r = kc_metrics_set_histogram(f->wq_queue_dur, wl, m->queue_duration.counts,
                                     (double)m->queue_duration.sum_ns / 1e9);
    if (r == 0)
      r = kc_metrics_set_histogram(f->wq_work_dur, wl, m->work_duration.counts,
                                   (double)m->work_duration.sum_ns / 1e9);
    if (r < 0 && rc == 0) rc = r;

    kc_controller_stats st;
    kc_controller_stats_get(ctl, &st);
    static const char *const results[] = {"success", "error", "requeue", "requeue_after"};
    const uint64_t counts[] = {st.success, st.error, st.requeue, st.requeue_after};
    for (size_t k = 0; k < 4; k++) {
      const char *rl[] = {name, results[k]};
      SET(f->rec_total, rl, counts[k]);
    }
    SET(f->rec_errors, cl, st.error); /* terminal ones included, as controller-runtime counts */
    SET(f->rec_terminal, cl, st.terminal);
    SET(f->rec_panics, cl, kc_isolate_panics(name));
    SET(f->child_idle_exits, cl, kc_isolate_idle_exits(name));
    SET(f->rec_max, cl, st.workers);
    SET(f->rec_active, cl, st.active_workers);
    const kc_reconcile_histogram *h = v->reconcile_histograms ? v->reconcile_histograms[c] : NULL;
    r = h ? kc_metrics_set_histogram(f->rec_time, cl, h->counts, h->sum_seconds)
          : kc_metrics_set_histogram_total(f->rec_time, cl, st.reconcile_count, st.reconcile_seconds_sum);
    if (r < 0 && rc == 0) rc = r;
    if ((r = fill_own_writes(f, ctl, cl)) < 0 && rc == 0) rc = r;
  }
  for (size_t c = 0; v->controller_states && c < v->ncontroller_states; c++) {
    const kc_ops_controller_state *cs = &v->controller_states[c];
    const char *cl[] = {cs->name};
    SET(f->ctl_ready, cl, cs->running ? 1 : 0);
    SET(f->ctl_init_failures, cl, cs->init_failures);
  }
  int sr = fill_shard_metrics(f, v);
  if (sr < 0 && rc == 0) rc = sr;
  if (v->lease_name) {
    const char *ll[] = {v->lease_name};
    SET(f->le_master, ll, v->leading ? 1 : 0);
  }
  if (v->has_events) {
    const kc_events_stats *e = &v->events;
    static const char *const outcomes[] = {"created", "patched", "dropped", "skipped", "failed"};
    const uint64_t n[] = {e->created, e->patched, e->dropped_queue + e->dropped_spam, e->skipped, e->failed};
    for (size_t k = 0; k < 5; k++) {
      const char *el[] = {outcomes[k]};
      SET(f->ev_total, el, n[k]);
    }
    SET(f->ev_queued, NULL, e->queued);
  }
  if (v->loop_lag) {
    int r = kc_metrics_set_histogram(f->loop_lag, NULL, v->loop_lag->counts, v->loop_lag->sum_seconds);
    if (r < 0 && rc == 0) rc = r;
    SET(f->loop_lag_max, NULL, v->loop_lag->max_seconds);
  }
  kc_shared_text_stats sts = kc_shared_text_stats_now();
  SET(f->shared_pieces, NULL, sts.pieces);
  SET(f->shared_bytes, NULL, sts.bytes);
  SET(f->shared_refs, NULL, sts.refs);
  uint64_t *backlog = compute_backlog(v);
  if (!backlog) return -ENOMEM;
  for (size_t i = 0; i < v->ninformers; i++) {
    kc_informer *inf = v->informers[i];
    if (!inf) continue;
    inf_desc d;
    describe(v, i, &d);
    const char *il[NINF_LABELS] = {d.informer, d.resource, d.namespace_, d.label_selector, d.field_selector};
    kc_informer_stats st;
    kc_informer_stats_get(inf, &st);
    SET(f->rf_lists, il, st.lists);
    SET(f->rf_watches, il, st.watches);
    SET(f->rf_relists, il, st.relists);
    SET(f->rf_events, il, st.events);
    SET(f->rf_errors, il, st.errors);
    SET(f->rf_stream_lists, il, st.streaming_lists);
    SET(f->rf_stream_attempts, il, st.streaming_attempts);
    SET(f->rf_stream_fallbacks, il, st.streaming_fallbacks);
    SET(f->rf_pauses, il, st.decode_pauses);
    SET(f->rf_rejected, il, st.rejected);
    SET(f->inf_objects, il, st.objects);
    SET(f->inf_bytes, il, st.bytes);
    SET(f->inf_backlog, il, backlog[i]);
    SET(f->inf_synced, il, kc_informer_synced(inf) ? 1 : 0);
    SET(f->rf_hist_checks, il, st.history_checks);
    SET(f->rf_hist_changes, il, st.history_changes);
    SET(f->inf_cons_checks, il, st.consistency_checks);
    SET(f->inf_cons_diffs, il, st.consistency_diffs);
  }
#undef SET
  free(backlog);
  int r = kc_selfmetrics_fill(f->self);
  if (r < 0 && rc == 0) rc = r;
  return rc;
}

/* --- /debug/shards ------------------------------------------------------------------ */

/* Appends the /debug/shards JSON array: one object per sharded controller
 * (sharding.h kc_sharding_debug_json). */
static int kc_ops_shards_json(const kc_ops_view *v, kc_buf *out) {
  kc_buf_puts(out, "[");
  bool first = true;
  int rc = 0;
  for (size_t c = 0; c < v->ncontrollers; c++) {
    kc_sharding *sh = v->controllers[c] ? kc_controller_sharding(v->controllers[c]) : NULL;
    if (!sh) continue;
    if (!first) kc_buf_puts(out, ",");
    first = false;
    int r = kc_sharding_debug_json(sh, out);
    if (r < 0 && rc == 0) rc = r;
  }
  kc_buf_puts(out, "]");
  return rc < 0 ? rc : out->err;
}

/* --- /debug/informers ------------------------------------------------------------ */

/* Appends the /debug/informers JSON array. */
int kc_ops_informers_json(const kc_ops_view *v, kc_buf *out) {
  uint64_t *backlog = compute_backlog(v);
  if (!backlog) return -ENOMEM;
  kc_buf_add(out, "[", 1);
  for (size_t i = 0; i < v->ninformers; i++) {
    kc_informer *inf = v->informers[i];
    const kc_informer_spec *s = v->specs ? v->specs[i] : inf ? kc_informer_spec_get(inf) : NULL;
    kc_informer_stats st = {0};
    if (inf) kc_informer_stats_get(inf, &st);
    kc_buf_puts(out, i ? ",\n {" : "\n {");
    kc_buf_puts(out, "\"name\":");
    if (s && s->name)
      kc_buf_json_c(out, s->name);
    else
      kc_buf_puts(out, "null");
    kc_buf_puts(out, ",\"apiVersion\":");
    kc_buf_json_c(out, s ? s->api_version : "");
    kc_buf_puts(out, ",\"kind\":");
    kc_buf_json_c(out, s ? s->kind : "");
    kc_buf_puts(out, ",\"resource\":");
    kc_buf_json_c(out, inf ? kc_informer_resource(inf) : "");
    kc_buf_puts(out, ",\"namespaces\":[");
    for (size_t n = 0; s && n < s->nnamespaces; n++) {
      if (n) kc_buf_add(out, ",", 1);
      kc_buf_json_c(out, s->namespaces[n]);
    }
    kc_buf_puts(out, "],\"labelSelector\":");
    kc_buf_json_c(out, s && s->label_selector ? s->label_selector : "");
    kc_buf_puts(out, ",\"fieldSelector\":");
    kc_buf_json_c(out, s && s->field_selector ? s->field_selector : "");
    kc_buf_printf(out, ",\"started\":%s,\"synced\":%s,\"objects\":%zu,\"bytes\":%zu,\"resourceVersion\":",
                   inf ? "true" : "false", inf && kc_informer_synced(inf) ? "true" : "false", st.objects,
                   st.bytes);
    kc_buf_json_c(out, st.resource_version);
    /* KEP-5866: the shardSelector asked for (null: none) and whether the server applies it */
    kc_buf_puts(out, ",\"shardSelector\":");
    if (inf && kc_informer_shard_selector(inf))
      kc_buf_json_c(out, kc_informer_shard_selector(inf));
    else
      kc_buf_puts(out, "null");
    kc_buf_puts(out, ",\"shardSupport\":");
    kc_buf_json_c(out, inf ? kc_shard_support_name(kc_informer_shard_support(inf)) : "unknown");
    kc_buf_printf(out,
                   ",\"lists\":%" PRIu64 ",\"watches\":%" PRIu64 ",\"relists\":%" PRIu64 ",\"events\":%" PRIu64
                   ",\"errors\":%" PRIu64 ",\"backlog\":%" PRIu64 ",\"streamingLists\":%" PRIu64
                   ",\"streamingListAttempts\":%" PRIu64 ",\"streamingListFallbacks\":%" PRIu64
                   ",\"decodePauses\":%" PRIu64 ",\"snapshotRestores\":%" PRIu64
                   ",\"snapshotObjects\":%" PRIu64 ",\"snapshotFailures\":%" PRIu64 "}",
                   st.lists, st.watches, st.relists, st.events, st.errors, backlog[i], st.streaming_lists,
                   st.streaming_attempts, st.streaming_fallbacks, st.decode_pauses, st.restores,
                   st.restored, st.restore_failures);
  }
  kc_buf_puts(out, v->ninformers ? "\n]\n" : "]\n");
  free(backlog);
  return out->err;
}

/* --- readiness and status --------------------------------------------------------- */

/* Appends every controller whose plugin fails to load or init to why
 * ("controller NAME: ERROR (...)", "; "-separated); false if there is one. */
static bool controllers_ok(const kc_ops_view *v, char *why, size_t cap) {
  size_t len = 0;
  for (size_t c = 0; v->controller_states && c < v->ncontroller_states; c++) {
    const kc_ops_controller_state *cs = &v->controller_states[c];
    if (!cs->init_error || len >= cap) continue;
    int n = snprintf(why + len, cap - len,
                     "%scontroller %s: %s (failed attempts: %u; the next one %.1f s after the last)",
                     len ? "; " : "", cs->name, cs->init_error, (unsigned)cs->failed_attempts,
                     (double)cs->retry_delay_ms / 1000.0);
    if (n > 0) len += (size_t)n;
  }
  return len == 0;
}

/* strict: /readyz (controllers, synced caches); else kc_ops_started. */
/* strict (/readyz): the first informer not synced, with why; else
 * (kc_ops_started): the first one not created, unless its kind is not
 * served. false when there is none. */
static bool informer_waiting(const kc_ops_view *v, bool strict, char *why, size_t cap) {
  for (size_t i = 0; i < v->ninformers; i++) {
    kc_informer *inf = v->informers[i];
    const kc_informer_spec *s = v->specs ? v->specs[i] : inf ? kc_informer_spec_get(inf) : NULL;
    const kc_ops_informer_wait *w = !inf && v->informer_waits ? &v->informer_waits[i] : NULL;
    if (inf && (!strict || kc_informer_synced(inf))) continue;
    if (!strict && w && w->not_served) continue;
    const char *cfg_err = inf ? kc_informer_config_error(inf) : NULL;
    if (cfg_err) {
      snprintf(why, cap, "informer of %s %s%s%s: the API server refuses its selector: %s",
               s ? s->api_version : "?", s ? s->kind : "?", s && s->name ? " " : "",
               s && s->name ? s->name : "", cfg_err);
      return true;
    }
    snprintf(why, cap, "waiting for kind %s %s (%s)", s ? s->api_version : "?", s ? s->kind : "?",
             inf                   ? "cache not synced yet"
             : w && w->not_served  ? "not served"
             : w && w->reason      ? "discovery failing, see the log"
                                   : "discovering");
    return true;
  }
  return false;
}

static bool ready_check(const kc_ops_view *v, bool strict, char *why, size_t cap) {
  if (v->stopping) {
    snprintf(why, cap, "stopping");
    return false;
  }
  if (strict && !controllers_ok(v, why, cap)) return false;
  if (informer_waiting(v, strict, why, cap)) return false;
  if (v->lease_name && !v->leading && !v->standby) {
    snprintf(why, cap, "leader election: lease %s not acquired or observed yet", v->lease_name);
    return false;
  }
  snprintf(why, cap, "ok");
  return true;
}

bool kc_ops_ready(const kc_ops_view *v, char *why, size_t cap) { return ready_check(v, true, why, cap); }
bool kc_ops_started(const kc_ops_view *v, char *why, size_t cap) { return ready_check(v, false, why, cap); }

void kc_ops_status_line(const kc_ops_view *v, char *buf, size_t cap) {
  char why[1024], status[512];
  bool ready = kc_ops_ready(v, why, sizeof why);
  kc_ops_summary(v, status, sizeof status);
  if (v->stopping)
    snprintf(buf, cap, "%s", status);
  else if (ready)
    snprintf(buf, cap, "ready: %s", status);
  else
    snprintf(buf, cap, "syncing: %s; %s", status, why);
}

void kc_ops_ready_message(const kc_ops_view *v, char *buf, size_t cap) {
  char why[1024], status[512];
  bool ready = kc_ops_ready(v, why, sizeof why);
  kc_ops_summary(v, status, sizeof status);
  if (ready)
    snprintf(buf, cap, "ready: %s", status);
  else
    snprintf(buf, cap, "ready: %s; still %s", status, why);
}

void kc_ops_summary(const kc_ops_view *v, char *buf, size_t cap) {
  size_t synced = 0, controllers = 0, failing = 0;
  for (size_t i = 0; i < v->ninformers; i++)
    if (v->informers[i] && kc_informer_synced(v->informers[i])) synced++;
  for (size_t c = 0; c < v->ncontrollers; c++)
    if (v->controllers[c]) controllers++;
  for (size_t c = 0; v->controller_states && c < v->ncontroller_states; c++)
    if (v->controller_states[c].init_error) failing++;
  char role[384];
  if (v->stopping)
    snprintf(role, sizeof role, "stopping");
  else if (!v->lease_name)
    snprintf(role, sizeof role, "active (leader election off)");
  else if (v->leading)
    snprintf(role, sizeof role, "leading lease=%s", v->lease_name);
  else if (v->standby)
    snprintf(role, sizeof role, "standby lease=%s leader=%s", v->lease_name, v->leader ? v->leader : "?");
  else
    snprintf(role, sizeof role, "acquiring lease=%s", v->lease_name);
  int n = snprintf(buf, cap, "%s; informers %zu/%zu synced; controllers %zu", role, synced, v->ninformers,
                   controllers);
  if (failing && n > 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, " (%zu failing init)", failing);
}

/* --- kc_ops ------------------------------------------------------------------------- */

struct kc_ops {
  uv_loop_t *loop;
  kc_ops_view_fn view;
  void *ud;
  kc_metrics *reg;
  kc_ops_families *fam;
  kc_httpserver *http;
  kc_httpserver *probes; /* own probe listener (probe_bind), or NULL */
  kc_tlscert *tls;        /* secure metrics: the served certificate, or NULL */
  kc_metricsauth *auth;   /* secure metrics: the authorization filter, or NULL */
  bool own_probes;
  kc_notify *notify;
  kc_health *health; /* the readiness checks (/readyz) */
  uv_timer_t timer;
  kc_looplag lag;
  int open_handles; /* timer and lag: freed when both closed */
  bool reloading, stopping;
};

static void get_view(kc_ops *ops, kc_ops_view *v) {
  memset(v, 0, sizeof *v);
  ops->view(ops->ud, v);
  if (ops->stopping) v->stopping = true;
  v->loop_lag = &ops->lag;
}

/* /debug/queues, /debug/keys, /debug/trace (metrics.debugQueues): the
 * answers of kctrld ctl, read-only commands only (httpserver.c asks no
 * other). */
static int hook_admin(void *ud, const kc_admin_request *r, kc_buf *out) {
  kc_ops_view v;
  get_view(ud, &v);
  return kc_admin_answer(&v, r, out);
}

static void hook_collect(void *ud, kc_metrics *reg, kc_buf *json) {
  kc_ops *ops = ud;
  kc_ops_view v;
  get_view(ops, &v);
  if (kc_ops_fill_metrics(ops->fam, &v) < 0) kc_warn("ops", "metrics collection incomplete: out of memory");
  kc_ops_informers_json(&v, json);
}

static void hook_shards(void *ud, kc_buf *json) {
  kc_ops *ops = ud;
  kc_ops_view v;
  get_view(ops, &v);
  if (kc_ops_shards_json(&v, json) < 0) kc_warn("ops", "/debug/shards incomplete: out of memory");
}

/* --- readiness checks (/readyz) --------------------------------------------------- */

static void check_shutdown(void *ud, kc_health_results *out) {
  kc_ops *ops = ud;
  kc_health_report(out, NULL, !ops->stopping, "stopping: finishing in-flight reconciles");
}

static void check_informers(void *ud, kc_health_results *out) {
  kc_ops_view v;
  get_view(ud, &v);
  char why[KC_HEALTH_WHY_MAX];
  bool waiting = informer_waiting(&v, true, why, sizeof why);
  kc_health_report(out, NULL, !waiting, "%s", why);
}

/* One result per configured controller: controller/NAME. */
static void check_controllers(void *ud, kc_health_results *out) {
  kc_ops_view v;
  get_view(ud, &v);
  for (size_t c = 0; v.controller_states && c < v.ncontroller_states; c++) {
    const kc_ops_controller_state *cs = &v.controller_states[c];
    char hook[KC_HEALTH_WHY_MAX];
    if (cs->init_error)
      kc_health_report(out, cs->name, false,
                       "%s (failed attempts: %u; the next one %.1f s after the last)", cs->init_error,
                       (unsigned)cs->failed_attempts, (double)cs->retry_delay_ms / 1000.0);
    else if (!cs->running)
      kc_health_report(out, cs->name, false, "not started yet");
    else if (!kc_hook_health(cs->name, hook, sizeof hook))
      kc_health_report(out, cs->name, false, "%s", hook);
    else
      kc_health_report(out, cs->name, true, NULL);
  }
}

static void check_leader(void *ud, kc_health_results *out) {
  kc_ops_view v;
  get_view(ud, &v);
  if (v.lease_name && !v.leading && !v.standby)
    kc_health_report(out, NULL, false, "lease %s not acquired or observed yet", v.lease_name);
  else
    kc_health_report(out, NULL, true, NULL);
}

static void hook_checks(void *ud, kc_health_results *out) {
  kc_ops *ops = ud;
  if (kc_health_run(ops->health, out) < 0) kc_warn("ops", "readiness checks incomplete: out of memory");
}

kc_health *kc_ops_health(kc_ops *ops) { return ops ? ops->health : NULL; }

static int add_builtin_checks(kc_ops *ops) {
  int rc = kc_health_add(ops->health, "shutdown", check_shutdown, ops);
  if (rc == 0) rc = kc_health_add(ops->health, "informers", check_informers, ops);
  if (rc == 0) rc = kc_health_add(ops->health, "controller", check_controllers, ops);
  if (rc == 0) rc = kc_health_add(ops->health, "leader-election", check_leader, ops);
  return rc;
}

static void on_state_tick(uv_timer_t *t) {
  kc_ops *ops = t->data;
  if (ops->reloading) return; /* kc_ops_reloaded sends READY=1 */
  kc_ops_view v;
  get_view(ops, &v);
  char why[1024], line[1600];
  /* READY=1 once serving: it waits neither for caches to sync nor for kinds
   * the server does not serve nor for controllers whose init fails (all
   * retried); STATUS= and /readyz name them. */
  bool started = kc_ops_started(&v, why, sizeof why);
  kc_ops_status_line(&v, line, sizeof line);
  if (started && !kc_notify_is_ready(ops->notify)) {
    char msg[1600];
    kc_ops_ready_message(&v, msg, sizeof msg);
    kc_info("ops", "%s", msg);
    kc_notify_ready(ops->notify, line);
  } else {
    kc_notify_status(ops->notify, line);
  }
}

/* The certificate and the authorization filter of secure metrics. */
static int secure_start(kc_ops *ops, const kc_ops_options *o) {
  int rc = kc_tlscert_new(o->cert_file, o->key_file, 0, &ops->tls);
  if (rc < 0) return rc;
  if (!o->api) return 0;
  kc_metricsauth_options mo = {0};
  return kc_metricsauth_new(o->api, &mo, &ops->auth);
}

int kc_ops_start(uv_loop_t *loop, const kc_ops_options *o, kc_ops_view_fn view, void *ud, kc_ops **out) {
  kc_ops *ops = calloc(1, sizeof *ops);
  if (!ops) return -ENOMEM;
  ops->loop = loop;
  ops->view = view;
  ops->ud = ud;
  int rc = -ENOMEM;
  ops->reg = kc_metrics_new();
  if (!ops->reg || (rc = kc_ops_families_new(ops->reg, &ops->fam)) < 0) goto fail;
  if ((rc = kc_notify_new(loop, &ops->notify)) < 0) goto fail;
  if ((rc = kc_health_new(&ops->health)) < 0 || (rc = add_builtin_checks(ops)) < 0) goto fail;
  ops->own_probes = o->probe_bind != NULL;
  char host[256];
  uint16_t port;
  /* A disabled listener needs no certificate nor filter. */
  bool serving = kc_httpserver_parse_bind(o->bind, host, sizeof host, &port) != 1;
  if (o->secure && serving && (rc = secure_start(ops, o)) < 0) goto fail;
  kc_httpserver_options ho = {.bind = o->bind, .heartbeat_ms = o->heartbeat_ms,
                              .endpoints = ops->own_probes ? KC_HTTP_METRICS : 0,
                              .tls = ops->tls,
                              .authorize = ops->auth ? kc_metricsauth_authorize : NULL,
                              .authorize_ud = ops->auth};
  kc_httpserver_hooks hooks = {hook_collect, hook_checks, ops, hook_shards,
                               o->debug_queues ? hook_admin : NULL};
  if ((rc = kc_httpserver_start(loop, ops->reg, &ho, &hooks, &ops->http)) < 0) goto fail;
  if (ops->own_probes) {
    kc_httpserver_options po = {.bind = o->probe_bind, .heartbeat_ms = o->heartbeat_ms,
                                .endpoints = KC_HTTP_PROBES};
    kc_httpserver_hooks ph = {NULL, hook_checks, ops, NULL, NULL};
    if ((rc = kc_httpserver_start(loop, ops->reg, &po, &ph, &ops->probes)) < 0) {
      kc_httpserver_close(ops->http);
      goto fail;
    }
  }
  if ((rc = uv_timer_init(loop, &ops->timer)) < 0) {
    kc_httpserver_close(ops->http);
    kc_httpserver_close(ops->probes);
    goto fail;
  }
  ops->timer.data = ops;
  ops->open_handles = 1;
  rc = kc_looplag_start(loop, &ops->lag, 0);
  if (ops->lag.open_handles > 0) ops->open_handles++; /* closed with ops, even half started */
  if (rc < 0) {
    kc_ops_close(ops);
    return rc;
  }
  uint64_t period = o->heartbeat_ms ? o->heartbeat_ms : 1000;
  uv_timer_start(&ops->timer, on_state_tick, period < 250 ? period : 250, period);
  *out = ops;
  return 0;
fail:
  kc_metricsauth_free(ops->auth);
  kc_tlscert_free(ops->tls);
  kc_notify_close(ops->notify);
  kc_health_free(ops->health);
  kc_ops_families_free(ops->fam);
  kc_metrics_free(ops->reg);
  free(ops);
  return rc;
}

void kc_ops_reloading(kc_ops *ops) {
  if (!ops) return;
  ops->reloading = true;
  kc_notify_reloading(ops->notify, "reloading configuration");
}

void kc_ops_reloaded(kc_ops *ops, const char *outcome) {
  if (!ops) return;
  ops->reloading = false;
  kc_ops_view v;
  get_view(ops, &v);
  char status[512], line[1024];
  kc_ops_summary(&v, status, sizeof status);
  snprintf(line, sizeof line, "%s; %s", status, outcome ? outcome : "reload done");
  kc_notify_reloaded(ops->notify, line);
}

void kc_ops_stopping(kc_ops *ops) {
  if (!ops) return;
  ops->stopping = true;
  kc_notify_stopping(ops->notify, "stopping: finishing in-flight reconciles");
}

static void release_handle(kc_ops *ops) {
  if (--ops->open_handles > 0) return;
  kc_health_free(ops->health);
  kc_ops_families_free(ops->fam);
  kc_metrics_free(ops->reg);
  free(ops);
}

static void on_timer_closed(uv_handle_t *h) { release_handle(h->data); }

/* The probe's data points at the probe: find the kc_ops around it. */
static void on_lag_closed(uv_handle_t *h) {
  release_handle((kc_ops *)((char *)h - offsetof(kc_ops, lag.timer)));
}

void kc_ops_close(kc_ops *ops) {
  if (!ops) return;
  kc_httpserver_close(ops->http); /* joins server threads before the registry goes */
  kc_httpserver_close(ops->probes);
  /* No server thread runs any more: the filter's API worker and the
   * certificate can go. */
  kc_metricsauth_free(ops->auth);
  ops->auth = NULL;
  kc_tlscert_free(ops->tls);
  ops->tls = NULL;
  kc_notify_close(ops->notify);
  uv_timer_stop(&ops->timer);
  uv_close((uv_handle_t *)&ops->timer, on_timer_closed);
  if (ops->open_handles > 1) kc_looplag_close(&ops->lag, on_lag_closed);
}
