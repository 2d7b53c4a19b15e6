/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/lease/leader.c against a small Lease emulation served by
 * mini_server: GET/POST/PUT of one Lease with resourceVersion conflicts,
 * 422 for a PUT without resourceVersion, create on PUT, MicroTime
 * validation (exactly six fraction digits, else 400), and injected faults
 * (429, 500, stall). The test itself plays "another replica" by writing the
 * emulated Lease directly.
 *
 * Timings: leaseDuration 1000 ms (leaseDurationSeconds 1), renewDeadline
 * 600 ms, retryPeriod 100 ms, on the manual clock (base/clock.h): the loop
 * helpers move it to the elector's next timer whenever no request is in
 * flight, so the test computes the elector's timing instead of waiting for
 * it, and every interval it checks is exact. A request in flight holds the
 * clock still (the server answers in real time).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/clock.h"
#include "client/apiclient.h"
#include "client/http.h"
#include "watch/decode.h"
#include "lease/leader.h"
#include "base/log.h"
#include "mini_server.h"

#define LD_MS 1000
#define RD_MS 600
#define RP_MS 100
#define COLL "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
#define ITEM COLL "/ctl"

#define MS 1000000ull
/* Real time: only the bound on how long a helper may spin. */
static uint64_t real_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
#define REAL_LIMIT_MS 20000

/* --- the Lease emulation (server threads) ------------------------------------ */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  bool exists;
  uint64_t rv;
  char holder[256];
  int64_t duration;
  char acquire[64], renew[64]; /* "" = null */
  int64_t transitions;
  unsigned gets, puts, posts, conflicts, bad_times, unconditional, writes;
  uint64_t last_write_ms; /* kc_clock ms of the last successful write */
} E;
static atomic_int fault;          /* 0, 429, 500, or 1 = stall */
static atomic_bool stall_release; /* set to let stalled handlers return */
static atomic_int stalled;        /* handlers stalled now: their requests never end */
static mini_server *srv;
static char server_url[64];

static void emu_reset(void) {
  pthread_mutex_lock(&mu);
  memset(&E, 0, sizeof E);
  E.rv = 100;
  pthread_mutex_unlock(&mu);
  atomic_store(&fault, 0);
}

/* The other replica writes the Lease (renewTime deliberately from another
 * era: nobody may compare it with a local clock). */
static void emu_write_other(const char *holder, int64_t duration, int64_t transitions) {
  pthread_mutex_lock(&mu);
  E.exists = true;
  E.rv++;
  snprintf(E.holder, sizeof E.holder, "%s", holder);
  E.duration = duration;
  snprintf(E.acquire, sizeof E.acquire, "2001-01-01T00:00:00.000000Z");
  snprintf(E.renew, sizeof E.renew, "2001-01-01T00:00:%02u.000000Z", (unsigned)(E.rv % 60));
  E.transitions = transitions;
  E.last_write_ms = kc_clock_now_ms();
  pthread_mutex_unlock(&mu);
}

/* A metadata-only change (e.g. a label edit): the RV moves, the spec not. */
static void emu_bump_rv(void) {
  pthread_mutex_lock(&mu);
  E.rv++;
  pthread_mutex_unlock(&mu);
}

static bool microtime_ok(const char *s) {
  /* 2006-01-02T15:04:05.000000Z */
  static const char pat[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";
  if (strlen(s) != sizeof pat - 1) return false;
  for (size_t i = 0; pat[i]; i++) {
    if (pat[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != pat[i]) return false;
  }
  return true;
}

static _Thread_local char out[4096];

static void jesc(const char *s, char *dst, size_t cap) {
  size_t n = 0;
  for (; *s && n + 3 < cap; s++) {
    if (*s == '"' || *s == '\\') dst[n++] = '\\';
    dst[n++] = *s;
  }
  dst[n] = '\0';
}

static const char *lease_json_locked(void) {
  char acq[80], ren[80], holder[600];
  jesc(E.holder, holder, sizeof holder);
  snprintf(acq, sizeof acq, E.acquire[0] ? "\"%s\"" : "null", E.acquire);
  snprintf(ren, sizeof ren, E.renew[0] ? "\"%s\"" : "null", E.renew);
  snprintf(out, sizeof out,
           "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":"
           "\"ctl\",\"namespace\":\"ns\",\"uid\":\"6b7c0f4e-2f5a-4a3c-9d1e-0c2b8f7a1d11\","
           "\"resourceVersion\":\"%llu\",\"creationTimestamp\":\"2024-05-01T10:00:00Z\","
           "\"labels\":{\"app\":\"kctrld\"}},\"spec\":{\"holderIdentity\":\"%s\","
           "\"leaseDurationSeconds\":%lld,\"acquireTime\":%s,\"renewTime\":%s,"
           "\"leaseTransitions\":%lld}}",
           (unsigned long long)E.rv, holder, (long long)E.duration, acq, ren,
           (long long)E.transitions);
  return out;
}

static void status(mini_server_reply *r, int code, const char *reason, const char *msg) {
  snprintf(out, sizeof out,
           "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
           "\"message\":\"%s\",\"reason\":\"%s\",\"details\":{\"name\":\"ctl\",\"group\":"
           "\"coordination.k8s.io\",\"kind\":\"leases\"},\"code\":%d}",
           msg, reason, code);
  r->status = code;
  r->body = out;
}

/* Decodes a written Lease into E (mutex held). Returns false (and answers
 * 400) when a MicroTime is not in the exact format. */
static bool take_spec_locked(const kc_obj *o, mini_server_reply *r) {
  kc_json_value v;
  char acq[64] = "", ren[64] = "";
  const char *paths[2] = {"spec.acquireTime", "spec.renewTime"};
  char *dst[2] = {acq, ren};
  for (int i = 0; i < 2; i++) {
    kc_obj_get(o, paths[i], &v);
    if (v.type == KC_JSON_NULL || v.type == KC_JSON_ABSENT) continue;
    if (v.type != KC_JSON_STRING || kc_json_string(&v, dst[i], 64) < 0 || !microtime_ok(dst[i])) {
      E.bad_times++;
      status(r, 400, "BadRequest", "Lease in version \\\"v1\\\" cannot be handled as a Lease");
      return false;
    }
  }
  E.holder[0] = '\0';
  if (kc_obj_get(o, "spec.holderIdentity", &v) == 0 && v.type == KC_JSON_STRING)
    kc_json_string(&v, E.holder, sizeof E.holder);
  E.duration = 0;
  if (kc_obj_get(o, "spec.leaseDurationSeconds", &v) == 0 && v.type == KC_JSON_NUMBER)
    kc_json_int64(&v, &E.duration);
  E.transitions = 0;
  if (kc_obj_get(o, "spec.leaseTransitions", &v) == 0 && v.type == KC_JSON_NUMBER)
    kc_json_int64(&v, &E.transitions);
  memcpy(E.acquire, acq, sizeof acq);
  memcpy(E.renew, ren, sizeof ren);
  E.exists = true;
  E.rv++;
  E.writes++;
  E.last_write_ms = kc_clock_now_ms();
  return true;
}

static void handler(const mini_server_request *rq, mini_server_reply *r, void *ud) {
  (void)ud;
  int f = atomic_load(&fault);
  if (f == 1) {
    atomic_fetch_add(&stalled, 1);
    while (!atomic_load(&stall_release)) {
      struct timespec ts = {0, 5000000};
      nanosleep(&ts, NULL);
    }
    atomic_fetch_sub(&stalled, 1);
    status(r, 500, "InternalError", "stalled");
    return;
  }
  if (f == 429) {
    r->status = 429;
    r->content_type = "text/plain";
    r->body = "Too many requests, please try again later.\n";
    r->headers[0] = "Retry-After: 1";
    return;
  }
  if (f == 500) {
    status(r, 500, "InternalError", "Internal error occurred: injected");
    return;
  }
  bool item = strcmp(rq->path, ITEM) == 0, coll = strcmp(rq->path, COLL) == 0;
  pthread_mutex_lock(&mu);
  if (item && strcmp(rq->method, "GET") == 0) {
    E.gets++;
    if (!E.exists)
      status(r, 404, "NotFound", "leases.coordination.k8s.io \\\"ctl\\\" not found");
    else
      r->body = lease_json_locked();
  } else if ((item && strcmp(rq->method, "PUT") == 0) || (coll && strcmp(rq->method, "POST") == 0)) {
    bool put = item;
    if (put) E.puts++;
    else E.posts++;
    char err[128];
    kc_obj *o = kc_obj_parse(rq->body, rq->body_len, NULL, err, sizeof err);
    if (!o) {
      status(r, 400, "BadRequest", "undecodable");
    } else if (!put && E.exists) {
      status(r, 409, "AlreadyExists", "leases.coordination.k8s.io \\\"ctl\\\" already exists");
    } else if (put && E.exists && !kc_obj_resource_version(o).len) {
      E.unconditional++;
      status(r, 422, "Invalid", "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update");
    } else if (put && E.exists &&
               (kc_obj_resource_version(o).len !=
                    (size_t)snprintf(err, sizeof err, "%llu", (unsigned long long)E.rv) ||
                memcmp(kc_obj_resource_version(o).ptr, err, kc_obj_resource_version(o).len) != 0)) {
      E.conflicts++;
      status(r, 409, "Conflict", "Operation cannot be fulfilled on leases.coordination.k8s.io \\\"ctl\\\": the object has been modified");
    } else {
      bool created = !E.exists;
      if (take_spec_locked(o, r)) {
        r->status = created ? 201 : 200;
        r->body = lease_json_locked();
      }
    }
    kc_obj_unref(o);
  } else {
    status(r, 405, "MethodNotAllowed", "no");
  }
  pthread_mutex_unlock(&mu);
}

/* --- harness ----------------------------------------------------------------- */

typedef struct events {
  kc_leader *le;
  int started, stopped;
  uint64_t started_ms, stopped_ms;
  bool leader_in_started, leader_in_stopped;
  char new_leader[256];
  int new_leader_calls;
  int released, release_err;
} events;

static void on_started(void *ud) {
  events *e = ud;
  e->started++;
  e->started_ms = kc_clock_now_ms();
  e->leader_in_started = kc_leader_is_leader(e->le);
}
static void on_stopped(void *ud) {
  events *e = ud;
  e->stopped++;
  e->stopped_ms = kc_clock_now_ms();
  e->leader_in_stopped = kc_leader_is_leader(e->le);
}
static void on_new_leader(const char *holder, void *ud) {
  events *e = ud;
  snprintf(e->new_leader, sizeof e->new_leader, "%s", holder);
  e->new_leader_calls++;
}
static void on_released(int err, void *ud) {
  events *e = ud;
  e->released++;
  e->release_err = err;
}

static const kc_leader_callbacks CBS = {on_started, on_stopped, on_new_leader, NULL};

typedef struct env {
  uv_loop_t loop;
  uv_timer_t tick;
  kc_api *api;
} env;

static void on_tick(uv_timer_t *t) { (void)t; }

static void env_init(env *v) {
  emu_reset();
  kc_clock_set_manual(1000000 * MS);
  assert_int_equal(uv_loop_init(&v->loop), 0);
  uv_timer_init(&v->loop, &v->tick);
  uv_timer_start(&v->tick, on_tick, 5, 5);
  kc_kube_creds cr = {.server = server_url};
  assert_int_equal(kc_api_new(&v->loop, &cr, &v->api), 0);
}

/* Ends the stall fault and waits until every stalled handler returned. */
static void unstall(void) {
  atomic_store(&fault, 0);
  atomic_store(&stall_release, true);
  uint64_t r0 = real_ms();
  while (atomic_load(&stalled) > 0 && real_ms() - r0 < REAL_LIMIT_MS) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(atomic_load(&stalled), 0);
}

static void env_free(env *v) {
  unstall();
  kc_api_close(v->api);
  uv_close((uv_handle_t *)&v->tick, NULL);
  uv_run(&v->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&v->loop), 0);
  kc_clock_set_real();
  atomic_store(&stall_release, false);
  atomic_store(&fault, 0);
}

static kc_leader *elector(env *v, const char *id, events *e) {
  kc_leader_election cfg = {.enabled = true, .namespace_ = "ns", .name = "ctl",
                            .lease_duration_ms = LD_MS, .renew_deadline_ms = RD_MS,
                            .retry_period_ms = RP_MS};
  kc_leader *le = NULL;
  assert_int_equal(kc_leader_new(&v->loop, v->api, &cfg, id, &CBS, e, &le), 0);
  e->le = le;
  assert_int_equal(kc_leader_start(le), 0);
  assert_int_equal(kc_leader_start(le), -EALREADY);
  return le;
}

/* A request is in flight that the server will answer (a stalled one never
 * is: time goes on meanwhile, as it would). */
static bool awaiting_server(env *v) {
  return kc_http_active(kc_api_http(v->api)) > 0 && atomic_load(&stalled) == 0;
}

/* One step, never moving the clock past limit_ns: while awaiting the
 * server, one loop iteration (the tick bounds it); otherwise what is ready
 * runs, then the clock moves to the next timer (or limit_ns) and what that
 * made due runs. */
static void turn(env *v, uint64_t limit_ns) {
  if (awaiting_server(v)) {
    uv_run(&v->loop, UV_RUN_ONCE);
    return;
  }
  uv_run(&v->loop, UV_RUN_NOWAIT);
  if (awaiting_server(v)) return;
  uint64_t due, now = kc_clock_now_ns(), to = limit_ns;
  if (kc_clock_next_due(&due) && due < to) to = due;
  kc_clock_advance(to > now ? to - now : 0);
  uv_run(&v->loop, UV_RUN_NOWAIT);
}

/* Runs until *flag >= want or timeout_ms on the elector's clock; returns the
 * elapsed ms. */
static uint64_t run_until(env *v, const int *flag, int want, uint64_t timeout_ms) {
  uint64_t t0 = kc_clock_now_ns(), limit = t0 + timeout_ms * MS, r0 = real_ms();
  while (*flag < want) {
    if (kc_clock_now_ns() >= limit || real_ms() - r0 > REAL_LIMIT_MS)
      fail_msg("timed out after %llu ms", (unsigned long long)timeout_ms);
    turn(v, limit);
  }
  return (kc_clock_now_ns() - t0) / MS;
}

/* Runs for ms on the elector's clock. */
static void run_for(env *v, uint64_t ms) {
  uint64_t end = kc_clock_now_ns() + ms * MS, r0 = real_ms();
  while (kc_clock_now_ns() < end && real_ms() - r0 < REAL_LIMIT_MS) turn(v, end);
}

static void snapshot(char *holder, size_t cap, int64_t *trans, char *acq, char *ren, int64_t *dur) {
  pthread_mutex_lock(&mu);
  snprintf(holder, cap, "%s", E.holder);
  if (trans) *trans = E.transitions;
  if (acq) snprintf(acq, 64, "%s", E.acquire);
  if (ren) snprintf(ren, 64, "%s", E.renew);
  if (dur) *dur = E.duration;
  pthread_mutex_unlock(&mu);
}

/* --- tests --------------------------------------------------------------------- */

static void test_microtime_and_identity(void **state) {
  (void)state;
  char b[64];
  assert_int_equal(kc_leader_format_microtime(0, b, sizeof b), 27);
  assert_string_equal(b, "1970-01-01T00:00:00.000000Z");
  assert_int_equal(kc_leader_format_microtime(1714557792123456LL, b, sizeof b), 27);
  assert_string_equal(b, "2024-05-01T10:03:12.123456Z");
  assert_int_equal(kc_leader_format_microtime(1714557792000001LL, b, sizeof b), 27);
  assert_string_equal(b, "2024-05-01T10:03:12.000001Z");
  assert_int_equal(kc_leader_format_microtime(-1, b, sizeof b), 27);
  assert_string_equal(b, "1969-12-31T23:59:59.999999Z");
  assert_true(microtime_ok(b));
  assert_int_equal(kc_leader_format_microtime(0, b, 27), -ENOSPC);

  char a[320], c[320];
  int n = kc_leader_default_identity(a, sizeof a);
  assert_true(n > 33);
  assert_int_equal(kc_leader_default_identity(c, sizeof c), n);
  assert_string_not_equal(a, c); /* 128 random bits each */
  const char *us = strrchr(a, '_');
  assert_non_null(us);
  assert_int_equal(strlen(us + 1), 32);
  assert_int_equal(strspn(us + 1, "0123456789abcdef"), 32);
  assert_int_equal(kc_leader_default_identity(a, 10), -ENOSPC);
}

/* A Lease whose spec member "x" holds `levels` nested arrays, closed. */
static char *nested_lease(size_t levels, size_t *len) {
  static const char head[] =
      "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
      "\"kctrld\",\"namespace\":\"kctrld-system\",\"resourceVersion\":\"7\"},\"spec\":{"
      "\"holderIdentity\":\"a\\u005fb\",\"leaseDurationSeconds\":15,\"acquireTime\":"
      "\"2024-05-01T10:03:12.123456Z\",\"renewTime\":\"2024-05-01T10:04:12.000001Z\","
      "\"leaseTransitions\":3,\"x\":";
  size_t n = sizeof head - 1 + 2 * levels + 2;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, head, sizeof head - 1);
  memset(s + sizeof head - 1, '[', levels);
  memset(s + sizeof head - 1 + levels, ']', levels);
  memcpy(s + n - 2, "}}", 3);
  *len = n;
  return s;
}

/* Every Lease answer goes through kc_leader_parse_lease's parse: nesting
 * deeper than KC_OBJ_MAX_DEPTH is refused while streaming, nothing recurses. */
static void test_parse_lease(void **state) {
  kc_lease_record r;
  char err[160];
  size_t len;
  char *doc = nested_lease(1, &len);
  assert_non_null(doc);
  assert_int_equal(kc_leader_parse_lease(doc, len, &r, err, sizeof err), 0);
  free(doc);
  assert_string_equal(r.holder, "a_b");
  assert_int_equal(r.duration_s, 15);
  assert_string_equal(r.acquire, "2024-05-01T10:03:12.123456Z");
  assert_string_equal(r.renew, "2024-05-01T10:04:12.000001Z");
  assert_int_equal(r.transitions, 3);

  doc = nested_lease(1000000, &len); /* 2 MB, a million levels */
  assert_non_null(doc);
  assert_int_equal(kc_leader_parse_lease(doc, len, &r, err, sizeof err), -EBADMSG);
  free(doc);
  assert_non_null(strstr(err, "nesting deeper than KC_OBJ_MAX_DEPTH (256) levels"));
  assert_string_equal(r.holder, "");

  doc = nested_lease(254, &len); /* root + spec + 254 = 256 levels: fine */
  assert_non_null(doc);
  assert_int_equal(kc_leader_parse_lease(doc, len, &r, err, sizeof err), 0);
  free(doc);
  assert_int_equal(r.transitions, 3);
  doc = nested_lease(255, &len);
  assert_non_null(doc);
  assert_int_equal(kc_leader_parse_lease(doc, len, &r, err, sizeof err), -EBADMSG);
  free(doc);

  assert_int_equal(kc_leader_parse_lease("[]", 2, &r, err, sizeof err), -EBADMSG);
  assert_string_equal(err, "offset 1: not a JSON object");
  assert_int_equal(kc_leader_parse_lease("{\"spec\":{}}", 11, &r, NULL, 0), 0);
  assert_string_equal(r.holder, "");
  assert_int_equal(r.duration_s, 0);
}

static void test_bad_config(void **state) {
  (void)state;
  env v;
  env_init(&v);
  kc_leader *le = NULL;
  kc_leader_election cfg = {.enabled = true, .namespace_ = "ns", .name = "ctl",
                            .lease_duration_ms = 1000, .renew_deadline_ms = 1000,
                            .retry_period_ms = 100};
  assert_int_equal(kc_leader_new(&v.loop, v.api, &cfg, "a", &CBS, NULL, &le), -EINVAL);
  cfg.renew_deadline_ms = 600;
  cfg.retry_period_ms = 500; /* 600 <= 1.2 x 500 */
  assert_int_equal(kc_leader_new(&v.loop, v.api, &cfg, "a", &CBS, NULL, &le), -EINVAL);
  assert_null(le);
  cfg.retry_period_ms = 100;
  assert_int_equal(kc_leader_new(&v.loop, v.api, &cfg, NULL, &CBS, NULL, &le), 0);
  assert_non_null(strchr(kc_leader_identity(le), '_')); /* default identity */
  kc_leader_close(le);
  env_free(&v);
}

/* 404 -> create; renewals every retryPeriod keep acquireTime and transitions,
 * move renewTime; all timestamps have exactly six fraction digits. */
static void test_acquire_create_and_renew(void **state) {
  (void)state;
  env v;
  env_init(&v);
  events e = {0};
  kc_leader *le = elector(&v, "node-a_1", &e);
  assert_false(kc_leader_is_leader(le));
  run_until(&v, &e.started, 1, 2000);
  assert_true(e.leader_in_started);
  assert_true(kc_leader_is_leader(le));
  assert_string_equal(e.new_leader, "node-a_1");
  assert_string_equal(kc_leader_holder(le), "node-a_1");
  char h[256], acq[64], ren[64], ren2[64], acq2[64];
  int64_t tr, dur;
  snapshot(h, sizeof h, &tr, acq, ren, &dur);
  assert_string_equal(h, "node-a_1");
  assert_int_equal(tr, 0);
  assert_int_equal(dur, 1); /* 1000 ms */
  assert_string_equal(acq, ren);
  pthread_mutex_lock(&mu);
  assert_int_equal(E.posts, 1);
  assert_int_equal(E.gets, 1);
  pthread_mutex_unlock(&mu);

  run_for(&v, 650); /* longer than the renew deadline: renewals must keep us leading */
  assert_true(kc_leader_is_leader(le));
  assert_int_equal(e.stopped, 0);
  snapshot(h, sizeof h, &tr, acq2, ren2, NULL);
  assert_string_equal(acq2, acq);
  assert_string_not_equal(ren2, ren);
  assert_int_equal(tr, 0);
  pthread_mutex_lock(&mu);
  assert_in_range(E.puts, 4, 8); /* every ~100 ms, fast path: no extra GETs */
  assert_int_equal(E.gets, 1);
  assert_int_equal(E.conflicts, 0);
  assert_int_equal(E.bad_times, 0);
  assert_int_equal(E.unconditional, 0);
  pthread_mutex_unlock(&mu);
  kc_leader_stats st;
  kc_leader_get_stats(le, &st);
  assert_int_equal(st.master_status, 1);
  assert_int_equal(st.slowpath_total, 0);
  assert_int_equal(st.acquisitions, 1);

  /* A metadata-only change behind our back: fast PUT conflicts, the slow
   * path (GET + PUT with the fetched RV) renews, leadership continues. */
  emu_bump_rv();
  run_for(&v, 250);
  assert_true(kc_leader_is_leader(le));
  assert_int_equal(e.stopped, 0);
  kc_leader_get_stats(le, &st);
  assert_int_equal(st.slowpath_total, 1);
  pthread_mutex_lock(&mu);
  assert_int_equal(E.conflicts, 1);
  assert_int_equal(E.transitions, 0);
  pthread_mutex_unlock(&mu);
  kc_leader_close(le);
  assert_false(kc_leader_is_leader(le));
  assert_int_equal(e.stopped, 0); /* close is silent */
  env_free(&v);
}

/* Another replica takes the Lease: we stop at once (not at the deadline);
 * while the other keeps changing the record we never take over; once it
 * stops, we take over only after leaseDurationSeconds of no change seen on
 * our clock, whatever its (absurd) renewTime says. */
static void test_lose_to_other_and_take_over_after_expiry(void **state) {
  (void)state;
  env v;
  env_init(&v);
  events e = {0};
  kc_leader *le = elector(&v, "node-a_1", &e);
  run_until(&v, &e.started, 1, 2000);

  emu_write_other("node-b_2", 1, 1);
  uint64_t t_take = kc_clock_now_ms();
  run_until(&v, &e.stopped, 1, 2000);
  assert_false(e.leader_in_stopped);
  assert_false(kc_leader_is_leader(le));
  assert_true(e.stopped_ms - t_take < 350); /* well before the 600 ms deadline */
  assert_string_equal(e.new_leader, "node-b_2");
  assert_string_equal(kc_leader_holder(le), "node-b_2");

  /* the other replica renews every 300 ms for 2 s: never expired for us */
  for (int i = 0; i < 7; i++) {
    run_for(&v, 300);
    assert_int_equal(e.started, 1);
    emu_write_other("node-b_2", 1, 1);
  }
  uint64_t t_last = kc_clock_now_ms();
  run_until(&v, &e.started, 2, 3000);
  uint64_t waited = e.started_ms - t_last;
  assert_true(waited >= LD_MS);
  assert_true(waited <= LD_MS + 2 * (RP_MS * 22 / 10) + 150);
  char h[256], acq[64], ren[64];
  int64_t tr;
  snapshot(h, sizeof h, &tr, acq, ren, NULL);
  assert_string_equal(h, "node-a_1");
  assert_int_equal(tr, 2); /* holder changed: +1 over the other's record */
  assert_string_equal(acq, ren); /* new term: acquireTime = now */
  assert_true(microtime_ok(acq));
  assert_string_equal(e.new_leader, "node-a_1");
  pthread_mutex_lock(&mu);
  assert_int_equal(E.bad_times, 0);
  pthread_mutex_unlock(&mu);
  kc_leader_stats st;
  kc_leader_get_stats(le, &st);
  assert_int_equal(st.losses, 1);
  assert_int_equal(st.acquisitions, 2);
  kc_leader_close(le);
  env_free(&v);
}

/* Release: holderIdentity "", leaseDurationSeconds 1, acquireTime =
 * renewTime, transitions unchanged; a standby takes over at once. Also an
 * identity that needs JSON escaping. */
static void test_release_and_handover(void **state) {
  (void)state;
  env v;
  env_init(&v);
  events a = {0}, b = {0};
  kc_leader *la = elector(&v, "node-a \"q\"\\x", &a);
  run_until(&v, &a.started, 1, 2000);
  kc_leader *lb = elector(&v, "node-b_2", &b);
  run_for(&v, 400);
  assert_int_equal(b.started, 0);
  assert_string_equal(b.new_leader, "node-a \"q\"\\x");
  assert_false(kc_leader_is_leader(lb));

  assert_int_equal(kc_leader_release(la, on_released, &a), 0);
  assert_false(kc_leader_is_leader(la)); /* at once, before any callback */
  assert_int_equal(a.stopped, 0);
  assert_int_equal(kc_leader_release(la, on_released, &a), -EALREADY);
  uint64_t t_rel = kc_clock_now_ms();
  run_until(&v, &a.released, 1, 2000);
  assert_int_equal(a.release_err, 0);
  assert_int_equal(a.stopped, 1);
  char h[256], acq[64], ren[64];
  int64_t tr, dur;
  snapshot(h, sizeof h, &tr, acq, ren, &dur);
  assert_string_equal(h, "");
  assert_int_equal(dur, 1);
  assert_int_equal(tr, 0);
  assert_string_equal(acq, ren);
  assert_true(microtime_ok(acq));

  run_until(&v, &b.started, 1, 2000);
  assert_true(b.started_ms - t_rel <= RP_MS * 22 / 10 + 150);
  snapshot(h, sizeof h, &tr, NULL, NULL, NULL);
  assert_string_equal(h, "node-b_2");
  assert_int_equal(tr, 1);
  run_for(&v, 300);
  assert_int_equal(a.started, 1); /* released electors stay out */
  assert_int_equal(a.released, 1);

  /* Releasing a standby sends nothing and reports success. */
  events c = {0};
  kc_leader *lc = elector(&v, "node-c_3", &c);
  run_for(&v, 150);
  pthread_mutex_lock(&mu);
  unsigned puts = E.puts;
  pthread_mutex_unlock(&mu);
  assert_int_equal(kc_leader_release(lc, on_released, &c), 0);
  run_until(&v, &c.released, 1, 1000);
  assert_int_equal(c.release_err, 0);
  assert_int_equal(c.stopped, 0);
  snapshot(h, sizeof h, NULL, NULL, NULL, NULL);
  assert_string_equal(h, "node-b_2");
  (void)puts;
  kc_leader_close(la);
  kc_leader_close(lb);
  kc_leader_close(lc);
  env_free(&v);
}

/* A leader that dies without releasing: the standby takes over after the
 * lease duration, measured from when it saw the last change. */
static void test_standby_takes_over_after_crash(void **state) {
  (void)state;
  env v;
  env_init(&v);
  events a = {0}, b = {0};
  kc_leader *la = elector(&v, "node-a_1", &a);
  run_until(&v, &a.started, 1, 2000);
  kc_leader *lb = elector(&v, "node-b_2", &b);
  run_for(&v, 300);
  kc_leader_close(la); /* no release, no more renewals */
  run_for(&v, 5);
  pthread_mutex_lock(&mu);
  uint64_t last = E.last_write_ms;
  pthread_mutex_unlock(&mu);
  run_until(&v, &b.started, 1, 3000);
  uint64_t waited = b.started_ms - last;
  assert_true(waited >= LD_MS);
  assert_true(waited <= LD_MS + 2 * (RP_MS * 22 / 10) + 150);
  char h[256];
  int64_t tr;
  snapshot(h, sizeof h, &tr, NULL, NULL, NULL);
  assert_string_equal(h, "node-b_2");
  assert_int_equal(tr, 1);
  kc_leader_close(lb);
  env_free(&v);
}

/* Renewal failures: leadership ends at the renew deadline counted from the
 * last successful renewal (before the lease could expire for others), not
 * earlier; afterwards the elector re-acquires its own record (same
 * acquireTime and transitions). */
static void renewal_fault(int f) {
  env v;
  env_init(&v);
  events e = {0};
  kc_leader *le = elector(&v, "node-a_1", &e);
  run_until(&v, &e.started, 1, 2000);
  run_for(&v, 250);
  char acq[64];
  int64_t tr;
  char h[256];
  snapshot(h, sizeof h, &tr, acq, NULL, NULL);
  atomic_store(&fault, f);
  run_until(&v, &e.stopped, 1, 3000);
  assert_false(e.leader_in_stopped);
  pthread_mutex_lock(&mu);
  uint64_t last = E.last_write_ms;
  pthread_mutex_unlock(&mu);
  int64_t after = (int64_t)(e.stopped_ms - last);
  print_message("# fault %d: stopped %lld ms after the last successful renewal\n", f,
                (long long)after);
  assert_true(after <= RD_MS + 30);
  assert_true(after >= RD_MS - 60);
  assert_true(after < LD_MS);
  assert_false(kc_leader_is_leader(le));
  kc_leader_stats st;
  kc_leader_get_stats(le, &st);
  assert_int_equal(st.master_status, 0);
  assert_int_equal(st.losses, 1);

  unstall();
  run_until(&v, &e.started, 2, 3000);
  char h2[256], acq2[64];
  int64_t tr2;
  snapshot(h2, sizeof h2, &tr2, acq2, NULL, NULL);
  assert_string_equal(h2, "node-a_1");
  assert_int_equal(tr2, tr);
  assert_string_equal(acq2, acq);
  kc_leader_close(le);
  env_free(&v);
}

static int renewed_calls;
static uint64_t renewed_until;
static void on_renewed_cb(uint64_t until, void *ud) {
  (void)ud;
  renewed_calls++;
  renewed_until = until;
}

/* For sharding.c: a released elector can be restarted; on_renewed reports
 * every successful write with the renew deadline; a record seeded with
 * kc_leader_observe (a LIST) as first seen more than leaseDuration ago is
 * taken over on the very first attempt instead of after another
 * leaseDuration of watching it; kc_leader_lease_record reads an object. */
static void test_restart_observe_renewed(void **state) {
  (void)state;
  env v;
  env_init(&v);
  events a = {0};
  kc_leader_callbacks cb = {on_started, on_stopped, on_new_leader, on_renewed_cb};
  kc_leader_election cfg = {.enabled = true, .namespace_ = "ns", .name = "ctl",
                            .lease_duration_ms = LD_MS, .renew_deadline_ms = RD_MS,
                            .retry_period_ms = RP_MS};
  kc_leader *la = NULL;
  renewed_calls = 0;
  assert_int_equal(kc_leader_new(&v.loop, v.api, &cfg, "node-a_1", &cb, &a, &la), 0);
  a.le = la;
  assert_int_equal(kc_leader_restart(la), 0); /* a new elector: same as start */
  run_until(&v, &a.started, 1, 2000);
  assert_true(renewed_calls >= 1);
  assert_true(renewed_until > kc_clock_now_ms());
  assert_int_equal(kc_leader_restart(la), -EALREADY);
  assert_int_equal(kc_leader_release(la, on_released, &a), 0);
  run_until(&v, &a.released, 1, 2000);
  assert_int_equal(kc_leader_restart(la), 0);
  run_until(&v, &a.started, 2, 2000);
  char h[256];
  snapshot(h, sizeof h, NULL, NULL, NULL, NULL);
  assert_string_equal(h, "node-a_1");
  kc_leader_close(la);

  /* A crashed holder's record, as a LIST showed it long enough ago. */
  emu_write_other("ghost_9", 1, 4);
  pthread_mutex_lock(&mu);
  char json[4096];
  snprintf(json, sizeof json, "%s", lease_json_locked());
  pthread_mutex_unlock(&mu);
  char err[128];
  kc_obj *o = kc_obj_parse(json, strlen(json), NULL, err, sizeof err);
  assert_non_null(o);
  kc_lease_record rec;
  kc_buf raw = {0};
  assert_int_equal(kc_leader_lease_record(o, &rec, &raw), 0);
  assert_string_equal(rec.holder, "ghost_9");
  assert_int_equal(rec.duration_s, 1);
  assert_int_equal(rec.transitions, 4);
  assert_true(raw.len > 0);
  kc_buf_free(&raw);
  events b = {0};
  kc_leader *lb = NULL;
  assert_int_equal(kc_leader_new(&v.loop, v.api, &cfg, "node-b_2", &CBS, &b, &lb), 0);
  b.le = lb;
  uint64_t now = kc_clock_now_ms();
  assert_int_equal(kc_leader_observe(lb, o, now > LD_MS + 1 ? now - LD_MS - 1 : 0), 0);
  kc_obj_unref(o);
  assert_int_equal(kc_leader_start(lb), 0);
  run_until(&v, &b.started, 1, 3000);
  kc_leader_stats st;
  kc_leader_get_stats(lb, &st);
  assert_int_equal(st.attempts, 1); /* no second look after leaseDuration */
  snapshot(h, sizeof h, NULL, NULL, NULL, NULL);
  assert_string_equal(h, "node-b_2");
  kc_leader_close(lb);
  env_free(&v);
}

static void test_renewal_429(void **state) {
  (void)state;
  renewal_fault(429);
}
static void test_renewal_500(void **state) {
  (void)state;
  renewal_fault(500);
}
static void test_renewal_stall(void **state) {
  (void)state;
  renewal_fault(1);
}

/* Callbacks may close the elector. */
static void close_in_started(void *ud) {
  events *e = ud;
  e->started++;
  kc_leader_close(e->le);
}
static void test_close_from_callback(void **state) {
  (void)state;
  env v;
  env_init(&v);
  events e = {0};
  kc_leader_callbacks cb = {close_in_started, on_stopped, NULL, NULL};
  kc_leader_election cfg = {.enabled = true, .namespace_ = "ns", .name = "ctl",
                            .lease_duration_ms = LD_MS, .renew_deadline_ms = RD_MS,
                            .retry_period_ms = RP_MS};
  assert_int_equal(kc_leader_new(&v.loop, v.api, &cfg, "x", &cb, &e, &e.le), 0);
  assert_int_equal(kc_leader_start(e.le), 0);
  run_until(&v, &e.started, 1, 2000);
  run_for(&v, 200);
  assert_int_equal(e.stopped, 0);
  env_free(&v);
}

static int setup(void **state) {
  (void)state;
  kc_log_set_level(getenv("KC_TEST_DEBUG") ? KC_LOG_DEBUG : KC_LOG_ERROR);
  srv = mini_server_start(handler, NULL, NULL, NULL);
  if (!srv) return -1;
  snprintf(server_url, sizeof server_url, "http://127.0.0.1:%d", mini_server_port(srv));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  atomic_store(&stall_release, true);
  mini_server_stop(srv);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_microtime_and_identity),
      cmocka_unit_test(test_bad_config),
      cmocka_unit_test(test_parse_lease),
      cmocka_unit_test(test_acquire_create_and_renew),
      cmocka_unit_test(test_lose_to_other_and_take_over_after_expiry),
      cmocka_unit_test(test_release_and_handover),
      cmocka_unit_test(test_standby_takes_over_after_crash),
      cmocka_unit_test(test_renewal_429),
      cmocka_unit_test(test_renewal_500),
      cmocka_unit_test(test_renewal_stall),
      cmocka_unit_test(test_close_from_callback),
      cmocka_unit_test(test_restart_observe_renewed),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
