/* SPDX-License-Identifier: Apache-2.0 */
/* reflector: see reflector.h. State machine:
 *
 *   LIST (pages) --complete--> WATCH --clean end / idle--> WATCH (same RV)
 *     ^   |                      |
 *     |   +--error--> BACKOFF ---+--410 / broken stream--> LIST at last RV
 *     +--------------------------+
 *
 * This file owns the reflector's lifetime, its URLs, WATCH and the
 * streaming list, and backoff; LIST is in reflector_list.c, the checks
 * before a resumed watch in reflector_verify.c, the state they share in
 * reflector_int.h. Loop thread.
 */
#include "watch/reflector.h"
#include "watch/reflector_int.h"

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

static void stream_fallback(kc_reflector *r, const char *why);

static char *dup_or_null(const char *s) {
  if (!s || !*s) return NULL;
  return strdup(s);
}

/* The last seen resourceVersion; one that does not fit is ignored. */
void refl_set_rv(kc_reflector *r, const char *rv, size_t len) {
  if (!len || len >= sizeof r->rv) return;
  memcpy(r->rv, rv, len);
  r->rv[len] = 0;
}

/* Ends the current list attempt's collection (success, failure or a new
 * attempt). */
void refl_clear_pending(kc_reflector *r) {
  for (size_t i = 0; i < r->npending; i++) kc_obj_unref(r->pending[i]);
  r->npending = 0;
  if (r->incremental && r->napplied) r->partial_applied = true;
  r->incremental = false;
  r->napplied = 0;
}

/* A new list attempt: is it the first, applied as it arrives? */
void refl_begin_list(kc_reflector *r) {
  refl_clear_pending(r);
  r->incremental = !r->synced && r->sink.synced && !r->partial_applied;
}

void refl_set_error(kc_reflector *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->stats.last_error, sizeof r->stats.last_error, fmt, ap);
  va_end(ap);
  r->stats.errors++;
  kc_warn("reflector", "%s: %s", r->describe, r->stats.last_error);
}

void refl_config_error(kc_reflector *r, const kc_status *st) {
  char full[700], what[sizeof r->config_error];
  refl_describe_status(st, full, sizeof full);
  snprintf(what, sizeof what, "%.*s", (int)sizeof what - 1, full);
  snprintf(r->stats.last_error, sizeof r->stats.last_error, "list: %.*s",
           (int)sizeof r->stats.last_error - 7, what);
  r->stats.errors++;
  if (strcmp(what, r->config_error) != 0) {
    memcpy(r->config_error, what, sizeof what);
    kc_error("reflector",
             "%s: the API server refuses to list this scope (a label or field selector it does not "
             "accept?): %s; fix the informer's selectors in the config; retrying every few "
             "minutes",
             r->describe, what);
  } else {
    kc_debug("reflector", "%s: list still refused: %s", r->describe, what);
  }
  refl_backoff_then(r, NEXT_LIST, 0);
}

void refl_config_error_clear(kc_reflector *r) {
  if (!r->config_error[0]) return;
  kc_info("reflector", "%s: the API server lists this scope now (was: %s)", r->describe,
          r->config_error);
  r->config_error[0] = '\0';
  r->backoff_ms = 0;
}

const char *kc_reflector_config_error(const kc_reflector *r) {
  return r->config_error[0] ? r->config_error : NULL;
}

/* --- URL building -------------------------------------------------------- */

/* Parameters in alphabetical order, as client-go encodes them. `stream`
 * (with watch) asks for a streaming list: sendInitialEvents with
 * resourceVersionMatch=NotOlderThan, at rv ("" = consistent read); `match`
 * (a list at rv) sets resourceVersionMatch. */
static int build_url(const kc_reflector *r, bool watch, bool stream, const char *rv,
                     const char *match, const char *continue_token, bool with_limit,
                     uint32_t timeout_s, char *buf, size_t cap) {
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
  } else if (match && rv && *rv && !(continue_token && *continue_token)) {
    kc_url_param(&u, &sep, "resourceVersionMatch", match);
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
  return build_url(r, watch, false, rv, NULL, continue_token, with_limit, timeout_s, buf, cap);
}

int kc_reflector_list_url(const kc_reflector *r, const char *rv, const char *match,
                          const char *cont, bool with_limit, char *buf, size_t cap) {
  return build_url(r, false, false, rv, match, cont, with_limit, 0, buf, cap);
}

/* --- shared response plumbing -------------------------------------------- */

size_t refl_list_budget(const kc_reflector *r) {
  return r->decode_budget ? r->decode_budget : KC_DSTREAM_DEFAULT_BUDGET;
}

/* Drops the early request for the next page (the page before failed, or
 * the list is abandoned); the current stream gets its whole budget back. */
void refl_cancel_ahead(kc_reflector *r) {
  if (!r->ahead.active) return;
  kc_api_cancel(r->ahead.req);
  kc_dstream_close(r->ahead.stream);
  memset(&r->ahead, 0, sizeof r->ahead);
  if (r->stream) kc_dstream_set_budget(r->stream, refl_list_budget(r));
}

void refl_reset_response(kc_reflector *r) {
  kc_dstream_close(r->stream);
  r->stream = NULL;
  r->http_done = false;
  r->decode_rc = 0;
}

void refl_describe_status(const kc_status *st, char *buf, size_t cap) {
  snprintf(buf, cap, "HTTP %d %s: %s", st->code, st->reason[0] ? st->reason : "(no reason)",
           st->message);
}

bool refl_is_2xx(const kc_status *st) { return st->code >= 200 && st->code < 300; }

uint64_t refl_retry_after_ms(const kc_status *st) {
  return st->retry_after_seconds > 0 ? (uint64_t)st->retry_after_seconds * 1000 : 0;
}

static uint64_t next_rand(kc_reflector *r) { return kc_xorshift64s(&r->rng); }

/* --- shard selector support ---------------------------------------------- */

bool refl_sends_shard_selector(const kc_reflector *r) {
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
void refl_note_list_shard_info(kc_reflector *r, const kc_list_meta *m) {
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
bool refl_shard_selector_refused(kc_reflector *r, const kc_status *st) {
  if (!r->shard_sent || (st->code != 400 && st->code != 422)) return false;
  if (st->code == 422 && strstr(st->message, "sendInitialEvents")) return false;
  char why[600];
  snprintf(why, sizeof why, "HTTP %d %s: %.500s", st->code, st->reason[0] ? st->reason : "(no reason)",
           st->message);
  shard_support_none(r, why);
  return true;
}

/* --- WATCH ---------------------------------------------------------------- */

/* Streaming list: the initial events are collected like list items; the
 * bookmark that ends them completes the "list" on the same stream. */
static int initial_event(kc_reflector *r, const kc_watch_event *ev) {
  r->watch_events++;
  switch (ev->type) {
  case KC_WATCH_ADDED:
  case KC_WATCH_MODIFIED:
    if (ev->obj && kc_obj_name(ev->obj).len) return refl_list_item(r, ev->obj);
    return 0;
  case KC_WATCH_BOOKMARK:
    if (!ev->initial_events_end) return 0;
    kc_timer_stop(&r->timer); /* the initial-events guard */
    r->initial_phase = false;
    r->stats.streaming_lists++;
    r->stats.watches++; /* the stream goes on as this scope's watch */
    char rv[64];
    snprintf(rv, sizeof rv, "%.*s", (int)kc_obj_resource_version(ev->obj).len,
             kc_obj_resource_version(ev->obj).ptr ? kc_obj_resource_version(ev->obj).ptr : "");
    refl_deliver_list(r, rv, "streamed");
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

int refl_watch_event(void *ud, const kc_watch_event *ev) {
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
    refl_backoff_reset(r); /* the LIST+WATCH cycle works again */
    r->backoff_after_watch = false;
    break;
  case KC_WATCH_BOOKMARK:
    r->stats.bookmarks++;
    r->watch_events++;
    refl_backoff_reset(r);
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
  if (ev->obj) {
    refl_set_rv(r, kc_obj_resource_version(ev->obj).ptr, kc_obj_resource_version(ev->obj).len);
    if (r->sink.progress) r->sink.progress(r->sink.ud, r, r->rv, false);
  }
  return 0;
}

static int on_watch_response(kc_api_call *call, long status, void *ud) {
  return refl_start_stream_decode(ud, KC_DECODE_WATCH);
}

/* What a list started after a failure of the current cycle is. */
static enum list_mode mode_after_failure(const kc_reflector *r) {
  if (!r->synced || !r->rv[0]) return LIST_INITIAL;
  return r->rv_unavailable ? LIST_CONSISTENT : LIST_AT_RV;
}

/* A streaming list that ended before its end bookmark. */
static void on_stream_failed(kc_reflector *r, const kc_api_result *res) {
  const kc_status *st = &res->status;
  kc_timer_stop(&r->timer);
  r->initial_phase = false;
  refl_clear_pending(r);
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
  else if (!refl_is_2xx(st))
    refl_describe_status(st, what, sizeof what);
  else
    snprintf(what, sizeof what, "stream ended before the initial-events-end bookmark");
  refl_reset_response(r);
  if (expired) {
    /* client-go: expired or too-large RV -> retry at "" (consistent read). */
    kc_info("reflector", "%s: streaming list %s, retrying at resourceVersion \"\"", r->describe, what);
    r->rv_unavailable = true;
    refl_backoff_then(r, NEXT_LIST, 0);
    return;
  }
  if (!res->error && !r->watch_error_event && refl_shard_selector_refused(r, st)) {
    refl_start_list(r, mode_after_failure(r)); /* the streaming list again, without the selector */
    return;
  }
  if (!res->error && !r->watch_error_event && st->code == 400 &&
      r->streaming == KC_REFLECTOR_STREAM_ON) {
    refl_config_error(r, st); /* a selector refused, as for a LIST */
    return;
  }
  bool retriable = res->error || (!refl_is_2xx(st) && (kc_api_is_too_many_requests(st) || kc_api_is_retryable(st)));
  /* A rejected credential says nothing of the server's streaming list:
   * the request is tried again as it was once a credential is accepted. */
  bool auth = r->watch_error_event ? r->watch_status.code == 401 || r->watch_status.code == 403
                                   : !res->error && (kc_api_is_unauthorized(st) || kc_api_is_forbidden(st));
  if (auth) r->auth_rejected = true;
  if (retriable || auth || decode_failed || r->streaming == KC_REFLECTOR_STREAM_ON) {
    refl_set_error(r, "streaming list: %s", what);
    refl_backoff_then(r, NEXT_LIST, refl_retry_after_ms(st));
    return;
  }
  /* Any other answer (422 from a server without WatchList, a server that
   * ignores sendInitialEvents): LIST+WATCH from now on. */
  stream_fallback(r, what);
}

static void on_watch_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  refl_response_done(ud, res, false);
}

void refl_watch_finished(kc_reflector *r, const kc_api_result *res) {
  uint64_t lasted = kc_clock_now_ms() - r->watch_started_ms;
  const kc_status *st = &res->status;
  if (r->initial_phase) {
    on_stream_failed(r, res);
    return;
  }

  if (r->watch_error_event) {
    kc_status *ws = &r->watch_status;
    refl_reset_response(r);
    if (ws->code == 410 || strcmp(ws->reason, "Expired") == 0 || strcmp(ws->reason, "Gone") == 0) {
      kc_info("reflector", "%s: watch expired (%s), relisting", r->describe, ws->message);
      refl_backoff_then(r, NEXT_LIST, 0);
    } else {
      refl_set_error(r, "watch: ERROR event code=%d reason=%s: %s", ws->code, ws->reason,
                     ws->message);
      refl_backoff_then(r, NEXT_LIST,
                        (uint64_t)(ws->retry_after_seconds > 0 ? ws->retry_after_seconds : 0) * 1000);
    }
    return;
  }
  if (r->stream && r->decode_rc) {
    /* Events may have been lost in the broken part: only a relist is safe. */
    refl_set_error(r, "watch: malformed stream after %llu events: %s",
                   (unsigned long long)r->watch_events, kc_dstream_error(r->stream));
    refl_reset_response(r);
    refl_backoff_then(r, NEXT_LIST, 0);
    return;
  }
  refl_reset_response(r);
  if (res->error && res->idle_timeout) {
    kc_warn("reflector", "%s: watch silent for %llu ms, restarting it from resourceVersion %s",
            r->describe, (unsigned long long)r->idle_timeout_ms, r->rv);
    refl_resume_watch(r);
    return;
  }
  if (res->error) {
    refl_set_error(r, "watch: %s", st->message[0] ? st->message : strerror(-res->error));
    /* Connection-level failure: resume from the same RV once the server is
     * back, if it is still the same history (reflector_verify.c). */
    r->verify_history = true;
    refl_backoff_then(r, NEXT_WATCH, 0);
    return;
  }
  if (refl_is_2xx(st)) {
    if (lasted >= 1000 || r->watch_events > 0) {
      /* Routine end (timeoutSeconds), or a proxy re-pointed at another
       * server: resume once the cluster identity is checked, no relist. */
      refl_resume_watch(r);
    } else {
      refl_set_error(r, "watch: very short watch (%llu ms, no events)", (unsigned long long)lasted);
      refl_backoff_then(r, NEXT_LIST, 0);
    }
    return;
  }
  if (refl_shard_selector_refused(r, st)) {
    /* The cache holds only the selected ranges: everything must be listed. */
    refl_start_list(r, mode_after_failure(r));
    return;
  }
  char what[700];
  refl_describe_status(st, what, sizeof what);
  if (kc_api_is_gone(st)) {
    kc_info("reflector", "%s: watch %s, relisting", r->describe, what);
    refl_backoff_then(r, NEXT_LIST, 0);
    return;
  }
  refl_set_error(r, "watch: %s", what);
  refl_backoff_then(r, kc_api_is_too_many_requests(st) ? NEXT_WATCH : NEXT_LIST,
                    refl_retry_after_ms(st));
}

static void start_watch_request(kc_reflector *r, bool stream, const char *rv);

void refl_start_watch(kc_reflector *r) { start_watch_request(r, false, r->rv); }

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
  refl_clear_pending(r);
  refl_reset_response(r);
  stream_fallback(r, why);
}

static void stream_fallback(kc_reflector *r, const char *why) {
  kc_info("reflector", "%s: streaming list unavailable (%s); using LIST+WATCH", r->describe, why);
  r->streaming = KC_REFLECTOR_STREAM_OFF;
  r->stats.streaming_fallbacks++;
  refl_start_list(r, r->synced && r->rv[0]
                    ? (r->rv_unavailable ? LIST_CONSISTENT : LIST_AT_RV)
                    : LIST_INITIAL);
}

void refl_start_stream(kc_reflector *r, enum list_mode mode) {
  refl_begin_list(r);
  /* Neither a LIST nor a WATCH until the server has accepted it (the end
   * bookmark): a refused attempt counts only here. */
  r->stats.streaming_attempts++;
  r->initial_phase = true;
  start_watch_request(r, true, mode == LIST_AT_RV ? r->rv : "");
  if (r->initial_phase && r->phase == PHASE_WATCH)
    kc_timer_start(&r->timer, on_initial_guard, r->initial_timeout_ms, r->initial_timeout_ms);
}

static void start_watch_request(kc_reflector *r, bool stream, const char *rv) {
  if (r->phase == PHASE_CLOSED) return;
  r->phase = PHASE_WATCH;
  r->watch_error_event = false;
  memset(&r->watch_status, 0, sizeof r->watch_status);
  r->watch_events = 0;
  r->watch_started_ms = kc_clock_now_ms();
  /* Random in [t, 2t) (client-go: t = 300 s), so watches of many replicas
   * spread out. */
  uint32_t timeout_s = r->watch_timeout_s + (uint32_t)(next_rand(r) % r->watch_timeout_s);
  char url[4096];
  if (build_url(r, true, stream, rv, NULL, NULL, false, timeout_s, url, sizeof url) < 0) {
    refl_set_error(r, "watch: URL too long");
    r->initial_phase = false;
    refl_backoff_then(r, NEXT_LIST, 0);
    return;
  }
  kc_api_request_opts o = {
      .path = url,
      .accept = r->transform.metadata_only ? "application/json;as=PartialObjectMetadata;"
                                             "g=meta.k8s.io;v=v1,application/json;q=0.9"
                                           : "application/json",
      .idle_timeout_ms = r->idle_timeout_ms == KC_REFLECTOR_NO_IDLE_TIMEOUT ? 0 : r->idle_timeout_ms,
      .on_response = on_watch_response,
      .on_data = refl_on_body_data,
      .on_done = on_watch_done,
  };
  if (!stream) r->stats.watches++;
  r->shard_sent = refl_sends_shard_selector(r);
  refl_send_get(r, "watch", &o, stream ? NEXT_LIST : NEXT_WATCH);
}

/* --- backoff -------------------------------------------------------------- */

static void on_backoff_timer(uv_timer_t *t) {
  kc_reflector *r = t->data;
  if (r->phase != PHASE_BACKOFF) return;
  if (r->after_backoff == NEXT_WATCH && r->synced && r->rv[0])
    refl_resume_watch(r);
  else if (!r->synced || !r->rv[0])
    refl_start_list(r, LIST_INITIAL);
  else
    refl_start_list(r, r->rv_unavailable ? LIST_CONSISTENT : LIST_AT_RV);
}

/* The failure streak is over: the next failure waits the initial delay
 * again. Called when a watch delivered an event or bookmark (the whole
 * LIST+WATCH cycle works) and when a LIST completes after failures of
 * LISTs (not after a failed watch: a server whose lists work but whose
 * watches fail at once must still see growing waits, or it would be
 * relisted at the initial rate forever). */
void refl_backoff_reset(kc_reflector *r) {
  r->backoff_ms = 0;
}

/* Waits before `next`. A Retry-After (ms, 0 = none) is the delay, bounded
 * by backoff_max_ms, and leaves the exponential step alone: the server said
 * when to come back, so a 429 storm does not grow the wait past its end
 * (client-go's rest client also retries a 429 after exactly Retry-After,
 * without the reflector's backoff). Otherwise the step doubles from
 * backoff_initial_ms to backoff_max_ms, with jitter 1.0 ([d, 2d), as
 * client-go's), and restarts from the initial value after 2 min without
 * failure (client-go's backoff manager) or after refl_backoff_reset. */
void refl_backoff_then(kc_reflector *r, int next, uint64_t retry_after) {
  if (r->phase == PHASE_CLOSED) return;
  uint64_t now = kc_clock_now_ms();
  uint64_t wait;
  if (r->config_error[0] && next == NEXT_LIST) {
    /* Refused as configured: slow, from the usual cap up to the config
     * cap, whatever the time since the last failure. */
    if (r->backoff_ms < r->backoff_max_ms) r->backoff_ms = r->backoff_max_ms;
    else if (r->backoff_ms < KC_REFLECTOR_CONFIG_RETRY_MAX_MS)
      r->backoff_ms = r->backoff_ms * 2 > KC_REFLECTOR_CONFIG_RETRY_MAX_MS
                          ? KC_REFLECTOR_CONFIG_RETRY_MAX_MS
                          : r->backoff_ms * 2;
    wait = r->backoff_ms + next_rand(r) % (r->backoff_ms / 10 + 1);
  } else if (retry_after > 0) {
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
  kc_timer_start(&r->timer, on_backoff_timer, wait, 0);
}

void kc_reflector_credentials_changed(kc_reflector *r) {
  if (r->phase != PHASE_BACKOFF || !r->auth_rejected) return;
  kc_info("reflector", "%s: a new credential: retrying now instead of after the backoff", r->describe);
  r->auth_rejected = false;
  refl_backoff_reset(r);
  kc_timer_start(&r->timer, on_backoff_timer, 0, 0);
}

/* --- lifetime ------------------------------------------------------------- */

static void free_reflector(uv_handle_t *h);

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
  /* No space before a "name=": log lines start with this, and their fields
   * are the trailing " name=value" pairs (base/log.h). */
  bool scoped = r->namespace_ || r->label_selector || r->field_selector;
  snprintf(r->describe, sizeof r->describe, "%s%s%s%s%s%s%s%s%s", r->resource, scoped ? "[" : "",
           r->namespace_ ? "ns=" : "", r->namespace_ ? r->namespace_ : "",
           r->label_selector ? (r->namespace_ ? ",labels=" : "labels=") : "",
           r->label_selector ? r->label_selector : "",
           r->field_selector ? (r->namespace_ || r->label_selector ? ",fields=" : "fields=") : "",
           r->field_selector ? r->field_selector : "", scoped ? "]" : "");
  if (oom || kc_timer_init(loop, &r->timer) != 0) {
    r->phase = PHASE_CLOSED;
    for (size_t i = 0; r->drop_paths && i < spec->transform.ndrop; i++) free(r->drop_paths[i]);
    free(r->drop_paths);
    free(r->type_kind), free(r->type_api_version);
    free(r->api_path), free(r->resource), free(r->namespace_);
    free(r->label_selector), free(r->field_selector);
    free(r);
    return -ENOMEM;
  }
  r->timer.uv.data = r;
  r->open_handles = 2;
  r->restore.fd = -1;
  if (kc_next_turn_init(loop, &r->turn, r) != 0) {
    r->phase = PHASE_CLOSED;
    r->open_handles = 1; /* the timer's close frees the rest */
    kc_timer_close(&r->timer, free_reflector);
    return -ENOMEM;
  }
  *out = r;
  return 0;
}

int kc_reflector_start(kc_reflector *r) {
  if (r->phase != PHASE_IDLE) return -EALREADY;
  refl_start_list(r, LIST_INITIAL);
  return 0;
}

static void free_reflector(uv_handle_t *h) {
  kc_reflector *r = h->data;
  if (--r->open_handles > 0) return;
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
  refl_cancel_ahead(r);
  if (r->req) kc_api_cancel(r->req);
  r->req = NULL;
  refl_reset_response(r);
  refl_clear_pending(r);
  kc_buf_free(&r->verify_body);
  refl_verify_reset(r);
  kc_clusterid_cancel(r->cluster);
  kc_timer_stop(&r->timer);
  refl_restore_stop(r);
}

void kc_reflector_close(kc_reflector *r) {
  if (!r || r->phase == PHASE_CLOSED) return;
  r->phase = PHASE_CLOSED;
  stop_current(r);
  kc_clusterid_leave(r->cluster); /* the component may close before the loop frees us */
  r->cluster = NULL;
  kc_mem_list_end(&r->listing);
  kc_next_turn_close(&r->turn, free_reflector);
  kc_timer_close(&r->timer, free_reflector);
}

int kc_reflector_set_cluster_identity(kc_reflector *r, kc_clusterid *id) {
  if (r->phase != PHASE_IDLE) return -EALREADY;
  kc_clusterid_leave(r->cluster);
  r->cluster = id ? kc_clusterid_join(id, refl_identity_changed, r) : NULL;
  r->cluster_id = r->cluster ? id : NULL;
  return id && !r->cluster ? -ENOMEM : 0;
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
  refl_start_list(r, LIST_CONSISTENT);
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
  refl_start_list(r, mode_after_failure(r));
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
