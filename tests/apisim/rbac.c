/* SPDX-License-Identifier: Apache-2.0 */
/* rbac: see rbac.h. */
#include "rbac.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store.h"
#include "types.h"

#define RBAC_GROUP "rbac.authorization.k8s.io"

bool sim_rbac_enabled;
/* The token file's users. A changed file is read again into a new table;
 * the old one is kept (a request on another thread may hold one of its
 * users), so tables are never freed: a test rewrites the file a few times. */
static pthread_mutex_t users_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_user *users;
static size_t nusers;
static char *tokens_path;
static struct stat tokens_st;

const struct sim_user sim_admin_user = {
  .name = "kubernetes-admin",
  .groups = (char *[]){"system:masters", "system:authenticated"},
  .ngroups = 2,
};

static void add_group(struct sim_user *u, const char *g, size_t len)
{
  u->groups = sim_xrealloc(u->groups, (u->ngroups + 1) * sizeof *u->groups);
  u->groups[u->ngroups++] = sim_xstrndup(g, len);
}

/* One CSV field: up to the next ',' outside double quotes; quotes removed. */
static char *csv_field(const char **pp)
{
  const char *p = *pp;
  struct sim_buf b = {0};
  bool quoted = false;
  for (; *p && (quoted || *p != ','); p++) {
    if (*p == '"') quoted = !quoted;
    else sim_buf_putc(&b, *p);
  }
  if (*p == ',') p++;
  *pp = p;
  sim_buf_putc(&b, 0);
  return b.p;
}

/* Parses the token file at path into a new table (*out, *nout). */
static int parse_tokens(const char *path, struct sim_user **out, size_t *nout, char **err)
{
  size_t len;
  struct sim_user *tab = NULL;
  size_t ntab = 0;
  char *text = sim_read_file(path, &len);
  *out = NULL;
  *nout = 0;
  if (!text) {
    *err = sim_xasprintf("%s: cannot read the token file", path);
    return -ENOENT;
  }
  int line = 0, rc = 0;
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    line++;
    size_t n = strlen(l);
    while (n && (l[n - 1] == '\r' || l[n - 1] == ' ')) l[--n] = 0;
    if (!n || l[0] == '#') continue;
    const char *p = l;
    char *token = csv_field(&p), *name = csv_field(&p), *uid = csv_field(&p), *groups = csv_field(&p);
    if (!*token || !*name) {
      *err = sim_xasprintf("%s:%d: want token,user,uid[,\"group1,group2\"]", path, line);
      free(token);
      free(name);
      free(uid);
      free(groups);
      rc = -EINVAL;
      break;
    }
    tab = sim_xrealloc(tab, (ntab + 1) * sizeof *tab);
    struct sim_user *u = &tab[ntab++];
    memset(u, 0, sizeof *u);
    u->token = token;
    u->name = name;
    for (const char *g = groups; *g;) {
      size_t gl = strcspn(g, ",");
      if (gl) add_group(u, g, gl);
      g += gl + (g[gl] == ',');
    }
    const char *sa = "system:serviceaccount:";
    if (strncmp(name, sa, strlen(sa)) == 0) {
      const char *ns = name + strlen(sa), *colon = strchr(ns, ':');
      add_group(u, "system:serviceaccounts", strlen("system:serviceaccounts"));
      if (colon) {
        char *g = sim_xasprintf("system:serviceaccounts:%.*s", (int)(colon - ns), ns);
        add_group(u, g, strlen(g));
        free(g);
      }
    }
    add_group(u, "system:authenticated", strlen("system:authenticated"));
    u->uid = uid;
    free(groups);
  }
  free(text);
  /* A table that failed half-way is kept unused (never freed, as above). */
  if (rc == 0) {
    *out = tab;
    *nout = ntab;
  }
  return rc;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

int sim_rbac_load_tokens(const char *path, char **err)
{
  struct stat st;
  if (stat(path, &st) < 0) {
    *err = sim_xasprintf("%s: %s", path, strerror(errno));
    return -errno;
  }
  int rc = parse_tokens(path, &users, &nusers, err);
  if (rc == 0) {
    free(tokens_path);
    tokens_path = sim_xstrdup(path);
    tokens_st = st;
  }
  return rc;
}

const struct sim_user *sim_rbac_user_for_token(const char *token)
{
  pthread_mutex_lock(&users_mu);
  struct stat st;
  /* Re-read when the file changed (another inode after a rename, another
   * size or mtime); a file that does not parse now keeps the last table. */
  if (tokens_path && stat(tokens_path, &st) == 0 && !same_file(&st, &tokens_st)) {
    struct sim_user *t;
    size_t n;
    char *err = NULL;
    if (parse_tokens(tokens_path, &t, &n, &err) == 0) {
      users = t;
      nusers = n;
      sim_debug("token auth file %s read again: %zu users", tokens_path, n);
    } else {
      sim_log("token auth file: %s; keeping the previous users", err ? err : "unreadable");
    }
    free(err);
    tokens_st = st;
  }
  const struct sim_user *found = NULL;
  for (size_t i = 0; i < nusers && !found; i++)
    if (strcmp(users[i].token, token) == 0) found = &users[i];
  pthread_mutex_unlock(&users_mu);
  return found;
}

/* ---- evaluation (sim_mu held) ---- */

struct attrs {
  const struct sim_user *user;
  const char *verb, *group, *resource, *sub, *ns, *name;
  const char *path; /* a non-resource request: resource and the rest unused */
};

/* A nonResourceURLs entry: "*" is every path, a trailing "*" a prefix,
 * anything else the whole path. */
static bool url_matches(const jv *arr, const char *path)
{
  if (!arr || arr->t != J_ARR) return false;
  for (size_t i = 0; i < arr->n; i++) {
    const char *v = jv_str(arr->u.a[i]);
    if (!v || !*v) continue;
    size_t n = strlen(v);
    if (v[n - 1] == '*' ? strncmp(path, v, n - 1) == 0 : strcmp(path, v) == 0) return true;
  }
  return false;
}

static bool list_has(const jv *arr, const char *s)
{
  if (!arr || arr->t != J_ARR) return false;
  for (size_t i = 0; i < arr->n; i++) {
    const char *v = jv_str(arr->u.a[i]);
    if (v && (strcmp(v, "*") == 0 || strcmp(v, s) == 0)) return true;
  }
  return false;
}

static bool resource_matches(const jv *arr, const struct attrs *a)
{
  if (!arr || arr->t != J_ARR) return false;
  for (size_t i = 0; i < arr->n; i++) {
    const char *v = jv_str(arr->u.a[i]);
    if (!v) continue;
    if (strcmp(v, "*") == 0) return true;
    if (!a->sub) {
      if (strcmp(v, a->resource) == 0) return true;
      continue;
    }
    size_t rl = strlen(a->resource);
    if (strncmp(v, a->resource, rl) == 0 && v[rl] == '/' && strcmp(v + rl + 1, a->sub) == 0) return true;
    if (v[0] == '*' && v[1] == '/' && strcmp(v + 2, a->sub) == 0) return true;
  }
  return false;
}

static bool rule_allows(const jv *rule, const struct attrs *a)
{
  if (!list_has(jv_get(rule, "verbs"), a->verb)) return false;
  if (a->path) return url_matches(jv_get(rule, "nonResourceURLs"), a->path);
  if (!list_has(jv_get(rule, "apiGroups"), a->group)) return false;
  if (!resource_matches(jv_get(rule, "resources"), a)) return false;
  const jv *names = jv_get(rule, "resourceNames");
  if (names && names->t == J_ARR && names->n > 0) {
    if (!a->name) return false;
    for (size_t i = 0; i < names->n; i++) {
      const char *v = jv_str(names->u.a[i]);
      if (v && strcmp(v, a->name) == 0) return true;
    }
    return false;
  }
  return true;
}

static bool role_allows(const struct sim_obj *role, const struct attrs *a)
{
  const jv *rules = role ? jv_get(role->dom, "rules") : NULL;
  if (!rules || rules->t != J_ARR) return false;
  for (size_t i = 0; i < rules->n; i++)
    if (rule_allows(rules->u.a[i], a)) return true;
  return false;
}

static bool subject_matches(const jv *subjects, const struct sim_user *u, const char *binding_ns)
{
  if (!subjects || subjects->t != J_ARR) return false;
  for (size_t i = 0; i < subjects->n; i++) {
    const jv *s = subjects->u.a[i];
    const char *kind = jv_gets(s, "kind"), *name = jv_gets(s, "name"), *ns = jv_gets(s, "namespace");
    if (!kind || !name) continue;
    if (strcmp(kind, "User") == 0 && strcmp(name, u->name) == 0) return true;
    if (strcmp(kind, "Group") == 0)
      for (size_t g = 0; g < u->ngroups; g++)
        if (strcmp(u->groups[g], name) == 0) return true;
    if (strcmp(kind, "ServiceAccount") == 0) {
      char *full = sim_xasprintf("system:serviceaccount:%s:%s", ns ? ns : binding_ns, name);
      bool eq = strcmp(full, u->name) == 0;
      free(full);
      if (eq) return true;
    }
  }
  return false;
}

static struct sim_coll *coll_of(const char *plural)
{
  struct sim_rtype *t = sim_type_find_locked(RBAC_GROUP, "v1", plural);
  return t ? t->coll : NULL;
}

/* The role a binding refers to (Role only in the binding's namespace). */
static struct sim_obj *role_of(const jv *binding, const char *ns)
{
  const jv *ref = jv_get(binding, "roleRef");
  const char *kind = ref ? jv_gets(ref, "kind") : NULL, *name = ref ? jv_gets(ref, "name") : NULL;
  if (!kind || !name) return NULL;
  if (strcmp(kind, "ClusterRole") == 0) {
    struct sim_coll *c = coll_of("clusterroles");
    return c ? sim_coll_get_locked(c, name) : NULL;
  }
  if (strcmp(kind, "Role") == 0 && ns) {
    struct sim_coll *c = coll_of("roles");
    char *key = sim_xasprintf("%s/%s", ns, name);
    struct sim_obj *o = c ? sim_coll_get_locked(c, key) : NULL;
    free(key);
    return o;
  }
  return NULL;
}

/* The first binding of kind plural whose role allows a, or NULL. Rules in
 * roles that RoleBindings refer to never grant non-resource paths. */
static struct sim_obj *bindings_allow(const char *plural, const struct attrs *a)
{
  struct sim_coll *c = coll_of(plural);
  if (!c) return NULL;
  bool namespaced = strcmp(plural, "rolebindings") == 0;
  if (namespaced && a->path) return NULL;
  for (struct sim_obj *b = sim_coll_next_locked(c, NULL, false); b;
       b = sim_coll_next_locked(c, b->key, false)) {
    if (namespaced && (!a->ns || strcmp(b->ns, a->ns) != 0)) continue;
    if (!subject_matches(jv_get(b->dom, "subjects"), a->user, b->ns)) continue;
    if (role_allows(role_of(b->dom, namespaced ? b->ns : NULL), a)) return b;
  }
  return NULL;
}

static bool in_group(const struct sim_user *u, const char *g)
{
  for (size_t i = 0; i < u->ngroups; i++)
    if (strcmp(u->groups[i], g) == 0) return true;
  return false;
}

/* The paths of system:discovery and system:public-info-viewer, which the
 * default bindings grant to system:authenticated (GET only). */
static bool default_path(const struct attrs *a)
{
  static const char *const discovery[] = {"/api", "/api/*", "/apis", "/apis/*", "/openapi",
                                          "/openapi/*", "/healthz", "/livez", "/readyz",
                                          "/version", "/version/"};
  if (strcmp(a->verb, "get") != 0 || !in_group(a->user, "system:authenticated")) return false;
  for (size_t i = 0; i < sizeof discovery / sizeof *discovery; i++) {
    size_t n = strlen(discovery[i]);
    if (discovery[i][n - 1] == '*' ? strncmp(a->path, discovery[i], n - 1) == 0
                                   : strcmp(a->path, discovery[i]) == 0)
      return true;
  }
  return false;
}

/* system:basic-user, bound to system:authenticated: asking about oneself. */
static bool default_resource(const struct attrs *a)
{
  if (strcmp(a->verb, "create") != 0 || a->sub || !in_group(a->user, "system:authenticated"))
    return false;
  if (strcmp(a->group, "authorization.k8s.io") == 0)
    return strcmp(a->resource, "selfsubjectaccessreviews") == 0 ||
           strcmp(a->resource, "selfsubjectrulesreviews") == 0;
  return strcmp(a->group, "authentication.k8s.io") == 0 &&
         strcmp(a->resource, "selfsubjectreviews") == 0;
}

/* The decision for a; *why (malloc'd, may be NULL) is the authorizer's
 * reason for an allowed request. */
static bool decide(const struct attrs *a, char **why)
{
  if (why) *why = NULL;
  if (in_group(a->user, "system:masters")) return true;
  if (a->path && default_path(a)) return true;
  if (!a->path && default_resource(a)) return true;
  pthread_mutex_lock(&sim_mu);
  const char *kind = "ClusterRoleBinding";
  struct sim_obj *b = bindings_allow("clusterrolebindings", a);
  if (!b && a->ns) {
    kind = "RoleBinding";
    b = bindings_allow("rolebindings", a);
  }
  if (b && why) {
    const jv *ref = jv_get(b->dom, "roleRef");
    const char *rk = ref ? jv_gets(ref, "kind") : NULL, *rn = ref ? jv_gets(ref, "name") : NULL;
    const char *bn = jv_gets(jv_get(b->dom, "metadata"), "name");
    char *where = b->ns && *b->ns ? sim_xasprintf("%s/", b->ns) : sim_xstrdup("");
    *why = sim_xasprintf("RBAC: allowed by %s \"%s%s\" of %s \"%s\" to User \"%s\"", kind,
                         where, bn ? bn : "", rk ? rk : "", rn ? rn : "", a->user->name);
    free(where);
  }
  pthread_mutex_unlock(&sim_mu);
  return b != NULL;
}

bool sim_rbac_decide(const struct sim_user *u, const struct sim_access *acc, char **why)
{
  if (why) *why = NULL;
  if (!sim_rbac_enabled) return true;
  struct attrs a = {u,         acc->verb, acc->group ? acc->group : "", acc->resource,
                    acc->sub,  acc->ns,   acc->name,                     acc->path};
  if (!a.path && !a.resource) return false;
  if (!a.ns && a.name && a.resource && strcmp(a.resource, "namespaces") == 0) a.ns = a.name;
  return decide(&a, why);
}

static const char *verb_of(struct sim_req *req, const char *name)
{
  const char *m = req->method;
  if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
    const char *w = sim_req_query(req, "watch");
    if (w && strcmp(w, "0") != 0 && strcmp(w, "false") != 0) return "watch";
    return name ? "get" : "list";
  }
  if (strcmp(m, "POST") == 0) return "create";
  if (strcmp(m, "PUT") == 0) return "update";
  if (strcmp(m, "PATCH") == 0) return "patch";
  if (strcmp(m, "DELETE") == 0) return name ? "delete" : "deletecollection";
  return "unknown";
}

bool sim_rbac_allow(struct sim_req *req, const char *group, const char *resource,
                    const char *sub, const char *ns, const char *name, struct sim_resp *resp)
{
  if (!sim_rbac_enabled || !req->user) return true;
  struct attrs a = {req->user, verb_of(req, name), group, resource, sub, ns, name, NULL};
  /* kube's request info: a namespace's own path is in that namespace. */
  if (!a.ns && name && strcmp(resource, "namespaces") == 0) a.ns = name;
  if (decide(&a, NULL)) return true;
  char *full = sub ? sim_xasprintf("%s/%s", resource, sub) : sim_xstrdup(resource);
  char *qualified = *group ? sim_xasprintf("%s.%s", resource, group) : sim_xstrdup(resource);
  char *scope = a.ns ? sim_xasprintf("in the namespace \"%s\"", a.ns) : sim_xstrdup("at the cluster scope");
  struct sim_details d = {.name = name, .group = group, .kind = resource};
  if (name)
    sim_resp_status(resp, 403, "Forbidden", &d,
                    "%s \"%s\" is forbidden: User \"%s\" cannot %s resource \"%s\" in API group \"%s\" %s",
                    qualified, name, a.user->name, a.verb, full, group, scope);
  else
    sim_resp_status(resp, 403, "Forbidden", &d,
                    "%s is forbidden: User \"%s\" cannot %s resource \"%s\" in API group \"%s\" %s",
                    qualified, a.user->name, a.verb, full, group, scope);
  req->verb = a.verb;
  free(full);
  free(qualified);
  free(scope);
  return false;
}

bool sim_rbac_allow_path(struct sim_req *req, const char *path, struct sim_resp *resp)
{
  if (!sim_rbac_enabled || !req->user) return true;
  bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
  char verb[16];
  size_t i = 0;
  for (const char *m = get ? "get" : req->method; *m && i + 1 < sizeof verb; m++)
    verb[i++] = (char)(*m >= 'A' && *m <= 'Z' ? *m - 'A' + 'a' : *m);
  verb[i] = '\0';
  struct attrs a = {.user = req->user, .verb = verb, .group = "", .path = path};
  if (decide(&a, NULL)) return true;
  struct sim_details d = {0};
  sim_resp_status(resp, 403, "Forbidden", &d, "forbidden: User \"%s\" cannot %s path \"%s\"",
                  req->user->name, verb, path);
  return false;
}
