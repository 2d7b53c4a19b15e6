/* SPDX-License-Identifier: Apache-2.0 */
/* clusterid: see clusterid.h. */
#include "client/clusterid.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "json/jsontree.h"

struct kc_clusterid_member {
  kc_clusterid *id;
  kc_clusterid_member *prev, *next;
  void (*on_change)(void *ud, const char *old_uid, const char *new_uid);
  void (*done)(void *ud, enum kc_clusterid_verdict v, const char *why);
  void *ud;
  bool pending;   /* a check waits for GET number `need` */
  bool notify;    /* on_change still to be called (a change being told) */
  uint64_t need;
};

struct kc_clusterid {
  uv_timer_t defer; /* starts the GET in the next loop turn; data = this */
  bool defer_armed;
  kc_api *api;
  kc_api_call *req; /* the GET in flight, NULL: none */
  uint64_t started; /* GETs started so far; the one in flight is number `started` */
  kc_buf body;
  kc_clusterid_member *members;
  char uid[64];
  bool told_unknown; /* the "cannot read" warning was logged */
  kc_clusterid_stats stats;
};

static int start_get(kc_clusterid *id);

/* The uid of the answer, or "" (why says what was wrong). */
static void answer_uid(const char *body, size_t len, char *uid, size_t cap, char *why, size_t wcap) {
  uid[0] = 0;
  yajl_val root = NULL;
  char err[128];
  if (kc_jsontree_parse(body ? body : "", len, &root, err, sizeof err) < 0) {
    snprintf(why, wcap, "malformed answer: %s", err);
    return;
  }
  const char *path[] = {"metadata", "uid", NULL};
  yajl_val v = yajl_tree_get(root, path, yajl_t_string);
  const char *s = v ? YAJL_GET_STRING(v) : NULL;
  if (s && *s && strlen(s) < cap)
    snprintf(uid, cap, "%s", s);
  else
    snprintf(why, wcap, "the answer has no usable metadata.uid");
  yajl_tree_free(root);
}

/* Calls done for every member whose check GET number upto answers. */
static void answer_members(kc_clusterid *id, uint64_t upto, enum kc_clusterid_verdict v,
                           const char *why) {
  for (;;) {
    kc_clusterid_member *m = id->members;
    while (m && !(m->pending && m->need <= upto)) m = m->next;
    if (!m) return;
    m->pending = false;
    m->done(m->ud, v, why);
  }
}

static void tell_change(kc_clusterid *id, const char *old_uid, const char *new_uid) {
  for (kc_clusterid_member *m = id->members; m; m = m->next) {
    m->pending = false;
    m->notify = true;
  }
  for (;;) {
    kc_clusterid_member *m = id->members;
    while (m && !m->notify) m = m->next;
    if (!m) return;
    m->notify = false;
    m->on_change(m->ud, old_uid, new_uid);
  }
}

static bool any_pending(const kc_clusterid *id) {
  for (const kc_clusterid_member *m = id->members; m; m = m->next)
    if (m->pending) return true;
  return false;
}

/* The uid a 2xx answer carried ("": none): the verdict, or true when the
 * identity changed (then every member was told through on_change). */
static bool judge_uid(kc_clusterid *id, const char *uid, enum kc_clusterid_verdict *v) {
  *v = KC_CLUSTERID_SAME;
  if (!uid[0]) {
    *v = KC_CLUSTERID_UNKNOWN;
    return false;
  }
  if (!id->uid[0]) {
    snprintf(id->uid, sizeof id->uid, "%s", uid);
    kc_info("clusterid", "cluster identity: namespace kube-system uid %s", uid);
    return false;
  }
  if (strcmp(uid, id->uid) == 0) return false;
  char old[64];
  snprintf(old, sizeof old, "%s", id->uid);
  snprintf(id->uid, sizeof id->uid, "%s", uid);
  id->stats.changes++;
  kc_warn("clusterid",
          "the API server is another cluster now: namespace kube-system uid %s, the caches were "
          "built from uid %s; every informer relists",
          uid, old);
  tell_change(id, old, uid);
  return true;
}

static void on_get_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  kc_clusterid *id = ud;
  id->req = NULL;
  uint64_t seq = id->started;
  const kc_status *st = &res->status;
  enum kc_clusterid_verdict v = KC_CLUSTERID_SAME;
  bool changed = false;
  char why[700] = "";
  if (res->error) {
    v = KC_CLUSTERID_RETRY;
    snprintf(why, sizeof why, "GET %s: %s", KC_CLUSTERID_PATH,
             st->message[0] ? st->message : strerror(-res->error));
  } else if (st->code < 200 || st->code >= 300) {
    snprintf(why, sizeof why, "GET %s: HTTP %d %s: %.500s", KC_CLUSTERID_PATH, st->code,
             st->reason[0] ? st->reason : "(no reason)", st->message);
    /* 401: the credential, not the cluster, is in question: ask again. */
    v = kc_api_is_unauthorized(st) ? KC_CLUSTERID_AUTH
        : kc_api_is_retryable(st)  ? KC_CLUSTERID_RETRY
                                   : KC_CLUSTERID_UNKNOWN;
  } else {
    char uid[64];
    answer_uid(id->body.p, id->body.len, uid, sizeof uid, why, sizeof why);
    kc_buf_free(&id->body); /* before on_change, which may start the next GET */
    changed = judge_uid(id, uid, &v);
  }
  kc_buf_free(&id->body);
  if (changed) {
    if (!id->req && any_pending(id) && start_get(id) < 0)
      answer_members(id, UINT64_MAX, KC_CLUSTERID_RETRY, "cannot start the GET");
    return;
  }
  if (v == KC_CLUSTERID_UNKNOWN && !id->told_unknown) {
    id->told_unknown = true;
    kc_warn("clusterid",
            "cannot read the cluster identity (%s); a different cluster behind the same endpoint "
            "is noticed only by the history check after a broken connection and by the "
            "consistency check (grant get on namespace kube-system, see `kctrld rbac`)",
            why);
  }
  answer_members(id, seq, v, why);
  if (!id->req && any_pending(id) && start_get(id) < 0)
    answer_members(id, UINT64_MAX, KC_CLUSTERID_RETRY, "cannot start the GET");
}

static int on_get_data(kc_api_call *call, const char *buf, size_t len, void *ud) {
  kc_clusterid *id = ud;
  kc_buf_add(&id->body, buf, len);
  return id->body.err ? KC_HTTP_ABORT : KC_HTTP_CONTINUE;
}

static int start_get(kc_clusterid *id) {
  if (id->req) return 0;
  kc_api_request_opts o = {
      .method = "GET",
      .path = KC_CLUSTERID_PATH,
      .accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;q=0.9",
      .timeout_ms = 30000,
      .on_data = on_get_data,
      .on_done = on_get_done,
      .ud = id,
  };
  kc_buf_free(&id->body);
  int rc = kc_api_request(id->api, &o, &id->req);
  if (rc < 0) {
    id->req = NULL;
    return rc;
  }
  id->started++;
  id->stats.gets++;
  kc_debug("clusterid", "GET %s (check %llu)", KC_CLUSTERID_PATH, (unsigned long long)id->started);
  return 0;
}

static void on_defer(uv_timer_t *t) {
  kc_clusterid *id = t->data;
  id->defer_armed = false;
  if (id->req || !any_pending(id)) return;
  if (start_get(id) < 0) answer_members(id, UINT64_MAX, KC_CLUSTERID_RETRY, "cannot start the GET");
}

int kc_clusterid_new(uv_loop_t *loop, kc_api *api, kc_clusterid **out) {
  if (!api || !loop) return -EINVAL;
  kc_clusterid *id = calloc(1, sizeof *id);
  if (!id) return -ENOMEM;
  if (uv_timer_init(loop, &id->defer) != 0) {
    free(id);
    return -ENOMEM;
  }
  id->defer.data = id;
  id->api = api;
  kc_buf_set_max(&id->body, 1u << 20);
  *out = id;
  return 0;
}

static void free_clusterid(uv_handle_t *h) { free(h->data); }

void kc_clusterid_close(kc_clusterid *id) {
  if (!id) return;
  if (id->req) kc_api_cancel(id->req);
  id->req = NULL;
  kc_buf_free(&id->body);
  while (id->members) kc_clusterid_leave(id->members);
  uv_close((uv_handle_t *)&id->defer, free_clusterid);
}

kc_clusterid_member *kc_clusterid_join(kc_clusterid *id,
                                       void (*on_change)(void *ud, const char *old_uid,
                                                         const char *new_uid),
                                       void *ud) {
  kc_clusterid_member *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->id = id;
  m->on_change = on_change;
  m->ud = ud;
  m->next = id->members;
  if (id->members) id->members->prev = m;
  id->members = m;
  /* Learn the identity while the caches are being built from this server. */
  if (!id->uid[0] && !id->told_unknown && !id->req) (void)start_get(id);
  return m;
}

void kc_clusterid_leave(kc_clusterid_member *m) {
  if (!m) return;
  kc_clusterid *id = m->id;
  if (m->prev) m->prev->next = m->next;
  else id->members = m->next;
  if (m->next) m->next->prev = m->prev;
  free(m);
}

int kc_clusterid_check(kc_clusterid_member *m,
                       void (*done)(void *ud, enum kc_clusterid_verdict v, const char *why)) {
  kc_clusterid *id = m->id;
  m->done = done;
  m->need = id->started + 1; /* a GET that starts from now on */
  m->pending = true;
  /* Started in the next loop turn, so that every member asking in this one
   * (a cut that ends every watch at once) shares it. */
  if (!id->req && !id->defer_armed) {
    if (uv_timer_start(&id->defer, on_defer, 0, 0) != 0) {
      m->pending = false;
      return -EIO;
    }
    id->defer_armed = true;
  }
  return 0;
}

void kc_clusterid_cancel(kc_clusterid_member *m) {
  if (m) m->pending = false;
}

void kc_clusterid_stats_get(const kc_clusterid *id, kc_clusterid_stats *out) {
  *out = id->stats;
  snprintf(out->uid, sizeof out->uid, "%s", id->uid);
}
