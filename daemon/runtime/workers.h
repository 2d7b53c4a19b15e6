/* SPDX-License-Identifier: Apache-2.0 */
/* workers: one controller's pool of reconcile threads and the hand-off
 * between them and the loop (docs/api-contract.md 15.1).
 *
 * Owns: N pthreads, one uv_async through which results come back, and the
 * timers that report slow reconciles and bound a graceful stop. The loop
 * hands a key to a worker only when one is idle (the workqueue keeps the
 * backlog, so nothing queues up here); the worker copies the key into its own
 * buffer (no per-key allocation once the buffer fits), calls the reconcile
 * function, and posts the result; the loop then calls on_result, where the
 * owner settles the key in its workqueue, and on_idle, where it dispatches
 * more. The pool knows no queue: the controller takes keys from its
 * workqueue and applies results to it (kc_controller_apply_result).
 *
 * Logs: every dispatch gets a fresh reconcileID (log.h); while a worker runs
 * a reconcile, every line it logs (the plugin's included) carries
 * controller=, key= and reconcileID= (kc_log_set_reconcile), and an error
 * result is logged there at error level as controller-runtime does:
 * "Reconciler error attempt=N error=MESSAGE" (attempt = 1 + the key's
 * retries so far, as the controller passes it to kc_workers_dispatch; left
 * out when it passes 0); a terminal result as "Reconciler error
 * terminal=true attempt=N error=MESSAGE".
 *
 * Crashes: each worker thread registers with crashreport.h and publishes
 * controller, plugin and key around each reconcile (kc_crash_busy/idle).
 *
 * A slow or stuck reconcile never stalls the loop: the loop never waits on a
 * worker. A reconcile running longer than timeout_ms is reported once (log +
 * on_timeout), not killed. kc_workers_stop lets running reconciles finish and
 * delivers their results, for at most bound_ms; workers still stuck after
 * that are abandoned (detached; their results are dropped, the memory they
 * use is freed when they return).
 *
 * Threads: every kc_workers_* function is loop thread only. The reconcile
 * function runs on a worker thread; on_result/on_idle/on_timeout/stopped
 * run on the loop thread.
 * Errors: 0 or a negative errno.
 * Ownership: config strings are copied; keys are borrowed for the call.
 */
#ifndef KC_WORKERS_H
#define KC_WORKERS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "host/result.h"


typedef struct kc_workers kc_workers;

/* Loop thread: one finished reconcile. key/res borrowed for the call. Do not
 * dispatch from here: the worker becomes idle after it returns (on_idle). */
typedef void (*kc_result_fn)(kc_workers *pool, const char *key, const kc_reconcile_result *res,
                             uint64_t duration_ns, void *ud);
/* Loop thread: after a batch of results, when at least one worker is idle. */
typedef void (*kc_idle_fn)(kc_workers *pool, void *ud);
/* Loop thread: a reconcile passed timeout_ms (reported once per call). */
typedef void (*kc_timeout_fn)(kc_workers *pool, const char *key, uint64_t running_ns, void *ud);
/* Loop thread: the stop finished; `abandoned` workers were still stuck. The
 * pool is freed right after this returns. */
typedef void (*kc_stopped_fn)(kc_workers *pool, unsigned abandoned, void *ud);

typedef struct kc_workers_config {
  const char *name;        /* controller name: log context of the workers */
  const char *plugin;      /* plugin path, for the crash report (crashreport.h); may be NULL */
  unsigned nworkers;       /* >= 1 */
  uint64_t timeout_ms;     /* report reconciles longer than this; 0 = never */
  kc_reconcile_fn reconcile;
  void *reconcile_ud;      /* passed to reconcile (on worker threads) */
  /* Optional: called once with reconcile_ud when no worker can call
   * reconcile any more. Normally on the loop thread during the stop; when
   * workers were abandoned, on the thread of the last one to return. Only
   * after a successful kc_workers_start. */
  void (*release)(void *reconcile_ud);
  kc_result_fn on_result;  /* required */
  kc_idle_fn on_idle;      /* optional */
  kc_timeout_fn on_timeout;/* optional */
  void *ud;                /* passed to the loop-side callbacks */
} kc_workers_config;

/* Starts the threads. Returns 0 and *out, or -EINVAL, -ENOMEM, or the
 * negated pthread_create/uv error; on error nothing is left running. */
int kc_workers_start(uv_loop_t *loop, const kc_workers_config *cfg, kc_workers **out);

/* Hands key to an idle worker; attempt is 1 + the key's retries so far (0:
 * not known, no attempt= in the logs). Returns 0, -EBUSY when no worker is
 * idle, -ESHUTDOWN after kc_workers_stop, -ENOMEM. */
int kc_workers_dispatch(kc_workers *pool, const char *key, uint32_t attempt);

/* Stops the pool: no more dispatch, idle workers exit, running reconciles
 * finish and their results still arrive through on_result, for at most
 * bound_ms; then cb runs (loop thread) and the pool is freed.
 * Calling it twice is a no-op. */
void kc_workers_stop(kc_workers *pool, uint64_t bound_ms, kc_stopped_fn cb, void *ud);

unsigned kc_workers_size(const kc_workers *pool);   /* max_concurrent_reconciles */
unsigned kc_workers_idle(const kc_workers *pool);
unsigned kc_workers_active(const kc_workers *pool); /* active_workers */

/* --- Test seam: for tests only, not called by the daemon --- */
/* Worker threads abandoned by a stop that have not returned yet (any
 * thread; process-wide). Tests wait for 0 before exiting. */
unsigned kc_workers_abandoned_running(void);

#endif
