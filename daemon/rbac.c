/* SPDX-License-Identifier: Apache-2.0 */
/* rbac: see rbac.h. */
#include "rbac.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kube/kname.h"
#include "base/log.h"
#include "host/plugin_host.h"

/* Alphabetical: a rule's verbs are printed in bit order. */
static const char *const verb_names[] = {"create", "delete", "deletecollection", "get",
                                         "list",   "patch",  "update",           "watch"};
#define NVERBS (sizeof verb_names / sizeof verb_names[0])
#define VERB(i) (1u << (i))
#define V_CREATE VERB(0)
#define V_DELETE VERB(1)
#define V_GET VERB(3)
#define V_LIST VERB(4)
#define V_PATCH VERB(5)
#define V_UPDATE VERB(6)
#define V_WATCH VERB(7)

/* ROLE_METRICS_AUTH: the secure metrics filter's reviews (ops/metricsauth.h). */
enum role_kind { ROLE_MAIN = 0, ROLE_LEADER = 1, ROLE_METRICS_AUTH = 2 };

typedef struct rule {
  enum role_kind role;
  char ns[254];       /* "" = the ClusterRole */
  char group[254];
  char resource[320]; /* plural, maybe "/subresource" */
  char name[254];     /* the one resourceNames entry, "" = any */
  unsigned verbs;
} rule;

typedef struct ruleset {
  rule *r;
  size_t n, cap;
} ruleset;

/* ---- kind -> resource without a server ---- */

static const struct builtin {
  const char *group, *kind, *plural;
  bool namespaced;
} builtins[] = {
    {"", "ConfigMap", "configmaps", true},
    {"", "Endpoints", "endpoints", true},
    {"", "Event", "events", true},
    {"", "LimitRange", "limitranges", true},
    {"", "Namespace", "namespaces", false},
    {"", "Node", "nodes", false},
    {"", "PersistentVolume", "persistentvolumes", false},
    {"", "PersistentVolumeClaim", "persistentvolumeclaims", true},
    {"", "Pod", "pods", true},
    {"", "PodTemplate", "podtemplates", true},
    {"", "ReplicationController", "replicationcontrollers", true},
    {"", "ResourceQuota", "resourcequotas", true},
    {"", "Secret", "secrets", true},
    {"", "Service", "services", true},
    {"", "ServiceAccount", "serviceaccounts", true},
    {"admissionregistration.k8s.io", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false},
    {"admissionregistration.k8s.io", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false},
    {"apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", false},
    {"apps", "ControllerRevision", "controllerrevisions", true},
    {"apps", "DaemonSet", "daemonsets", true},
    {"apps", "Deployment", "deployments", true},
    {"apps", "ReplicaSet", "replicasets", true},
    {"apps", "StatefulSet", "statefulsets", true},
    {"autoscaling", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true},
    {"batch", "CronJob", "cronjobs", true},
    {"batch", "Job", "jobs", true},
    {"coordination.k8s.io", "Lease", "leases", true},
    {"discovery.k8s.io", "EndpointSlice", "endpointslices", true},
    {"events.k8s.io", "Event", "events", true},
    {"networking.k8s.io", "Ingress", "ingresses", true},
    {"networking.k8s.io", "IngressClass", "ingressclasses", false},
    {"networking.k8s.io", "NetworkPolicy", "networkpolicies", true},
    {"policy", "PodDisruptionBudget", "poddisruptionbudgets", true},
    {"rbac.authorization.k8s.io", "ClusterRole", "clusterroles", false},
    {"rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", false},
    {"rbac.authorization.k8s.io", "Role", "roles", true},
    {"rbac.authorization.k8s.io", "RoleBinding", "rolebindings", true},
    {"scheduling.k8s.io", "PriorityClass", "priorityclasses", false},
    {"storage.k8s.io", "StorageClass", "storageclasses", false},
};
#define NBUILTINS (sizeof builtins / sizeof builtins[0])

static bool is_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

bool kc_rbac_resource_of(const char *group, const char *kind, char *plural, size_t cap,
                         bool *namespaced) {
  for (size_t i = 0; i < NBUILTINS; i++) {
    if (strcmp(builtins[i].group, group) == 0 && strcmp(builtins[i].kind, kind) == 0) {
      snprintf(plural, cap, "%s", builtins[i].plural);
      *namespaced = builtins[i].namespaced;
      return true;
    }
  }
  /* The rule CRD generators use: lower case; -s/-x/-z/-ch/-sh + es;
   * consonant + y -> ies; else + s. A CRD whose plural differs needs an
   * informer of the built-in table's kind or a hand-written rule. */
  size_t n = strlen(kind), o = 0;
  if (cap == 0) return false;
  for (size_t i = 0; i < n && o + 1 < cap; i++) plural[o++] = (char)tolower((unsigned char)kind[i]);
  plural[o] = '\0';
  const char *suffix = "s";
  if (o >= 1 && (plural[o - 1] == 's' || plural[o - 1] == 'x' || plural[o - 1] == 'z'))
    suffix = "es";
  else if (o >= 2 && plural[o - 1] == 'h' && (plural[o - 2] == 'c' || plural[o - 2] == 's'))
    suffix = "es";
  else if (o >= 2 && plural[o - 1] == 'y' && !is_vowel(plural[o - 2])) {
    plural[--o] = '\0';
    suffix = "ies";
  }
  snprintf(plural + o, cap - o, "%s", suffix);
  *namespaced = true;
  return false;
}

/* Whether a resource (plural, maybe with a subresource) is namespaced:
 * built-ins by the table, anything else assumed so. */
static bool plural_namespaced(const char *group, const char *resource) {
  size_t len = strcspn(resource, "/");
  for (size_t i = 0; i < NBUILTINS; i++)
    if (strcmp(builtins[i].group, group) == 0 && strlen(builtins[i].plural) == len &&
        strncmp(builtins[i].plural, resource, len) == 0)
      return builtins[i].namespaced;
  return true;
}

/* ---- the rule set ---- */

static int add_rule(ruleset *rs, enum role_kind role, const char *ns, const char *group,
                    const char *resource, const char *name, unsigned verbs) {
  for (size_t i = 0; i < rs->n; i++) {
    rule *r = &rs->r[i];
    if (r->role == role && !strcmp(r->ns, ns) && !strcmp(r->group, group) &&
        !strcmp(r->resource, resource) && !strcmp(r->name, name)) {
      r->verbs |= verbs;
      return 0;
    }
  }
  if (strlen(ns) >= sizeof rs->r->ns || strlen(group) >= sizeof rs->r->group ||
      strlen(resource) >= sizeof rs->r->resource || strlen(name) >= sizeof rs->r->name)
    return -ENAMETOOLONG;
  if (KC_ARRAY_ROOM(rs->r, rs->cap, rs->n, 16) < 0) return -ENOMEM;
  rule *r = &rs->r[rs->n++];
  memset(r, 0, sizeof *r);
  r->role = role;
  snprintf(r->ns, sizeof r->ns, "%s", ns);
  snprintf(r->group, sizeof r->group, "%s", group);
  snprintf(r->resource, sizeof r->resource, "%s", resource);
  snprintf(r->name, sizeof r->name, "%s", name);
  r->verbs = verbs;
  return 0;
}

static int cmp_rule(const void *a, const void *b) {
  const rule *x = a, *y = b;
  if (x->role != y->role) return x->role < y->role ? -1 : 1;
  int c = strcmp(x->ns, y->ns);
  if (!c) c = strcmp(x->group, y->group);
  if (!c) c = strcmp(x->resource, y->resource);
  if (!c) c = strcmp(x->name, y->name);
  return c;
}

/* "create, delete" -> bits; -EINVAL naming the first unknown verb. */
static int parse_verbs(const char *s, unsigned *out, char *bad, size_t badcap) {
  unsigned v = 0;
  const char *p = s;
  while (*p) {
    while (*p == ' ' || *p == ',') p++;
    size_t len = strcspn(p, ", ");
    if (!len) break;
    size_t i = 0;
    while (i < NVERBS && !(strlen(verb_names[i]) == len && !strncmp(verb_names[i], p, len))) i++;
    if (i == NVERBS) {
      snprintf(bad, badcap, "%.*s", (int)len, p);
      return -EINVAL;
    }
    v |= VERB(i);
    p += len;
  }
  if (!v) {
    snprintf(bad, badcap, "%s", s);
    return -EINVAL;
  }
  *out = v;
  return 0;
}

/* One controller's declared permission, resolved: group, resource, verbs. */
typedef struct decl {
  char group[254];
  char resource[320];
  unsigned verbs;
} decl;

static int resolve_decl(const kc_config *cfg, const kc_controller_spec *c,
                        const kctrld_permission *p, decl *d, char *err, size_t errlen) {
  char bad[64];
  if (!p->resource || !*p->resource || !p->verbs) {
    kc_errf(err, errlen, "controller %s: plugin %s declares a permission without resource or verbs",
            c->name, c->plugin);
    return -EINVAL;
  }
  if (parse_verbs(p->verbs, &d->verbs, bad, sizeof bad) < 0) {
    kc_errf(err, errlen, "controller %s: plugin %s declares unknown verb \"%s\" on %s", c->name,
            c->plugin, bad, p->resource);
    return -EINVAL;
  }
  size_t forlen = strlen(KCTRLD_RESOURCE_FOR);
  if (!strncmp(p->resource, KCTRLD_RESOURCE_FOR, forlen) &&
      (p->resource[forlen] == '\0' || p->resource[forlen] == '/')) {
    const kc_informer_spec *inf = &cfg->informers[c->for_.informer];
    char plural[256];
    bool ns;
    kc_rbac_resource_of(inf->group, inf->kind, plural, sizeof plural, &ns);
    snprintf(d->group, sizeof d->group, "%s", inf->group);
    snprintf(d->resource, sizeof d->resource, "%s%s", plural, p->resource + forlen);
    return 0;
  }
  const char *group = p->group ? p->group : "";
  if (strlen(group) >= sizeof d->group || strlen(p->resource) >= sizeof d->resource) {
    kc_errf(err, errlen, "controller %s: plugin %s declares a resource name too long", c->name,
            c->plugin);
    return -EINVAL;
  }
  snprintf(d->group, sizeof d->group, "%s", group);
  snprintf(d->resource, sizeof d->resource, "%s", p->resource);
  return 0;
}

/* ---- YAML ---- */

static void put_list(kc_buf *b, const char *key, const char *const *items, size_t n) {
  kc_buf_printf(b, "    %s: [", key);
  for (size_t i = 0; i < n; i++) {
    if (i) kc_buf_puts(b, ", ");
    kc_buf_json_c(b, items[i]);
  }
  kc_buf_puts(b, "]\n");
}

static void put_rules(kc_buf *b, const ruleset *rs, size_t from, size_t to) {
  kc_buf_puts(b, "rules:\n");
  for (size_t i = from; i < to; i++) {
    const rule *r = &rs->r[i];
    const char *g = r->group, *res = r->resource, *name = r->name;
    kc_buf_puts(b, "  - apiGroups: [");
    kc_buf_json_c(b, g);
    kc_buf_puts(b, "]\n");
    put_list(b, "resources", &res, 1);
    if (name[0]) put_list(b, "resourceNames", &name, 1);
    const char *verbs[NVERBS];
    size_t nv = 0;
    for (size_t v = 0; v < NVERBS; v++)
      if (r->verbs & VERB(v)) verbs[nv++] = verb_names[v];
    put_list(b, "verbs", verbs, nv);
  }
}

static void put_role(kc_buf *b, const kc_rbac_options *o, const char *ns, const char *name,
                     const ruleset *rs, size_t from, size_t to) {
  const char *kind = ns[0] ? "Role" : "ClusterRole";
  kc_buf_printf(b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: %s\nmetadata:\n  name: %s\n",
                kind, name);
  if (ns[0]) kc_buf_printf(b, "  namespace: %s\n", ns);
  put_rules(b, rs, from, to);
  kc_buf_printf(b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: %sBinding\nmetadata:\n  name: %s\n",
                kind, name);
  if (ns[0]) kc_buf_printf(b, "  namespace: %s\n", ns);
  kc_buf_printf(b,
                "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: %s\n  name: %s\n"
                "subjects:\n  - kind: ServiceAccount\n    name: %s\n    namespace: %s\n",
                kind, name, o->name, o->namespace_);
}

/* ---- generation ---- */

/* Secure metrics: each scrape's token is reviewed (TokenReview) and its
 * user authorized (SubjectAccessReview); both are cluster-scoped creates. */
static int add_metrics_auth_rules(ruleset *rs, const kc_config *cfg) {
  if (!cfg->metrics_secure) return 0;
  int rc = add_rule(rs, ROLE_METRICS_AUTH, "", "authentication.k8s.io", "tokenreviews", "", V_CREATE);
  if (!rc) rc = add_rule(rs, ROLE_METRICS_AUTH, "", "authorization.k8s.io", "subjectaccessreviews", "", V_CREATE);
  return rc;
}

/* What a scraper of secure metrics needs: bound by whoever runs it
 * (Prometheus's ServiceAccount), so no binding here. */
static void put_metrics_reader(kc_buf *out, const kc_config *cfg, const char *name) {
  if (!cfg->metrics_secure) return;
  kc_buf_printf(out,
                "---\n# Bind it to the scraper's ServiceAccount: secure metrics answer only tokens\n"
                "# allowed to get /metrics (docs/operations.md \"Secure metrics\").\n"
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s-metrics-reader\n"
                "rules:\n  - nonResourceURLs: [\"/metrics\"]\n    verbs: [\"get\"]\n",
                name);
}

/* What the daemon itself writes for controller c (desired.h): its
 * finalizer on the `for` objects; for a hook of style desired, the
 * children (server-side apply creates or patches, prune deletes) and the
 * status. A C plugin's desired_* writes are in its own declarations.
 * Where the controller's `for` objects are, as for its declarations. */
static int add_daemon_writes(ruleset *rs, const kc_config *cfg, const kc_controller_spec *c,
                             bool per_ns) {
  const kc_informer_spec *inf = &cfg->informers[c->for_.informer];
  bool desired = c->hook && c->hook->style == KC_HOOK_STYLE_DESIRED;
  struct {
    const char *group;
    char resource[320];
    unsigned verbs;
  } w[2 + 64];
  size_t nw = 0;
  char plural[256];
  bool ns;
  kc_rbac_resource_of(inf->group, inf->kind, plural, sizeof plural, &ns);
  if (c->finalizer) {
    w[nw].group = inf->group;
    snprintf(w[nw].resource, sizeof w[nw].resource, "%s", plural);
    w[nw++].verbs = V_PATCH;
  }
  if (desired) {
    w[nw].group = inf->group;
    snprintf(w[nw].resource, sizeof w[nw].resource, "%s/status", plural);
    w[nw++].verbs = V_UPDATE;
  }
  for (size_t k = 0; desired && k < c->nowns && nw < sizeof w / sizeof w[0]; k++) {
    const kc_informer_spec *oi = &cfg->informers[c->owns[k].ref.informer];
    kc_rbac_resource_of(oi->group, oi->kind, plural, sizeof plural, &ns);
    w[nw].group = oi->group;
    snprintf(w[nw].resource, sizeof w[nw].resource, "%s", plural);
    w[nw++].verbs = V_CREATE | V_PATCH | V_DELETE;
  }
  int rc = 0;
  for (size_t k = 0; k < nw && !rc; k++) {
    if (!per_ns) rc = add_rule(rs, ROLE_MAIN, "", w[k].group, w[k].resource, "", w[k].verbs);
    for (size_t j = 0; per_ns && j < inf->nnamespaces && !rc; j++)
      rc = add_rule(rs, ROLE_MAIN, inf->namespaces[j], w[k].group, w[k].resource, "", w[k].verbs);
  }
  return rc;
}

int kc_rbac_generate(const kc_config *cfg, const kc_rbac_options *opt, kc_buf *out, FILE *warn,
                     char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  kc_rbac_options o = *opt;
  if (!o.namespace_) o.namespace_ = KC_RBAC_DEFAULT_NAMESPACE;
  if (!o.name) o.name = KC_RBAC_DEFAULT_NAME;
  if (!kc_name_is_dns_label(o.namespace_, strlen(o.namespace_))) {
    kc_errf(err, errlen, "namespace \"%s\" is not a valid namespace name", o.namespace_);
    return -EINVAL;
  }
  if (!kc_name_is_dns_subdomain(o.name, strlen(o.name)) || strlen(o.name) > 200) {
    kc_errf(err, errlen, "name \"%s\" is not a valid ServiceAccount name", o.name);
    return -EINVAL;
  }
  int rc = 0;
  ruleset rs = {0};
  decl *decls = NULL;
  size_t ndecls = 0, cap = 0;
  size_t *first = calloc(cfg->ncontrollers + 1, sizeof *first); /* decls of controller i */
  bool *declared = calloc(cfg->ncontrollers + 1, sizeof *declared);
  kc_buf head = {0};
  if (!first || !declared) {
    rc = -ENOMEM;
    goto out;
  }
  /* Every controller's declarations, resolved; do they allow Roles? */
  bool per_ns = cfg->ninformers > 0;
  for (size_t i = 0; i < cfg->ncontrollers; i++) {
    const kc_controller_spec *c = &cfg->controllers[i];
    const kctrld_permission *perms = NULL;
    first[i] = ndecls;
    if (c->hook) perms = c->hook->permissions; /* declared in the config */
    else if (o.perms && (rc = o.perms(o.perms_ud, c, &perms, err, errlen)) < 0) goto out;
    declared[i] = perms != NULL;
    for (const kctrld_permission *p = perms; p && p->resource; p++) {
      if ((rc = KC_ARRAY_ROOM(decls, cap, ndecls, 8)) < 0) goto out;
      if ((rc = resolve_decl(cfg, c, p, &decls[ndecls], err, errlen)) < 0) goto out;
      if (!plural_namespaced(decls[ndecls].group, decls[ndecls].resource)) per_ns = false;
      ndecls++;
    }
  }
  first[cfg->ncontrollers] = ndecls;
  for (size_t i = 0; i < cfg->ninformers; i++) {
    const kc_informer_spec *inf = &cfg->informers[i];
    char plural[256];
    bool ns;
    kc_rbac_resource_of(inf->group, inf->kind, plural, sizeof plural, &ns);
    if (!ns || inf->nnamespaces == 0) per_ns = false;
  }
  /* Informers: get, list, watch, where they watch. */
  for (size_t i = 0; i < cfg->ninformers && !rc; i++) {
    const kc_informer_spec *inf = &cfg->informers[i];
    char plural[256];
    bool ns;
    kc_rbac_resource_of(inf->group, inf->kind, plural, sizeof plural, &ns);
    unsigned v = V_GET | V_LIST | V_WATCH;
    if (!per_ns) rc = add_rule(&rs, ROLE_MAIN, "", inf->group, plural, "", v);
    for (size_t j = 0; per_ns && j < inf->nnamespaces && !rc; j++)
      rc = add_rule(&rs, ROLE_MAIN, inf->namespaces[j], inf->group, plural, "", v);
  }
  /* The reflectors' cluster identity check (client/clusterid.h) reads the
   * kube-system Namespace: a ClusterRole rule even beside namespaced Roles. */
  if (!rc && cfg->ninformers > 0)
    rc = add_rule(&rs, ROLE_MAIN, "", "", "namespaces", "kube-system", V_GET);
  /* Plugin writes: where the controller's `for` objects are. */
  for (size_t i = 0; i < cfg->ncontrollers && !rc; i++) {
    const kc_informer_spec *inf = &cfg->informers[cfg->controllers[i].for_.informer];
    for (size_t k = first[i]; k < first[i + 1] && !rc; k++) {
      const decl *d = &decls[k];
      if (!per_ns) rc = add_rule(&rs, ROLE_MAIN, "", d->group, d->resource, "", d->verbs);
      for (size_t j = 0; per_ns && j < inf->nnamespaces && !rc; j++)
        rc = add_rule(&rs, ROLE_MAIN, inf->namespaces[j], d->group, d->resource, "", d->verbs);
    }
  }
  for (size_t i = 0; i < cfg->ncontrollers && !rc; i++)
    rc = add_daemon_writes(&rs, cfg, &cfg->controllers[i], per_ns);
  const kc_leader_election *le = &cfg->leader_election;
  if (!rc && le->enabled) {
    /* create cannot be limited to a name (the name is in the body). */
    rc = add_rule(&rs, ROLE_LEADER, le->namespace_, "coordination.k8s.io", "leases", "", V_CREATE);
    if (!rc)
      rc = add_rule(&rs, ROLE_LEADER, le->namespace_, "coordination.k8s.io", "leases", le->name,
                    V_GET | V_UPDATE);
  }
  /* Sharding (daemon/lease/sharding.h): range and membership Leases are listed,
   * created and renewed in leaseNamespace; membership names depend on the
   * identity, so no resourceNames. */
  for (size_t i = 0; i < cfg->ncontrollers && !rc; i++) {
    const kc_sharding_spec *sp = &cfg->controllers[i].sharding;
    if (sp->shards > 0)
      rc = add_rule(&rs, ROLE_LEADER, sp->lease_namespace, "coordination.k8s.io", "leases", "",
                    V_CREATE | V_GET | V_LIST | V_UPDATE);
  }
  if (!rc) rc = add_metrics_auth_rules(&rs, cfg);
  if (rc == -ENAMETOOLONG) kc_errf(err, errlen, "a namespace, group or resource name is too long");
  if (rc) goto out;
  if (rs.n) qsort(rs.r, rs.n, sizeof *rs.r, cmp_rule);

  kc_buf_printf(&head,
                "# Least-privilege RBAC for kctrld's config %s, generated by `kctrld rbac`:\n"
                "# regenerate it when the config or a plugin changes (docs/deploy.md).\n",
                strrchr(cfg->file, '/') ? strrchr(cfg->file, '/') + 1 : cfg->file);
  for (size_t i = 0; i < cfg->ncontrollers; i++) {
    if (declared[i]) continue;
    const kc_controller_spec *c = &cfg->controllers[i];
    kc_buf_printf(&head,
                  "# controller %s: its %s declares no permissions; grant what it writes by "
                  "hand.\n",
                  c->name, c->hook ? "hook" : "plugin");
    if (warn && c->hook)
      fprintf(warn,
              "kctrld rbac: warning: controller %s: a hook declares no permissions: its writes "
              "are not granted\n",
              c->name);
    else if (warn)
      fprintf(warn,
              "kctrld rbac: warning: controller %s: plugin %s declares no permissions "
              "(kctrld_plugin.permissions): its writes are not granted\n",
              c->name, c->plugin);
  }
  kc_buf_add(out, head.p ? head.p : "", head.len);
  if (o.create_namespace)
    kc_buf_printf(out, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", o.namespace_);
  kc_buf_printf(out, "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: %s\n  namespace: %s\n",
                o.name, o.namespace_);
  char le_name[256], auth_name[256];
  snprintf(le_name, sizeof le_name, "%s-leader-election", o.name);
  snprintf(auth_name, sizeof auth_name, "%s-metrics-auth", o.name);
  for (size_t i = 0; i < rs.n;) {
    size_t j = i;
    while (j < rs.n && rs.r[j].role == rs.r[i].role && !strcmp(rs.r[j].ns, rs.r[i].ns)) j++;
    put_role(out, &o, rs.r[i].ns,
             rs.r[i].role == ROLE_LEADER ? le_name : rs.r[i].role == ROLE_METRICS_AUTH ? auth_name : o.name,
             &rs, i, j);
    i = j;
  }
  put_metrics_reader(out, cfg, o.name);
  if (out->err || head.err) rc = out->err ? out->err : head.err;
out:
  kc_buf_free(&head);
  free(rs.r);
  free(decls);
  free(first);
  free(declared);
  return rc;
}

/* ---- plugins and the command ---- */

/* The kc_rbac_perms_fn that loads the controller's plugin (plugin_host.h);
 * ud NULL: the configured path, else a directory (const char *) in which the
 * plugin is looked up by its file name. */
static int kc_rbac_plugin_perms(void *ud, const kc_controller_spec *c,
                                const kctrld_permission **out, char *err, size_t errlen) {
  const char *dir = ud;
  char path[4096];
  if (c->hook) { /* a hook's writes are what its `permissions:` declare (config.c) */
    *out = c->hook->permissions;
    return 0;
  }
  if (dir) {
    const char *base = strrchr(c->plugin, '/');
    if (snprintf(path, sizeof path, "%s/%s", dir, base ? base + 1 : c->plugin) >= (int)sizeof path) {
      kc_errf(err, errlen, "controller %s: plugin path too long", c->name);
      return -ENAMETOOLONG;
    }
  } else {
    snprintf(path, sizeof path, "%s", c->plugin);
  }
  kc_plugin *p = NULL;
  char why[1024];
  int rc = kc_plugin_load(path, &p, why, sizeof why);
  if (rc < 0) {
    kc_errf(err, errlen, "controller %s: %s", c->name, why);
    return rc;
  }
  *out = kc_plugin_permissions(p);
  return 0;
}

int kc_rbac_check_plugins(const kc_config *cfg, FILE *out) {
  int warnings = 0;
  enum kc_log_level saved = kc_log_get_level();
  kc_log_set_level(KC_LOG_WARN); /* no "loaded plugin" lines */
  for (size_t i = 0; i < cfg->ncontrollers; i++) {
    const kc_controller_spec *c = &cfg->controllers[i];
    const kctrld_permission *perms = NULL;
    char err[1200];
    if (kc_rbac_plugin_perms(NULL, c, &perms, err, sizeof err) < 0) {
      fprintf(out, "%s: warning: %s (its permissions are unknown)\n", cfg->file, err);
      warnings++;
    } else if (!perms && c->hook) {
      fprintf(out,
              "%s: warning: controller %s: a hook declares no permissions: `kctrld rbac` grants "
              "its reads only; list the writes its actions need under hook.permissions\n",
              cfg->file, c->name);
      warnings++;
    } else if (!perms) {
      fprintf(out,
              "%s: warning: controller %s: plugin %s declares no permissions "
              "(kctrld_plugin.permissions): `kctrld rbac` cannot grant its writes\n",
              cfg->file, c->name, c->plugin);
      warnings++;
    }
  }
  kc_plugin_host_unload_all();
  kc_log_set_level(saved);
  return warnings;
}

void kc_rbac_default_name(const char *config_path, char *out, size_t cap) {
  const char *base = strrchr(config_path, '/');
  base = base ? base + 1 : config_path;
  size_t n = strlen(base);
  static const char *const exts[] = {".yaml", ".yml", ".json"};
  for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
    size_t el = strlen(exts[i]);
    if (n > el && !strcasecmp(base + n - el, exts[i])) {
      n -= el;
      break;
    }
  }
  char stem[64];
  size_t m = 0;
  for (size_t i = 0; i < n && m + 1 < sizeof stem; i++) {
    char ch = base[i];
    if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
    if (!ok && (m == 0 || stem[m - 1] == '-')) continue; /* no leading or doubled '-' */
    stem[m++] = ok ? ch : '-';
  }
  while (m && stem[m - 1] == '-') m--;
  stem[m] = '\0';
  if (!m)
    snprintf(out, cap, "%s", KC_RBAC_DEFAULT_NAME);
  else if (!strcmp(stem, "kctrld") || !strncmp(stem, "kctrld-", 7))
    snprintf(out, cap, "%s", stem);
  else
    snprintf(out, cap, "kctrld-%s", stem);
}

int kc_rbac_main(const kc_cli_command *cmd, int argc, char **argv) {
  const char *config = NULL, *dir = NULL, *arg;
  kc_rbac_options o = {0};
  int id;
  while ((id = kc_cli_next(cmd, argc, argv, &arg)) > KC_CLI_END) {
    switch (id) {
    case KC_CLI_CONFIG: config = arg; break;
    case KC_CLI_RBAC_NAMESPACE: o.namespace_ = arg; break;
    case KC_CLI_RBAC_CREATE_NAMESPACE: o.create_namespace = true; break;
    case KC_CLI_RBAC_NAME: o.name = arg; break;
    case KC_CLI_RBAC_PLUGIN_DIR: dir = arg; break;
    case KC_CLI_HELP: kc_cli_help(stdout, cmd); return 0;
    default: break;
    }
  }
  if (id == KC_CLI_USAGE || kc_cli_check_args(cmd, argc, argv) < 0) return 2;
  if (!config) {
    kc_cli_usage_error(cmd, "--config FILE is required");
    return 2;
  }
  char err[4096];
  kc_config *cfg = NULL;
  if (kc_config_load_file(config, &cfg, err, sizeof err) < 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  o.perms = kc_rbac_plugin_perms;
  o.perms_ud = (void *)dir;
  char default_name[256];
  if (!o.name) {
    kc_rbac_default_name(config, default_name, sizeof default_name);
    o.name = default_name;
  }
  kc_buf b = {0};
  enum kc_log_level saved = kc_log_get_level();
  kc_log_set_level(KC_LOG_WARN);
  int rc = kc_rbac_generate(cfg, &o, &b, stderr, err, sizeof err);
  kc_log_set_level(saved);
  kc_plugin_host_unload_all();
  kc_config_free(cfg);
  if (rc < 0) {
    fprintf(stderr, "kctrld rbac: %s: %s\n", config, err[0] ? err : strerror(-rc));
    kc_buf_free(&b);
    return 1;
  }
  int wrc = fwrite(b.p, 1, b.len, stdout) == b.len && fflush(stdout) == 0 ? 0 : 1;
  if (wrc) fprintf(stderr, "kctrld rbac: cannot write the output: %s\n", strerror(errno));
  kc_buf_free(&b);
  return wrc;
}
