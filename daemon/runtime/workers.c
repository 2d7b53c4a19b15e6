/* SPDX-License-Identifier: Apache-2.0 */
/* workers: see workers.h.
 *
 * Two halves: `struct core` is shared with the threads and guarded by
 * core->mu; it is reference counted so that a worker abandoned by a stop can
 * return long after the loop side is gone. `struct kc_workers` (handles,
 * callbacks, idle stack) is loop-only. The few fields of struct worker marked
 * "loop" are touched by the loop thread only.
 */
#include "runtime/workers.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/crashreport.h"
#include "base/log.h"

struct worker {
  struct core *core;
  pthread_t thread;
  pthread_cond_t cond;
  /* guarded by core->mu */
  bool has_job;
  bool exited;
  struct worker *cnext; /* completed list */
  char *key;            /* written by the loop only while the worker is idle */
  size_t keycap;
  char rid[KC_LOG_RECONCILE_ID_SIZE]; /* reconcileID of the job; as key */
  uint32_t attempt;                   /* 1 + retries of the key so far (0: unknown); as key */
  kc_reconcile_result res; /* written by the worker while it has the job */
  /* loop */
  bool busy;
  bool joined;
  bool timeout_reported;
  uint64_t started_ns;
};

struct core {
  pthread_mutex_t mu;
  atomic_uint refs;
  bool quit;   /* workers exit once idle */
  bool closed; /* loop side gone: never touch `async` again */
  uv_async_t *async;
  struct worker *completed; /* LIFO of finished jobs */
  kc_reconcile_fn reconcile;
  void *reconcile_ud;
  void (*release)(void *reconcile_ud); /* run by the last reference */
  char *name;
  char *plugin; /* NULL when not given */
  unsigned n;
  struct worker w[];
};

enum pool_state { RUNNING, STOPPING, CLOSING };

struct kc_workers {
  uv_loop_t *loop;
  uv_async_t async;
  uv_timer_t tick;      /* timeout reports */
  uv_timer_t stop_timer;
  enum pool_state state;
  int open_handles;
  struct core *core;
  kc_workers_config cfg;
  unsigned *idle;       /* stack of idle worker indexes */
  unsigned nidle;
  unsigned nexited;
  unsigned abandoned;
  kc_stopped_fn stopped_cb;
  void *stopped_ud;
};

static atomic_uint abandoned_running;

unsigned kc_workers_abandoned_running(void) { return atomic_load(&abandoned_running); }

static void core_unref(struct core *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  if (c->release) c->release(c->reconcile_ud);
  for (unsigned i = 0; i < c->n; i++) {
    pthread_cond_destroy(&c->w[i].cond);
    free(c->w[i].key);
  }
  pthread_mutex_destroy(&c->mu);
  free(c->name);
  free(c->plugin);
  free(c);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct core *c = w->core;
  kc_log_set_context(c->name);
  kc_crash_thread_enter(); /* -ENOSPC: this thread is left out of crash reports */
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!w->has_job && !c->quit) pthread_cond_wait(&w->cond, &c->mu);
    if (!w->has_job) break; /* quit, and nothing assigned */
    pthread_mutex_unlock(&c->mu);
    w->res.kind = KC_RESULT_DONE;
    w->res.after_ms = 0;
    w->res.message[0] = '\0';
    w->res.held = false;
    w->res.has_priority = false;
    w->res.priority = 0;
    kc_log_set_reconcile(c->name, w->key, w->rid);
    kc_crash_busy(c->name, c->plugin, w->key);
    c->reconcile(c->reconcile_ud, w->key, &w->res);
    kc_crash_idle();
    w->res.message[KC_RESULT_MESSAGE_MAX - 1] = '\0';
    /* controller-runtime's "Reconciler error"; a terminal one is not
     * retried, so this is its only line */
    const char *terminal = w->res.kind == KC_RESULT_TERMINAL ? " terminal=true" : "";
    if ((w->res.kind == KC_RESULT_ERROR || *terminal) && w->attempt)
      kc_error("controller", "Reconciler error%s attempt=%u error=%s", terminal,
               (unsigned)w->attempt, w->res.message);
    else if (w->res.kind == KC_RESULT_ERROR || *terminal)
      kc_error("controller", "Reconciler error%s error=%s", terminal, w->res.message);
    kc_log_set_reconcile(NULL, NULL, NULL);
    pthread_mutex_lock(&c->mu);
    w->has_job = false;
    w->cnext = c->completed;
    c->completed = w;
    if (!c->closed) uv_async_send(c->async);
  }
  w->exited = true;
  bool abandoned = c->closed;
  if (!c->closed) uv_async_send(c->async);
  pthread_mutex_unlock(&c->mu);
  if (abandoned) atomic_fetch_sub(&abandoned_running, 1);
  kc_crash_thread_leave();
  core_unref(c);
  return NULL;
}

static void on_close(uv_handle_t *h) {
  kc_workers *p = h->data;
  if (--p->open_handles > 0) return;
  if (p->stopped_cb) p->stopped_cb(p, p->abandoned, p->stopped_ud);
  core_unref(p->core);
  free(p->idle);
  free((void *)p->cfg.name);
  free(p);
}

static void close_all(kc_workers *p) {
  struct core *c = p->core;
  p->state = CLOSING;
  pthread_mutex_lock(&c->mu);
  c->closed = true;
  for (unsigned i = 0; i < c->n; i++) {
    struct worker *w = &c->w[i];
    if (w->joined) continue;
    if (w->exited) {
      pthread_join(w->thread, NULL); /* it is past its last lock: returns at once */
    } else {
      kc_warn("workers", "abandoning stuck reconcile controller=%s key=%s running_ms=%llu", c->name,
              w->busy ? w->key : "-",
              (unsigned long long)((kc_clock_now_ns() - w->started_ns) / 1000000u));
      pthread_detach(w->thread);
      atomic_fetch_add(&abandoned_running, 1);
      p->abandoned++;
    }
    w->joined = true;
  }
  pthread_mutex_unlock(&c->mu);
  p->open_handles = 3;
  uv_close((uv_handle_t *)&p->async, on_close);
  uv_close((uv_handle_t *)&p->tick, on_close);
  uv_close((uv_handle_t *)&p->stop_timer, on_close);
}

static void on_async(uv_async_t *h) {
  kc_workers *p = h->data;
  struct core *c = p->core;
  if (p->state == CLOSING) return;
  bool freed = false;
  for (;;) {
    pthread_mutex_lock(&c->mu);
    struct worker *done = c->completed;
    c->completed = NULL;
    pthread_mutex_unlock(&c->mu);
    uint64_t now = kc_clock_now_ns();
    while (done) {
      struct worker *w = done;
      done = w->cnext;
      uint64_t dur = now - w->started_ns;
      if (w->timeout_reported)
        kc_info("workers", "slow reconcile finished controller=%s key=%s reconcileID=%s duration_ms=%llu",
                c->name, w->key, w->rid, (unsigned long long)(dur / 1000000u));
      p->cfg.on_result(p, w->key, &w->res, dur, p->cfg.ud);
      w->busy = false;
      w->timeout_reported = false;
      p->idle[p->nidle++] = (unsigned)(w - c->w);
      freed = true;
    }
    if (p->state != STOPPING) break;
    /* A worker pushes its last result and then exits, both under mu: one
     * that finished after the list was taken above has its result queued
     * again, and it is delivered before the pool may close. */
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < c->n; i++) {
      struct worker *w = &c->w[i];
      if (w->exited && !w->joined) {
        pthread_join(w->thread, NULL);
        w->joined = true;
        p->nexited++;
      }
    }
    bool more = c->completed != NULL;
    pthread_mutex_unlock(&c->mu);
    if (more) continue;
    if (p->nexited == c->n) close_all(p);
    return;
  }
  if (freed && p->cfg.on_idle) p->cfg.on_idle(p, p->cfg.ud);
}

static void on_tick(uv_timer_t *t) {
  kc_workers *p = t->data;
  struct core *c = p->core;
  uint64_t now = kc_clock_now_ns(), limit = p->cfg.timeout_ms * 1000000u;
  for (unsigned i = 0; i < c->n; i++) {
    struct worker *w = &c->w[i];
    if (!w->busy || w->timeout_reported || now - w->started_ns <= limit) continue;
    w->timeout_reported = true;
    kc_warn("workers", "reconcile exceeded timeout controller=%s key=%s reconcileID=%s running_ms=%llu "
            "timeout_ms=%llu", c->name, w->key, w->rid, (unsigned long long)((now - w->started_ns) / 1000000u),
            (unsigned long long)p->cfg.timeout_ms);
    if (p->cfg.on_timeout) p->cfg.on_timeout(p, w->key, now - w->started_ns, p->cfg.ud);
  }
}

static void on_stop_bound(uv_timer_t *t) {
  kc_workers *p = t->data;
  if (p->state == STOPPING) close_all(p);
}

int kc_workers_start(uv_loop_t *loop, const kc_workers_config *cfg, kc_workers **out) {
  if (!loop || !cfg || !cfg->reconcile || !cfg->on_result || cfg->nworkers == 0 ||
      cfg->nworkers > 4096)
    return -EINVAL;
  unsigned n = cfg->nworkers;
  kc_workers *p = calloc(1, sizeof *p);
  struct core *c = calloc(1, sizeof *c + n * sizeof(struct worker));
  unsigned *idle = calloc(n, sizeof *idle);
  char *name = strdup(cfg->name ? cfg->name : "");
  char *name2 = strdup(cfg->name ? cfg->name : "");
  if (!p || !c || !idle || !name || !name2) {
    free(p), free(c), free(idle), free(name), free(name2);
    return -ENOMEM;
  }
  p->loop = loop;
  p->cfg = *cfg;
  p->cfg.name = name2;
  p->idle = idle;
  p->core = c;
  c->name = name;
  if (cfg->plugin && !(c->plugin = strdup(cfg->plugin))) {
    free(p), free(c), free(idle), free(name), free(name2);
    return -ENOMEM;
  }
  c->n = n;
  c->reconcile = cfg->reconcile;
  c->reconcile_ud = cfg->reconcile_ud;
  c->async = &p->async;
  atomic_init(&c->refs, 1);
  int rc = -pthread_mutex_init(&c->mu, NULL);
  if (rc < 0) {
    free(p), free(c->plugin), free(c), free(idle), free(name), free(name2);
    return rc;
  }
  for (unsigned i = 0; i < n; i++) {
    c->w[i].core = c;
    c->w[i].keycap = 128;
    c->w[i].key = malloc(c->w[i].keycap);
    if (!c->w[i].key) rc = -ENOMEM;
    int e = pthread_cond_init(&c->w[i].cond, NULL);
    if (e && rc == 0) rc = -e;
  }
  if (rc == 0) rc = uv_async_init(loop, &p->async, on_async);
  if (rc < 0) {
    /* cond_init may have failed half way: destroying an all-zero cond is
     * allowed with glibc; the refcount path frees the rest. */
    core_unref(c);
    free(p), free(idle), free(name2);
    return rc;
  }
  p->async.data = p;
  uv_timer_init(loop, &p->tick);
  uv_timer_init(loop, &p->stop_timer);
  p->tick.data = p->stop_timer.data = p;

  /* Workers must not take the daemon's signals (libuv handles them on the loop). */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  unsigned started = 0;
  for (; started < n; started++) {
    atomic_fetch_add(&c->refs, 1);
    int e = pthread_create(&c->w[started].thread, NULL, worker_main, &c->w[started]);
    if (e) {
      atomic_fetch_sub(&c->refs, 1);
      rc = -e;
      break;
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc < 0) {
    kc_error("workers", "cannot start worker thread controller=%s err=%s", name, strerror(-rc));
    pthread_mutex_lock(&c->mu);
    c->quit = true;
    c->closed = true;
    for (unsigned i = 0; i < started; i++) pthread_cond_signal(&c->w[i].cond);
    pthread_mutex_unlock(&c->mu);
    for (unsigned i = 0; i < started; i++) pthread_join(c->w[i].thread, NULL);
    for (unsigned i = started; i < n; i++) c->w[i].joined = true;
    for (unsigned i = 0; i < started; i++) c->w[i].joined = true;
    p->stopped_cb = NULL;
    p->state = CLOSING;
    p->open_handles = 3;
    uv_close((uv_handle_t *)&p->async, on_close);
    uv_close((uv_handle_t *)&p->tick, on_close);
    uv_close((uv_handle_t *)&p->stop_timer, on_close);
    return rc;
  }
  c->release = cfg->release; /* from here on the core owns reconcile_ud's release */
  for (unsigned i = 0; i < n; i++) p->idle[i] = n - 1 - i; /* worker 0 first */
  p->nidle = n;
  if (cfg->timeout_ms > 0) {
    uint64_t period = cfg->timeout_ms / 4;
    if (period < 5) period = 5;
    if (period > 1000) period = 1000;
    uv_timer_start(&p->tick, on_tick, period, period);
    uv_unref((uv_handle_t *)&p->tick); /* never keeps the loop alive by itself */
  }
  *out = p;
  return 0;
}

static int dispatch(kc_workers *p, const char *key, uint32_t attempt) {
  if (p->state != RUNNING) return -ESHUTDOWN;
  if (p->nidle == 0) return -EBUSY;
  struct core *c = p->core;
  struct worker *w = &c->w[p->idle[p->nidle - 1]];
  size_t len = strlen(key);
  pthread_mutex_lock(&c->mu);
  if (KC_ARRAY_RESERVE(w->key, w->keycap, len + 1, 128) < 0) {
    pthread_mutex_unlock(&c->mu);
    return -ENOMEM;
  }
  memcpy(w->key, key, len + 1);
  kc_log_new_reconcile_id(w->rid);
  w->attempt = attempt;
  w->has_job = true;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&c->mu);
  p->nidle--;
  w->busy = true;
  w->timeout_reported = false;
  w->started_ns = kc_clock_now_ns();
  return 0;
}

int kc_workers_dispatch(kc_workers *p, const char *key, uint32_t attempt) {
  return dispatch(p, key, attempt);
}

void kc_workers_stop(kc_workers *p, uint64_t bound_ms, kc_stopped_fn cb, void *ud) {
  if (p->state != RUNNING) return;
  struct core *c = p->core;
  p->state = STOPPING;
  p->stopped_cb = cb;
  p->stopped_ud = ud;
  pthread_mutex_lock(&c->mu);
  c->quit = true;
  for (unsigned i = 0; i < c->n; i++) pthread_cond_signal(&c->w[i].cond);
  pthread_mutex_unlock(&c->mu);
  uv_update_time(p->loop); /* the bound counts from now, not from the last loop wakeup */
  uv_timer_start(&p->stop_timer, on_stop_bound, bound_ms, 0);
}

unsigned kc_workers_size(const kc_workers *p) { return p->core->n; }
unsigned kc_workers_idle(const kc_workers *p) { return p->state == RUNNING ? p->nidle : 0; }
unsigned kc_workers_active(const kc_workers *p) { return p->core->n - p->nidle; }
