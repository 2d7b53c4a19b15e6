/* SPDX-License-Identifier: Apache-2.0 */
/* leader: see leader.h.
 *
 * One attempt (tryAcquireOrRenew) is a small state machine over at most
 * three requests (fast PUT, GET, PUT or POST); only one request is ever in
 * flight. Time comes from two clocks: the monotonic clock (base/clock.h) for
 * every decision (observation age, renew deadline), the wall clock only for
 * the acquireTime/renewTime we write, which nobody compares with a clock.
 */
#include "lease/leader.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/buf.h"
#include "base/clock.h"
#include "watch/decode.h"
#include "base/log.h"
#include "kube/kurl.h"

#define RESP_MAX (1u << 20) /* a Lease is tiny; anything bigger is not one */

/* The leader election record: the Lease spec fields client-go uses. */
typedef struct record {
  kc_buf holder; /* unescaped, NUL-terminated ("" = none) */
  int64_t duration_s;
  char acquire[48]; /* MicroTime text; "" = null */
  char renew[48];
  int64_t transitions;
} record;

enum phase { PH_IDLE, PH_FAST_PUT, PH_GET, PH_CREATE, PH_PUT, PH_REL_GET, PH_REL_PUT };
enum run_state { RS_NEW, RS_RUNNING, RS_RELEASING, RS_STOPPED, RS_CLOSED };

struct kc_leader {
  uv_loop_t *loop;
  kc_api *api;
  char *identity;
  char *ns, *name;
  char *item_path, *coll_path;
  int64_t lease_ms, renew_ms, retry_ms, duration_s;
  kc_leader_callbacks cb;
  void *ud;
  kc_timer timer;    /* next attempt; deferred release steps */
  kc_timer deadline; /* renew deadline while leading */
  int open_handles;
  enum run_state state;

  /* the attempt in progress */
  kc_api_call *call;
  enum phase phase;
  uint64_t attempt_ms;       /* monotonic ms at the start of the attempt */
  uint64_t attempt_deadline; /* requests must be answered by then */
  bool known_lost;           /* a GET showed another valid holder */
  record desired;
  kc_buf body, resp;
  unsigned fail_streak;

  /* what we observed */
  record observed;
  bool have_observed;
  uint64_t observed_ms; /* monotonic ms when the record last changed */
  kc_buf observed_raw, fetched_raw;
  record fetched;
  kc_obj *lease; /* last Lease object read or written; its metadata goes in PUTs */
  kc_buf reported;
  bool reported_valid;

  /* leadership */
  bool leading; /* loop view */
  atomic_bool leading_flag;
  _Atomic uint64_t valid_until; /* monotonic ms; 0 when not leading */
  uint64_t rng;

  /* release */
  void (*release_done)(int err, void *ud);
  void *release_ud;
  bool release_notify;
  int release_conflicts;

  _Atomic uint64_t st_slowpath, st_attempts, st_failed, st_acquisitions, st_losses;
};

/* --- small helpers ------------------------------------------------------------ */

static int64_t wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *holder_of(const record *r) { return r->holder.p ? r->holder.p : ""; }

static int rec_copy(record *dst, const record *src) {
  const char *h = holder_of(src);
  if (dst == src) return 0;
  kc_buf_set(&dst->holder, h, strlen(h));
  dst->duration_s = src->duration_s;
  memcpy(dst->acquire, src->acquire, sizeof dst->acquire);
  memcpy(dst->renew, src->renew, sizeof dst->renew);
  dst->transitions = src->transitions;
  return dst->holder.err;
}

static uint64_t rng_next(kc_leader *le) { return kc_xorshift64s(&le->rng); }

/* retryPeriod x (1 + rand x 1.2), client-go's JitterUntil factor. */
static uint64_t jittered(kc_leader *le) {
  double r = (double)(rng_next(le) >> 11) / (double)(1ULL << 53);
  return (uint64_t)((double)le->retry_ms * (1.0 + r * 1.2));
}

int kc_leader_format_microtime(int64_t unix_us, char *buf_, size_t cap) {
  if (cap < 28) return -ENOSPC;
  int64_t us = unix_us % 1000000;
  time_t sec = (time_t)(unix_us / 1000000);
  if (us < 0) {
    us += 1000000;
    sec -= 1;
  }
  struct tm tm;
  if (!gmtime_r(&sec, &tm)) return -EINVAL;
  int n = snprintf(buf_, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)us);
  return n > 0 && (size_t)n < cap ? n : -ENOSPC;
}

int kc_leader_default_identity(char *out, size_t cap) {
  char host[256];
  if (gethostname(host, sizeof host) < 0) snprintf(host, sizeof host, "kctrld");
  host[sizeof host - 1] = '\0';
  unsigned char rnd[16];
  size_t got = 0;
  while (got < sizeof rnd) {
    ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -EIO;
    }
    got += (size_t)n;
  }
  char hex[33];
  for (size_t i = 0; i < sizeof rnd; i++) snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
  int n = snprintf(out, cap, "%s_%s", host, hex);
  return n > 0 && (size_t)n < cap ? n : -ENOSPC;
}

/* --- reading a Lease ----------------------------------------------------------- */

static void get_str(const kc_obj *obj, const char *path, char *out, size_t cap) {
  kc_json_value v;
  out[0] = '\0';
  if (kc_obj_get(obj, path, &v) == 0 && v.type == KC_JSON_STRING && kc_json_string(&v, out, cap) < 0)
    out[0] = '\0';
}

static int64_t get_int(const kc_obj *obj, const char *path) {
  kc_json_value v;
  int64_t x = 0;
  if (kc_obj_get(obj, path, &v) == 0 && v.type == KC_JSON_NUMBER && kc_json_int64(&v, &x) == 0)
    return x;
  return 0;
}

/* Fills rec from obj's spec, and raw with the spec fields' exact JSON text
 * (client-go compares the serialized record to notice changes). */
static int rec_from_obj(const kc_obj *obj, record *rec, kc_buf *raw) {
  static const char *const fields[] = {"spec.holderIdentity", "spec.leaseDurationSeconds",
                                       "spec.acquireTime",    "spec.renewTime",
                                       "spec.leaseTransitions", "spec.strategy",
                                       "spec.preferredHolder"};
  kc_buf_reset(raw);
  kc_buf_add(raw, "", 0);
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    kc_json_value v;
    if (kc_obj_get(obj, fields[i], &v) == 0 && v.type != KC_JSON_ABSENT)
      kc_buf_add(raw, v.raw.ptr, v.raw.len);
    kc_buf_add(raw, "\x01", 1);
  }
  int rc = raw->err;
  kc_json_value h;
  kc_buf_reset(&rec->holder);
  kc_buf_add(&rec->holder, "", 0);
  if (rc == 0) rc = rec->holder.err;
  if (rc == 0 && kc_obj_get(obj, "spec.holderIdentity", &h) == 0 && h.type == KC_JSON_STRING) {
    rc = kc_buf_reserve(&rec->holder, h.raw.len);
    if (rc == 0) {
      int n = kc_json_string(&h, rec->holder.p, rec->holder.cap);
      rec->holder.len = n > 0 ? (size_t)n : 0;
      rec->holder.p[rec->holder.len] = '\0';
    }
  }
  rec->duration_s = get_int(obj, "spec.leaseDurationSeconds");
  get_str(obj, "spec.acquireTime", rec->acquire, sizeof rec->acquire);
  get_str(obj, "spec.renewTime", rec->renew, sizeof rec->renew);
  rec->transitions = get_int(obj, "spec.leaseTransitions");
  return rc;
}

/* Every Lease answer is parsed here. */
static kc_obj *parse_lease(const char *json, size_t len, char *err, size_t errlen) {
  return kc_obj_parse(json, len, NULL, err, errlen);
}

int kc_leader_lease_record(const kc_obj *o, kc_lease_record *out, kc_buf *raw) {
  memset(out, 0, sizeof *out);
  record r = {0};
  kc_buf own = {0};
  int rc = rec_from_obj(o, &r, raw ? raw : &own);
  if (rc == 0) {
    if (r.holder.len < sizeof out->holder) memcpy(out->holder, holder_of(&r), r.holder.len + 1);
    out->duration_s = r.duration_s;
    memcpy(out->acquire, r.acquire, sizeof out->acquire);
    memcpy(out->renew, r.renew, sizeof out->renew);
    out->transitions = r.transitions;
  }
  kc_buf_free(&r.holder);
  kc_buf_free(&own);
  return rc;
}

int kc_leader_parse_lease(const char *json, size_t len, kc_lease_record *out, char *err,
                          size_t errlen) {
  memset(out, 0, sizeof *out);
  errno = 0;
  kc_obj *o = parse_lease(json, len, err, errlen);
  if (!o) return errno == ENOMEM ? -ENOMEM : -EBADMSG;
  int rc = kc_leader_lease_record(o, out, NULL);
  if (rc < 0 && err && errlen) snprintf(err, errlen, "out of memory");
  kc_obj_unref(o);
  return rc;
}

static void set_lease(kc_leader *le, kc_obj *obj) {
  kc_obj_unref(le->lease);
  le->lease = obj;
}

static bool is_me(const kc_leader *le, const record *r) {
  return strcmp(holder_of(r), le->identity) == 0;
}

/* --- requests -------------------------------------------------------------- */

static void put_time(kc_buf *b, const char *t) {
  if (t[0]) kc_buf_json_c(b, t);
  else kc_buf_puts(b, "null");
}

/* The Lease body for POST (metadata: name, namespace) or PUT (metadata of
 * the last object we read or wrote, so its resourceVersion, labels and
 * annotations go back unchanged). */
static int build_body(kc_leader *le, const record *r, bool create) {
  kc_buf *b = &le->body;
  kc_buf_reset(b);
  kc_buf_puts(b, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":");
  kc_json_value meta = {0};
  if (!create && (!le->lease || kc_obj_get(le->lease, "metadata", &meta) < 0 ||
                  meta.type != KC_JSON_OBJECT))
    return -EINVAL;
  if (create) {
    kc_buf_puts(b, "{\"name\":");
    kc_buf_json_c(b, le->name);
    kc_buf_puts(b, ",\"namespace\":");
    kc_buf_json_c(b, le->ns);
    kc_buf_puts(b, "}");
  } else {
    kc_buf_add(b, meta.raw.ptr, meta.raw.len);
  }
  kc_buf_puts(b, ",\"spec\":{\"holderIdentity\":");
  kc_buf_json_c(b, holder_of(r));
  kc_buf_printf(b, ",\"leaseDurationSeconds\":%" PRId64 ",\"acquireTime\":", r->duration_s);
  put_time(b, r->acquire);
  kc_buf_puts(b, ",\"renewTime\":");
  put_time(b, r->renew);
  kc_buf_printf(b, ",\"leaseTransitions\":%" PRId64 "}}", r->transitions);
  return b->err;
}

static int on_data(kc_api_call *call, const char *p, size_t len, void *ud) {
  (void)call;
  kc_leader *le = ud;
  if (le->resp.len + len > RESP_MAX) return KC_HTTP_ABORT;
  kc_buf_add(&le->resp, p, len);
  if (le->resp.err) return KC_HTTP_ABORT;
  return KC_HTTP_CONTINUE;
}

static void on_call_done(kc_api_call *call, const kc_api_result *res, void *ud);

/* Sends one request of the current attempt (body: le->body when with_body).
 * The timeout ends at the attempt's deadline. */
static int send_req(kc_leader *le, enum phase ph, const char *method, bool with_body) {
  uint64_t now = kc_clock_now_ms();
  if (now + 1 >= le->attempt_deadline) return -ETIMEDOUT;
  kc_buf_reset(&le->resp);
  le->phase = ph;
  kc_api_request_opts o = {
      .method = method,
      .path = strcmp(method, "POST") == 0 ? le->coll_path : le->item_path,
      .body = with_body ? le->body.p : NULL,
      .body_len = with_body ? le->body.len : 0,
      .timeout_ms = le->attempt_deadline - now,
      .on_data = on_data,
      .on_done = on_call_done,
      .ud = le,
  };
  int rc = kc_api_request(le->api, &o, &le->call);
  if (rc < 0) {
    le->call = NULL;
    le->phase = PH_IDLE;
  }
  return rc;
}

static void cancel_call(kc_leader *le) {
  kc_api_cancel(le->call);
  le->call = NULL;
  le->phase = PH_IDLE;
}

/* --- leadership transitions -------------------------------------------------- */

static void on_timer(uv_timer_t *t);
static void on_deadline(uv_timer_t *t);

static void report_transition(kc_leader *le) {
  if (!le->have_observed) return;
  const char *h = holder_of(&le->observed);
  if (le->reported_valid && strcmp(h, le->reported.p) == 0) return;
  kc_buf_set(&le->reported, h, strlen(h));
  if (le->reported.err) return;
  le->reported_valid = true;
  if (h[0]) kc_info("leader", "lease %s/%s: new leader holder=%s", le->ns, le->name, h);
  if (le->cb.on_new_leader) le->cb.on_new_leader(le->reported.p, le->ud);
}

/* Ends leadership: writes are refused before anybody is told. */
static void lose(kc_leader *le, const char *why) {
  if (!le->leading) return;
  le->leading = false;
  atomic_store(&le->leading_flag, false);
  atomic_store(&le->valid_until, 0);
  kc_timer_stop(&le->deadline);
  cancel_call(le);
  atomic_fetch_add(&le->st_losses, 1);
  kc_warn("leader", "lease %s/%s: leadership lost: %s identity=%s", le->ns, le->name, why,
          le->identity);
  if (le->cb.on_stopped_leading) le->cb.on_stopped_leading(le->ud);
}

/* True (and leadership ended) when the renew deadline has passed. */
static bool deadline_passed(kc_leader *le) {
  if (!le->leading || kc_clock_now_ms() < atomic_load(&le->valid_until)) return false;
  lose(le, "renew deadline passed without a successful renewal");
  return true;
}

static void schedule(kc_leader *le, uint64_t delay_ms) {
  kc_timer_start(&le->timer, on_timer, delay_ms, 0);
}

static void attempt_done(kc_leader *le, bool ok) {
  le->phase = PH_IDLE;
  uint64_t until = le->attempt_ms + (uint64_t)le->renew_ms, now = kc_clock_now_ms();
  if (ok && now >= until) {
    /* The write landed, but so late that the term it buys is already over. */
    kc_warn("leader", "lease %s/%s: write succeeded after the renew deadline; not leading on it",
            le->ns, le->name);
    ok = false;
  }
  if (!ok) atomic_fetch_add(&le->st_failed, 1);
  if (ok) {
    le->fail_streak = 0;
    atomic_store(&le->valid_until, until);
    kc_timer_start(&le->deadline, on_deadline, until - now, 0);
    schedule(le, (uint64_t)le->retry_ms);
    bool started = !le->leading;
    if (started) {
      le->leading = true;
      atomic_store(&le->leading_flag, true);
      atomic_fetch_add(&le->st_acquisitions, 1);
      kc_info("leader", "lease %s/%s: acquired identity=%s transitions=%" PRId64, le->ns,
              le->name, le->identity, le->observed.transitions);
    }
    report_transition(le);
    if (le->state == RS_RUNNING && le->cb.on_renewed) le->cb.on_renewed(until, le->ud);
    if (started && le->state == RS_RUNNING && le->cb.on_started_leading)
      le->cb.on_started_leading(le->ud);
    return;
  }
  if (le->leading && le->known_lost)
    lose(le, "the lease is held by another replica");
  if (le->state != RS_RUNNING) return;
  report_transition(le);
  if (le->state != RS_RUNNING) return;
  schedule(le, le->leading ? (uint64_t)le->retry_ms : jittered(le));
}

static void fail_log(kc_leader *le, const char *what, const kc_api_result *res) {
  le->fail_streak++;
  enum kc_log_level lvl = le->leading || le->fail_streak == 1 || le->fail_streak % 30 == 0
                              ? KC_LOG_WARN
                              : KC_LOG_DEBUG;
  if (res && !res->error)
    kc_log(lvl, "leader", "lease %s/%s: %s: HTTP %d %s: %s", le->ns, le->name, what,
           res->status.code, res->status.reason, res->status.message);
  else
    kc_log(lvl, "leader", "lease %s/%s: %s: %s", le->ns, le->name, what,
           res ? res->status.message : "cannot send");
}

/* Step 2 of tryAcquireOrRenew. */
static void slow_get(kc_leader *le) {
  int rc = send_req(le, PH_GET, "GET", false);
  if (rc < 0) {
    fail_log(le, "get", NULL);
    attempt_done(le, false);
  }
}

static void start_attempt(kc_leader *le) {
  if (deadline_passed(le) && le->state != RS_RUNNING) return;
  atomic_fetch_add(&le->st_attempts, 1);
  uint64_t now = kc_clock_now_ms();
  le->attempt_ms = now;
  le->attempt_deadline = le->leading ? atomic_load(&le->valid_until) : now + (uint64_t)le->renew_ms;
  le->known_lost = false;
  record *d = &le->desired;
  kc_buf_set(&d->holder, le->identity, strlen(le->identity));
  d->duration_s = le->duration_s;
  kc_leader_format_microtime(wall_us(), d->acquire, sizeof d->acquire);
  memcpy(d->renew, d->acquire, sizeof d->renew);
  d->transitions = 0;
  /* 1. fast path: we hold a record that is still valid on our clock */
  if (le->lease && le->have_observed && is_me(le, &le->observed) &&
      le->observed_ms + (uint64_t)le->observed.duration_s * 1000u > now) {
    memcpy(d->acquire, le->observed.acquire, sizeof d->acquire);
    d->transitions = le->observed.transitions;
    if (build_body(le, d, false) == 0 && send_req(le, PH_FAST_PUT, "PUT", true) == 0) return;
  }
  slow_get(le);
}

static kc_obj *parse_resp(kc_leader *le) {
  char err[128];
  kc_obj *o = parse_lease(le->resp.p ? le->resp.p : "", le->resp.len, err, sizeof err);
  if (!o) kc_warn("leader", "lease %s/%s: unreadable response: %s", le->ns, le->name, err);
  return o;
}

static void finish_release(kc_leader *le, int err) {
  le->state = RS_STOPPED;
  le->phase = PH_IDLE;
  void (*done)(int, void *) = le->release_done;
  le->release_done = NULL;
  if (done) done(err, le->release_ud);
}

static void release_get(kc_leader *le) {
  int rc = send_req(le, PH_REL_GET, "GET", false);
  if (rc < 0) finish_release(le, rc);
}

static void release_step(kc_leader *le, const kc_api_result *res, kc_obj *obj) {
  bool ok = !res->error && res->status.code >= 200 && res->status.code < 300 && obj;
  if (le->phase == PH_REL_GET) {
    if (!res->error && kc_api_is_not_found(&res->status)) {
      kc_obj_unref(obj);
      finish_release(le, 0);
      return;
    }
    if (!ok || rec_from_obj(obj, &le->fetched, &le->fetched_raw) < 0) {
      fail_log(le, "release: get", res);
      kc_obj_unref(obj);
      finish_release(le, res->error ? res->error : -EIO);
      return;
    }
    set_lease(le, obj);
    if (!is_me(le, &le->fetched)) { /* someone else's now: nothing of ours to release */
      finish_release(le, 0);
      return;
    }
    record *d = &le->desired;
    kc_buf_set(&d->holder, "", 0);
    d->duration_s = 1;
    kc_leader_format_microtime(wall_us(), d->acquire, sizeof d->acquire);
    memcpy(d->renew, d->acquire, sizeof d->renew);
    d->transitions = le->fetched.transitions;
    int rc = build_body(le, d, false);
    if (rc == 0) rc = send_req(le, PH_REL_PUT, "PUT", true);
    if (rc < 0) finish_release(le, rc);
    return;
  }
  /* PH_REL_PUT */
  if (ok) {
    set_lease(le, obj);
    rec_copy(&le->observed, &le->desired);
    le->observed_ms = kc_clock_now_ms();
    kc_info("leader", "lease %s/%s: released identity=%s", le->ns, le->name, le->identity);
    finish_release(le, 0);
    return;
  }
  kc_obj_unref(obj);
  if (!res->error && kc_api_is_conflict(&res->status) && le->release_conflicts++ == 0) {
    release_get(le);
    return;
  }
  fail_log(le, "release: put", res);
  finish_release(le, res->error ? res->error : -EIO);
}

static void on_call_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  (void)call;
  kc_leader *le = ud;
  le->call = NULL;
  bool ok = !res->error && res->status.code >= 200 && res->status.code < 300;
  kc_obj *obj = ok ? parse_resp(le) : NULL;
  if (le->phase == PH_REL_GET || le->phase == PH_REL_PUT) {
    release_step(le, res, obj);
    return;
  }
  if (deadline_passed(le)) { /* the answer came after our term ended */
    kc_obj_unref(obj);
    if (le->state == RS_RUNNING) schedule(le, jittered(le));
    return;
  }
  switch (le->phase) {
  case PH_FAST_PUT:
    if (obj) {
      set_lease(le, obj);
      rec_copy(&le->observed, &le->desired);
      le->observed_ms = le->attempt_ms;
      attempt_done(le, true);
    } else {
      kc_debug("leader", "lease %s/%s: optimistic renew failed (HTTP %d %s); slow path", le->ns,
               le->name, res->status.code, res->status.reason);
      slow_get(le);
    }
    return;
  case PH_GET: {
    if (!res->error && kc_api_is_not_found(&res->status)) {
      int rc = build_body(le, &le->desired, true);
      if (rc == 0) rc = send_req(le, PH_CREATE, "POST", true);
      if (rc < 0) attempt_done(le, false);
      return;
    }
    if (!obj || rec_from_obj(obj, &le->fetched, &le->fetched_raw) < 0) {
      if (!obj) fail_log(le, "get", res);
      kc_obj_unref(obj);
      attempt_done(le, false);
      return;
    }
    set_lease(le, obj);
    /* 3. note when the record's content changed, on our clock */
    if (!le->have_observed || le->observed_raw.len != le->fetched_raw.len ||
        memcmp(le->observed_raw.p, le->fetched_raw.p, le->fetched_raw.len) != 0) {
      rec_copy(&le->observed, &le->fetched);
      kc_buf_set(&le->observed_raw, le->fetched_raw.p, le->fetched_raw.len);
      le->observed_ms = kc_clock_now_ms();
      le->have_observed = true;
    }
    bool mine = is_me(le, &le->fetched);
    if (le->fetched.holder.len &&
        le->observed_ms + (uint64_t)le->observed.duration_s * 1000u > le->attempt_ms && !mine) {
      kc_debug("leader", "lease %s/%s: held by %s and not expired", le->ns, le->name,
               holder_of(&le->fetched));
      le->known_lost = true;
      attempt_done(le, false);
      return;
    }
    /* 4. */
    record *d = &le->desired;
    if (mine) {
      memcpy(d->acquire, le->fetched.acquire, sizeof d->acquire);
      d->transitions = le->fetched.transitions;
      atomic_fetch_add(&le->st_slowpath, 1);
    } else {
      d->transitions = le->fetched.transitions + 1;
    }
    int rc = build_body(le, d, false);
    if (rc == 0) rc = send_req(le, PH_PUT, "PUT", true);
    if (rc < 0) attempt_done(le, false);
    return;
  }
  case PH_CREATE:
  case PH_PUT:
    if (obj) {
      set_lease(le, obj);
      rec_copy(&le->observed, &le->desired);
      le->observed_ms = le->attempt_ms;
      le->have_observed = true;
      attempt_done(le, true);
    } else {
      fail_log(le, le->phase == PH_CREATE ? "create" : "update", res);
      attempt_done(le, false);
    }
    return;
  default:
    kc_obj_unref(obj);
    return;
  }
}

/* --- timers ---------------------------------------------------------------- */

static void on_timer(uv_timer_t *t) {
  kc_leader *le = t->data;
  if (le->state == RS_RUNNING) {
    if (!le->call) start_attempt(le);
    return;
  }
  if (le->state != RS_RELEASING || le->call) return;
  if (le->release_notify) {
    le->release_notify = false;
    if (le->cb.on_stopped_leading) le->cb.on_stopped_leading(le->ud);
    if (le->state != RS_RELEASING) return;
  }
  if (le->have_observed && is_me(le, &le->observed)) {
    le->attempt_deadline = kc_clock_now_ms() + (uint64_t)le->renew_ms;
    release_get(le);
  } else {
    finish_release(le, 0);
  }
}

static void on_deadline(uv_timer_t *t) {
  kc_leader *le = t->data;
  if (!le->leading) return;
  uint64_t now = kc_clock_now_ms(), until = atomic_load(&le->valid_until);
  if (now < until) { /* the loop's cached time lags: re-arm for the rest */
    kc_timer_start(&le->deadline, on_deadline, until - now, 0);
    return;
  }
  deadline_passed(le);
  if (le->state == RS_RUNNING) schedule(le, jittered(le));
}

/* --- lifecycle --------------------------------------------------------------- */

int kc_leader_new(uv_loop_t *loop, kc_api *api, const kc_leader_election *cfg,
                  const char *identity, const kc_leader_callbacks *cb, void *ud,
                  kc_leader **out) {
  *out = NULL;
  if (!loop || !api || !cfg || !cfg->namespace_ || !cfg->name || !cfg->namespace_[0] ||
      !cfg->name[0] || cfg->retry_period_ms <= 0 ||
      cfg->renew_deadline_ms * 5 <= cfg->retry_period_ms * 6 ||
      cfg->lease_duration_ms <= cfg->renew_deadline_ms)
    return -EINVAL;
  kc_leader *le = calloc(1, sizeof *le);
  if (!le) return -ENOMEM;
  char idbuf[320];
  if (!identity) identity = cfg->identity;
  if (!identity || !identity[0]) {
    int rc = kc_leader_default_identity(idbuf, sizeof idbuf);
    if (rc < 0) {
      free(le);
      return rc;
    }
    identity = idbuf;
  }
  le->identity = strdup(identity);
  le->ns = strdup(cfg->namespace_);
  le->name = strdup(cfg->name);
  kc_buf coll = {0}, item = {0};
  kc_url_resource(&coll, KC_LEASE_API_PATH, "leases", kc_str_c(cfg->namespace_), (kc_str){NULL, 0}, NULL);
  kc_url_resource(&item, KC_LEASE_API_PATH, "leases", kc_str_c(cfg->namespace_), kc_str_c(cfg->name), NULL);
  le->coll_path = kc_buf_take(&coll);
  le->item_path = kc_buf_take(&item);
  if (!le->identity || !le->ns || !le->name || !le->coll_path || !le->item_path) {
    free(le->identity), free(le->ns), free(le->name), free(le->coll_path), free(le->item_path);
    free(le);
    return -ENOMEM;
  }
  le->loop = loop;
  le->api = api;
  le->lease_ms = cfg->lease_duration_ms;
  le->renew_ms = cfg->renew_deadline_ms;
  le->retry_ms = cfg->retry_period_ms;
  le->duration_s = (cfg->lease_duration_ms + 999) / 1000;
  if (cb) le->cb = *cb;
  le->ud = ud;
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) seed = uv_hrtime();
  le->rng = seed | 1;
  kc_timer_init(loop, &le->timer);
  kc_timer_init(loop, &le->deadline);
  le->timer.uv.data = le->deadline.uv.data = le;
  le->open_handles = 2;
  le->state = RS_NEW;
  *out = le;
  return 0;
}

int kc_leader_start(kc_leader *le) {
  if (le->state != RS_NEW) return -EALREADY;
  le->state = RS_RUNNING;
  kc_info("leader", "lease %s/%s: starting identity=%s leaseDuration=%" PRId64
                    "ms renewDeadline=%" PRId64 "ms retryPeriod=%" PRId64 "ms",
          le->ns, le->name, le->identity, le->lease_ms, le->renew_ms, le->retry_ms);
  schedule(le, 0);
  return 0;
}

bool kc_leader_is_leader(const kc_leader *le) {
  if (!atomic_load(&le->leading_flag)) return false;
  return kc_clock_now_ms() < atomic_load(&le->valid_until);
}

const char *kc_leader_holder(const kc_leader *le) {
  return le->have_observed ? holder_of(&le->observed) : "";
}

const char *kc_leader_identity(const kc_leader *le) { return le->identity; }

void kc_leader_get_stats(const kc_leader *le, kc_leader_stats *out) {
  *out = (kc_leader_stats){
      .master_status = kc_leader_is_leader(le) ? 1 : 0,
      .slowpath_total = atomic_load(&le->st_slowpath),
      .attempts = atomic_load(&le->st_attempts),
      .failed_attempts = atomic_load(&le->st_failed),
      .acquisitions = atomic_load(&le->st_acquisitions),
      .losses = atomic_load(&le->st_losses),
  };
}

int kc_leader_restart(kc_leader *le) {
  if (le->state == RS_NEW) return kc_leader_start(le);
  if (le->state != RS_STOPPED) return -EALREADY;
  le->state = RS_RUNNING;
  le->fail_streak = 0;
  schedule(le, 0);
  return 0;
}

int kc_leader_observe(kc_leader *le, const kc_obj *lease, uint64_t observed_ms) {
  if (le->leading || le->call) return -EBUSY;
  int rc = rec_from_obj(lease, &le->observed, &le->observed_raw);
  if (rc < 0) {
    le->have_observed = false;
    return rc;
  }
  le->have_observed = true;
  le->observed_ms = observed_ms;
  return 0;
}

int kc_leader_release(kc_leader *le, void (*done)(int err, void *ud), void *ud) {
  if (le->state == RS_RELEASING || le->state == RS_STOPPED || le->state == RS_CLOSED)
    return -EALREADY;
  cancel_call(le);
  kc_timer_stop(&le->timer);
  kc_timer_stop(&le->deadline);
  le->release_notify = le->leading;
  if (le->leading) {
    le->leading = false;
    atomic_store(&le->leading_flag, false);
    atomic_store(&le->valid_until, 0);
  }
  le->state = RS_RELEASING;
  le->release_done = done;
  le->release_ud = ud;
  le->release_conflicts = 0;
  schedule(le, 0);
  return 0;
}

static void on_closed(uv_handle_t *h) {
  kc_leader *le = h->data;
  if (--le->open_handles > 0) return;
  kc_obj_unref(le->lease);
  kc_buf_free(&le->body), kc_buf_free(&le->resp), kc_buf_free(&le->observed_raw);
  kc_buf_free(&le->fetched_raw), kc_buf_free(&le->reported);
  kc_buf_free(&le->desired.holder), kc_buf_free(&le->observed.holder), kc_buf_free(&le->fetched.holder);
  free(le->identity), free(le->ns), free(le->name), free(le->coll_path), free(le->item_path);
  free(le);
}

void kc_leader_close(kc_leader *le) {
  if (!le || le->state == RS_CLOSED) return;
  le->state = RS_CLOSED;
  cancel_call(le);
  le->leading = false;
  atomic_store(&le->leading_flag, false);
  atomic_store(&le->valid_until, 0);
  le->release_done = NULL;
  kc_timer_close(&le->timer, on_closed);
  kc_timer_close(&le->deadline, on_closed);
}
