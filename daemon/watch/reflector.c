/* SPDX-License-Identifier: Apache-2.0 */
/* reflector: see reflector.h. State machine:
 *
 *   LIST (pages) --complete--> WATCH --clean end / idle--> WATCH (same RV)
 *     ^   |                      |
 *     |   +--error--> BACKOFF ---+--410 / broken stream--> LIST at last RV
 *     +--------------------------+
 */
#include "watch/reflector.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/buf.h"
#include "watch/decodepool.h"
#include "watch/history.h"
#include "base/log.h"
#include "base/memtrim.h"
#include "kube/kurl.h"

enum list_mode {
  LIST_INITIAL,    /* resourceVersion=0 with limit: any snapshot, served from cache */
  LIST_AT_RV,      /* after a watch 410: not older than the last seen RV */
  LIST_CONSISTENT, /* after that failed too: resourceVersion="" (quorum read) */
};

/* PHASE_VERIFY: the history check (see reflector.h) before resuming a watch. */
enum phase { PHASE_IDLE, PHASE_LIST, PHASE_WATCH, PHASE_BACKOFF, PHASE_VERIFY, PHASE_CLOSED };

struct kc_reflector {
  uv_loop_t *loop;
  uv_timer_t timer; /* backoff; timer.data = this */
  kc_api *api;
  kc_reflector_sink sink;
  char *api_path, *resource, *namespace_, *label_selector, *field_selector;
  char **drop_paths;
  char *type_kind, *type_api_version; /* transform.kind/api_version, copied */
  kc_transform transform;
  uint32_t page_size;
  bool no_limit;
  uint32_t watch_timeout_s;
  uint64_t rng; /* jitter (xorshift64), seeded per reflector so replicas spread out */
  uint64_t idle_timeout_ms, backoff_initial_ms, backoff_max_ms;
  char describe[256];

  enum phase phase;
  kc_api_call *req;
  /* The response body's decoding (off the loop when a pool is given). Its
   * done() runs after the HTTP result: that result waits in `result`. */
  kc_decode_pool *pool;
  size_t decode_budget;
  kc_dstream *stream;
  int decode_rc;          /* the stream's result: 0 or its first error */
  bool http_done;         /* `result` holds the response's outcome */
  kc_api_result result;

  /* listing */
  enum list_mode list_mode;
  bool paginated_before; /* an earlier list came back in pages: keep using limit */
  bool page_continue;    /* current request continues a paginated list */
  int force_limit;       /* next list: 1 with limit, -1 without, 0 by mode */
  bool force_no_limit;   /* next list: one full list without limit (expired continue) */
  bool last_list_limit;  /* whether the list last sent (first page) carried limit */
  bool rv_unavailable;   /* a list at the last RV got 410/too large: list at "" until one works */
  bool synced;           /* the first complete list has been delivered */
  bool listing;          /* a list is in progress: kc_mem_list_begin (memtrim.h) */
  char rv[64];           /* last seen resourceVersion: where a watch resumes, a relist starts */
  char continue_token[1024];
  char list_rv[64];      /* RV the current list was requested at ("" = consistent) */
  /* Pipelined pages (reflector.h): the request for the next page, sent as
   * soon as the current page's metadata.continue was decoded. Its stream is
   * held until the current page finished; then it becomes the current
   * response (promote_ahead). */
  struct {
    bool active;          /* sent, not yet taken up or cancelled */
    kc_api_call *req;     /* NULL once its response ended */
    kc_dstream *stream;   /* held; NULL until the response's headers came */
    bool http_done;       /* `result` holds the response's outcome */
    kc_api_result result;
    bool shard_sent;
    char cont[1024];      /* the continue token it carries */
  } ahead;
  kc_obj **pending;
  size_t npending, cap_pending;
  bool incremental;      /* this first list goes to sink.upsert as it arrives */
  bool partial_applied;  /* an incremental attempt failed half-way: replace from now on */
  size_t napplied;       /* objects the incremental attempt handed over */

  /* watching */
  uint64_t watch_started_ms;
  uint64_t watch_events;
  bool watch_error_event;
  bool initial_phase;    /* streaming list: initial events until the end bookmark */
  int streaming;         /* KC_REFLECTOR_STREAM_* */
  uint64_t initial_timeout_ms;
  kc_status watch_status;

  /* shard selector (reflector.h "Shard selector") */
  char *shard_selector;  /* NULL: none */
  enum kc_shard_support shard_support;
  bool shard_sent;       /* the request under way carries shardSelector */

  /* backoff (client-go: 800 ms doubling to 30 s, jitter 1.0, reset after 2 min) */
  uint64_t backoff_ms;
  uint64_t last_backoff_at_ms;
  bool backoff_after_watch; /* the last failure was a watch's (or the history check's) */
  enum { NEXT_LIST, NEXT_WATCH } after_backoff;

  /* history check (history.h) */
  bool verify_history;   /* a connection failed: check before resuming the watch */
  /* Witnesses: [0] the cached object with the highest RV, the others a
   * uniform sample of the cached objects (reservoir over what the lists and
   * events delivered since the last list began), so that a history
   * re-seeded to end on the same RV is caught too. */
  kc_history history;
  kc_buf verify_body;    /* the check's response (at most 4 MiB: one object's metadata) */

  /* Reporting only, never read to decide: the counters, and the fields
   * kc_reflector_stats_get copies from the control state above. */
  kc_reflector_stats stats;
};

static void start_list(kc_reflector *r, enum list_mode mode);
static void start_watch(kc_reflector *r);
static void start_stream(kc_reflector *r, enum list_mode mode);
static void stream_fallback(kc_reflector *r, const char *why);
static void backoff_then(kc_reflector *r, int next, uint64_t retry_after_ms);
static void backoff_reset(kc_reflector *r);
static void start_verify(kc_reflector *r);

static char *dup_or_null(const char *s) {
  if (!s || !*s) return NULL;
  return strdup(s);
}

/* The last seen resourceVersion; one that does not fit is ignored. */
static void set_rv(kc_reflector *r, const char *rv, size_t len) {
  if (!len || len >= sizeof r->rv) return;
  memcpy(r->rv, rv, len);
  r->rv[len] = 0;
}

/* Ends the current list attempt's collection (success, failure or a new
 * attempt). */
static void clear_pending(kc_reflector *r) {
  for (size_t i = 0; i < r->npending; i++) kc_obj_unref(r->pending[i]);
  r->npending = 0;
  if (r->incremental && r->napplied) r->partial_applied = true;
  r->incremental = false;
  r->napplied = 0;
}

/* A new list attempt: is it the first, applied as it arrives? */
static void begin_list(kc_reflector *r) {
  clear_pending(r);
  r->incremental = !r->synced && r->sink.synced && !r->partial_applied;
}

static void set_error(kc_reflector *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(kc_reflector *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->stats.last_error, sizeof r->stats.last_error, fmt, ap);
  va_end(ap);
  r->stats.errors++;
  kc_warn("reflector", "%s: %s", r->describe, r->stats.last_error);
}

/* --- URL building -------------------------------------------------------- */

/* Parameters in alphabetical order, as client-go encodes them. `stream`
 * (with watch) asks for a streaming list: sendInitialEvents with
 * resourceVersionMatch=NotOlderThan, at rv ("" = consistent read). */
static int build_url(const kc_reflector *r, bool watch, bool stream, const char *rv,
                     const char *continue_token, bool with_limit, uint32_t timeout_s, char *buf,
                     size_t cap) {
  kc_buf u = kc_buf_fixed(buf, cap);
  char sep = '?';
  kc_url_resource(&u, r->api_path, r->resource, kc_str_c(r->namespace_), (kc_str){NULL, 0}, NULL);
  if (watch) kc_url_param(&u, &sep, "allowWatchBookmarks", "true");
  if (!watch && continue_token && *continue_token)
    kc_url_param(&u, &sep, "continue", continue_token);
  if (r->field_selector) kc_url_param(&u, &sep, "fieldSelector", r->field_selector);
  if (r->label_selector) kc_url_param(&u, &sep, "labelSelector", r->label_selector);
  if (!watch && with_limit) kc_url_param_uint(&u, &sep, "limit", r->page_size);
  /* A continue request must not carry a resourceVersion (400). */
  if ((rv && *rv && !(continue_token && *continue_token)) || stream)
    kc_url_param(&u, &sep, "resourceVersion", rv ? rv : "");
  if (stream) {
    kc_url_param(&u, &sep, "resourceVersionMatch", "NotOlderThan");
    kc_url_param(&u, &sep, "sendInitialEvents", "true");
  }
  if (r->shard_selector && r->shard_support != KC_SHARD_SUPPORT_NONE)
    kc_url_param(&u, &sep, "shardSelector", r->shard_selector);
  if (watch) {
    kc_url_param_uint(&u, &sep, "timeoutSeconds", timeout_s);
    kc_url_param(&u, &sep, "watch", "true");
  }
  return u.err ? -ENOSPC : (int)u.len;
}

int kc_reflector_url(const kc_reflector *r, bool watch, const char *rv, const char *continue_token,
                     bool with_limit, uint32_t timeout_s, char *buf, size_t cap) {
  return build_url(r, watch, false, rv, continue_token, with_limit, timeout_s, buf, cap);
}

/* --- shared response plumbing -------------------------------------------- */

static size_t list_budget(const kc_reflector *r) {
  return r->decode_budget ? r->decode_budget : KC_DSTREAM_DEFAULT_BUDGET;
}

/* Drops the early request for the next page (the page before failed, or
 * the list is abandoned); the current stream gets its whole budget back. */
static void cancel_ahead(kc_reflector *r) {
  if (!r->ahead.active) return;
  kc_api_cancel(r->ahead.req);
  kc_dstream_close(r->ahead.stream);
  memset(&r->ahead, 0, sizeof r->ahead);
  if (r->stream) kc_dstream_set_budget(r->stream, list_budget(r));
}

static void reset_response(kc_reflector *r) {
  kc_dstream_close(r->stream);
  r->stream = NULL;
  r->http_done = false;
  r->decode_rc = 0;
}

static void describe_status(const kc_status *st, char *buf, size_t cap) {
  snprintf(buf, cap, "HTTP %d %s: %s", st->code, st->reason[0] ? st->reason : "(no reason)",
           st->message);
}

static bool is_2xx(const kc_status *st) { return st->code >= 200 && st->code < 300; }

static uint64_t retry_after_ms(const kc_status *st) {
  return st->retry_after_seconds > 0 ? (uint64_t)st->retry_after_seconds * 1000 : 0;
}

static uint64_t next_rand(kc_reflector *r) { return kc_xorshift64s(&r->rng); }

static uint64_t now_ms(kc_reflector *r) {
  uv_update_time(r->loop);
  return uv_now(r->loop);
}

/* --- shard selector support ---------------------------------------------- */

static bool sends_shard_selector(const kc_reflector *r) {
  return r->shard_selector && r->shard_support != KC_SHARD_SUPPORT_NONE;
}

/* The server does not filter: from now on nothing carries the selector. */
static void shard_support_none(kc_reflector *r, const char *why) {
  if (r->shard_support == KC_SHARD_SUPPORT_NONE) return;
  r->shard_support = KC_SHARD_SUPPORT_NONE;
  kc_warn("reflector", "%s: the API server does not filter by shardSelector (%s); listing and "
          "watching without it, caching the whole scope", r->describe, why);
}

/* A list answer to a request that carried the selector. */
static void note_list_shard_info(kc_reflector *r, const kc_list_meta *m) {
  if (!r->shard_sent) return;
  if (!m->has_shard_info) {
    shard_support_none(r, "a list answer without metadata.shardInfo: the parameter was ignored");
    return;
  }
  if (r->shard_support != KC_SHARD_SUPPORT_SERVER)
    kc_info("reflector", "%s: the API server filters by shardSelector (metadata.shardInfo.selector "
            "\"%.300s\")", r->describe, m->shard_selector ? m->shard_selector : "");
  r->shard_support = KC_SHARD_SUPPORT_SERVER;
}

/* A 400/422 to a request that carried the selector: the server refuses the
 * parameter (or this value of it). Returns true when that was the case: the
 * caller then repeats the request without it. A 422 that names
 * sendInitialEvents is a server without WatchList refusing the streaming
 * list, not the selector (stream_fallback handles that). */
static bool shard_selector_refused(kc_reflector *r, const kc_status *st) {
  if (!r->shard_sent || (st->code != 400 && st->code != 422)) return false;
  if (st->code == 422 && strstr(st->message, "sendInitialEvents")) return false;
  char why[600];
  snprintf(why, sizeof why, "HTTP %d %s: %.500s", st->code, st->reason[0] ? st->reason : "(no reason)",
           st->message);
  shard_support_none(r, why);
  return true;
}

/* --- LIST ----------------------------------------------------------------- */

static int list_item(void *ud, kc_obj *obj) {
  kc_reflector *r = ud;
  if (r->incremental) {
    if (!r->napplied) kc_history_forget(&r->history);
    kc_history_note(&r->history, obj, &r->rng);
    r->sink.upsert(r->sink.ud, r, obj);
    r->napplied++;
    return 0;
  }
  if (r->npending == r->cap_pending) {
    size_t nc = r->cap_pending ? r->cap_pending * 2 : 1024;
    kc_obj **np = realloc(r->pending, nc * sizeof *np);
    if (!np) return -ENOMEM;
    r->pending = np;
    r->cap_pending = nc;
  }
  r->pending[r->npending++] = kc_obj_ref(obj);
  return 0;
}

/* An object the decoder did not deliver (decode.h "Rejected objects"): one
 * warning naming it, then the stream goes on. */
static int reject_object(void *ud, const kc_decode_reject *rj) {
  kc_reflector *r = ud;
  const kc_obj *o = rj->obj;
  r->stats.rejected++;
  kc_warn("reflector", "%s: %s %s %llu at offset %llu, object %.*s%s%.*s: %s", r->describe,
          rj->event_type ? "rejected" : "rejected list", rj->event_type ? rj->event_type : "item",
          (unsigned long long)rj->index, (unsigned long long)rj->offset,
          (int)(kc_obj_namespace(o).len > 253 ? 253 : kc_obj_namespace(o).len),
          kc_obj_namespace(o).ptr, kc_obj_namespace(o).len ? "/" : "",
          (int)(kc_obj_name(o).len > 253 ? 253 : kc_obj_name(o).len), kc_obj_name(o).ptr,
          rj->reason);
  /* The event was consumed: a resumed watch must not bring it back. */
  if (rj->event_type && !r->initial_phase)
    set_rv(r, kc_obj_resource_version(o).ptr, kc_obj_resource_version(o).len);
  return 0;
}

static void on_stream_resume(void *ud) {
  kc_reflector *r = ud;
  /* Only the current response's stream decodes (a held one never drains). */
  kc_api_call_resume(r->req);
}

static void send_ahead(kc_reflector *r, const char *cont);

/* The current page's metadata was decoded (list_continue, decodepool.h):
 * with a continue token, the next page is requested now (reflector.h
 * "Pipelined pages"). At most one page ahead. */
static int list_continue(void *ud, const char *cont) {
  kc_reflector *r = ud;
  if (r->phase != PHASE_LIST || !cont[0] || r->ahead.active || !r->stream) return 0;
  /* The page that probes shardSelector support decides whether the next
   * one carries it: that one is requested after it, as before. */
  if (r->shard_sent && r->shard_support == KC_SHARD_SUPPORT_UNKNOWN) return 0;
  if (strlen(cont) >= sizeof r->ahead.cont) return 0; /* list_finished reports it as today */
  send_ahead(r, cont);
  return 0;
}

static int watch_event(void *ud, const kc_watch_event *ev);
static void list_finished(kc_reflector *r, const kc_api_result *res);
static void list_request_opts(kc_reflector *r, const char *url, kc_api_request_opts *o);
static void watch_finished(kc_reflector *r, const kc_api_result *res);

/* The stream is done: after the response ended (its result waits), or
 * because decoding failed while the response is still running (then the
 * transfer is stopped here and reported as aborted). */
static void on_stream_done(void *ud, int rc) {
  kc_reflector *r = ud;
  r->decode_rc = rc;
  if (!r->http_done) {
    kc_api_cancel(r->req);
    r->req = NULL;
    memset(&r->result, 0, sizeof r->result);
    r->result.error = -ECANCELED;
    snprintf(r->result.status.message, sizeof r->result.status.message, "%s",
             kc_dstream_error(r->stream));
    r->result.status.retry_after_seconds = -1;
    r->http_done = true;
  }
  kc_api_result res = r->result;
  if (r->phase == PHASE_LIST)
    list_finished(r, &res);
  else
    watch_finished(r, &res);
}

/* Pages are pipelined only when a pool thread decodes: an inline stream
 * cannot hold a page back. */
static bool pipelining(const kc_reflector *r) { return kc_decode_pool_threads(r->pool) > 0; }

static kc_dstream *new_stream(kc_reflector *r, enum kc_decode_mode mode, size_t budget) {
  kc_dstream_callbacks cbs = {.reject = reject_object, .resume = on_stream_resume,
                              .done = on_stream_done};
  if (mode == KC_DECODE_LIST) {
    cbs.item = list_item;
    if (pipelining(r)) cbs.list_continue = list_continue;
  } else {
    cbs.event = watch_event;
  }
  kc_dstream *s = kc_dstream_new(r->pool, mode, &r->transform, &cbs, r, budget);
  if (s && (mode == KC_DECODE_LIST || r->initial_phase)) kc_dstream_set_bulk(s);
  return s;
}

static int start_stream_decode(kc_reflector *r, enum kc_decode_mode mode) {
  r->stream = new_stream(r, mode, r->decode_budget);
  r->decode_rc = 0;
  r->http_done = false;
  return r->stream ? KC_HTTP_CONTINUE : KC_HTTP_ABORT;
}

static int on_list_response(kc_api_call *call, long status, void *ud) {
  kc_reflector *r = ud;
  if (r->ahead.active && call == r->ahead.req) {
    /* The next page: held until the current one finished; half the budget
     * each while both are in flight. */
    r->ahead.stream = new_stream(r, KC_DECODE_LIST, list_budget(r) / 2);
    if (!r->ahead.stream) return KC_HTTP_ABORT;
    if (kc_dstream_set_held(r->ahead.stream, true) < 0) return KC_HTTP_ABORT;
    return KC_HTTP_CONTINUE;
  }
  return start_stream_decode(r, KC_DECODE_LIST);
}

/* Body bytes of a list or watch response go to that response's stream. A
 * full stream pauses the transfer until it has drained (on_stream_resume). */
static int on_body_data(kc_api_call *call, const char *buf, size_t len, void *ud) {
  kc_reflector *r = ud;
  bool ahead = r->ahead.active && call == r->ahead.req;
  kc_dstream *s = ahead ? r->ahead.stream : r->stream;
  if (!s) return KC_HTTP_ABORT;
  int rc = kc_dstream_feed(s, buf, len);
  if (rc == KC_DSTREAM_FULL) {
    r->stats.decode_pauses++;
    return KC_HTTP_PAUSE;
  }
  if (rc < 0) {
    /* A held stream only queues: this is -ENOMEM, and the aborted
     * response is the page's failure once it is taken up. */
    if (!ahead) r->decode_rc = rc;
    return KC_HTTP_ABORT;
  }
  return KC_HTTP_CONTINUE;
}

/* The response ended. With a stream, what it still decodes is delivered
 * first; its done() then finishes the request. */
static void response_done(kc_reflector *r, const kc_api_result *res, bool list) {
  r->req = NULL;
  r->result = *res;
  r->http_done = true;
  if (r->stream) {
    kc_dstream_finish(r->stream, res->error == 0 && is_2xx(&res->status));
    return;
  }
  if (list)
    list_finished(r, res);
  else
    watch_finished(r, res);
}

/* A complete list (LIST pages or a streaming list's initial events): the
 * pending objects replace the scope's content at resourceVersion rv. */
static void deliver_list(kc_reflector *r, const char *rv, const char *how) {
  snprintf(r->rv, sizeof r->rv, "%s", rv);
  if (r->synced) r->stats.relists++;
  r->synced = true; /* already while the sink applies it (kc_informer_synced) */
  size_t n = r->incremental ? r->napplied : r->npending;
  r->verify_history = false; /* a complete list is of the server's current history */
  if (r->incremental) {
    /* The witness was noted as the objects went by (list_item). */
    r->incremental = false; /* complete: nothing stale */
    r->napplied = 0;
    r->sink.synced(r->sink.ud, r);
  } else {
    kc_history_forget(&r->history);
    for (size_t i = 0; i < r->npending; i++) kc_history_note(&r->history, r->pending[i], &r->rng);
    r->sink.replace(r->sink.ud, r, (kc_obj *const *)r->pending, r->npending);
  }
  kc_info("reflector", "%s: %s %zu objects at resourceVersion %s", r->describe, how, n, rv);
  clear_pending(r);
  r->rv_unavailable = false;
  /* The decode stream's input copies (up to its budget, freed on the loop's
   * heap as the decoder caught up) and, after a relist, the objects the
   * replace dropped, which lie below the new ones: one trim per list. */
  kc_mem_list_end(&r->listing);
  kc_mem_give_back();
}

static void list_complete(kc_reflector *r, const char *rv) {
  deliver_list(r, rv, "listed");
  /* After LIST failures (429 storm, 5xx burst, server down) the list
   * working ends the streak. After a failed watch it does not: a server
   * whose lists work and whose watches fail must not be relisted at the
   * initial rate forever; a watch event resets it then. */
  if (!r->backoff_after_watch) backoff_reset(r);
  start_watch(r);
}

static void on_list_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  kc_reflector *r = ud;
  if (r->ahead.active && call == r->ahead.req) {
    /* The next page ended before the current one: its outcome waits. */
    r->ahead.req = NULL;
    r->ahead.result = *res;
    r->ahead.http_done = true;
    if (r->ahead.stream)
      kc_dstream_finish(r->ahead.stream, res->error == 0 && is_2xx(&res->status));
    return;
  }
  response_done(r, res, true);
}

/* The current page finished well and its continue token is the one the
 * early request carries: that request becomes the current response. Its
 * page counts as a LIST now (one per page, as without pipelining). */
static void promote_ahead(kc_reflector *r) {
  r->stats.lists++;
  r->req = r->ahead.req;
  r->stream = r->ahead.stream;
  r->http_done = r->ahead.http_done;
  r->result = r->ahead.result;
  r->decode_rc = 0;
  r->shard_sent = r->ahead.shard_sent;
  memset(&r->ahead, 0, sizeof r->ahead);
  kc_debug("reflector", "%s: list: next page (requested early) taken up%s", r->describe,
           r->http_done ? ", already received" : "");
  if (r->stream) {
    kc_dstream_set_budget(r->stream, list_budget(r));
    kc_dstream_set_held(r->stream, false); /* done() follows, as for any response */
    return;
  }
  if (r->http_done) {
    /* Ended without a body (an error status, a refused connection). */
    kc_api_result res = r->result;
    list_finished(r, &res);
  }
  /* else: its headers are still to come (on_list_response, now current). */
}

/* Sends the request for the next page early (see list_continue). One that
 * cannot start is simply not there: list_finished requests the page as
 * before. */
static void send_ahead(kc_reflector *r, const char *cont) {
  char url[4096];
  if (kc_reflector_url(r, false, r->list_rv, cont, true, 0, url, sizeof url) < 0) return;
  kc_api_request_opts o;
  list_request_opts(r, url, &o);
  kc_debug("reflector", "%s: list: next page requested early: GET %s", r->describe, url);
  kc_api_call *call = NULL;
  if (kc_api_request(r->api, &o, &call) < 0 || !call) return;
  r->ahead.active = true;
  r->ahead.req = call;
  r->ahead.shard_sent = sends_shard_selector(r);
  snprintf(r->ahead.cont, sizeof r->ahead.cont, "%s", cont);
  /* Both pages together within the reflector's budget. */
  kc_dstream_set_budget(r->stream, list_budget(r) / 2);
}

static void list_finished(kc_reflector *r, const kc_api_result *res) {
  const kc_status *st = &res->status;
  if (res->error == 0 && is_2xx(st) && r->stream && !r->decode_rc) {
    const kc_list_meta *m = kc_dstream_list_meta(r->stream);
    note_list_shard_info(r, m);
    char rv[64], cont[sizeof r->continue_token];
    snprintf(rv, sizeof rv, "%s", m->resource_version ? m->resource_version : "");
    snprintf(cont, sizeof cont, "%s", m->continue_token ? m->continue_token : "");
    reset_response(r);
    if (cont[0]) {
      /* More pages: same snapshot; the follow-up carries no resourceVersion. */
      r->paginated_before = true;
      r->page_continue = true;
      memcpy(r->continue_token, cont, sizeof cont);
      if (r->ahead.active && strcmp(r->ahead.cont, cont) == 0) {
        promote_ahead(r);
        return;
      }
      cancel_ahead(r);
      start_list(r, r->list_mode);
      return;
    }
    cancel_ahead(r);
    r->page_continue = false;
    list_complete(r, rv);
    return;
  }
  /* This page failed: the next one, if requested early, goes too. */
  cancel_ahead(r);
  bool was_continue = r->page_continue;
  r->page_continue = false;
  r->continue_token[0] = 0;
  clear_pending(r);
  if (r->stream && (r->decode_rc || res->error == 0)) {
    set_error(r, "list: malformed response: %s", kc_dstream_error(r->stream));
    reset_response(r);
    backoff_then(r, NEXT_LIST, 0);
    return;
  }
  reset_response(r);
  if (res->error) {
    set_error(r, "list: %s", st->message[0] ? st->message : strerror(-res->error));
    backoff_then(r, NEXT_LIST, 0);
    return;
  }
  char what[700];
  describe_status(st, what, sizeof what);
  if (kc_api_is_gone(st) && was_continue) {
    /* client-go pager: an expired continue token -> one full list without limit. */
    kc_info("reflector", "%s: continue token expired, listing again without pages", r->describe);
    r->force_no_limit = true;
    start_list(r, r->list_mode);
    return;
  }
  if (shard_selector_refused(r, st)) {
    start_list(r, r->list_mode); /* the same list, now without the selector */
    return;
  }
  set_error(r, "list: %s", what);
  if ((kc_api_is_gone(st) || kc_api_is_too_large_rv(st)) && r->list_mode == LIST_AT_RV) {
    /* At once, as client-go does, with the same page size as the failed
     * list (its pager is reused). */
    r->rv_unavailable = true;
    r->force_limit = r->last_list_limit ? 1 : -1;
    start_list(r, LIST_CONSISTENT);
    return;
  }
  backoff_then(r, NEXT_LIST, retry_after_ms(st));
}

/* Starts GET o->path (`what`: the log's name of the request); one that
 * cannot start is an error, then a wait before `next`. */
static void send_get(kc_reflector *r, const char *what, kc_api_request_opts *o, int next) {
  o->method = "GET";
  o->ud = r;
  kc_debug("reflector", "%s: %s: GET %s", r->describe, what, o->path);
  int rc = kc_api_request(r->api, o, &r->req);
  if (rc == 0) return;
  r->req = NULL;
  r->initial_phase = false;
  set_error(r, "%s: cannot start request: %s", what, strerror(-rc));
  backoff_then(r, next, 0);
}

static void list_request_opts(kc_reflector *r, const char *url, kc_api_request_opts *o) {
  *o = (kc_api_request_opts){
      .method = "GET",
      .ud = r,
      .path = url,
      .accept = r->transform.metadata_only ? "application/json;as=PartialObjectMetadataList;"
                                             "g=meta.k8s.io;v=v1,application/json;q=0.9"
                                           : "application/json",
      .timeout_ms = 0, /* large lists stream for a while; the idle timer guards them */
      .idle_timeout_ms = 60000,
      .on_response = on_list_response,
      .on_data = on_body_data,
      .on_done = on_list_done,
  };
}

static void start_list(kc_reflector *r, enum list_mode mode) {
  if (r->phase == PHASE_CLOSED) return;
  /* until deliver_list: retries after a failed attempt are still this list */
  kc_mem_list_begin(&r->listing);
  /* A streaming list tells nothing of shardSelector support: LIST until known. */
  bool shard_probe = r->shard_selector && r->shard_support == KC_SHARD_SUPPORT_UNKNOWN;
  if (r->streaming != KC_REFLECTOR_STREAM_OFF && !r->page_continue && !shard_probe) {
    start_stream(r, mode);
    return;
  }
  r->phase = PHASE_LIST;
  r->list_mode = mode;
  const char *rv = mode == LIST_INITIAL ? "0" : mode == LIST_AT_RV ? r->rv : "";
  /* client-go: page size 500 unless the list is at a specific RV and no
   * earlier list came back paginated (then no limit, so that the watch
   * cache can serve it); a retry at "" keeps the failed list's size. */
  bool limit;
  if (r->no_limit || (r->force_no_limit && !r->page_continue))
    limit = false;
  else if (r->force_limit)
    limit = r->force_limit > 0;
  else if (mode == LIST_INITIAL || mode == LIST_CONSISTENT)
    limit = true;
  else
    limit = r->paginated_before;
  r->force_no_limit = false;
  r->force_limit = 0;
  if (!r->page_continue) r->last_list_limit = limit;
  if (!r->page_continue) {
    snprintf(r->list_rv, sizeof r->list_rv, "%s", rv);
    begin_list(r);
  }
  char url[4096];
  if (kc_reflector_url(r, false, r->list_rv, r->page_continue ? r->continue_token : NULL,
                       limit || r->page_continue, 0, url, sizeof url) < 0) {
    set_error(r, "list: URL too long");
    backoff_then(r, NEXT_LIST, 0);
    return;
  }
  kc_api_request_opts o;
  list_request_opts(r, url, &o);
  r->stats.lists++;
  r->shard_sent = sends_shard_selector(r);
  send_get(r, "list", &o, NEXT_LIST);
}

/* --- WATCH ---------------------------------------------------------------- */

/* Streaming list: the initial events are collected like list items; the
 * bookmark that ends them completes the "list" on the same stream. */
static int initial_event(kc_reflector *r, const kc_watch_event *ev) {
  r->watch_events++;
  switch (ev->type) {
  case KC_WATCH_ADDED:
  case KC_WATCH_MODIFIED:
    if (ev->obj && kc_obj_name(ev->obj).len) return list_item(r, ev->obj);
    return 0;
  case KC_WATCH_BOOKMARK:
    if (!ev->initial_events_end) return 0;
    uv_timer_stop(&r->timer); /* the initial-events guard */
    r->initial_phase = false;
    r->stats.streaming_lists++;
    r->stats.watches++; /* the stream goes on as this scope's watch */
    char rv[64];
    snprintf(rv, sizeof rv, "%.*s", (int)kc_obj_resource_version(ev->obj).len,
             kc_obj_resource_version(ev->obj).ptr ? kc_obj_resource_version(ev->obj).ptr : "");
    deliver_list(r, rv, "streamed");
    return 0;
  case KC_WATCH_DELETED: /* not expected before the end bookmark; the list replaces all */
  case KC_WATCH_UNKNOWN:
    return 0;
  case KC_WATCH_ERROR:
    r->watch_error_event = true;
    if (ev->status) r->watch_status = *ev->status;
    return -ECANCELED;
  }
  return 0;
}

static int watch_event(void *ud, const kc_watch_event *ev) {
  kc_reflector *r = ud;
  if (r->initial_phase) return initial_event(r, ev);
  switch (ev->type) {
  case KC_WATCH_ADDED:
  case KC_WATCH_MODIFIED:
  case KC_WATCH_DELETED:
    if (!ev->obj || !kc_obj_name(ev->obj).len) {
      kc_warn("reflector", "%s: %s event %llu without metadata.name ignored", r->describe,
              ev->type_name, (unsigned long long)ev->index);
      return 0;
    }
    if (ev->type == KC_WATCH_DELETED) {
      kc_history_drop(&r->history, ev->obj);
      r->sink.remove(r->sink.ud, r, ev->obj);
    } else {
      kc_history_note(&r->history, ev->obj, &r->rng);
      r->sink.upsert(r->sink.ud, r, ev->obj);
    }
    r->stats.events++;
    r->watch_events++;
    backoff_reset(r); /* the LIST+WATCH cycle works again */
    r->backoff_after_watch = false;
    break;
  case KC_WATCH_BOOKMARK:
    r->stats.bookmarks++;
    r->watch_events++;
    backoff_reset(r);
    r->backoff_after_watch = false;
    break;
  case KC_WATCH_ERROR:
    r->watch_error_event = true;
    if (ev->status) r->watch_status = *ev->status;
    return -ECANCELED; /* the server ends the stream after ERROR anyway */
  case KC_WATCH_UNKNOWN:
    kc_warn("reflector", "%s: unknown watch event type \"%s\" (event %llu) ignored", r->describe,
            ev->type_name, (unsigned long long)ev->index);
    return 0;
  }
  if (ev->obj)
    set_rv(r, kc_obj_resource_version(ev->obj).ptr, kc_obj_resource_version(ev->obj).len);
  return 0;
}

static int on_watch_response(kc_api_call *call, long status, void *ud) {
  return start_stream_decode(ud, KC_DECODE_WATCH);
}

/* What a list started after a failure of the current cycle is. */
static enum list_mode mode_after_failure(const kc_reflector *r) {
  if (!r->synced || !r->rv[0]) return LIST_INITIAL;
  return r->rv_unavailable ? LIST_CONSISTENT : LIST_AT_RV;
}

/* A streaming list that ended before its end bookmark. */
static void on_stream_failed(kc_reflector *r, const kc_api_result *res) {
  const kc_status *st = &res->status;
  uv_timer_stop(&r->timer);
  r->initial_phase = false;
  clear_pending(r);
  bool expired = r->watch_error_event
                     ? (r->watch_status.code == 410 || strcmp(r->watch_status.reason, "Expired") == 0 ||
                        strcmp(r->watch_status.reason, "Gone") == 0)
                     : (!res->error && (kc_api_is_gone(st) || kc_api_is_too_large_rv(st)));
  bool decode_failed = r->stream && r->decode_rc;
  char what[700];
  if (r->watch_error_event)
    snprintf(what, sizeof what, "ERROR event code=%d reason=%s: %.500s", r->watch_status.code,
             r->watch_status.reason, r->watch_status.message);
  else if (decode_failed)
    snprintf(what, sizeof what, "malformed stream: %s", kc_dstream_error(r->stream));
  else if (res->error)
    snprintf(what, sizeof what, "%s", st->message[0] ? st->message : strerror(-res->error));
  else if (!is_2xx(st))
    describe_status(st, what, sizeof what);
  else
    snprintf(what, sizeof what, "stream ended before the initial-events-end bookmark");
  reset_response(r);
  if (expired) {
    /* client-go: expired or too-large RV -> retry at "" (consistent read). */
    kc_info("reflector", "%s: streaming list %s, retrying at resourceVersion \"\"", r->describe, what);
    r->rv_unavailable = true;
    backoff_then(r, NEXT_LIST, 0);
    return;
  }
  if (!res->error && !r->watch_error_event && shard_selector_refused(r, st)) {
    start_list(r, mode_after_failure(r)); /* the streaming list again, without the selector */
    return;
  }
  bool retriable = res->error || (!is_2xx(st) && (kc_api_is_too_many_requests(st) || kc_api_is_retryable(st)));
  if (retriable || decode_failed || r->streaming == KC_REFLECTOR_STREAM_ON) {
    set_error(r, "streaming list: %s", what);
    backoff_then(r, NEXT_LIST, retry_after_ms(st));
    return;
  }
  /* Any other answer (422 from a server without WatchList, a server that
   * ignores sendInitialEvents): LIST+WATCH from now on. */
  stream_fallback(r, what);
}

static void on_watch_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  response_done(ud, res, false);
}

static void watch_finished(kc_reflector *r, const kc_api_result *res) {
  uint64_t lasted = now_ms(r) - r->watch_started_ms;
  const kc_status *st = &res->status;
  if (r->initial_phase) {
    on_stream_failed(r, res);
    return;
  }

  if (r->watch_error_event) {
    kc_status *ws = &r->watch_status;
    reset_response(r);
    if (ws->code == 410 || strcmp(ws->reason, "Expired") == 0 || strcmp(ws->reason, "Gone") == 0) {
      kc_info("reflector", "%s: watch expired (%s), relisting", r->describe, ws->message);
      backoff_then(r, NEXT_LIST, 0);
    } else {
      set_error(r, "watch: ERROR event code=%d reason=%s: %s", ws->code, ws->reason, ws->message);
      backoff_then(r, NEXT_LIST,
                   (uint64_t)(ws->retry_after_seconds > 0 ? ws->retry_after_seconds : 0) * 1000);
    }
    return;
  }
  if (r->stream && r->decode_rc) {
    /* Events may have been lost in the broken part: only a relist is safe. */
    set_error(r, "watch: malformed stream after %llu events: %s",
              (unsigned long long)r->watch_events, kc_dstream_error(r->stream));
    reset_response(r);
    backoff_then(r, NEXT_LIST, 0);
    return;
  }
  reset_response(r);
  if (res->error && res->idle_timeout) {
    kc_warn("reflector", "%s: watch silent for %llu ms, restarting it from resourceVersion %s",
            r->describe, (unsigned long long)r->idle_timeout_ms, r->rv);
    start_watch(r);
    return;
  }
  if (res->error) {
    set_error(r, "watch: %s", st->message[0] ? st->message : strerror(-res->error));
    /* Connection-level failure: resume from the same RV once the server is
     * back, if it is still the same history (start_verify). */
    r->verify_history = true;
    backoff_then(r, NEXT_WATCH, 0);
    return;
  }
  if (is_2xx(st)) {
    if (lasted >= 1000 || r->watch_events > 0) {
      start_watch(r); /* routine end (timeoutSeconds): resume, no relist */
    } else {
      set_error(r, "watch: very short watch (%llu ms, no events)", (unsigned long long)lasted);
      backoff_then(r, NEXT_LIST, 0);
    }
    return;
  }
  if (shard_selector_refused(r, st)) {
    /* The cache holds only the selected ranges: everything must be listed. */
    start_list(r, mode_after_failure(r));
    return;
  }
  char what[700];
  describe_status(st, what, sizeof what);
  if (kc_api_is_gone(st)) {
    kc_info("reflector", "%s: watch %s, relisting", r->describe, what);
    backoff_then(r, NEXT_LIST, 0);
    return;
  }
  set_error(r, "watch: %s", what);
  backoff_then(r, kc_api_is_too_many_requests(st) ? NEXT_WATCH : NEXT_LIST, retry_after_ms(st));
}

static void start_watch_request(kc_reflector *r, bool stream, const char *rv);

static void start_watch(kc_reflector *r) { start_watch_request(r, false, r->rv); }

static void on_initial_guard(uv_timer_t *t) {
  kc_reflector *r = t->data;
  if (!r->initial_phase || r->phase != PHASE_WATCH) return;
  char why[128];
  snprintf(why, sizeof why, "no initial-events-end bookmark after %llu ms (%zu objects so far)",
           (unsigned long long)r->initial_timeout_ms, r->npending);
  if (r->streaming == KC_REFLECTOR_STREAM_ON) {
    kc_warn("reflector", "%s: streaming list: %s; still waiting", r->describe, why);
    return;
  }
  kc_api_cancel(r->req);
  r->req = NULL;
  r->initial_phase = false;
  clear_pending(r);
  reset_response(r);
  stream_fallback(r, why);
}

static void stream_fallback(kc_reflector *r, const char *why) {
  kc_info("reflector", "%s: streaming list unavailable (%s); using LIST+WATCH", r->describe, why);
  r->streaming = KC_REFLECTOR_STREAM_OFF;
  r->stats.streaming_fallbacks++;
  start_list(r, r->synced && r->rv[0]
                    ? (r->rv_unavailable ? LIST_CONSISTENT : LIST_AT_RV)
                    : LIST_INITIAL);
}

static void start_stream(kc_reflector *r, enum list_mode mode) {
  begin_list(r);
  /* Neither a LIST nor a WATCH until the server has accepted it (the end
   * bookmark): a refused attempt counts only here. */
  r->stats.streaming_attempts++;
  r->initial_phase = true;
  start_watch_request(r, true, mode == LIST_AT_RV ? r->rv : "");
  if (r->initial_phase && r->phase == PHASE_WATCH)
    uv_timer_start(&r->timer, on_initial_guard, r->initial_timeout_ms, r->initial_timeout_ms);
}

static void start_watch_request(kc_reflector *r, bool stream, const char *rv) {
  if (r->phase == PHASE_CLOSED) return;
  r->phase = PHASE_WATCH;
  r->watch_error_event = false;
  memset(&r->watch_status, 0, sizeof r->watch_status);
  r->watch_events = 0;
  r->watch_started_ms = now_ms(r);
  /* Random in [t, 2t) (client-go: t = 300 s), so watches of many replicas
   * spread out. */
  uint32_t timeout_s = r->watch_timeout_s + (uint32_t)(next_rand(r) % r->watch_timeout_s);
  char url[4096];
  if (build_url(r, true, stream, rv, NULL, false, timeout_s, url, sizeof url) < 0) {
    set_error(r, "watch: URL too long");
    r->initial_phase = false;
    backoff_then(r, NEXT_LIST, 0);
    return;
  }
  kc_api_request_opts o = {
      .path = url,
      .accept = r->transform.metadata_only ? "application/json;as=PartialObjectMetadata;"
                                             "g=meta.k8s.io;v=v1,application/json;q=0.9"
                                           : "application/json",
      .idle_timeout_ms = r->idle_timeout_ms == KC_REFLECTOR_NO_IDLE_TIMEOUT ? 0 : r->idle_timeout_ms,
      .on_response = on_watch_response,
      .on_data = on_body_data,
      .on_done = on_watch_done,
  };
  if (!stream) r->stats.watches++;
  r->shard_sent = sends_shard_selector(r);
  send_get(r, "watch", &o, stream ? NEXT_LIST : NEXT_WATCH);
}

/* --- history check (history.h) -------------------------------------------- */

static void history_changed(kc_reflector *r, const char *why) {
  r->stats.history_changes++;
  kc_warn("reflector",
          "%s: the API server's history is not the one the cache was built from (%s); relisting "
          "instead of resuming the watch at resourceVersion %s",
          r->describe, why, r->rv);
  r->verify_history = false;
  r->rv_unavailable = true; /* an RV of another history means nothing: list at "" */
  start_list(r, LIST_CONSISTENT);
}

static int on_verify_data(kc_api_call *call, const char *buf, size_t len, void *ud) {
  kc_reflector *r = ud;
  kc_buf_add(&r->verify_body, buf, len);
  return r->verify_body.err ? KC_HTTP_ABORT : KC_HTTP_CONTINUE;
}

static void verify_witness(kc_reflector *r);

static void on_verify_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  kc_reflector *r = ud;
  r->req = NULL;
  const kc_status *st = &res->status;
  kc_buf *body = &r->verify_body; /* freed before anything else starts */
  const kc_history_witness *w = &r->history.witness[r->history.next];
  char why[1400];
  if (res->error) {
    /* Still cut off: check again after the next wait. */
    kc_buf_free(body);
    set_error(r, "history check: %s", st->message[0] ? st->message : strerror(-res->error));
    backoff_then(r, NEXT_WATCH, 0);
    return;
  }
  if (!is_2xx(st)) {
    kc_buf_free(body);
    char what[700];
    describe_status(st, what, sizeof what);
    if (kc_api_is_retryable(st)) { /* 429, 5xx: the server is busy, not different */
      set_error(r, "history check: %s", what);
      backoff_then(r, NEXT_WATCH, retry_after_ms(st));
      return;
    }
    /* 404: an object we know is gone, and no DELETED told us. Any other
     * answer (403 without get permission, ...): unknown. Both relist, the
     * safe choice after a connection failure. */
    snprintf(why, sizeof why, "GET of %s%s%s (resourceVersion %s): %s", w->ns, w->ns[0] ? "/" : "",
             w->name, w->rv, what);
    history_changed(r, why);
    return;
  }
  bool same = kc_history_judge(&r->history, body->p, body->len, why, sizeof why);
  kc_buf_free(body);
  if (same) {
    kc_debug("reflector", "%s: history check: %s%s%s uid %s still there", r->describe, w->ns,
             w->ns[0] ? "/" : "", w->name, w->uid);
    kc_history_passed(&r->history);
    verify_witness(r);
    return;
  }
  history_changed(r, why);
}

/* Reads the next witness on; all passed: resume. */
static void verify_witness(kc_reflector *r) {
  const kc_history_witness *w = kc_history_next(&r->history);
  if (!w) {
    kc_debug("reflector", "%s: history check passed; resuming the watch", r->describe);
    r->verify_history = false;
    start_watch(r);
    return;
  }
  char url[4096];
  kc_buf u = kc_buf_fixed(url, sizeof url);
  kc_url_resource(&u, r->api_path, r->resource, kc_str_c(w->ns), kc_str_c(w->name), NULL);
  if (u.err) {
    history_changed(r, "history check: URL too long");
    return;
  }
  r->phase = PHASE_VERIFY;
  kc_api_request_opts o = {
      .path = url,
      .accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;q=0.9",
      .timeout_ms = 30000,
      .on_data = on_verify_data,
      .on_done = on_verify_done,
  };
  send_get(r, "history check", &o, NEXT_WATCH);
}

/* After a connection failure: is the server still the history the cache
 * was built from? Metadata-only GETs of the witnesses (see reflector.h). */
static void start_verify(kc_reflector *r) {
  if (r->phase == PHASE_CLOSED) return;
  r->stats.history_checks++;
  if (!kc_history_any(&r->history)) {
    /* Nothing to compare (empty scope, or the witnesses were deleted): a
     * list of what is, at worst, a few objects. */
    r->verify_history = false;
    kc_info("reflector", "%s: reconnected; no cached object to check the server's history with, "
            "relisting", r->describe);
    r->rv_unavailable = true;
    start_list(r, LIST_CONSISTENT);
    return;
  }
  kc_history_begin(&r->history);
  verify_witness(r);
}

/* --- backoff -------------------------------------------------------------- */

static void on_backoff_timer(uv_timer_t *t) {
  kc_reflector *r = t->data;
  if (r->phase != PHASE_BACKOFF) return;
  if (r->after_backoff == NEXT_WATCH && r->synced && r->rv[0])
    r->verify_history ? start_verify(r) : start_watch(r);
  else if (!r->synced || !r->rv[0])
    start_list(r, LIST_INITIAL);
  else
    start_list(r, r->rv_unavailable ? LIST_CONSISTENT : LIST_AT_RV);
}

/* The failure streak is over: the next failure waits the initial delay
 * again. Called when a watch delivered an event or bookmark (the whole
 * LIST+WATCH cycle works) and when a LIST completes after failures of
 * LISTs (not after a failed watch: a server whose lists work but whose
 * watches fail at once must still see growing waits, or it would be
 * relisted at the initial rate forever). */
static void backoff_reset(kc_reflector *r) {
  r->backoff_ms = 0;
}

/* Waits before `next`. A Retry-After (ms, 0 = none) is the delay, bounded
 * by backoff_max_ms, and leaves the exponential step alone: the server said
 * when to come back, so a 429 storm does not grow the wait past its end
 * (client-go's rest client also retries a 429 after exactly Retry-After,
 * without the reflector's backoff). Otherwise the step doubles from
 * backoff_initial_ms to backoff_max_ms, with jitter 1.0 ([d, 2d), as
 * client-go's), and restarts from the initial value after 2 min without
 * failure (client-go's backoff manager) or after backoff_reset. */
static void backoff_then(kc_reflector *r, int next, uint64_t retry_after) {
  if (r->phase == PHASE_CLOSED) return;
  uint64_t now = now_ms(r);
  uint64_t wait;
  if (retry_after > 0) {
    wait = retry_after < r->backoff_max_ms ? retry_after : r->backoff_max_ms;
    r->stats.retry_after_waits++;
  } else {
    if (r->backoff_ms == 0 || now - r->last_backoff_at_ms > 2 * 60 * 1000)
      r->backoff_ms = r->backoff_initial_ms;
    else if (r->backoff_ms < r->backoff_max_ms)
      r->backoff_ms = r->backoff_ms * 2 > r->backoff_max_ms ? r->backoff_max_ms : r->backoff_ms * 2;
    wait = r->backoff_ms + next_rand(r) % (r->backoff_ms ? r->backoff_ms : 1);
  }
  r->last_backoff_at_ms = now;
  r->backoff_after_watch = r->phase == PHASE_WATCH;
  r->stats.last_wait_ms = wait;
  r->phase = PHASE_BACKOFF;
  r->after_backoff = next;
  kc_debug("reflector", "%s: retrying in %llu ms%s", r->describe, (unsigned long long)wait,
           retry_after ? " (Retry-After)" : "");
  uv_timer_start(&r->timer, on_backoff_timer, wait, 0);
}

/* --- lifetime ------------------------------------------------------------- */

int kc_reflector_new(uv_loop_t *loop, kc_api *api,
                     const kc_reflector_spec *spec, const kc_reflector_sink *sink,
                     kc_reflector **out) {
  if (!spec->api_path || !spec->resource || !api || !sink) return -EINVAL;
  kc_reflector *r = calloc(1, sizeof *r);
  if (!r) return -ENOMEM;
  r->loop = loop;
  r->api = api;
  r->sink = *sink;
  r->api_path = strdup(spec->api_path);
  r->resource = strdup(spec->resource);
  r->namespace_ = dup_or_null(spec->namespace_);
  kc_buf_set_max(&r->verify_body, 4u << 20);
  r->label_selector = dup_or_null(spec->label_selector);
  r->field_selector = dup_or_null(spec->field_selector);
  bool oom = !r->api_path || !r->resource || (spec->namespace_ && *spec->namespace_ && !r->namespace_) ||
             (spec->label_selector && *spec->label_selector && !r->label_selector) ||
             (spec->field_selector && *spec->field_selector && !r->field_selector);
  if (spec->transform.ndrop) {
    r->drop_paths = calloc(spec->transform.ndrop, sizeof *r->drop_paths);
    oom |= !r->drop_paths;
    for (size_t i = 0; !oom && i < spec->transform.ndrop; i++) {
      r->drop_paths[i] = strdup(spec->transform.drop[i]);
      oom |= !r->drop_paths[i];
    }
  }
  r->transform.drop = (const char *const *)r->drop_paths;
  r->transform.ndrop = spec->transform.ndrop;
  r->transform.metadata_only = spec->transform.metadata_only;
  r->transform.capture = spec->transform.capture; /* borrowed: see reflector.h */
  r->transform.kind = r->type_kind = dup_or_null(spec->transform.kind);
  r->transform.api_version = r->type_api_version = dup_or_null(spec->transform.api_version);
  oom |= (spec->transform.kind && *spec->transform.kind && !r->type_kind) ||
         (spec->transform.api_version && *spec->transform.api_version && !r->type_api_version);
  r->page_size = spec->page_size ? spec->page_size : 500;
  r->no_limit = spec->no_limit;
  r->watch_timeout_s = spec->watch_timeout_s ? spec->watch_timeout_s : 300;
  r->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)r) | 1;
  r->idle_timeout_ms = spec->idle_timeout_ms ? spec->idle_timeout_ms : 5 * 60 * 1000;
  r->backoff_initial_ms = spec->backoff_initial_ms ? spec->backoff_initial_ms : 800;
  r->backoff_max_ms = spec->backoff_max_ms ? spec->backoff_max_ms : 30000;
  r->streaming = spec->streaming;
  r->pool = spec->decode_pool;
  r->decode_budget = spec->decode_budget;
  r->initial_timeout_ms = spec->initial_events_timeout_ms ? spec->initial_events_timeout_ms : 60000;
  snprintf(r->describe, sizeof r->describe, "%s%s%s%s%s%s%s", r->resource,
           r->namespace_ ? " ns=" : "", r->namespace_ ? r->namespace_ : "",
           r->label_selector ? " labels=" : "", r->label_selector ? r->label_selector : "",
           r->field_selector ? " fields=" : "", r->field_selector ? r->field_selector : "");
  if (oom || uv_timer_init(loop, &r->timer) != 0) {
    r->phase = PHASE_CLOSED;
    for (size_t i = 0; r->drop_paths && i < spec->transform.ndrop; i++) free(r->drop_paths[i]);
    free(r->drop_paths);
    free(r->type_kind), free(r->type_api_version);
    free(r->api_path), free(r->resource), free(r->namespace_);
    free(r->label_selector), free(r->field_selector);
    free(r);
    return -ENOMEM;
  }
  r->timer.data = r;
  *out = r;
  return 0;
}

int kc_reflector_start(kc_reflector *r) {
  if (r->phase != PHASE_IDLE) return -EALREADY;
  start_list(r, LIST_INITIAL);
  return 0;
}

static void free_reflector(uv_handle_t *h) {
  kc_reflector *r = h->data;
  for (size_t i = 0; i < r->transform.ndrop; i++) free(r->drop_paths[i]);
  free(r->drop_paths);
  free(r->type_kind), free(r->type_api_version);
  free(r->pending);
  free(r->api_path), free(r->resource), free(r->namespace_);
  free(r->label_selector), free(r->field_selector);
  free(r->shard_selector);
  free(r);
}

/* Drops whatever request, response, list collection and timer is running. */
static void stop_current(kc_reflector *r) {
  cancel_ahead(r);
  if (r->req) kc_api_cancel(r->req);
  r->req = NULL;
  reset_response(r);
  clear_pending(r);
  kc_buf_free(&r->verify_body);
  uv_timer_stop(&r->timer);
}

void kc_reflector_close(kc_reflector *r) {
  if (!r || r->phase == PHASE_CLOSED) return;
  r->phase = PHASE_CLOSED;
  stop_current(r);
  kc_mem_list_end(&r->listing);
  uv_close((uv_handle_t *)&r->timer, free_reflector);
}

int kc_reflector_relist(kc_reflector *r, const char *why) {
  if (!r || r->phase == PHASE_CLOSED) return -EINVAL;
  if (r->phase == PHASE_IDLE) return -EAGAIN;
  kc_info("reflector", "%s: relisting: %s", r->describe, why);
  stop_current(r);
  r->initial_phase = false;
  r->page_continue = false;
  r->continue_token[0] = 0;
  r->verify_history = false;
  r->rv_unavailable = true;
  start_list(r, LIST_CONSISTENT);
  return 0;
}

int kc_reflector_set_shard_selector(kc_reflector *r, const char *selector) {
  if (!r || r->phase == PHASE_CLOSED) return -EINVAL;
  if (selector && !*selector) selector = NULL;
  if ((!selector && !r->shard_selector) ||
      (selector && r->shard_selector && strcmp(selector, r->shard_selector) == 0))
    return 0;
  char *copy = NULL;
  if (selector && !(copy = strdup(selector))) return -ENOMEM;
  free(r->shard_selector);
  r->shard_selector = copy;
  if (r->phase == PHASE_IDLE || r->shard_support == KC_SHARD_SUPPORT_NONE) return 0;
  kc_info("reflector", "%s: shardSelector %s%.300s%s; relisting", r->describe, copy ? "\"" : "cleared",
          copy ? copy : "", copy ? "\"" : "");
  stop_current(r);
  r->initial_phase = false;
  r->page_continue = false;
  r->continue_token[0] = 0;
  r->verify_history = false;
  start_list(r, mode_after_failure(r));
  return 0;
}

const char *kc_reflector_shard_selector(const kc_reflector *r) { return r->shard_selector; }
enum kc_shard_support kc_reflector_shard_support(const kc_reflector *r) { return r->shard_support; }

const char *kc_shard_support_name(enum kc_shard_support s) {
  switch (s) {
  case KC_SHARD_SUPPORT_SERVER: return "server";
  case KC_SHARD_SUPPORT_NONE: return "none";
  default: return "unknown";
  }
}

const kc_reflector_stats *kc_reflector_stats_get(kc_reflector *r) {
  r->stats.synced = r->synced;
  r->stats.streaming = r->streaming != KC_REFLECTOR_STREAM_OFF;
  r->stats.backoff_ms = r->backoff_ms;
  _Static_assert(sizeof r->stats.resource_version == sizeof r->rv, "same size");
  memcpy(r->stats.resource_version, r->rv, sizeof r->rv);
  return &r->stats;
}
const char *kc_reflector_describe(const kc_reflector *r) { return r->describe; }
