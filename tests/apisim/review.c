/* SPDX-License-Identifier: Apache-2.0 */
/* review: see review.h. */
#include "review.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "rbac.h"
#include "store.h"
#include "types.h"

#define TOKENREVIEWS "/apis/authentication.k8s.io/v1/tokenreviews"
#define SARS "/apis/authorization.k8s.io/v1/subjectaccessreviews"

static bool has(const jv *arr, const char *s)
{
  for (size_t i = 0; arr && arr->t == J_ARR && i < arr->n; i++) {
    const char *v = jv_str(arr->u.a[i]);
    if (v && (strcmp(v, "*") == 0 || strcmp(v, s) == 0)) return true;
  }
  return false;
}

/* nonResourceURLs: exact, or a prefix ending in '*'. */
static bool url_matches(const jv *arr, const char *path)
{
  for (size_t i = 0; arr && arr->t == J_ARR && i < arr->n; i++) {
    const char *v = jv_str(arr->u.a[i]);
    if (!v) continue;
    size_t n = strlen(v);
    if (n && v[n - 1] == '*' ? strncmp(path, v, n - 1) == 0 : strcmp(path, v) == 0) return true;
  }
  return false;
}

static bool subject_is(const jv *subjects, const char *user, const jv *groups)
{
  for (size_t i = 0; subjects && subjects->t == J_ARR && i < subjects->n; i++) {
    const jv *s = subjects->u.a[i];
    const char *kind = jv_gets(s, "kind"), *name = jv_gets(s, "name"), *ns = jv_gets(s, "namespace");
    if (!kind || !name) continue;
    if (strcmp(kind, "User") == 0 && user && strcmp(name, user) == 0) return true;
    if (strcmp(kind, "Group") == 0 && has(groups, name) && strcmp(name, "*") != 0) return true;
    if (strcmp(kind, "ServiceAccount") == 0 && ns && user) {
      char *full = sim_xasprintf("system:serviceaccount:%s:%s", ns, name);
      bool eq = strcmp(full, user) == 0;
      free(full);
      if (eq) return true;
    }
  }
  return false;
}

/* The ClusterRoleBinding that allows it, or NULL; sim_mu held. */
static const char *nonresource_allowed_locked(const char *user, const jv *groups, const char *path,
                                              const char *verb)
{
  struct sim_rtype *bt = sim_type_find_locked("rbac.authorization.k8s.io", "v1", "clusterrolebindings");
  struct sim_rtype *rt = sim_type_find_locked("rbac.authorization.k8s.io", "v1", "clusterroles");
  if (!bt || !rt) return NULL;
  for (struct sim_obj *b = sim_coll_next_locked(bt->coll, NULL, false); b;
       b = sim_coll_next_locked(bt->coll, b->key, false)) {
    if (!subject_is(jv_get(b->dom, "subjects"), user, groups)) continue;
    const jv *ref = jv_get(b->dom, "roleRef");
    const char *kind = ref ? jv_gets(ref, "kind") : NULL, *name = ref ? jv_gets(ref, "name") : NULL;
    if (!kind || !name || strcmp(kind, "ClusterRole") != 0) continue;
    struct sim_obj *role = sim_coll_get_locked(rt->coll, name);
    const jv *rules = role ? jv_get(role->dom, "rules") : NULL;
    for (size_t i = 0; rules && rules->t == J_ARR && i < rules->n; i++)
      if (has(jv_get(rules->u.a[i], "verbs"), verb) && url_matches(jv_get(rules->u.a[i], "nonResourceURLs"), path))
        return b->name;
  }
  return NULL;
}

static void token_review(jv *doc, jv *status)
{
  const jv *spec = jv_get(doc, "spec");
  const char *token = spec ? jv_gets(spec, "token") : NULL;
  const struct sim_user *u = token && *token ? sim_rbac_user_for_token(token) : NULL;
  if (!u) {
    jv_set(status, "authenticated", jv_bool_new(false));
    jv_set_str(status, "error", token && *token ? "invalid bearer token" : "spec.token is empty");
    return;
  }
  jv_set(status, "authenticated", jv_bool_new(true));
  jv *user = jv_obj_ensure(status, "user");
  jv_set_str(user, "username", u->name);
  jv *groups = jv_new(J_ARR);
  for (size_t i = 0; i < u->ngroups; i++) jv_push(groups, jv_str_new(u->groups[i]));
  jv_set(user, "groups", groups);
}

static void access_review(jv *doc, jv *status)
{
  const jv *spec = jv_get(doc, "spec");
  const jv *nra = spec ? jv_get(spec, "nonResourceAttributes") : NULL;
  const char *user = spec ? jv_gets(spec, "user") : NULL;
  const char *path = nra ? jv_gets(nra, "path") : NULL, *verb = nra ? jv_gets(nra, "verb") : NULL;
  if (!path || !verb) {
    jv_set(status, "allowed", jv_bool_new(false));
    jv_set_str(status, "reason", "kube-apisim evaluates nonResourceAttributes only");
    return;
  }
  pthread_mutex_lock(&sim_mu);
  const char *by = nonresource_allowed_locked(user, spec ? jv_get(spec, "groups") : NULL, path, verb);
  char *reason = by ? sim_xasprintf("RBAC: allowed by ClusterRoleBinding \"%s\"", by) : NULL;
  pthread_mutex_unlock(&sim_mu);
  jv_set(status, "allowed", jv_bool_new(by != NULL));
  if (reason) jv_set_str(status, "reason", reason);
  free(reason);
}

bool sim_review_handle(struct sim_req *req, struct sim_resp *resp)
{
  bool tr = strcmp(req->url, TOKENREVIEWS) == 0, sar = strcmp(req->url, SARS) == 0;
  if (!sim_rbac_enabled || (!tr && !sar)) return false;
  req->verb = "create";
  struct sim_details d = {0};
  if (strcmp(req->method, "POST") != 0) {
    sim_resp_status(resp, 405, "MethodNotAllowed", &d, "the server does not allow this method on the requested resource");
    return true;
  }
  if (!sim_rbac_allow(req, tr ? "authentication.k8s.io" : "authorization.k8s.io",
                      tr ? "tokenreviews" : "subjectaccessreviews", NULL, NULL, NULL, resp))
    return true;
  char err[256];
  jv *doc = req->body ? jv_parse(req->body, req->blen, err, sizeof err) : NULL;
  const char *kind = doc ? jv_gets(doc, "kind") : NULL;
  if (!doc || doc->t != J_OBJ || !kind || strcmp(kind, tr ? "TokenReview" : "SubjectAccessReview") != 0) {
    sim_resp_status(resp, 400, "BadRequest", &d, "the body is not a %s", tr ? "TokenReview" : "SubjectAccessReview");
    jv_free(doc);
    return true;
  }
  jv *status = jv_new(J_OBJ);
  if (tr) token_review(doc, status);
  else access_review(doc, status);
  jv_set(doc, "status", status);
  jv_obj_ensure(doc, "metadata");
  resp->code = 201;
  jv_write(&resp->body, doc);
  jv_free(doc);
  return true;
}
