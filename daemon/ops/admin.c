/* SPDX-License-Identifier: Apache-2.0 */
/* admin: see admin.h. */
#include "ops/admin.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "runtime/keytrace.h"
#include "runtime/pausedset.h"

#define TRACE_MAX 256 /* entries of one key in one answer (the ring may hold more) */

void kc_admin_error(kc_buf *out, const char *message) {
  kc_buf_puts(out, "{\"error\":");
  kc_buf_json_c(out, message);
  kc_buf_puts(out, "}\n");
}

/* The running controller named name; else NULL with the error answered. */
static kc_controller *controller_named(const kc_ops_view *v, const char *name, kc_buf *out,
                                       int *rc) {
  for (size_t i = 0; i < v->ncontrollers; i++)
    if (v->controllers[i] && strcmp(kc_controller_name(v->controllers[i]), name) == 0)
      return v->controllers[i];
  kc_buf msg = {0};
  for (size_t i = 0; i < v->ncontroller_states; i++)
    if (strcmp(v->controller_states[i].name, name) == 0) {
      const char *why = v->controller_states[i].init_error;
      kc_buf_printf(&msg, "controller \"%s\" is not running%s%s", name, why ? ": " : "",
                    why ? why : "");
      kc_admin_error(out, msg.p ? msg.p : "controller not running");
      kc_buf_free(&msg);
      *rc = -EAGAIN;
      return NULL;
    }
  kc_buf_printf(&msg, "no such controller \"%s\" (controllers:", name);
  size_t n = v->ncontroller_states;
  for (size_t i = 0; i < n; i++)
    kc_buf_printf(&msg, "%s %s", i ? "," : "", v->controller_states[i].name);
  kc_buf_puts(&msg, n ? ")" : " none)");
  kc_admin_error(out, msg.p ? msg.p : "no such controller");
  kc_buf_free(&msg);
  *rc = -ENOENT;
  return NULL;
}

static double seconds(uint64_t ns) { return (double)ns / 1e9; }

/* --- queues ------------------------------------------------------------------- */

typedef struct queue_sums {
  size_t depth, inflight, backoff;
  size_t by_level[KC_WQ_LEVELS];
  uint64_t oldest_added_ns; /* 0: nothing queued */
} queue_sums;

static void sum_key(const kc_wq_key_state *st, void *ud) {
  queue_sums *q = ud;
  if (st->queued) q->depth++;
  if (st->queued && st->level >= 0 && st->level < KC_WQ_LEVELS) q->by_level[st->level]++;
  if (st->processing) q->inflight++;
  if (st->waiting) q->backoff++;
  if (st->queued && st->added_ns && (!q->oldest_added_ns || st->added_ns < q->oldest_added_ns))
    q->oldest_added_ns = st->added_ns;
}

static void answer_queues(const kc_ops_view *v, kc_buf *out) {
  uint64_t now = kc_clock_now_ns();
  kc_buf_puts(out, "{\"controllers\":[");
  bool first = true;
  for (size_t i = 0; i < v->ncontroller_states; i++) {
    const kc_ops_controller_state *cs = &v->controller_states[i];
    kc_controller *c = NULL;
    for (size_t k = 0; k < v->ncontrollers; k++)
      if (v->controllers[k] && strcmp(kc_controller_name(v->controllers[k]), cs->name) == 0)
        c = v->controllers[k];
    queue_sums q = {0};
    size_t failing = 0;
    if (c) {
      kc_workqueue_each(kc_controller_queue(c), sum_key, &q);
      failing = kc_keytrace_failing(kc_controller_keytrace(c));
    }
    kc_buf_puts(out, first ? "\n {\"name\":" : ",\n {\"name\":");
    first = false;
    kc_buf_json_c(out, cs->name);
    kc_buf_printf(out,
                  ",\"running\":%s,\"active\":%s,\"paused\":%s,\"depth\":%zu,\"inflight\":%zu,"
                  "\"backoff\":%zu,\"failing\":%zu,\"oldestWaitSeconds\":%.3f,"
                  "\"depthByPriority\":{\"high\":%zu,\"normal\":%zu,\"low\":%zu}}",
                  c ? "true" : "false", c && kc_controller_active(c) ? "true" : "false",
                  (c && kc_controller_paused(c)) || kc_paused_set_has(v->paused, cs->name)
                      ? "true"
                      : "false",
                  q.depth, q.inflight, q.backoff,
                  failing,
                  q.oldest_added_ns && now > q.oldest_added_ns ? seconds(now - q.oldest_added_ns)
                                                               : 0.0,
                  q.by_level[KC_WQ_HIGH], q.by_level[KC_WQ_NORMAL], q.by_level[KC_WQ_LOW]);
  }
  kc_buf_puts(out, first ? "]}\n" : "\n]}\n");
}

/* --- keys --------------------------------------------------------------------- */

typedef struct key_row {
  char *key;
  const char *state;
  int level;
  uint32_t failures;
  uint64_t ready_ns; /* backoff: when it is queued again */
} key_row;

typedef struct key_rows {
  key_row *v;
  size_t n, cap;
  enum kc_admin_state want;
  kc_keytrace *trace;
  const kc_workqueue *wq;
  bool oom;
} key_rows;

static void push_row(key_rows *rows, const char *key, const char *state, int level,
                     uint32_t failures, uint64_t ready_ns) {
  if (rows->oom) return;
  if (KC_ARRAY_RESERVE(rows->v, rows->cap, rows->n + 1, 64) < 0) {
    rows->oom = true;
    return;
  }
  key_row *r = &rows->v[rows->n];
  *r = (key_row){strdup(key), state, level, failures, ready_ns};
  if (!r->key) {
    rows->oom = true;
    return;
  }
  rows->n++;
}

static void on_queue_key(const kc_wq_key_state *st, void *ud) {
  key_rows *rows = ud;
  const char *state = st->processing ? "inflight" : st->queued ? "queued" : st->waiting ? "backoff"
                                                                                      : NULL;
  bool failing = kc_keytrace_last_error(rows->trace, st->key, NULL, 0);
  if (!state) {
    if (!failing) return; /* failures counted, no error kept: a requeue result */
    state = "failing";
  }
  switch (rows->want) {
  case KC_ADMIN_STATE_ANY: break;
  case KC_ADMIN_STATE_QUEUED: if (strcmp(state, "queued") != 0) return; break;
  case KC_ADMIN_STATE_INFLIGHT: if (strcmp(state, "inflight") != 0) return; break;
  case KC_ADMIN_STATE_BACKOFF: if (!st->waiting) return; break;
  case KC_ADMIN_STATE_FAILING: if (!failing) return; break;
  }
  push_row(rows, st->key, state, st->level, st->failures, st->waiting ? st->ready_ns : 0);
}

/* Failing keys the queue no longer holds (a terminal error). */
static void on_error_key(const char *key, const char *message, void *ud) {
  key_rows *rows = ud;
  if (rows->want != KC_ADMIN_STATE_ANY && rows->want != KC_ADMIN_STATE_FAILING) return;
  kc_wq_key_state st;
  if (kc_workqueue_key_state(rows->wq, key, &st)) return; /* listed by on_queue_key */
  push_row(rows, key, "failing", KC_WQ_NORMAL, 0, 0);
}

static int row_cmp(const void *a, const void *b) {
  return strcmp(((const key_row *)a)->key, ((const key_row *)b)->key);
}

static int answer_keys(kc_controller *c, const kc_admin_request *r, kc_buf *out) {
  kc_workqueue *wq = kc_controller_queue(c);
  key_rows rows = {.want = r->state, .trace = kc_controller_keytrace(c), .wq = wq};
  kc_workqueue_each(wq, on_queue_key, &rows);
  /* on_error_key runs under the trace's lock: it does not call into the trace. */
  kc_keytrace_each_error(rows.trace, on_error_key, &rows);
  int rc = 0;
  if (rows.oom) {
    kc_admin_error(out, "out of memory listing the keys");
    rc = -ENOMEM;
    goto out;
  }
  if (rows.n > 1) qsort(rows.v, rows.n, sizeof *rows.v, row_cmp); /* v is NULL when empty */
  uint64_t now = kc_clock_now_ns();
  kc_buf_puts(out, "{\"controller\":");
  kc_buf_json_c(out, kc_controller_name(c));
  kc_buf_puts(out, ",\"keys\":[");
  char err[KC_KEYTRACE_ERROR_MAX];
  for (size_t i = 0; i < rows.n; i++) {
    const key_row *k = &rows.v[i];
    kc_buf_puts(out, i ? ",\n {\"key\":" : "\n {\"key\":");
    kc_buf_json_c(out, k->key);
    kc_buf_puts(out, ",\"state\":");
    kc_buf_json_c(out, k->state);
    kc_buf_puts(out, ",\"priority\":");
    kc_buf_json_c(out, kc_wq_priority_name(k->level));
    kc_buf_printf(out, ",\"attempts\":%" PRIu32 ",\"lastError\":", k->failures);
    if (kc_keytrace_last_error(rows.trace, k->key, err, sizeof err))
      kc_buf_json_c(out, err);
    else
      kc_buf_puts(out, "null");
    kc_buf_puts(out, ",\"nextRetrySeconds\":");
    if (k->ready_ns)
      kc_buf_printf(out, "%.3f", k->ready_ns > now ? seconds(k->ready_ns - now) : 0.0);
    else
      kc_buf_puts(out, "null");
    kc_buf_puts(out, "}");
  }
  kc_buf_puts(out, rows.n ? "\n]}\n" : "]}\n");
out:
  for (size_t i = 0; i < rows.n; i++) free(rows.v[i].key);
  free(rows.v);
  return rc;
}

/* --- trace -------------------------------------------------------------------- */

static void put_time(kc_buf *out, uint64_t wall_ms) {
  time_t s = (time_t)(wall_ms / 1000);
  struct tm tm;
  char buf[32];
  if (!gmtime_r(&s, &tm) || strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
    kc_buf_puts(out, "null");
    return;
  }
  kc_buf_printf(out, "\"%s.%03uZ\"", buf, (unsigned)(wall_ms % 1000));
}

static int answer_trace(kc_controller *c, const kc_admin_request *r, kc_buf *out) {
  kc_keytrace *t = kc_controller_keytrace(c);
  kc_keytrace_entry *e = calloc(TRACE_MAX, sizeof *e);
  if (!e) {
    kc_admin_error(out, "out of memory reading the trace");
    return -ENOMEM;
  }
  size_t matched = kc_keytrace_find(t, r->key, e, TRACE_MAX);
  size_t n = matched < TRACE_MAX ? matched : TRACE_MAX;
  kc_buf_puts(out, "{\"controller\":");
  kc_buf_json_c(out, kc_controller_name(c));
  kc_buf_puts(out, ",\"key\":");
  kc_buf_json_c(out, r->key);
  kc_buf_puts(out, ",\"entries\":[");
  for (size_t i = 0; i < n; i++) {
    kc_buf_puts(out, i ? ",\n {\"time\":" : "\n {\"time\":");
    put_time(out, e[i].wall_ms);
    kc_buf_puts(out, ",\"stage\":");
    kc_buf_json_c(out, kc_keytrace_stage_name((enum kc_keytrace_stage)e[i].stage));
    kc_buf_puts(out, ",\"detail\":");
    kc_buf_json(out, e[i].detail, strnlen(e[i].detail, sizeof e[i].detail));
    kc_buf_puts(out, "}");
  }
  kc_buf_printf(out, "%s],\"matched\":%zu,\"ringEntries\":%zu,\"ringBytes\":%zu}\n", n ? "\n" : "",
                matched, kc_keytrace_capacity(t), kc_keytrace_mem_bytes(t));
  free(e);
  return 0;
}

/* --- pause, resume ------------------------------------------------------------- */

static bool configured(const kc_ops_view *v, const char *name) {
  for (size_t i = 0; i < v->ncontroller_states; i++)
    if (strcmp(v->controller_states[i].name, name) == 0) return true;
  return false;
}

/* c NULL: a configured controller not running (yet): only the kept set
 * changes, and it applies once the controller runs. */
static int answer_pause(const kc_ops_view *v, kc_controller *c, const kc_admin_request *r,
                        kc_buf *out) {
  bool pause = r->command == KC_ADMIN_PAUSE;
  char why[320] = "";
  int saved = v->paused ? kc_paused_set_put(v->paused, r->controller, pause, why, sizeof why) : 0;
  if (saved < 0)
    kc_warn("admin", "kctrld ctl %s %s: in effect, but not kept for a restart: %s",
            pause ? "pause" : "resume", r->controller, why);
  if (c) kc_controller_set_paused(c, pause);
  bool paused = c ? kc_controller_paused(c) : kc_paused_set_has(v->paused, r->controller);
  kc_buf_puts(out, "{\"controller\":");
  kc_buf_json_c(out, r->controller);
  kc_buf_printf(out, ",\"paused\":%s,\"running\":%s", paused ? "true" : "false",
                c ? "true" : "false");
  if (saved < 0) {
    kc_buf msg = {0};
    kc_buf_printf(&msg, "not kept for a restart: %s", why);
    kc_buf_puts(out, ",\"warning\":");
    kc_buf_json_c(out, msg.p ? msg.p : "not kept for a restart");
    kc_buf_free(&msg);
  }
  kc_buf_puts(out, "}\n");
  return 0;
}

/* --- the rest ----------------------------------------------------------------- */

int kc_admin_answer(const kc_ops_view *v, const kc_admin_request *r, kc_buf *out) {
  int rc = 0;
  kc_controller *c = NULL;
  if ((r->command == KC_ADMIN_PAUSE || r->command == KC_ADMIN_RESUME) && v->paused &&
      configured(v, r->controller)) {
    for (size_t i = 0; i < v->ncontrollers && !c; i++)
      if (v->controllers[i] && strcmp(kc_controller_name(v->controllers[i]), r->controller) == 0)
        c = v->controllers[i];
    rc = answer_pause(v, c, r, out);
    return rc == 0 && out->err ? out->err : rc;
  }
  if (r->controller[0] && !(c = controller_named(v, r->controller, out, &rc))) return rc;
  switch (r->command) {
  case KC_ADMIN_QUEUES: answer_queues(v, out); break;
  case KC_ADMIN_KEYS: rc = answer_keys(c, r, out); break;
  case KC_ADMIN_TRACE: rc = answer_trace(c, r, out); break;
  case KC_ADMIN_REQUEUE:
    rc = kc_controller_requeue(c, r->key, KC_WQ_HIGH);
    if (rc < 0) {
      kc_admin_error(out, rc == -ESRCH       ? "the key is in a shard range another replica holds"
                          : rc == -ECANCELED ? "the controller is stopping"
                          : rc == -ENOMEM    ? "out of memory"
                                             : "the key cannot be queued");
      break;
    }
    kc_buf_puts(out, "{\"controller\":");
    kc_buf_json_c(out, r->controller);
    kc_buf_puts(out, ",\"key\":");
    kc_buf_json_c(out, r->key);
    kc_buf_puts(out, ",\"requeued\":true}\n");
    break;
  case KC_ADMIN_PAUSE:
  case KC_ADMIN_RESUME: rc = answer_pause(v, c, r, out); break;
  case KC_ADMIN_INFORMERS:
    kc_buf_puts(out, "{\"informers\":");
    rc = kc_ops_informers_json(v, out);
    kc_buf_puts(out, "}\n");
    break;
  default:
    kc_admin_error(out, "unknown command");
    rc = -EINVAL;
    break;
  }
  if (rc == 0 && out->err) rc = out->err;
  return rc;
}
