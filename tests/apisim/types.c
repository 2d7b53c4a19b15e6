/* SPDX-License-Identifier: Apache-2.0 */
#include "types.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sim_rtype **types;
static size_t ntypes, ctypes;

static const char *const pod_fields[] = {
  "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
  "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName",
  NULL,
};
static const char *const node_fields[] = {"spec.unschedulable", NULL};
static const char *const ns_fields[] = {"status.phase", NULL};
static const char *const secret_fields[] = {"type", NULL};
static const char *const event_fields[] = {
  "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
  "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
  "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type", NULL,
};
static const char *const rs_fields[] = {"status.replicas", NULL};

struct builtin {
  const char *group, *version, *plural, *singular, *kind, *shorts, *categories;
  bool namespaced, has_status, gen;
  enum sim_status_reset reset;
  const char *const *fields;
  const char *bookmark_tail;
};

static const struct builtin builtins[] = {
  {"", "v1", "namespaces", "namespace", "Namespace", "ns", NULL, false, true, false,
   SIM_RESET_META, ns_fields, ",\"spec\":{},\"status\":{}"},
  {"", "v1", "pods", "pod", "Pod", "po", "all", true, true, false, SIM_RESET_POD, pod_fields,
   ",\"spec\":{\"containers\":null},\"status\":{}"},
  {"", "v1", "configmaps", "configmap", "ConfigMap", "cm", NULL, true, false, false,
   SIM_RESET_META, NULL, ""},
  {"", "v1", "secrets", "secret", "Secret", NULL, NULL, true, false, false, SIM_RESET_META,
   secret_fields, ""},
  {"", "v1", "services", "service", "Service", "svc", "all", true, true, false, SIM_RESET_META,
   NULL, ",\"spec\":{},\"status\":{\"loadBalancer\":{}}"},
  {"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", "sa", NULL, true, false,
   false, SIM_RESET_META, NULL, ""},
  {"", "v1", "endpoints", "endpoints", "Endpoints", "ep", NULL, true, false, false,
   SIM_RESET_META, NULL, ""},
  {"", "v1", "events", "event", "Event", "ev", NULL, true, false, false, SIM_RESET_META,
   event_fields, ",\"involvedObject\":{},\"source\":{},\"firstTimestamp\":null,\"lastTimestamp\":null,\"eventTime\":null,\"reportingComponent\":\"\",\"reportingInstance\":\"\""},
  {"", "v1", "nodes", "node", "Node", "no", NULL, false, true, false, SIM_RESET_META,
   node_fields, ",\"spec\":{},\"status\":{\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":0}},\"nodeInfo\":{\"machineID\":\"\",\"systemUUID\":\"\",\"bootID\":\"\",\"kernelVersion\":\"\",\"osImage\":\"\",\"containerRuntimeVersion\":\"\",\"kubeletVersion\":\"\",\"kubeProxyVersion\":\"\",\"operatingSystem\":\"\",\"architecture\":\"\"}}"},
  {"", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", "pvc",
   NULL, true, true, false, SIM_RESET_META, NULL, ",\"spec\":{\"resources\":{}},\"status\":{}"},
  {"apps", "v1", "deployments", "deployment", "Deployment", "deploy", "all", true, true, true,
   SIM_RESET_META, NULL,
   ",\"spec\":{\"selector\":null,\"template\":{\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"containers\":null}},\"strategy\":{}},\"status\":{}"},
  {"apps", "v1", "replicasets", "replicaset", "ReplicaSet", "rs", "all", true, true, true,
   SIM_RESET_META, rs_fields,
   ",\"spec\":{\"selector\":null,\"template\":{\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"containers\":null}}},\"status\":{\"replicas\":0}"},
  {"apps", "v1", "statefulsets", "statefulset", "StatefulSet", "sts", "all", true, true, true,
   SIM_RESET_META, NULL,
   ",\"spec\":{\"selector\":null,\"template\":{\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"containers\":null}},\"serviceName\":\"\",\"updateStrategy\":{}},\"status\":{\"replicas\":0,\"availableReplicas\":0}"},
  {"apps", "v1", "daemonsets", "daemonset", "DaemonSet", "ds", "all", true, true, true,
   SIM_RESET_META, NULL,
   ",\"spec\":{\"selector\":null,\"template\":{\"metadata\":{\"creationTimestamp\":null},\"spec\":{\"containers\":null}},\"updateStrategy\":{}},\"status\":{\"currentNumberScheduled\":0,\"numberMisscheduled\":0,\"desiredNumberScheduled\":0,\"numberReady\":0}"},
  {"coordination.k8s.io", "v1", "leases", "lease", "Lease", NULL, NULL, true, false, false,
   SIM_RESET_META, NULL, ",\"spec\":{}"},
  {"rbac.authorization.k8s.io", "v1", "roles", "role", "Role", NULL, NULL, true, false, false,
   SIM_RESET_META, NULL, ",\"rules\":null"},
  {"rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", NULL, NULL,
   true, false, false, SIM_RESET_META, NULL,
   ",\"roleRef\":{\"apiGroup\":\"\",\"kind\":\"\",\"name\":\"\"}"},
  {"rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", NULL, NULL,
   false, false, false, SIM_RESET_META, NULL, ",\"rules\":null"},
  {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
   "ClusterRoleBinding", NULL, NULL, false, false, false, SIM_RESET_META, NULL,
   ",\"roleRef\":{\"apiGroup\":\"\",\"kind\":\"\",\"name\":\"\"}"},
  {"events.k8s.io", "v1", "events", "event", "Event", "ev", NULL, true, false, false,
   SIM_RESET_META, NULL, ",\"eventTime\":null,\"reportingController\":\"\",\"reportingInstance\":\"\""},
  {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
   "CustomResourceDefinition", "crd,crds", NULL, false, true, true, SIM_RESET_META, NULL,
   ",\"spec\":{\"group\":\"\",\"names\":{\"plural\":\"\",\"kind\":\"\"},\"scope\":\"\",\"versions\":null},\"status\":{\"conditions\":null,\"acceptedNames\":{\"plural\":\"\",\"kind\":\"\"},\"storedVersions\":null}"},
};

/* The create-only review kinds (review.h), cluster-scoped, all v1. */
static const struct {
  const char *group, *plural, *singular, *kind;
} reviews[] = {
  {"authentication.k8s.io", "tokenreviews", "tokenreview", "TokenReview"},
  {"authentication.k8s.io", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview"},
  {"authorization.k8s.io", "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview"},
  {"authorization.k8s.io", "selfsubjectaccessreviews", "selfsubjectaccessreview",
   "SelfSubjectAccessReview"},
};

static void add_type(struct sim_rtype *t)
{
  if (ntypes == ctypes) {
    ctypes = ctypes ? ctypes * 2 : 32;
    types = sim_xrealloc(types, ctypes * sizeof *types);
  }
  t->gv = *t->group ? sim_xasprintf("%s/%s", t->group, t->version) : sim_xstrdup(t->version);
  t->served = true;
  types[ntypes++] = t;
}

void sim_types_init(void)
{
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
    const struct builtin *b = &builtins[i];
    struct sim_rtype *t = sim_xcalloc(1, sizeof *t);
    t->group = sim_xstrdup(b->group);
    t->version = sim_xstrdup(b->version);
    t->plural = sim_xstrdup(b->plural);
    t->singular = sim_xstrdup(b->singular);
    t->kind = sim_xstrdup(b->kind);
    t->short_names = b->shorts ? sim_xstrdup(b->shorts) : NULL;
    t->categories = b->categories;
    t->namespaced = b->namespaced;
    t->has_status = b->has_status;
    t->track_generation = b->gen;
    t->status_reset = b->reset;
    t->fields = b->fields;
    t->own_field_list = b->fields != NULL;
    t->bookmark_tail = b->bookmark_tail;
    t->is_lease = strcmp(b->plural, "leases") == 0;
    /* Leases and CRs refuse unconditional updates; Leases create on PUT. */
    t->allow_unconditional_update = !t->is_lease;
    t->create_on_update = t->is_lease;
    t->coll = sim_xcalloc(1, sizeof *t->coll);
    add_type(t);
  }
  for (size_t i = 0; i < sizeof reviews / sizeof reviews[0]; i++) {
    struct sim_rtype *t = sim_xcalloc(1, sizeof *t);
    t->group = sim_xstrdup(reviews[i].group);
    t->version = sim_xstrdup("v1");
    t->plural = sim_xstrdup(reviews[i].plural);
    t->singular = sim_xstrdup(reviews[i].singular);
    t->kind = sim_xstrdup(reviews[i].kind);
    t->review_only = true;
    t->bookmark_tail = "";
    t->coll = sim_xcalloc(1, sizeof *t->coll);
    add_type(t);
  }
}

struct sim_rtype *sim_type_find_locked(const char *group, const char *version, const char *plural)
{
  for (size_t i = 0; i < ntypes; i++) {
    struct sim_rtype *t = types[i];
    if (t->served && strcmp(t->plural, plural) == 0 && strcmp(t->version, version) == 0 &&
        strcmp(t->group, group) == 0)
      return t;
  }
  return NULL;
}

struct sim_rtype *sim_type_by_kind_locked(const char *api_version, const char *kind)
{
  if (!api_version || !kind) return NULL;
  for (size_t i = 0; i < ntypes; i++) {
    struct sim_rtype *t = types[i];
    if (t->served && strcmp(t->kind, kind) == 0 && strcmp(t->gv, api_version) == 0) return t;
  }
  return NULL;
}

struct sim_rtype *sim_type_by_name_locked(const char *name)
{
  const char *dot = strchr(name, '.');
  for (size_t i = 0; i < ntypes; i++) {
    struct sim_rtype *t = types[i];
    if (!t->served) continue;
    if (dot) {
      if (strlen(t->plural) == (size_t)(dot - name) && strncmp(t->plural, name, (size_t)(dot - name)) == 0 &&
          strcmp(t->group, dot + 1) == 0)
        return t;
    } else if (strcmp(t->plural, name) == 0 && !*t->group) {
      return t;
    }
  }
  return NULL;
}

bool sim_group_version_served_locked(const char *group, const char *version)
{
  for (size_t i = 0; i < ntypes; i++)
    if (types[i]->served && strcmp(types[i]->group, group) == 0 &&
        strcmp(types[i]->version, version) == 0)
      return true;
  return false;
}

bool sim_group_served_locked(const char *group)
{
  for (size_t i = 0; i < ntypes; i++)
    if (types[i]->served && strcmp(types[i]->group, group) == 0) return true;
  return false;
}

struct sim_rtype *sim_type_crd_locked(void)
{
  return sim_type_find_locked("apiextensions.k8s.io", "v1", "customresourcedefinitions");
}

void sim_types_each_locked(void (*fn)(struct sim_rtype *, void *), void *arg)
{
  for (size_t i = 0; i < ntypes; i++)
    if (types[i]->served) fn(types[i], arg);
}

/* ---- discovery ---- */

void sim_disc_api(struct sim_buf *b, const char *host)
{
  sim_buf_puts(b, "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],"
                  "\"serverAddressByClientCIDRs\":[{\"clientCIDR\":\"0.0.0.0/0\",\"serverAddress\":");
  sim_buf_put_jstr(b, host, strlen(host));
  sim_buf_puts(b, "}]}");
}

/* Versions of a group in registration order (the first is preferred). */
static size_t group_versions(const char *group, const char **out, size_t max)
{
  size_t n = 0;
  for (size_t i = 0; i < ntypes; i++) {
    struct sim_rtype *t = types[i];
    if (!t->served || strcmp(t->group, group) != 0) continue;
    bool seen = false;
    for (size_t j = 0; j < n; j++) seen |= strcmp(out[j], t->version) == 0;
    if (!seen && n < max) out[n++] = t->version;
  }
  return n;
}

static void group_json(struct sim_buf *b, const char *group, bool with_kind)
{
  const char *vers[16];
  size_t nv = group_versions(group, vers, 16);
  sim_buf_puts(b, "{");
  if (with_kind) sim_buf_puts(b, "\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",");
  sim_buf_puts(b, "\"name\":");
  sim_buf_put_jstr(b, group, strlen(group));
  sim_buf_puts(b, ",\"versions\":[");
  for (size_t i = 0; i < nv; i++)
    sim_buf_printf(b, "%s{\"groupVersion\":\"%s/%s\",\"version\":\"%s\"}", i ? "," : "", group,
                   vers[i], vers[i]);
  sim_buf_printf(b, "],\"preferredVersion\":{\"groupVersion\":\"%s/%s\",\"version\":\"%s\"}}",
                 group, nv ? vers[0] : "v1", nv ? vers[0] : "v1");
}

void sim_disc_apis_locked(struct sim_buf *b)
{
  sim_buf_puts(b, "{\"kind\":\"APIGroupList\",\"apiVersion\":\"v1\",\"groups\":[");
  const char *groups[256];
  size_t ng = 0;
  for (size_t i = 0; i < ntypes; i++) {
    struct sim_rtype *t = types[i];
    if (!t->served || !*t->group) continue;
    bool seen = false;
    for (size_t j = 0; j < ng; j++) seen |= strcmp(groups[j], t->group) == 0;
    if (!seen && ng < 256) groups[ng++] = t->group;
  }
  for (size_t i = 0; i < ng; i++) {
    if (i) sim_buf_putc(b, ',');
    group_json(b, groups[i], false);
  }
  sim_buf_puts(b, "]}");
}

void sim_disc_group_locked(struct sim_buf *b, const char *group) { group_json(b, group, true); }

static void put_list(struct sim_buf *b, const char *csv)
{
  sim_buf_putc(b, '[');
  const char *p = csv;
  bool first = true;
  while (p && *p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (!first) sim_buf_putc(b, ',');
    first = false;
    sim_buf_put_jstr(b, p, n);
    p = e ? e + 1 : NULL;
  }
  sim_buf_putc(b, ']');
}

void sim_disc_resources_locked(struct sim_buf *b, const char *group, const char *version)
{
  sim_buf_puts(b, "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":");
  char *gv = *group ? sim_xasprintf("%s/%s", group, version) : sim_xstrdup(version);
  sim_buf_put_jstr(b, gv, strlen(gv));
  free(gv);
  sim_buf_puts(b, ",\"resources\":[");
  bool first = true;
  for (size_t i = 0; i < ntypes; i++) {
    struct sim_rtype *t = types[i];
    if (!t->served || strcmp(t->group, group) != 0 || strcmp(t->version, version) != 0) continue;
    if (!first) sim_buf_putc(b, ',');
    first = false;
    sim_buf_printf(b,
                   "{\"name\":\"%s\",\"singularName\":\"%s\",\"namespaced\":%s,\"kind\":\"%s\","
                   "\"verbs\":%s",
                   t->plural, t->singular, t->namespaced ? "true" : "false", t->kind,
                   t->review_only ? "[\"create\"]"
                                  : "[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\","
                                    "\"patch\",\"update\",\"watch\"]");
    if (t->short_names) {
      sim_buf_puts(b, ",\"shortNames\":");
      put_list(b, t->short_names);
    }
    if (t->categories) {
      sim_buf_puts(b, ",\"categories\":");
      put_list(b, t->categories);
    }
    sim_buf_puts(b, "}");
    if (t->has_status)
      sim_buf_printf(b,
                     ",{\"name\":\"%s/status\",\"singularName\":\"\",\"namespaced\":%s,"
                     "\"kind\":\"%s\",\"verbs\":[\"get\",\"patch\",\"update\"]}",
                     t->plural, t->namespaced ? "true" : "false", t->kind);
  }
  sim_buf_puts(b, "]}");
}

/* ---- CRDs ---- */

static bool dns_label(const char *s)
{
  size_t n = strlen(s);
  if (!n || n > 63) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && i && i + 1 < n);
    if (!ok) return false;
  }
  return true;
}

int sim_crd_validate(const jv *crd, char **field, char **msg)
{
  const jv *spec = jv_get(crd, "spec");
  const char *name = jv_gets(jv_get(crd, "metadata"), "name");
  const char *group = jv_gets(spec, "group");
  const jv *names = jv_get(spec, "names");
  const char *plural = jv_gets(names, "plural"), *kind = jv_gets(names, "kind");
  const char *scope = jv_gets(spec, "scope");
  const jv *vers = jv_get(spec, "versions");
  *field = NULL;
  *msg = NULL;
  if (!group || !*group) {
    *field = sim_xstrdup("spec.group");
    *msg = sim_xstrdup("Required value");
  } else if (!plural || !dns_label(plural)) {
    *field = sim_xstrdup("spec.names.plural");
    *msg = sim_xasprintf("Invalid value: \"%s\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'", plural ? plural : "");
  } else if (!kind || !*kind) {
    *field = sim_xstrdup("spec.names.kind");
    *msg = sim_xstrdup("Required value");
  } else if (!scope || (strcmp(scope, "Namespaced") != 0 && strcmp(scope, "Cluster") != 0)) {
    *field = sim_xstrdup("spec.scope");
    *msg = sim_xasprintf("Unsupported value: \"%s\": supported values: \"Cluster\", \"Namespaced\"", scope ? scope : "");
  } else if (!vers || vers->t != J_ARR || vers->n == 0) {
    *field = sim_xstrdup("spec.versions");
    *msg = sim_xstrdup("Invalid value: null: must have exactly one version marked as storage version");
  } else {
    char *want = sim_xasprintf("%s.%s", plural, group);
    if (!name || strcmp(name, want) != 0) {
      *field = sim_xstrdup("metadata.name");
      *msg = sim_xasprintf("Invalid value: \"%s\": must be spec.names.plural+\".\"+spec.group", name ? name : "");
    }
    free(want);
    int storage = 0;
    for (size_t i = 0; !*msg && i < vers->n; i++) {
      const jv *v = vers->u.a[i];
      if (!jv_gets(v, "name") || !dns_label(jv_gets(v, "name"))) {
        *field = sim_xasprintf("spec.versions[%zu].name", i);
        *msg = sim_xstrdup("Required value");
      }
      if (jv_get(v, "storage") && jv_get(v, "storage")->t == J_TRUE) storage++;
    }
    if (!*msg && storage != 1) {
      *field = sim_xstrdup("spec.versions");
      *msg = sim_xstrdup("Invalid value: \"\": must have exactly one version marked as storage version");
    }
  }
  return *msg ? -EINVAL : 0;
}

static void set_crd_fields(struct sim_rtype *t, const jv *ver)
{
  for (size_t i = 0; i < t->n_crd_fields; i++) free(t->crd_fields[i]);
  free(t->crd_fields);
  t->crd_fields = NULL;
  t->n_crd_fields = 0;
  const jv *sf = jv_get(ver, "selectableFields");
  if (!sf || sf->t != J_ARR) return;
  t->crd_fields = sim_xcalloc(sf->n, sizeof(char *));
  for (size_t i = 0; i < sf->n; i++) {
    const char *p = jv_gets(sf->u.a[i], "jsonPath");
    if (p) t->crd_fields[t->n_crd_fields++] = sim_xstrdup(*p == '.' ? p + 1 : p);
  }
}

void sim_crd_apply_locked(const jv *crd)
{
  const jv *spec = jv_get(crd, "spec");
  const char *name = jv_gets(jv_get(crd, "metadata"), "name");
  const char *group = jv_gets(spec, "group");
  const jv *names = jv_get(spec, "names");
  const jv *vers = jv_get(spec, "versions");
  bool namespaced = strcmp(jv_gets(spec, "scope"), "Namespaced") == 0;
  struct sim_coll *coll = NULL;
  for (size_t i = 0; i < ntypes; i++)
    if (types[i]->crd_name && strcmp(types[i]->crd_name, name) == 0) {
      coll = types[i]->coll;
      types[i]->served = false;
    }
  if (!coll) coll = sim_xcalloc(1, sizeof *coll);
  for (size_t i = 0; i < vers->n; i++) {
    const jv *v = vers->u.a[i];
    const jv *served = jv_get(v, "served");
    if (served && served->t == J_FALSE) continue;
    const char *vn = jv_gets(v, "name");
    struct sim_rtype *t = NULL;
    for (size_t j = 0; j < ntypes; j++)
      if (types[j]->crd_name && strcmp(types[j]->crd_name, name) == 0 &&
          strcmp(types[j]->version, vn) == 0)
        t = types[j];
    bool fresh = !t;
    if (fresh) {
      t = sim_xcalloc(1, sizeof *t);
      t->crd_name = sim_xstrdup(name);
      t->version = sim_xstrdup(vn);
      t->group = sim_xstrdup(group);
    } else {
      free(t->plural); free(t->singular); free(t->kind); free(t->short_names);
    }
    t->plural = sim_xstrdup(jv_gets(names, "plural"));
    const char *sing = jv_gets(names, "singular");
    if (sing && *sing) {
      t->singular = sim_xstrdup(sing);
    } else {
      t->singular = sim_xstrdup(jv_gets(names, "kind"));
      for (char *c = t->singular; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    }
    t->kind = sim_xstrdup(jv_gets(names, "kind"));
    const jv *sn = jv_get(names, "shortNames");
    t->short_names = NULL;
    if (sn && sn->t == J_ARR && sn->n) {
      struct sim_buf b = {0};
      for (size_t k = 0; k < sn->n; k++)
        if (jv_str(sn->u.a[k])) {
          if (b.len) sim_buf_putc(&b, ',');
          sim_buf_puts(&b, jv_str(sn->u.a[k]));
        }
      t->short_names = sim_buf_steal(&b, NULL);
    }
    t->namespaced = namespaced;
    t->has_status = jv_geta(v, "subresources", "status", (const char *)NULL) != NULL;
    t->is_crd = true;
    t->track_generation = true;
    t->allow_unconditional_update = false;
    t->create_on_update = false;
    t->status_reset = SIM_RESET_CR;
    t->bookmark_tail = "";
    t->coll = coll;
    set_crd_fields(t, v);
    if (fresh) add_type(t);
    t->served = true;
  }
}

void sim_crd_remove_locked(const char *name)
{
  struct sim_coll *coll = NULL;
  for (size_t i = 0; i < ntypes; i++)
    if (types[i]->crd_name && strcmp(types[i]->crd_name, name) == 0) {
      types[i]->served = false;
      coll = types[i]->coll;
    }
  /* Instances vanish with their CRD; the collection stays allocated because
   * a recreated CRD of the same name reuses it. */
  if (coll) sim_coll_clear_locked(coll);
}

void sim_crd_set_status(jv *crd)
{
  char now[32];
  sim_time_rfc3339(now, sizeof now);
  jv *spec = jv_get(crd, "spec");
  jv *st = jv_new(J_OBJ);
  jv *conds = jv_new(J_ARR);
  const char *types_[2][3] = {
    {"NamesAccepted", "NoConflicts", "no conflicts found"},
    {"Established", "InitialNamesAccepted", "the initial names have been accepted"},
  };
  for (int i = 0; i < 2; i++) {
    jv *c = jv_new(J_OBJ);
    jv_set_str(c, "type", types_[i][0]);
    jv_set_str(c, "status", "True");
    jv_set_str(c, "lastTransitionTime", now);
    jv_set_str(c, "reason", types_[i][1]);
    jv_set_str(c, "message", types_[i][2]);
    jv_push(conds, c);
  }
  jv_set(st, "conditions", conds);
  jv *names = jv_copy(jv_get(spec, "names"));
  if (names && names->t == J_OBJ && !jv_get(names, "singular")) {
    char *s = sim_xstrdup(jv_gets(names, "kind") ? jv_gets(names, "kind") : "");
    for (char *c = s; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    jv_set_str(names, "singular", s);
    free(s);
  }
  jv_set(st, "acceptedNames", names ? names : jv_new(J_OBJ));
  jv *stored = jv_new(J_ARR);
  const jv *vers = jv_get(spec, "versions");
  for (size_t i = 0; vers && vers->t == J_ARR && i < vers->n; i++) {
    const jv *s = jv_get(vers->u.a[i], "storage");
    if (s && s->t == J_TRUE && jv_gets(vers->u.a[i], "name"))
      jv_push(stored, jv_str_new(jv_gets(vers->u.a[i], "name")));
  }
  jv_set(st, "storedVersions", stored);
  jv_set(crd, "status", st);
}
