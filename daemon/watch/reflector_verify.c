/* SPDX-License-Identifier: Apache-2.0 */
/* reflector_verify: what runs before a reflector resumes a watch at its last
 * resourceVersion (reflector.h "Cluster identity", "History check"): the
 * cluster identity check, then, after a connection failure, the history
 * check: the LIST of the scope's state at that
 * resourceVersion compared with the cache, or the witness GETs for caches
 * too large for it. Shares the reflector's state through reflector_int.h.
 * Loop thread.
 */
#include "watch/reflector.h"
#include "watch/reflector_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "kube/kurl.h"
#include "watch/decodepool.h"
#include "watch/history.h"
#include "watch/metalist.h"

static void start_history_check(kc_reflector *r);

/* The server's history is not the cache's: relist at "" (an RV of another
 * history means nothing). */
static void history_changed(kc_reflector *r, const char *why) {
  r->stats.history_changes++;
  kc_warn("reflector",
          "%s: the API server's history is not the one the cache was built from (%s); relisting "
          "instead of resuming the watch at resourceVersion %s",
          r->describe, why, r->rv);
  r->verify_history = false;
  r->rv_unavailable = true;
  refl_start_list(r, LIST_CONSISTENT);
}

/* Both checks passed (or were not needed): the watch resumes at r->rv. */
static void verified(kc_reflector *r) {
  r->verify_history = false;
  refl_start_watch(r);
}

/* --- cluster identity -------------------------------------------------------- */

static void on_identity(void *ud, enum kc_clusterid_verdict v, const char *why) {
  kc_reflector *r = ud;
  if (r->phase != PHASE_VERIFY) return;
  if (v == KC_CLUSTERID_RETRY || v == KC_CLUSTERID_AUTH) {
    /* A refused credential: a new one ends the wait (kc_reflector_credentials_changed). */
    if (v == KC_CLUSTERID_AUTH) r->auth_rejected = true;
    refl_set_error(r, "cluster identity check: %s", why);
    refl_backoff_then(r, NEXT_WATCH, 0);
    return;
  }
  if (r->verify_history)
    start_history_check(r);
  else
    verified(r);
}

void refl_identity_changed(void *ud, const char *old_uid, const char *new_uid) {
  kc_reflector *r = ud;
  if (r->phase == PHASE_IDLE || r->phase == PHASE_CLOSED) return;
  r->stats.identity_changes++;
  char why[200];
  snprintf(why, sizeof why, "the cluster identity changed (kube-system uid %.64s, was %.64s)",
           new_uid, old_uid);
  kc_reflector_relist(r, why);
}

void refl_resume_watch(kc_reflector *r) {
  if (r->phase == PHASE_CLOSED) return;
  if (!r->cluster) {
    if (r->verify_history)
      start_history_check(r);
    else
      verified(r);
    return;
  }
  r->phase = PHASE_VERIFY;
  r->stats.identity_checks++;
  int rc = kc_clusterid_check(r->cluster, on_identity);
  if (rc < 0) {
    refl_set_error(r, "cluster identity check: cannot start request: %s", strerror(-rc));
    refl_backoff_then(r, NEXT_WATCH, 0);
  }
}

/* --- the LIST comparison -------------------------------------------------------- */

static void fmt_key(char *buf, size_t cap, const kc_obj *o) {
  snprintf(buf, cap, "%.*s%s%.*s", (int)(kc_obj_namespace(o).len > 253 ? 253 : kc_obj_namespace(o).len),
           kc_obj_namespace(o).ptr ? kc_obj_namespace(o).ptr : "", kc_obj_namespace(o).len ? "/" : "",
           (int)(kc_obj_name(o).len > 253 ? 253 : kc_obj_name(o).len),
           kc_obj_name(o).ptr ? kc_obj_name(o).ptr : "");
}

/* One object of the server's state at r->rv: the cache must hold it as is. */
static int verify_item(void *ud, kc_obj *obj) {
  kc_reflector *r = ud;
  if (r->verify.differs) return 0;
  kc_obj *c = r->sink.get(r->sink.ud, r, kc_obj_namespace(obj), kc_obj_name(obj));
  char key[520];
  if (!c || !kc_str_eq(kc_obj_uid(c), kc_obj_uid(obj)) ||
      !kc_str_eq(kc_obj_resource_version(c), kc_obj_resource_version(obj))) {
    fmt_key(key, sizeof key, obj);
    if (!c)
      snprintf(r->verify.why, sizeof r->verify.why,
               "%s (uid %.64s resourceVersion %.64s) is on the server at resourceVersion %s, not in "
               "the cache",
               key, kc_obj_uid(obj).ptr ? kc_obj_uid(obj).ptr : "",
               kc_obj_resource_version(obj).ptr ? kc_obj_resource_version(obj).ptr : "", r->rv);
    else
      snprintf(r->verify.why, sizeof r->verify.why,
               "%s at resourceVersion %s: cache uid %.*s resourceVersion %.*s, server uid %.*s "
               "resourceVersion %.*s",
               key, r->rv, (int)kc_obj_uid(c).len, kc_obj_uid(c).ptr ? kc_obj_uid(c).ptr : "",
               (int)kc_obj_resource_version(c).len,
               kc_obj_resource_version(c).ptr ? kc_obj_resource_version(c).ptr : "",
               (int)kc_obj_uid(obj).len, kc_obj_uid(obj).ptr ? kc_obj_uid(obj).ptr : "",
               (int)kc_obj_resource_version(obj).len,
               kc_obj_resource_version(obj).ptr ? kc_obj_resource_version(obj).ptr : "");
    r->verify.differs = true;
    kc_obj_unref(c);
    return -ECANCELED; /* decided: the rest of the answer is not needed */
  }
  kc_obj_unref(c);
  r->verify.matched++;
  return 0;
}

void refl_verify_reset(kc_reflector *r) { kc_metalist_cancel(&r->verify.list); }

/* A LIST that did not come through: the same history cannot be shown. */
static void verify_list_failed(kc_reflector *r, const kc_metalist_result *res) {
  const kc_status *st = &res->api.status;
  char why[1400];
  bool malformed = res->decoded && res->api.error == 0 && refl_is_2xx(st);
  if (malformed || res->api.error) {
    if (malformed)
      snprintf(why, sizeof why, "history check: malformed answer: %s", res->decode_error);
    else
      snprintf(why, sizeof why, "history check: %s",
               st->message[0] ? st->message : strerror(-res->api.error));
    refl_set_error(r, "%s", why); /* still cut off, or a broken answer: check again */
    refl_backoff_then(r, NEXT_WATCH, 0);
    return;
  }
  char what[700];
  refl_describe_status(st, what, sizeof what);
  if (kc_api_is_retryable(st) && !kc_api_is_too_large_rv(st)) { /* busy, not different */
    refl_set_error(r, "history check: %s", what);
    refl_backoff_then(r, NEXT_WATCH, refl_retry_after_ms(st));
    return;
  }
  if (kc_api_is_gone(st)) {
    /* R is compacted: a watch from R would get 410 as well. */
    kc_info("reflector", "%s: history check: the state at resourceVersion %s is gone (%s); "
            "relisting", r->describe, r->rv, what);
    r->verify_history = false;
    r->rv_unavailable = true;
    refl_start_list(r, LIST_CONSISTENT);
    return;
  }
  /* 504 too large (the server is behind R: another history), 403, 400, ...:
   * not provably the same history. */
  snprintf(why, sizeof why, "LIST at resourceVersion %s: %s", r->rv, what);
  history_changed(r, why);
}

static void verify_listed(void *ud, const kc_metalist_result *res) {
  kc_reflector *r = ud;
  char why[1400];
  if (r->verify.differs) {
    snprintf(why, sizeof why, "%s", r->verify.why);
    history_changed(r, why);
    return;
  }
  switch (res->end) {
  case KC_METALIST_URL_TOO_LONG: history_changed(r, "history check: URL too long"); return;
  case KC_METALIST_CONTINUE_TOO_LONG:
    history_changed(r, "history check: continue token too long");
    return;
  case KC_METALIST_NOT_SENT:
    refl_set_error(r, "history check: cannot start request: %s", strerror(-res->send_rc));
    refl_backoff_then(r, NEXT_WATCH, 0);
    return;
  case KC_METALIST_FAILED: verify_list_failed(r, res); return;
  case KC_METALIST_COMPLETE: break;
  }
  if (r->verify.matched != r->verify.cached) {
    snprintf(why, sizeof why,
             "%zu of the %zu cached objects are not on the server at resourceVersion %s",
             r->verify.cached - r->verify.matched, r->verify.cached, r->rv);
    history_changed(r, why);
    return;
  }
  kc_debug("reflector", "%s: history check: the server's state at resourceVersion %s equals the "
           "cache (%zu objects); resuming the watch", r->describe, r->rv, r->verify.cached);
  verified(r);
}

/* The scope's state at exactly r->rv, page by page, each object checked
 * against the cache (verify_item). */
static void verify_list(kc_reflector *r) {
  r->phase = PHASE_VERIFY;
  kc_metalist_opts o = {
      .api = r->api,
      .pool = r->pool,
      .budget = r->decode_budget,
      .scope = r,
      .rv = r->rv,
      .match = "Exact",
      .with_limit = !r->no_limit,
      .log_tag = "reflector",
      .what = "history check",
      .item = verify_item,
      .done = verify_listed,
      .ud = r,
  };
  kc_metalist_start(&r->verify.list, &o);
}

/* --- witnesses (caches too large for the LIST) ------------------------------------- */

static int on_witness_data(kc_api_call *call, const char *buf, size_t len, void *ud) {
  kc_reflector *r = ud;
  kc_buf_add(&r->verify_body, buf, len);
  return r->verify_body.err ? KC_HTTP_ABORT : KC_HTTP_CONTINUE;
}

static void verify_witness(kc_reflector *r);

static void on_witness_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  kc_reflector *r = ud;
  r->req = NULL;
  const kc_status *st = &res->status;
  kc_buf *body = &r->verify_body; /* freed before anything else starts */
  const kc_history_witness *w = &r->history.witness[r->history.next];
  char why[1400];
  if (res->error) {
    /* Still cut off: check again after the next wait. */
    kc_buf_free(body);
    refl_set_error(r, "history check: %s", st->message[0] ? st->message : strerror(-res->error));
    refl_backoff_then(r, NEXT_WATCH, 0);
    return;
  }
  if (!refl_is_2xx(st)) {
    kc_buf_free(body);
    char what[700];
    refl_describe_status(st, what, sizeof what);
    if (kc_api_is_retryable(st)) { /* 429, 5xx: the server is busy, not different */
      refl_set_error(r, "history check: %s", what);
      refl_backoff_then(r, NEXT_WATCH, refl_retry_after_ms(st));
      return;
    }
    /* 404: an object we know is gone, and no DELETED told us. Any other
     * answer (403 without get permission, ...): unknown. Both relist, the
     * safe choice. */
    snprintf(why, sizeof why, "GET of %s%s%s (resourceVersion %s): %s", w->ns, w->ns[0] ? "/" : "",
             w->name, w->rv, what);
    history_changed(r, why);
    return;
  }
  bool same = kc_history_judge(&r->history, body->p, body->len, r->rv, why, sizeof why);
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
    verified(r);
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
      .on_data = on_witness_data,
      .on_done = on_witness_done,
  };
  refl_send_get(r, "history check", &o, NEXT_WATCH);
}

/* Is the server still the history the cache was built from? The LIST
 * comparison when the cache is small enough and the sink can be read,
 * else the witnesses (see reflector.h). */
static void start_history_check(kc_reflector *r) {
  if (r->phase == PHASE_CLOSED) return;
  r->stats.history_checks++;
  size_t n = r->sink.count && r->sink.get ? r->sink.count(r->sink.ud, r) : SIZE_MAX;
  if (n <= KC_HISTORY_LIST_MAX) {
    r->verify.cached = n;
    r->verify.matched = 0;
    r->verify.differs = false;
    verify_list(r);
    return;
  }
  if (!kc_history_any(&r->history)) {
    /* Nothing to compare (the witnesses were deleted): relist. */
    r->verify_history = false;
    kc_info("reflector", "%s: reconnected; no cached object to check the server's history with, "
            "relisting", r->describe);
    r->rv_unavailable = true;
    refl_start_list(r, LIST_CONSISTENT);
    return;
  }
  kc_history_begin(&r->history);
  verify_witness(r);
}
