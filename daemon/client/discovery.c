/* SPDX-License-Identifier: Apache-2.0 */
/* discovery: see discovery.h. */
#include "client/discovery.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "base/buf.h"
#include "json/jsontree.h"
#include "base/log.h"
#include "json/yamltree.h"
#include "kube/kname.h"
#include "kube/kurl.h"

#define COMPONENT "discovery"
#define MAX_BODY (16u << 20)

struct res {
  char *plural;
  char *kind;
  bool namespaced;
};

struct waiter {
  struct waiter *next;
  char kind[64];
  kc_discovery_cb cb;
  void *ud;
};

struct gv {
  struct gv *next;
  char group[254];
  char version[64];
  struct res *res;
  size_t nres, capres;
  bool fetched;
  kc_api_call *call; /* fetch in flight */
  struct waiter *waiters;
  kc_buf body;
  struct kc_discovery *d;
};

struct kc_discovery {
  kc_api *api;
  struct gv *gvs;
};

static int split_api_version(const char *av, char *group, size_t gcap, char *version,
                             size_t vcap) {
  kc_str g, v;
  if (!av || !kc_name_split_api_version(av, strlen(av), &g, &v) || g.len >= gcap || v.len >= vcap)
    return -EINVAL;
  memcpy(group, g.ptr, g.len);
  group[g.len] = '\0';
  memcpy(version, v.ptr, v.len);
  version[v.len] = '\0';
  return 0;
}

static void clear_res(struct gv *g) {
  for (size_t i = 0; i < g->nres; i++) {
    free(g->res[i].plural);
    free(g->res[i].kind);
  }
  g->nres = 0;
}

static int add_res(struct gv *g, const char *plural, const char *kind, bool namespaced) {
  if (KC_ARRAY_ROOM(g->res, g->capres, g->nres, 16) < 0) return -ENOMEM;
  struct res *r = &g->res[g->nres];
  r->plural = strdup(plural);
  r->kind = strdup(kind);
  if (!r->plural || !r->kind) {
    free(r->plural);
    free(r->kind);
    return -ENOMEM;
  }
  r->namespaced = namespaced;
  g->nres++;
  return 0;
}

static struct gv *find_gv(kc_discovery *d, const char *group, const char *version, bool create) {
  for (struct gv *g = d->gvs; g; g = g->next)
    if (strcmp(g->group, group) == 0 && strcmp(g->version, version) == 0) return g;
  if (!create) return NULL;
  struct gv *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  snprintf(g->group, sizeof g->group, "%s", group);
  snprintf(g->version, sizeof g->version, "%s", version);
  g->d = d;
  g->next = d->gvs;
  d->gvs = g;
  return g;
}

static bool find_kind(const struct gv *g, const char *kind, kc_resource_info *out) {
  for (size_t i = 0; i < g->nres; i++) {
    if (strcmp(g->res[i].kind, kind) != 0) continue;
    snprintf(out->group, sizeof out->group, "%s", g->group);
    snprintf(out->version, sizeof out->version, "%s", g->version);
    snprintf(out->plural, sizeof out->plural, "%s", g->res[i].plural);
    snprintf(out->kind, sizeof out->kind, "%s", g->res[i].kind);
    out->namespaced = g->res[i].namespaced;
    return true;
  }
  return false;
}

int kc_discovery_new(kc_api *api, kc_discovery **out) {
  kc_discovery *d = calloc(1, sizeof *d);
  if (!d) return -ENOMEM;
  d->api = api;
  struct gv *g = find_gv(d, "coordination.k8s.io", "v1", true);
  if (!g || add_res(g, "leases", "Lease", true) < 0) {
    kc_discovery_free(d);
    return -ENOMEM;
  }
  *out = d;
  return 0;
}

static void free_waiters(struct waiter *w) {
  while (w) {
    struct waiter *next = w->next;
    free(w);
    w = next;
  }
}

void kc_discovery_free(kc_discovery *d) {
  if (!d) return;
  struct gv *g = d->gvs;
  while (g) {
    struct gv *next = g->next;
    kc_api_cancel(g->call);
    free_waiters(g->waiters);
    clear_res(g);
    free(g->res);
    kc_buf_free(&g->body);
    free(g);
    g = next;
  }
  free(d);
}

int kc_discovery_lookup(kc_discovery *d, const char *api_version, const char *kind,
                        kc_resource_info *out) {
  char group[254], version[64];
  if (split_api_version(api_version, group, sizeof group, version, sizeof version) < 0 || !kind)
    return -EINVAL;
  struct gv *g = find_gv(d, group, version, false);
  return g && find_kind(g, kind, out) ? 0 : -ENOENT;
}

static const char *str_of(yajl_val v) {
  const char *s = YAJL_IS_STRING(v) ? v->u.string : NULL;
  return s ? s : "";
}

int kc_discovery_parse(const char *json, size_t len,
                       void (*cb)(const char *plural, const char *kind, bool namespaced, void *ud),
                       void *ud, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  yajl_val root;
  int rc = kc_jsontree_parse(json, len, &root, err, errlen);
  if (rc < 0) return rc == -EBADMSG ? -EINVAL : rc;
  static const char *kind_path[] = {"kind", NULL};
  static const char *res_path[] = {"resources", NULL};
  yajl_val kind = yajl_tree_get(root, kind_path, yajl_t_string);
  yajl_val res = yajl_tree_get(root, res_path, yajl_t_array);
  bool is_list = kind && strcmp(str_of(kind), "APIResourceList") == 0;
  if (!is_list || !res) {
    yajl_tree_free(root);
    if (err && errlen)
      snprintf(err, errlen, "%s", is_list ? "no resources array" : "not an APIResourceList");
    return -EINVAL;
  }
  static const char *name_path[] = {"name", NULL};
  static const char *k_path[] = {"kind", NULL};
  static const char *ns_path[] = {"namespaced", NULL};
  for (size_t i = 0; i < YAJL_GET_ARRAY(res)->len; i++) {
    yajl_val item = YAJL_GET_ARRAY(res)->values[i];
    const char *name = str_of(yajl_tree_get(item, name_path, yajl_t_string));
    const char *k = str_of(yajl_tree_get(item, k_path, yajl_t_string));
    yajl_val ns = yajl_tree_get(item, ns_path, yajl_t_any);
    if (!*name || !*k || strchr(name, '/')) continue; /* subresources share the kind */
    cb(name, k, ns && YAJL_IS_TRUE(ns), ud);
  }
  yajl_tree_free(root);
  return 0;
}

static int on_data(kc_api_call *call, const char *buf, size_t len, void *ud) {
  struct gv *g = ud;
  if (g->body.len + len > MAX_BODY) return KC_HTTP_ABORT;
  kc_buf_add(&g->body, buf, len);
  if (g->body.err) return KC_HTTP_ABORT;
  return KC_HTTP_CONTINUE;
}

struct parse_ctx {
  struct gv *g;
  int rc;
};

static void collect(const char *plural, const char *kind, bool namespaced, void *ud) {
  struct parse_ctx *p = ud;
  if (p->rc == 0) p->rc = add_res(p->g, plural, kind, namespaced);
}

static void on_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  struct gv *g = ud;
  g->call = NULL;
  int err = 0;
  if (res->error) {
    err = res->error;
  } else if (res->status.code == 404) {
    err = -ENOENT;
    clear_res(g);
    g->fetched = true;
  } else if (res->status.code != 200) {
    err = -EIO;
  } else {
    /* Replace the cache only with a complete, valid list. */
    struct gv fresh = {0};
    struct parse_ctx p = {&fresh, 0};
    char why[160];
    int rc = kc_discovery_parse(g->body.p ? g->body.p : "", g->body.len, collect, &p, why, sizeof why);
    if (rc == 0 && p.rc < 0) snprintf(why, sizeof why, "%s", strerror(-p.rc));
    if (rc == 0) rc = p.rc;
    if (rc == 0) {
      clear_res(g);
      free(g->res);
      g->res = fresh.res;
      g->nres = fresh.nres;
      g->capres = fresh.capres;
      g->fetched = true;
    } else {
      clear_res(&fresh);
      free(fresh.res);
      char path[1024];
      kc_buf pb = kc_buf_fixed(path, sizeof path);
      kc_url_group_version(&pb, kc_str_c(g->group), kc_str_c(g->version));
      kc_error(COMPONENT, "bad APIResourceList from %s: %s", path, why);
      err = rc == -ENOMEM ? -ENOMEM : -EIO;
    }
  }
  kc_buf_free(&g->body);
  /* Detach the waiters first: a callback may resolve again. */
  struct waiter *w = g->waiters;
  g->waiters = NULL;
  while (w) {
    struct waiter *next = w->next;
    kc_resource_info info;
    int e = err;
    if (!e && !find_kind(g, w->kind, &info)) e = -ENOENT;
    w->cb(e, e ? NULL : &info, &res->status, w->ud);
    free(w);
    w = next;
  }
}

int kc_discovery_resolve(kc_discovery *d, const char *api_version, const char *kind,
                         kc_discovery_cb cb, void *ud) {
  char group[254], version[64];
  if (!cb || !kind || strlen(kind) >= 64 ||
      split_api_version(api_version, group, sizeof group, version, sizeof version) < 0)
    return -EINVAL;
  struct gv *g = find_gv(d, group, version, true);
  if (!g) return -ENOMEM;
  struct waiter *w = calloc(1, sizeof *w);
  if (!w) return -ENOMEM;
  snprintf(w->kind, sizeof w->kind, "%s", kind);
  w->cb = cb;
  w->ud = ud;
  if (!g->call) {
    char path[1024];
    kc_buf pb = kc_buf_fixed(path, sizeof path);
    kc_url_group_version(&pb, kc_str_c(group), kc_str_c(version));
    kc_api_request_opts o = {.path = path, .timeout_ms = 30000, .on_data = on_data,
                             .on_done = on_done, .ud = g};
    int rc = kc_api_request(d->api, &o, &g->call);
    if (rc < 0) {
      free(w);
      return rc;
    }
  }
  w->next = g->waiters;
  g->waiters = w;
  return 0;
}

/* --- "did you mean" ------------------------------------------------------------ */

/* The singular of a plural kind written by mistake: "ies" -> "y", "es",
 * "s". Writes into buf; false when kind does not end in s. */
static bool singular_of(const char *kind, size_t which, char *buf, size_t cap) {
  size_t n = strlen(kind);
  if (n < 2 || n >= cap || (kind[n - 1] != 's' && kind[n - 1] != 'S')) return false;
  memcpy(buf, kind, n + 1);
  if (which == 0 && n > 3 && strcasecmp(kind + n - 3, "ies") == 0) {
    strcpy(buf + n - 3, "y");
    return true;
  }
  if (which == 1 && n > 2 && strcasecmp(kind + n - 2, "es") == 0) {
    buf[n - 2] = '\0';
    return true;
  }
  if (which == 2) {
    buf[n - 1] = '\0';
    return true;
  }
  return false;
}

const char *kc_discovery_kind_suggest(const char *kind, const char *const *names, size_t n) {
  if (!kind || !*kind) return NULL;
  for (size_t i = 0; i < n; i++)
    if (strcasecmp(kind, names[i]) == 0) return names[i];
  char one[64];
  for (size_t which = 0; which < 3; which++) {
    if (!singular_of(kind, which, one, sizeof one)) continue;
    for (size_t i = 0; i < n; i++)
      if (strcasecmp(one, names[i]) == 0) return names[i];
  }
  return kc_yaml_closest(kind, names, n);
}

int kc_discovery_suggest(kc_discovery *d, const char *api_version, const char *kind, char *out,
                         size_t cap) {
  char group[254], version[64];
  if (!kind || split_api_version(api_version, group, sizeof group, version, sizeof version) < 0)
    return -EINVAL;
  struct gv *g = find_gv(d, group, version, false);
  if (!g || !g->nres) return -ENOENT;
  const char **names = malloc(g->nres * sizeof *names);
  if (!names) return -ENOMEM;
  for (size_t i = 0; i < g->nres; i++) names[i] = g->res[i].kind;
  const char *best = kc_discovery_kind_suggest(kind, names, g->nres);
  if (best) snprintf(out, cap, "%s", best);
  free(names);
  return best ? 0 : -ENOENT;
}

/* The kinds of the built-in group/versions of a current Kubernetes
 * (kubectl api-resources of v1.30, without subresources). */
static const struct {
  const char *gv;
  const char *kinds[18];
} builtin[] = {
    {"v1", {"Binding", "ComponentStatus", "ConfigMap", "Endpoints", "Event", "LimitRange",
            "Namespace", "Node", "PersistentVolume", "PersistentVolumeClaim", "Pod",
            "PodTemplate", "ReplicationController", "ResourceQuota", "Secret", "Service",
            "ServiceAccount"}},
    {"apps/v1", {"ControllerRevision", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"}},
    {"batch/v1", {"CronJob", "Job"}},
    {"autoscaling/v1", {"HorizontalPodAutoscaler"}},
    {"autoscaling/v2", {"HorizontalPodAutoscaler"}},
    {"policy/v1", {"PodDisruptionBudget"}},
    {"networking.k8s.io/v1", {"Ingress", "IngressClass", "NetworkPolicy"}},
    {"coordination.k8s.io/v1", {"Lease"}},
    {"discovery.k8s.io/v1", {"EndpointSlice"}},
    {"events.k8s.io/v1", {"Event"}},
    {"rbac.authorization.k8s.io/v1", {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}},
    {"storage.k8s.io/v1",
     {"CSIDriver", "CSINode", "CSIStorageCapacity", "StorageClass", "VolumeAttachment"}},
    {"apiextensions.k8s.io/v1", {"CustomResourceDefinition"}},
    {"admissionregistration.k8s.io/v1",
     {"MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration"}},
    {"scheduling.k8s.io/v1", {"PriorityClass"}},
    {"node.k8s.io/v1", {"RuntimeClass"}},
    {"certificates.k8s.io/v1", {"CertificateSigningRequest"}},
    {"flowcontrol.apiserver.k8s.io/v1", {"FlowSchema", "PriorityLevelConfiguration"}},
    {"apiregistration.k8s.io/v1", {"APIService"}},
};

int kc_discovery_builtin_check(const char *api_version, const char *kind, char *msg, size_t cap) {
  if (cap) msg[0] = '\0';
  if (!api_version || !kind) return 0;
  for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
    if (strcmp(builtin[i].gv, api_version) != 0) continue;
    size_t n = 0;
    while (n < sizeof builtin[i].kinds / sizeof builtin[i].kinds[0] && builtin[i].kinds[n]) {
      if (strcmp(builtin[i].kinds[n], kind) == 0) return 0;
      n++;
    }
    const char *best = kc_discovery_kind_suggest(kind, builtin[i].kinds, n);
    if (best)
      snprintf(msg, cap, "kind %s is not served by %s (did you mean %s?)", kind, api_version, best);
    else
      snprintf(msg, cap, "kind %s is not served by %s (a built-in group/version)", kind,
               api_version);
    return -ENOENT;
  }
  return 0;
}
