/* SPDX-License-Identifier: Apache-2.0 */
/* metricsauth: see metricsauth.h. */
#include "ops/metricsauth.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "json/jsontree.h"

#define TOKENREVIEW_PATH "/apis/authentication.k8s.io/v1/tokenreviews"
#define SAR_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"

struct kc_metricsauth {
  kc_authcache *cache;
  kc_api *api;
  uint64_t timeout_ms;
  kc_metricsauth_review_fn review;
  void *review_ud;
  pthread_mutex_t worker_mu; /* one review at a time on the worker */
  kc_api_worker *worker;
};

/* --- documents ---------------------------------------------------------------- */

/* v's member name when it has type t, else NULL. */
static yajl_val member(yajl_val v, const char *name, yajl_type t) {
  const char *path[] = {name, NULL};
  return v ? yajl_tree_get(v, path, t) : NULL;
}


static void put_string_array(kc_buf *b, yajl_val arr) {
  kc_buf_putc(b, '[');
  size_t k = 0;
  for (size_t i = 0; YAJL_IS_ARRAY(arr) && i < arr->u.array.len; i++) {
    const char *s = YAJL_GET_STRING(arr->u.array.values[i]);
    if (!s) continue;
    if (k++) kc_buf_putc(b, ',');
    kc_buf_json_c(b, s);
  }
  kc_buf_putc(b, ']');
}

int kc_metricsauth_parse_token_review(const char *body, size_t len, kc_buf *user_fields, char *name,
                                      size_t namecap, char *why, size_t whycap) {
  yajl_val root = NULL;
  int rc = kc_jsontree_parse(body, len, &root, NULL, 0);
  if (rc < 0) return rc == -ENOMEM ? rc : -EBADMSG;
  const char *kind = YAJL_GET_STRING(member(root, "kind", yajl_t_string));
  yajl_val st = member(root, "status", yajl_t_object);
  if (!kind || strcmp(kind, "TokenReview") != 0 || !st) {
    yajl_tree_free(root);
    return -EBADMSG;
  }
  if (!YAJL_IS_TRUE(member(st, "authenticated", yajl_t_true))) {
    const char *e = YAJL_GET_STRING(member(st, "error", yajl_t_string));
    snprintf(why, whycap, "%s", e && *e ? e : "token not authenticated");
    yajl_tree_free(root);
    return 0;
  }
  yajl_val user = member(st, "user", yajl_t_object);
  const char *uname = user ? YAJL_GET_STRING(member(user, "username", yajl_t_string)) : NULL;
  if (!uname || !*uname) {
    snprintf(why, whycap, "the TokenReview names no user");
    yajl_tree_free(root);
    return 0;
  }
  snprintf(name, namecap, "%s", uname);
  kc_buf_reset(user_fields);
  kc_buf_puts(user_fields, "\"user\":");
  kc_buf_json_c(user_fields, uname);
  const char *uid = YAJL_GET_STRING(member(user, "uid", yajl_t_string));
  if (uid && *uid) {
    kc_buf_puts(user_fields, ",\"uid\":");
    kc_buf_json_c(user_fields, uid);
  }
  yajl_val groups = member(user, "groups", yajl_t_array);
  if (groups) {
    kc_buf_puts(user_fields, ",\"groups\":");
    put_string_array(user_fields, groups);
  }
  yajl_val extra = member(user, "extra", yajl_t_object);
  if (extra) {
    kc_buf_puts(user_fields, ",\"extra\":{");
    for (size_t i = 0; i < extra->u.object.len; i++) {
      if (i) kc_buf_putc(user_fields, ',');
      kc_buf_json_c(user_fields, extra->u.object.keys[i]);
      kc_buf_putc(user_fields, ':');
      put_string_array(user_fields, extra->u.object.values[i]);
    }
    kc_buf_putc(user_fields, '}');
  }
  yajl_tree_free(root);
  return user_fields->err ? -ENOMEM : 1;
}

void kc_metricsauth_sar_body(kc_buf *out, const char *user_fields, const char *verb, const char *path) {
  kc_buf_puts(out, "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\",\"spec\":{");
  kc_buf_puts(out, user_fields);
  kc_buf_puts(out, ",\"nonResourceAttributes\":{\"path\":");
  kc_buf_json_c(out, path);
  kc_buf_puts(out, ",\"verb\":");
  kc_buf_json_c(out, verb);
  kc_buf_puts(out, "}}}");
}

int kc_metricsauth_parse_sar(const char *body, size_t len, char *why, size_t whycap) {
  yajl_val root = NULL;
  int rc = kc_jsontree_parse(body, len, &root, NULL, 0);
  if (rc < 0) return rc == -ENOMEM ? rc : -EBADMSG;
  const char *kind = YAJL_GET_STRING(member(root, "kind", yajl_t_string));
  yajl_val st = member(root, "status", yajl_t_object);
  if (!kind || strcmp(kind, "SubjectAccessReview") != 0 || !st) {
    yajl_tree_free(root);
    return -EBADMSG;
  }
  bool allowed = YAJL_IS_TRUE(member(st, "allowed", yajl_t_true)) &&
                 !YAJL_IS_TRUE(member(st, "denied", yajl_t_true));
  const char *reason = YAJL_GET_STRING(member(st, "reason", yajl_t_string));
  snprintf(why, whycap, "%s", reason ? reason : "");
  yajl_tree_free(root);
  return allowed ? 1 : 0;
}

/* --- reviews through the API server ------------------------------------------- */

/* POSTs body to path; 0 with *resp (a 201/200 answer), or a negative errno
 * with why filled. Call with worker_mu held. */
static int post(kc_metricsauth *m, const char *path, const kc_buf *body, kc_api_response *resp, char *why,
                size_t cap) {
  int rc = kc_api_do(m->worker, "POST", path, "application/json", body->p, body->len, m->timeout_ms, resp);
  if (rc < 0) {
    snprintf(why, cap, "POST %s: %s", path, strerror(-rc));
    return rc;
  }
  if (resp->code != 200 && resp->code != 201) {
    snprintf(why, cap, "POST %s: %ld %.200s", path, resp->code, resp->status.message);
    return -EIO;
  }
  return 0;
}

static int api_review(kc_metricsauth *m, const char *token, const char *verb, const char *path,
                      kc_authcache_entry *out, char *why, size_t cap) {
  kc_buf body = {0}, user = {0};
  kc_buf_puts(&body, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":");
  kc_buf_json_c(&body, token);
  kc_buf_puts(&body, "}}");
  int rc = -ENOMEM;
  pthread_mutex_lock(&m->worker_mu);
  if (body.err) goto out;
  kc_api_response resp;
  if ((rc = post(m, TOKENREVIEW_PATH, &body, &resp, why, cap)) < 0) goto out;
  char name[128] = "";
  rc = kc_metricsauth_parse_token_review(resp.body, resp.body_len, &user, name, sizeof name, out->reason,
                                         sizeof out->reason);
  if (rc < 0) {
    snprintf(why, cap, "POST %s: %s", TOKENREVIEW_PATH, rc == -ENOMEM ? "out of memory" : "not a TokenReview");
    goto out;
  }
  if (rc == 0) {
    out->status = 401;
    rc = 0;
    goto out;
  }
  kc_buf_reset(&body);
  kc_metricsauth_sar_body(&body, user.p, verb, path);
  rc = -ENOMEM;
  if (body.err) goto out;
  if ((rc = post(m, SAR_PATH, &body, &resp, why, cap)) < 0) goto out;
  char reason[KC_AUTHCACHE_REASON_MAX];
  rc = kc_metricsauth_parse_sar(resp.body, resp.body_len, reason, sizeof reason);
  if (rc < 0) {
    snprintf(why, cap, "POST %s: %s", SAR_PATH, rc == -ENOMEM ? "out of memory" : "not a SubjectAccessReview");
    goto out;
  }
  out->status = rc ? 200 : 403;
  if (rc)
    snprintf(out->reason, sizeof out->reason, "user %.100s", name);
  else /* within the entry's reason, whatever the lengths */
    snprintf(out->reason, sizeof out->reason, "user \"%.48s\" may not %.8s %.40s%s%.40s", name, verb, path,
             reason[0] ? ": " : "", reason);
  rc = 0;
out:
  pthread_mutex_unlock(&m->worker_mu);
  /* The request carried the token: wiped before the memory goes back. */
  if (body.p) memset(body.p, 0, body.len);
  kc_buf_free(&body);
  kc_buf_free(&user);
  return rc;
}

/* --- the check ---------------------------------------------------------------- */

unsigned kc_metricsauth_authorize(void *ud, const char *authorization, const char *method, const char *path,
                                  char *msg, size_t cap) {
  kc_metricsauth *m = ud;
  const char *token = NULL;
  if (authorization && strncasecmp(authorization, "Bearer ", 7) == 0) {
    token = authorization + 7;
    while (*token == ' ') token++;
  }
  if (!token || !*token) {
    snprintf(msg, cap, "Unauthorized: a bearer token is required");
    return 401;
  }
  char verb[16];
  size_t i = 0;
  for (; method[i] && i + 1 < sizeof verb; i++) verb[i] = (char)tolower((unsigned char)method[i]);
  verb[i] = '\0';
  unsigned char key[KC_AUTHCACHE_KEY_LEN];
  kc_authcache_key(token, verb, path, key);
  kc_authcache_entry e = {0};
  if (!kc_authcache_get(m->cache, key, &e)) {
    char why[384] = "";
    int rc = m->review ? m->review(m->review_ud, token, verb, path, &e)
                       : api_review(m, token, verb, path, &e, why, sizeof why);
    if (rc < 0) {
      kc_warn("metricsauth", "cannot review a request for %s: %s", path, why[0] ? why : strerror(-rc));
      snprintf(msg, cap, "authorization failed: the API server did not answer the review");
      return 500;
    }
    kc_authcache_put(m->cache, key, &e);
    if (e.status != 200)
      kc_info("metricsauth", "refused %s %s: %u %s", method, path, e.status, e.reason);
  }
  if (e.status == 200) return 0;
  snprintf(msg, cap, "%s: %s", e.status == 401 ? "Unauthorized" : "Forbidden", e.reason);
  return e.status;
}

int kc_metricsauth_new(kc_api *api, const kc_metricsauth_options *o, kc_metricsauth **out) {
  *out = NULL;
  if (!api && !o->review) return -EINVAL;
  kc_metricsauth *m = calloc(1, sizeof *m);
  if (!m) return -ENOMEM;
  m->api = api;
  m->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
  m->review = o->review;
  m->review_ud = o->review_ud;
  int rc = pthread_mutex_init(&m->worker_mu, NULL);
  if (rc != 0) {
    free(m);
    return -rc;
  }
  if ((rc = kc_authcache_new(&o->cache, &m->cache)) < 0 ||
      (!m->review && (rc = kc_api_worker_new(api, &m->worker)) < 0)) {
    kc_metricsauth_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

void kc_metricsauth_free(kc_metricsauth *m) {
  if (!m) return;
  kc_api_worker_free(m->worker);
  kc_authcache_free(m->cache);
  pthread_mutex_destroy(&m->worker_mu);
  free(m);
}
