/* SPDX-License-Identifier: Apache-2.0 */
/* reflector_list: the LIST half of the reflector (reflector.h): paginated
 * lists with the next page requested as soon as the current page's
 * continue token is decoded (pipelined pages), the incremental first list,
 * the fallbacks of an expired continue token or a refused shardSelector,
 * and the delivery of a complete list to the sink. Shares the reflector's
 * state through reflector_int.h. Loop thread.
 */
#include "watch/reflector.h"
#include "watch/reflector_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/memtrim.h"

/* --- LIST ----------------------------------------------------------------- */

int refl_list_item(void *ud, kc_obj *obj) {
  kc_reflector *r = ud;
  if (r->incremental) {
    if (!r->napplied) kc_history_forget(&r->history);
    kc_history_note(&r->history, obj, &r->rng);
    r->sink.upsert(r->sink.ud, r, obj);
    r->napplied++;
    return 0;
  }
  if (KC_ARRAY_ROOM(r->pending, r->cap_pending, r->npending, 1024) < 0) return -ENOMEM;
  r->pending[r->npending++] = kc_obj_ref(obj);
  return 0;
}

/* An object the decoder did not deliver (decode.h "Rejected objects"): one
 * warning naming it, then the stream goes on. */
int refl_reject_object(void *ud, const kc_decode_reject *rj) {
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
    refl_set_rv(r, kc_obj_resource_version(o).ptr, kc_obj_resource_version(o).len);
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

static void list_finished(kc_reflector *r, const kc_api_result *res);
static void list_request_opts(kc_reflector *r, const char *url, kc_api_request_opts *o);

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
    refl_watch_finished(r, &res);
}

/* Pages are pipelined only when a pool thread decodes: an inline stream
 * cannot hold a page back. */
static bool pipelining(const kc_reflector *r) { return kc_decode_pool_threads(r->pool) > 0; }

static kc_dstream *new_stream(kc_reflector *r, enum kc_decode_mode mode, size_t budget) {
  kc_dstream_callbacks cbs = {.reject = refl_reject_object, .resume = on_stream_resume,
                              .done = on_stream_done};
  if (mode == KC_DECODE_LIST) {
    cbs.item = refl_list_item;
    if (pipelining(r)) cbs.list_continue = list_continue;
  } else {
    cbs.event = refl_watch_event;
  }
  kc_dstream *s = kc_dstream_new(r->pool, mode, &r->transform, &cbs, r, budget);
  if (s && (mode == KC_DECODE_LIST || r->initial_phase)) kc_dstream_set_bulk(s);
  return s;
}

int refl_start_stream_decode(kc_reflector *r, enum kc_decode_mode mode) {
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
    r->ahead.stream = new_stream(r, KC_DECODE_LIST, refl_list_budget(r) / 2);
    if (!r->ahead.stream) return KC_HTTP_ABORT;
    if (kc_dstream_set_held(r->ahead.stream, true) < 0) return KC_HTTP_ABORT;
    return KC_HTTP_CONTINUE;
  }
  return refl_start_stream_decode(r, KC_DECODE_LIST);
}

/* Body bytes of a list or watch response go to that response's stream. A
 * full stream pauses the transfer until it has drained (on_stream_resume). */
int refl_on_body_data(kc_api_call *call, const char *buf, size_t len, void *ud) {
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
void refl_response_done(kc_reflector *r, const kc_api_result *res, bool list) {
  r->req = NULL;
  r->auth_rejected = !res->error && (res->status.code == 401 || res->status.code == 403);
  r->result = *res;
  r->http_done = true;
  if (r->stream) {
    kc_dstream_finish(r->stream, res->error == 0 && refl_is_2xx(&res->status));
    return;
  }
  if (list)
    list_finished(r, res);
  else
    refl_watch_finished(r, res);
}

/* A complete list (LIST pages or a streaming list's initial events): the
 * pending objects replace the scope's content at resourceVersion rv. */
void refl_deliver_list(kc_reflector *r, const char *rv, const char *how) {
  snprintf(r->rv, sizeof r->rv, "%s", rv);
  if (r->synced) r->stats.relists++;
  r->synced = true; /* already while the sink applies it (kc_informer_synced) */
  size_t n = r->incremental ? r->napplied : r->npending;
  r->verify_history = false; /* a complete list is of the server's current history */
  if (r->incremental) {
    /* The witness was noted as the objects went by (refl_list_item). */
    r->incremental = false; /* complete: nothing stale */
    r->napplied = 0;
    r->sink.synced(r->sink.ud, r);
  } else {
    kc_history_forget(&r->history);
    for (size_t i = 0; i < r->npending; i++) kc_history_note(&r->history, r->pending[i], &r->rng);
    r->sink.replace(r->sink.ud, r, (kc_obj *const *)r->pending, r->npending);
  }
  kc_info("reflector", "%s: %s %zu objects at resourceVersion %s", r->describe, how, n, rv);
  if (r->sink.progress) r->sink.progress(r->sink.ud, r, r->rv, true);
  refl_clear_pending(r);
  r->rv_unavailable = false;
  /* The decode stream's input copies (up to its budget, freed on the loop's
   * heap as the decoder caught up) and, after a relist, the objects the
   * replace dropped, which lie below the new ones: one trim per list. */
  kc_mem_list_end(&r->listing);
  kc_mem_give_back();
}

static void list_complete(kc_reflector *r, const char *rv) {
  refl_deliver_list(r, rv, "listed");
  /* After LIST failures (429 storm, 5xx burst, server down) the list
   * working ends the streak. After a failed watch it does not: a server
   * whose lists work and whose watches fail must not be relisted at the
   * initial rate forever; a watch event resets it then. */
  if (!r->backoff_after_watch) refl_backoff_reset(r);
  refl_start_watch(r);
}

static void on_list_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  kc_reflector *r = ud;
  if (r->ahead.active && call == r->ahead.req) {
    /* The next page ended before the current one: its outcome waits. */
    r->ahead.req = NULL;
    r->ahead.result = *res;
    r->ahead.http_done = true;
    if (r->ahead.stream)
      kc_dstream_finish(r->ahead.stream, res->error == 0 && refl_is_2xx(&res->status));
    return;
  }
  refl_response_done(r, res, true);
}

/* The current page finished well and its continue token is the one the
 * early request carries: that request becomes the current response. Its
 * page counts as a LIST now (one per page, as without pipelining). */
static void refl_promote_ahead(kc_reflector *r) {
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
    kc_dstream_set_budget(r->stream, refl_list_budget(r));
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
  r->ahead.shard_sent = refl_sends_shard_selector(r);
  snprintf(r->ahead.cont, sizeof r->ahead.cont, "%s", cont);
  /* Both pages together within the reflector's budget. */
  kc_dstream_set_budget(r->stream, refl_list_budget(r) / 2);
}

static void list_finished(kc_reflector *r, const kc_api_result *res) {
  const kc_status *st = &res->status;
  if (res->error == 0 && refl_is_2xx(st) && r->stream && !r->decode_rc) {
    refl_config_error_clear(r);
    const kc_list_meta *m = kc_dstream_list_meta(r->stream);
    refl_note_list_shard_info(r, m);
    char rv[64], cont[sizeof r->continue_token];
    snprintf(rv, sizeof rv, "%s", m->resource_version ? m->resource_version : "");
    snprintf(cont, sizeof cont, "%s", m->continue_token ? m->continue_token : "");
    refl_reset_response(r);
    if (cont[0]) {
      /* More pages: same snapshot; the follow-up carries no resourceVersion. */
      r->paginated_before = true;
      r->page_continue = true;
      memcpy(r->continue_token, cont, sizeof cont);
      if (r->ahead.active && strcmp(r->ahead.cont, cont) == 0) {
        refl_promote_ahead(r);
        return;
      }
      refl_cancel_ahead(r);
      refl_start_list(r, r->list_mode);
      return;
    }
    refl_cancel_ahead(r);
    r->page_continue = false;
    list_complete(r, rv);
    return;
  }
  /* This page failed: the next one, if requested early, goes too. */
  refl_cancel_ahead(r);
  bool was_continue = r->page_continue;
  r->page_continue = false;
  r->continue_token[0] = 0;
  refl_clear_pending(r);
  if (r->stream && (r->decode_rc || res->error == 0)) {
    refl_set_error(r, "list: malformed response: %s", kc_dstream_error(r->stream));
    refl_reset_response(r);
    refl_backoff_then(r, NEXT_LIST, 0);
    return;
  }
  refl_reset_response(r);
  if (res->error) {
    refl_set_error(r, "list: %s", st->message[0] ? st->message : strerror(-res->error));
    refl_backoff_then(r, NEXT_LIST, 0);
    return;
  }
  char what[700];
  refl_describe_status(st, what, sizeof what);
  if (kc_api_is_gone(st) && was_continue) {
    /* client-go pager: an expired continue token -> one full list without limit. */
    kc_info("reflector", "%s: continue token expired, listing again without pages", r->describe);
    r->force_no_limit = true;
    refl_start_list(r, r->list_mode);
    return;
  }
  if (refl_shard_selector_refused(r, st)) {
    refl_start_list(r, r->list_mode); /* the same list, now without the selector */
    return;
  }
  if (st->code == 400) {
    refl_config_error(r, st);
    return;
  }
  refl_set_error(r, "list: %s", what);
  if ((kc_api_is_gone(st) || kc_api_is_too_large_rv(st)) && r->list_mode == LIST_AT_RV) {
    /* At once, as client-go does, with the same page size as the failed
     * list (its pager is reused). */
    r->rv_unavailable = true;
    r->force_limit = r->last_list_limit ? 1 : -1;
    refl_start_list(r, LIST_CONSISTENT);
    return;
  }
  refl_backoff_then(r, NEXT_LIST, refl_retry_after_ms(st));
}

/* Starts GET o->path (`what`: the log's name of the request); one that
 * cannot start is an error, then a wait before `next`. */
void refl_send_get(kc_reflector *r, const char *what, kc_api_request_opts *o, int next) {
  o->method = "GET";
  o->ud = r;
  kc_debug("reflector", "%s: %s: GET %s", r->describe, what, o->path);
  int rc = kc_api_request(r->api, o, &r->req);
  if (rc == 0) return;
  r->req = NULL;
  r->initial_phase = false;
  refl_set_error(r, "%s: cannot start request: %s", what, strerror(-rc));
  refl_backoff_then(r, next, 0);
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
      .on_data = refl_on_body_data,
      .on_done = on_list_done,
  };
}

void refl_start_list(kc_reflector *r, enum list_mode mode) {
  if (r->phase == PHASE_CLOSED) return;
  /* until refl_deliver_list: retries after a failed attempt are still this list */
  kc_mem_list_begin(&r->listing);
  /* A streaming list tells nothing of shardSelector support: LIST until known. */
  bool shard_probe = r->shard_selector && r->shard_support == KC_SHARD_SUPPORT_UNKNOWN;
  if (r->streaming != KC_REFLECTOR_STREAM_OFF && !r->page_continue && !shard_probe) {
    refl_start_stream(r, mode);
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
    refl_begin_list(r);
  }
  char url[4096];
  if (kc_reflector_url(r, false, r->list_rv, r->page_continue ? r->continue_token : NULL,
                       limit || r->page_continue, 0, url, sizeof url) < 0) {
    refl_set_error(r, "list: URL too long");
    refl_backoff_then(r, NEXT_LIST, 0);
    return;
  }
  kc_api_request_opts o;
  list_request_opts(r, url, &o);
  r->stats.lists++;
  r->shard_sent = refl_sends_shard_selector(r);
  refl_send_get(r, "list", &o, NEXT_LIST);
}

