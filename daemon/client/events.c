/* SPDX-License-Identifier: Apache-2.0 */
/* events: see events.h. */
#include "client/events.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/buf.h"
#include "base/hash.h"
#include "base/log.h"
#include "kube/kurl.h"

#define COMPONENT "events"
#define NIL UINT32_MAX

/* ---- a bounded LRU keyed by 128-bit hashes ----
 * Entries live in one array grown by doubling up to `cap` (indices stay
 * valid across realloc); a power-of-two bucket array chains them; a doubly
 * linked list orders them by use. Keys are hashes, so no key strings are
 * kept: a collision of two 128-bit hashes among 4096 entries is not a
 * practical concern. */

typedef struct lru_ent {
  uint64_t h1, h2;
  uint32_t hnext, prev, next;
} lru_ent;

typedef struct lru {
  lru_ent *e;
  unsigned char *vals; /* vsize bytes per entry */
  uint32_t *bucket;
  size_t vsize;
  uint32_t cap, alloc, n, mask, head, tail;
} lru;

static int lru_init(lru *l, size_t cap, size_t vsize) {
  memset(l, 0, sizeof *l);
  if (cap == 0 || cap > (1u << 24)) return -EINVAL;
  uint32_t nb = 1;
  while (nb < cap) nb <<= 1;
  l->bucket = malloc(nb * sizeof *l->bucket);
  if (!l->bucket) return -ENOMEM;
  for (uint32_t i = 0; i < nb; i++) l->bucket[i] = NIL;
  l->mask = nb - 1;
  l->cap = (uint32_t)cap;
  l->vsize = vsize;
  l->head = l->tail = NIL;
  return 0;
}

static void lru_free(lru *l) {
  free(l->e);
  free(l->vals);
  free(l->bucket);
  memset(l, 0, sizeof *l);
}

static void *lru_val(lru *l, uint32_t i) { return l->vals + (size_t)i * l->vsize; }

static void list_unlink(lru *l, uint32_t i) {
  lru_ent *x = &l->e[i];
  if (x->prev != NIL) l->e[x->prev].next = x->next;
  else l->head = x->next;
  if (x->next != NIL) l->e[x->next].prev = x->prev;
  else l->tail = x->prev;
  x->prev = x->next = NIL;
}

static void list_push_front(lru *l, uint32_t i) {
  lru_ent *x = &l->e[i];
  x->prev = NIL;
  x->next = l->head;
  if (l->head != NIL) l->e[l->head].prev = i;
  l->head = i;
  if (l->tail == NIL) l->tail = i;
}

/* The entry of (h1, h2), moved to the front; NULL when absent. */
static void *lru_get(lru *l, uint64_t h1, uint64_t h2) {
  for (uint32_t i = l->bucket[h1 & l->mask]; i != NIL; i = l->e[i].hnext) {
    if (l->e[i].h1 == h1 && l->e[i].h2 == h2) {
      if (l->head != i) {
        list_unlink(l, i);
        list_push_front(l, i);
      }
      return lru_val(l, i);
    }
  }
  return NULL;
}

/* A new zeroed entry for a key known to be absent, evicting the least
 * recently used one when full. NULL only when growing failed. */
static void *lru_add(lru *l, uint64_t h1, uint64_t h2) {
  uint32_t i;
  if (l->n < l->cap) {
    if (l->n == l->alloc) {
      uint32_t na = l->alloc ? l->alloc * 2 : 64;
      if (na > l->cap) na = l->cap;
      lru_ent *e = realloc(l->e, (size_t)na * sizeof *e);
      if (!e) return NULL;
      l->e = e;
      unsigned char *v = realloc(l->vals, (size_t)na * l->vsize);
      if (!v) return NULL;
      l->vals = v;
      l->alloc = na;
    }
    i = l->n++;
  } else {
    i = l->tail;
    list_unlink(l, i);
    uint32_t *pp = &l->bucket[l->e[i].h1 & l->mask];
    while (*pp != i) pp = &l->e[*pp].hnext;
    *pp = l->e[i].hnext;
  }
  lru_ent *x = &l->e[i];
  x->h1 = h1;
  x->h2 = h2;
  uint32_t b = (uint32_t)(h1 & l->mask);
  x->hnext = l->bucket[b];
  l->bucket[b] = i;
  list_push_front(l, i);
  void *v = lru_val(l, i);
  memset(v, 0, l->vsize);
  return v;
}

/* ---- hashing: two FNV-1a streams with different bases, finalized ---- */

typedef struct khash {
  uint64_t a, b;
} khash;

static khash kh_init(void) { return (khash){0xcbf29ce484222325ull, 0x84222325cbf29ce4ull}; }

static void kh_bytes(khash *h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) {
    h->a = (h->a ^ s[i]) * 0x100000001b3ull;
    h->b = (h->b ^ s[i]) * 0x100000001b3ull;
    h->b ^= h->b >> 29;
  }
}

/* Length-prefixed, so field boundaries cannot shift between keys. */
static void kh_str(khash *h, kc_str s) {
  uint64_t n = s.len;
  kh_bytes(h, &n, sizeof n);
  kh_bytes(h, s.ptr, s.len);
}


/* ---- correlator ---- */

struct spam_val {
  uint64_t tokens_ns; /* budget in refill-nanoseconds: one token = REFILL_NS */
  uint64_t last_ns;
};

struct agg_val {
  uint64_t last_ns;
  uint64_t msgs[KC_EVENTS_AGG_MAX]; /* hashes of the distinct messages seen */
  uint32_t nmsgs;
};

struct dedup_val {
  int32_t count;
  int64_t first_ns;
  uint64_t suffix;
};

struct kc_event_correlator {
  lru spam, agg, dedup;
  uint64_t seq; /* keeps two new Events of one nanosecond apart */
};

int kc_event_correlator_new(size_t entries, kc_event_correlator **out) {
  *out = NULL;
  if (!entries) entries = KC_EVENTS_CACHE_DEFAULT;
  kc_event_correlator *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  int rc = lru_init(&c->spam, entries, sizeof(struct spam_val));
  if (rc == 0) rc = lru_init(&c->agg, entries, sizeof(struct agg_val));
  if (rc == 0) rc = lru_init(&c->dedup, entries, sizeof(struct dedup_val));
  if (rc < 0) {
    kc_event_correlator_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void kc_event_correlator_free(kc_event_correlator *c) {
  if (!c) return;
  lru_free(&c->spam);
  lru_free(&c->agg);
  lru_free(&c->dedup);
  free(c);
}

void kc_event_correlator_sizes(const kc_event_correlator *c, size_t *spam, size_t *agg,
                               size_t *dedup) {
  if (spam) *spam = c->spam.n;
  if (agg) *agg = c->agg.n;
  if (dedup) *dedup = c->dedup.n;
}

/* Token bucket of the involved object; true = within budget. A cache that
 * cannot grow lets the event through (losing the filter, not the event). */
static bool spam_accept(kc_event_correlator *c, khash k, uint64_t now) {
  const uint64_t full = (uint64_t)KC_EVENTS_SPAM_BURST * KC_EVENTS_SPAM_REFILL_NS;
  uint64_t h1 = kc_mix64(k.a), h2 = kc_mix64(k.b ^ 0x5350414d); /* "SPAM" */
  struct spam_val *v = lru_get(&c->spam, h1, h2);
  if (!v) {
    if (!(v = lru_add(&c->spam, h1, h2))) return true;
    v->tokens_ns = full;
    v->last_ns = now;
  }
  if (now > v->last_ns) {
    uint64_t add = now - v->last_ns;
    v->tokens_ns = add >= full - v->tokens_ns ? full : v->tokens_ns + add;
    v->last_ns = now;
  }
  if (v->tokens_ns < KC_EVENTS_SPAM_REFILL_NS) return false;
  v->tokens_ns -= KC_EVENTS_SPAM_REFILL_NS;
  return true;
}

/* Aggregation record of (object, type, reason); true = combine. */
static bool aggregate(kc_event_correlator *c, khash k, uint64_t msg, uint64_t now) {
  uint64_t h1 = kc_mix64(k.a), h2 = kc_mix64(k.b ^ 0x414747); /* "AGG" */
  struct agg_val *v = lru_get(&c->agg, h1, h2);
  if (!v) {
    if (!(v = lru_add(&c->agg, h1, h2))) return false;
  } else if (now - v->last_ns > KC_EVENTS_AGG_WINDOW_NS) {
    v->nmsgs = 0; /* quiet for longer than the window: start over */
  }
  v->last_ns = now;
  bool seen = false;
  for (uint32_t i = 0; i < v->nmsgs && !seen; i++) seen = v->msgs[i] == msg;
  if (!seen) v->msgs[v->nmsgs++] = msg;
  if (v->nmsgs < KC_EVENTS_AGG_MAX) return false;
  v->nmsgs--; /* client-go pops one so the set stays below the bound */
  return true;
}

kc_event_action kc_event_correlate(kc_event_correlator *c, const kc_event_in *ev, uint64_t mono_ns,
                                   int64_t wall_ns, kc_event_out *out) {
  memset(out, 0, sizeof *out);
  khash k = kh_init();
  kh_str(&k, ev->component);
  kh_str(&k, ev->kind);
  kh_str(&k, ev->namespace_);
  kh_str(&k, ev->name);
  kh_str(&k, ev->uid);
  kh_str(&k, ev->api_version);
  khash spam_key = k;
  unsigned char t = (unsigned char)ev->type;
  kh_bytes(&k, &t, 1);
  kh_str(&k, ev->reason);
  khash agg_key = k;
  khash mk = kh_init();
  kh_str(&mk, ev->message);
  uint64_t msg = kc_mix64(mk.a) ^ kc_mix64(mk.b);

  /* Aggregation first: a combined event is deduplicated under the
   * aggregate's key, so the combined Event counts up in place. */
  out->combined = aggregate(c, agg_key, msg, mono_ns);
  khash dk = agg_key;
  if (out->combined) {
    kh_bytes(&dk, "A", 1);
  } else {
    kh_bytes(&dk, "M", 1);
    kh_str(&dk, ev->message);
  }
  uint64_t h1 = kc_mix64(dk.a), h2 = kc_mix64(dk.b ^ 0x4445); /* "DE" */
  struct dedup_val *d = lru_get(&c->dedup, h1, h2);
  struct dedup_val fresh; /* outlives the branch: d may point at it */
  if (d) {
    out->action = KC_EVENT_PATCH;
    if (d->count < INT32_MAX) d->count++;
  } else {
    out->action = KC_EVENT_CREATE;
    d = lru_add(&c->dedup, h1, h2);
    fresh = (struct dedup_val){1, wall_ns, (uint64_t)wall_ns + c->seq++};
    if (d) *d = fresh;
    else d = &fresh; /* not remembered: the next occurrence creates again */
  }
  out->count = d->count;
  out->first_ns = d->first_ns;
  out->name_suffix = d->suffix;
  /* client-go filters last: a dropped occurrence still counts. */
  if (!spam_accept(c, spam_key, mono_ns)) out->action = KC_EVENT_DROP;
  return out->action;
}

/* ---- records ---- */

enum { F_AV, F_KIND, F_NS, F_NAME, F_UID, F_RV, F_REASON, F_MSG, F_COMPONENT, F_N };

typedef struct ev_rec {
  int64_t wall_ns;
  int type;
  void *fence; /* fence_capture's token, NULL: may_write decides */
  uint32_t off[F_N], len[F_N];
  char data[];
} ev_rec;

static kc_str rf(const ev_rec *r, int f) { return (kc_str){r->data + r->off[f], r->len[f]}; }

/* Longest prefix of s of at most max bytes that does not split a UTF-8
 * sequence. */
static size_t utf8_cut(const char *s, size_t len, size_t max) {
  if (len <= max) return len;
  size_t n = max;
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  return n;
}

/* ---- recorder ---- */

struct kc_events {
  uv_loop_t *loop;
  kc_events_options o;
  uv_async_t async;
  uv_timer_t retry_timer, flush_timer;
  int open_handles;
  bool closing;

  /* queue: shared with producers, under mu */
  pthread_mutex_t mu;
  ev_rec **ring;
  size_t cap, head, n;
  bool closed;

  kc_event_correlator *corr;
  /* the write in flight (or waiting for its retry) */
  ev_rec *cur;
  kc_event_out cur_out;
  bool cur_patching; /* the current request is the PATCH */
  int tries;
  kc_api_call *call;
  bool retry_pending;
  bool failing; /* a failure was logged at warn; quiet until a success */
  kc_buf body, path; /* the request being sent; reused across writes */

  void (*flush_done)(void *ud);
  void *flush_ud;

  atomic_uint_fast64_t created, patched, dropped_queue, dropped_spam, skipped, failed, queued;
};


static void fmt_time(char out[32], int64_t wall_ns) {
  time_t s = (time_t)(wall_ns / 1000000000);
  struct tm tm;
  if (!gmtime_r(&s, &tm)) memset(&tm, 0, sizeof tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static kc_str event_ns(const ev_rec *r) {
  return r->len[F_NS] ? rf(r, F_NS) : kc_str_c("default");
}

static void json_kstr(kc_buf *b, kc_str s) { kc_buf_json(b, s.ptr, s.len); }

/* "<name>.<hex>", kept within the 253 bytes of a DNS subdomain; raw bytes
 * (a URL segment or the text of a JSON string, see json_event_name). */
static void wb_event_name(kc_buf *b, const ev_rec *r, uint64_t suffix) {
  kc_str name = rf(r, F_NAME);
  if (name.len > 236) name.len = 236;
  kc_buf_add(b, name.ptr, name.len);
  char hx[24];
  int n = snprintf(hx, sizeof hx, ".%" PRIx64, suffix);
  kc_buf_add(b, hx, (size_t)n);
}

/* The Event name as a JSON string: the object's name is the API server's
 * data, so it goes through the JSON writer like every other string. */
static void json_event_name(kc_buf *b, const ev_rec *r, uint64_t suffix) {
  char name[256];
  kc_buf nb = kc_buf_fixed(name, sizeof name);
  wb_event_name(&nb, r, suffix);
  kc_buf_json(b, name, nb.len);
}

static void wb_message(kc_buf *b, const ev_rec *r, bool combined) {
  kc_buf_add(b, "\"", 1);
  if (combined) kc_buf_add(b, KC_EVENTS_COMBINED_PREFIX, sizeof KC_EVENTS_COMBINED_PREFIX - 1);
  kc_str msg = rf(r, F_MSG);
  kc_buf_json_body(b, msg.ptr, msg.len);
  kc_buf_add(b, "\"", 1);
}

static void build_post(kc_events *ev, kc_buf *body, kc_buf *path) {
  const ev_rec *r = ev->cur;
  const kc_event_out *o = &ev->cur_out;
  kc_str ns = event_ns(r);
  char first[32], last[32];
  fmt_time(first, o->first_ns);
  fmt_time(last, r->wall_ns);
  kc_buf_puts(body, "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":");
  json_event_name(body, r, o->name_suffix);
  kc_buf_puts(body, ",\"namespace\":");
  json_kstr(body, ns);
  kc_buf_puts(body, "},\"involvedObject\":{");
  static const struct {
    int f;
    const char *key;
  } ref[] = {{F_AV, "\"apiVersion\":"}, {F_KIND, "\"kind\":"},  {F_NS, "\"namespace\":"},
             {F_UID, "\"uid\":"},       {F_RV, "\"resourceVersion\":"}};
  for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
    if (!r->len[ref[i].f]) continue;
    kc_buf_puts(body, ref[i].key);
    json_kstr(body, rf(r, ref[i].f));
    kc_buf_puts(body, ",");
  }
  kc_buf_puts(body, "\"name\":");
  json_kstr(body, rf(r, F_NAME));
  kc_buf_puts(body, "},\"reason\":");
  json_kstr(body, rf(r, F_REASON));
  kc_buf_puts(body, ",\"message\":");
  wb_message(body, r, o->combined);
  kc_buf_puts(body, r->type == KC_EVENT_TYPE_WARNING ? ",\"type\":\"Warning\",\"source\":{\"component\":"
                                                     : ",\"type\":\"Normal\",\"source\":{\"component\":");
  json_kstr(body, rf(r, F_COMPONENT));
  kc_buf_puts(body, "},\"reportingComponent\":");
  json_kstr(body, rf(r, F_COMPONENT));
  char tail[128];
  int n = snprintf(tail, sizeof tail,
                   ",\"firstTimestamp\":\"%s\",\"lastTimestamp\":\"%s\",\"count\":%" PRId32 "}",
                   first, last, o->count);
  kc_buf_add(body, tail, (size_t)n);
  kc_url_resource(path, "/api/v1", "events", ns, (kc_str){NULL, 0}, NULL);
}

static void build_patch(kc_events *ev, kc_buf *body, kc_buf *path) {
  const ev_rec *r = ev->cur;
  const kc_event_out *o = &ev->cur_out;
  char last[32];
  fmt_time(last, r->wall_ns);
  char head[96];
  int n = snprintf(head, sizeof head, "{\"count\":%" PRId32 ",\"lastTimestamp\":\"%s\",\"message\":",
                   o->count, last);
  kc_buf_add(body, head, (size_t)n);
  wb_message(body, r, o->combined);
  kc_buf_puts(body, "}");
  char name[256];
  kc_buf nb = kc_buf_fixed(name, sizeof name);
  wb_event_name(&nb, r, o->name_suffix);
  kc_url_resource(path, "/api/v1", "events", event_ns(r), (kc_str){name, nb.len}, NULL);
}

/* ---- the write loop ---- */

static void pump(kc_events *ev);

static void rec_free(kc_events *ev, ev_rec *r) {
  if (r && r->fence && ev->o.fence_free) ev->o.fence_free(r->fence);
  free(r);
}

/* May r be written now: its own fence when it has one, else may_write. */
static bool rec_may_write(const kc_events *ev, const ev_rec *r) {
  if (r->fence) return ev->o.fence_ok(r->fence);
  return !ev->o.may_write || ev->o.may_write(ev->o.ud);
}

static void drop_cur(kc_events *ev) {
  rec_free(ev, ev->cur);
  ev->cur = NULL;
  ev->tries = 0;
}

static void log_failure(kc_events *ev, const kc_api_result *res, const char *verb) {
  const ev_rec *r = ev->cur;
  kc_str ns = event_ns(r), name = rf(r, F_NAME), reason = rf(r, F_REASON);
  enum kc_log_level lvl = ev->failing ? KC_LOG_DEBUG : KC_LOG_WARN;
  if (lvl == KC_LOG_DEBUG && kc_log_get_level() < KC_LOG_DEBUG) return;
  kc_log(lvl, COMPONENT,
         "event dropped: %s failed: code=%d reason=%s message=\"%s\" object=%.*s/%.*s "
         "event_reason=%.*s%s",
         verb, res->status.code, res->status.reason[0] ? res->status.reason : "-",
         res->status.message, (int)ns.len, ns.ptr, (int)name.len, name.ptr, (int)reason.len,
         reason.ptr, ev->failing ? "" : " (further failures are logged at debug until one succeeds)");
  ev->failing = true;
}

static void on_write_done(kc_api_call *call, const kc_api_result *res, void *ud);

/* Sends the current record: its PATCH when ev->cur_patching, else its POST.
 * Returns 0 or a negative errno (nothing in flight then). */
static int send_cur(kc_events *ev) {
  kc_buf_reset(&ev->body);
  kc_buf_reset(&ev->path);
  if (ev->cur_patching) build_patch(ev, &ev->body, &ev->path);
  else build_post(ev, &ev->body, &ev->path);
  if (ev->body.err || ev->path.err) return -ENOMEM;
  kc_api_request_opts o = {
      .method = ev->cur_patching ? "PATCH" : "POST",
      .path = ev->path.p,
      .content_type = ev->cur_patching ? "application/strategic-merge-patch+json"
                                       : "application/json",
      .body = ev->body.p,
      .body_len = ev->body.len,
      .timeout_ms = ev->o.timeout_ms,
      .on_done = on_write_done,
      .ud = ev,
  };
  ev->tries++;
  return kc_api_request(ev->o.api, &o, &ev->call);
}

static void on_retry(uv_timer_t *t) {
  kc_events *ev = t->data;
  ev->retry_pending = false;
  if (!ev->cur) {
    pump(ev);
    return;
  }
  if (!rec_may_write(ev, ev->cur)) {
    atomic_fetch_add(&ev->skipped, 1);
    drop_cur(ev);
  } else if (send_cur(ev) < 0) {
    ev->call = NULL;
    atomic_fetch_add(&ev->failed, 1);
    drop_cur(ev);
  }
  pump(ev);
}

static void on_write_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  kc_events *ev = ud;
  ev->call = NULL;
  int code = res->error ? 0 : res->status.code;
  const char *verb = ev->cur_patching ? "PATCH" : "POST";
  if (code >= 200 && code < 300) {
    atomic_fetch_add(ev->cur_patching ? &ev->patched : &ev->created, 1);
    if (ev->failing) kc_info(COMPONENT, "event writes succeed again");
    ev->failing = false;
    drop_cur(ev);
    pump(ev);
    return;
  }
  if (ev->cur_patching && kc_api_is_not_found(&res->status)) {
    /* The Event expired (the API server keeps them an hour) or was deleted:
     * create it again under its name, keeping the count. */
    ev->cur_patching = false;
    ev->tries = 0;
    if (send_cur(ev) < 0) {
      ev->call = NULL;
      atomic_fetch_add(&ev->failed, 1);
      drop_cur(ev);
      pump(ev);
    }
    return;
  }
  bool retry = res->error || kc_api_is_retryable(&res->status);
  if (retry && ev->tries < ev->o.max_tries) {
    uint64_t delay = ev->o.retry_delay_ms;
    if (res->status.retry_after_seconds > 0) {
      uint64_t ra = (uint64_t)res->status.retry_after_seconds * 1000;
      if (ra > delay) delay = ra < 60000 ? ra : 60000;
    }
    ev->retry_pending = true;
    uv_timer_start(&ev->retry_timer, on_retry, delay, 0);
    return;
  }
  log_failure(ev, res, verb);
  atomic_fetch_add(&ev->failed, 1);
  drop_cur(ev);
  pump(ev);
}

static ev_rec *pop(kc_events *ev) {
  ev_rec *r = NULL;
  pthread_mutex_lock(&ev->mu);
  if (ev->n) {
    r = ev->ring[ev->head];
    ev->ring[ev->head] = NULL;
    ev->head = (ev->head + 1) % ev->cap;
    ev->n--;
    atomic_fetch_sub(&ev->queued, 1);
  }
  pthread_mutex_unlock(&ev->mu);
  return r;
}

static void flush_finish(kc_events *ev) {
  void (*done)(void *) = ev->flush_done;
  void *ud = ev->flush_ud;
  ev->flush_done = NULL;
  ev->flush_ud = NULL;
  uv_timer_stop(&ev->flush_timer);
  if (done) done(ud);
}

static void on_flush_timeout(uv_timer_t *t) { flush_finish(t->data); }

/* Takes records until one needs a write (then waits for it) or the queue is
 * empty. */
static void pump(kc_events *ev) {
  if (ev->closing) return;
  while (!ev->call && !ev->retry_pending) {
    if (!ev->cur) {
      ev->cur = pop(ev);
      if (!ev->cur) {
        /* From a timer: pump may run inside an API call's callback, where
         * the flush owner (the daemon's shutdown) must not close the client. */
        if (ev->flush_done) uv_timer_start(&ev->flush_timer, on_flush_timeout, 0, 0);
        return;
      }
      ev->tries = 0;
      if (!rec_may_write(ev, ev->cur)) {
        atomic_fetch_add(&ev->skipped, 1);
        drop_cur(ev);
        continue;
      }
      const ev_rec *r = ev->cur;
      kc_event_in in = {rf(r, F_AV),  rf(r, F_KIND), rf(r, F_NS),     rf(r, F_NAME),
                        rf(r, F_UID), r->type,       rf(r, F_REASON), rf(r, F_MSG),
                        rf(r, F_COMPONENT)};
      kc_event_action a = kc_event_correlate(ev->corr, &in, kc_clock_now_ns(), r->wall_ns, &ev->cur_out);
      if (a == KC_EVENT_DROP) {
        atomic_fetch_add(&ev->dropped_spam, 1);
        drop_cur(ev);
        continue;
      }
      ev->cur_patching = a == KC_EVENT_PATCH;
    }
    if (send_cur(ev) < 0) {
      ev->call = NULL;
      atomic_fetch_add(&ev->failed, 1);
      drop_cur(ev);
    }
  }
}

static void on_async(uv_async_t *a) { pump(a->data); }

int kc_events_new(uv_loop_t *loop, const kc_events_options *opts, kc_events **out) {
  *out = NULL;
  if (!opts || !opts->api || !loop) return -EINVAL;
  if (opts->fence_capture && (!opts->fence_ok || !opts->fence_free)) return -EINVAL;
  kc_events *ev = calloc(1, sizeof *ev);
  if (!ev) return -ENOMEM;
  ev->loop = loop;
  ev->o = *opts;
  if (!ev->o.queue_capacity) ev->o.queue_capacity = KC_EVENTS_QUEUE_DEFAULT;
  if (!ev->o.max_tries) ev->o.max_tries = 3;
  if (!ev->o.retry_delay_ms) ev->o.retry_delay_ms = 1000;
  if (!ev->o.timeout_ms) ev->o.timeout_ms = 10000;
  ev->cap = ev->o.queue_capacity;
  ev->ring = calloc(ev->cap, sizeof *ev->ring);
  int rc = ev->ring ? kc_event_correlator_new(ev->o.cache_entries, &ev->corr) : -ENOMEM;
  if (rc == 0 && pthread_mutex_init(&ev->mu, NULL) != 0) rc = -ENOMEM;
  if (rc < 0) {
    kc_event_correlator_free(ev->corr);
    free(ev->ring);
    free(ev);
    return rc;
  }
  rc = uv_async_init(loop, &ev->async, on_async);
  if (rc < 0) {
    pthread_mutex_destroy(&ev->mu);
    kc_event_correlator_free(ev->corr);
    free(ev->ring);
    free(ev);
    return rc;
  }
  uv_timer_init(loop, &ev->retry_timer);
  uv_timer_init(loop, &ev->flush_timer);
  ev->async.data = ev->retry_timer.data = ev->flush_timer.data = ev;
  ev->open_handles = 3;
  *out = ev;
  return 0;
}

int kc_events_record(kc_events *ev, const char *controller, const kc_obj *o, int type,
                     const char *reason, const char *message) {
  if (!ev || !o || !kc_obj_name(o).len || !reason || !*reason) return -EINVAL;
  if (!message) message = "";
  /* A label of its own under kctrld.io: the source column of kubectl get
   * events tells the controllers of one daemon (and other daemons) apart. */
  char component[KC_EVENTS_COMPONENT_MAX + 1];
  if (controller && *controller)
    snprintf(component, sizeof component, "kctrld.io/%s", controller);
  else
    snprintf(component, sizeof component, "kctrld");
  kc_str f[F_N] = {kc_obj_api_version(o), kc_obj_kind(o),   kc_obj_namespace(o),
                   kc_obj_name(o),        kc_obj_uid(o),    kc_obj_resource_version(o),
                   kc_str_c(reason),      kc_str_c(message), kc_str_c(component)};
  f[F_MSG].len = utf8_cut(f[F_MSG].ptr, f[F_MSG].len, KC_EVENTS_MESSAGE_MAX);
  if (f[F_REASON].len > 128) f[F_REASON].len = 128; /* the API server's limit */
  size_t total = 0;
  for (int i = 0; i < F_N; i++) {
    if (f[i].len > UINT32_MAX / 2) return -EINVAL;
    total += f[i].len + 1;
  }
  void *fence = NULL;
  bool refused = false;
  if (ev->o.fence_capture) {
    fence = ev->o.fence_capture(ev->o.ud, &refused);
    if (refused) { /* checked when recording: a fenced thread may not write now */
      atomic_fetch_add(&ev->skipped, 1);
      return 0;
    }
  }
  ev_rec *r = malloc(sizeof *r + total);
  if (!r) {
    if (fence) ev->o.fence_free(fence);
    return -ENOMEM;
  }
  r->fence = fence;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  r->wall_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
  r->type = type == KC_EVENT_TYPE_WARNING ? KC_EVENT_TYPE_WARNING : KC_EVENT_TYPE_NORMAL;
  size_t at = 0;
  for (int i = 0; i < F_N; i++) {
    r->off[i] = (uint32_t)at;
    r->len[i] = (uint32_t)f[i].len;
    if (f[i].len) memcpy(r->data + at, f[i].ptr, f[i].len);
    r->data[at + f[i].len] = '\0';
    at += f[i].len + 1;
  }
  bool queued = false;
  pthread_mutex_lock(&ev->mu);
  if (!ev->closed && ev->n < ev->cap) {
    ev->ring[(ev->head + ev->n) % ev->cap] = r;
    ev->n++;
    queued = true;
    atomic_fetch_add(&ev->queued, 1);
    /* Inside the lock: close() sets `closed` under it before closing the
     * handle, so the handle is alive here. */
    uv_async_send(&ev->async);
  }
  pthread_mutex_unlock(&ev->mu);
  if (!queued) {
    rec_free(ev, r);
    atomic_fetch_add(&ev->dropped_queue, 1);
  }
  return 0;
}

void kc_events_flush(kc_events *ev, uint64_t timeout_ms, void (*done)(void *ud), void *ud) {
  ev->flush_done = done;
  ev->flush_ud = ud;
  uv_timer_start(&ev->flush_timer, on_flush_timeout, timeout_ms, 0);
  uv_async_send(&ev->async); /* pump from a callback: done never runs synchronously */
}

static void on_handle_closed(uv_handle_t *h) {
  kc_events *ev = h->data;
  if (--ev->open_handles > 0) return;
  pthread_mutex_destroy(&ev->mu);
  free(ev->ring);
  kc_buf_free(&ev->body);
  kc_buf_free(&ev->path);
  free(ev);
}

void kc_events_close(kc_events *ev) {
  if (!ev || ev->closing) return;
  ev->closing = true;
  pthread_mutex_lock(&ev->mu);
  ev->closed = true;
  pthread_mutex_unlock(&ev->mu);
  kc_api_cancel(ev->call);
  ev->call = NULL;
  if (ev->cur) {
    atomic_fetch_add(&ev->dropped_queue, 1);
    drop_cur(ev);
  }
  for (ev_rec *r; (r = pop(ev));) {
    atomic_fetch_add(&ev->dropped_queue, 1);
    rec_free(ev, r);
  }
  ev->flush_done = NULL;
  kc_event_correlator_free(ev->corr);
  ev->corr = NULL;
  uv_close((uv_handle_t *)&ev->async, on_handle_closed);
  uv_close((uv_handle_t *)&ev->retry_timer, on_handle_closed);
  uv_close((uv_handle_t *)&ev->flush_timer, on_handle_closed);
}

void kc_events_get_stats(kc_events *ev, kc_events_stats *out) {
  out->created = atomic_load(&ev->created);
  out->patched = atomic_load(&ev->patched);
  out->dropped_queue = atomic_load(&ev->dropped_queue);
  out->dropped_spam = atomic_load(&ev->dropped_spam);
  out->skipped = atomic_load(&ev->skipped);
  out->failed = atomic_load(&ev->failed);
  out->queued = atomic_load(&ev->queued);
}
