/* SPDX-License-Identifier: Apache-2.0 */
#include "openapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "store.h"
#include "types.h"

uint64_t sim_openapi_hash(const void *p, size_t n)
{
  const unsigned char *s = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

#define REF(name) "{\"$ref\":\"#/components/schemas/" name "\"}"
#define META "io.k8s.apimachinery.pkg.apis.meta.v1."
#define OPEN "{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}"

/* Shared meta.k8s.io/v1 schemas every group-version document carries. */
static const char common_schemas[] =
  "\"" META "ObjectMeta\":{\"description\":\"ObjectMeta is metadata that all persisted resources must have.\","
  "\"type\":\"object\",\"properties\":{"
  "\"annotations\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"default\":\"\"}},"
  "\"creationTimestamp\":{\"allOf\":[" REF(META "Time") "]},"
  "\"deletionGracePeriodSeconds\":{\"type\":\"integer\",\"format\":\"int64\"},"
  "\"deletionTimestamp\":{\"allOf\":[" REF(META "Time") "]},"
  "\"finalizers\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"default\":\"\"},\"x-kubernetes-list-type\":\"set\",\"x-kubernetes-patch-strategy\":\"merge\"},"
  "\"generateName\":{\"type\":\"string\"},"
  "\"generation\":{\"type\":\"integer\",\"format\":\"int64\"},"
  "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"default\":\"\"}},"
  "\"managedFields\":{\"type\":\"array\",\"items\":{\"default\":{},\"allOf\":[" REF(META "ManagedFieldsEntry") "]},\"x-kubernetes-list-type\":\"atomic\"},"
  "\"name\":{\"type\":\"string\"},"
  "\"namespace\":{\"type\":\"string\"},"
  "\"ownerReferences\":{\"type\":\"array\",\"items\":{\"default\":{},\"allOf\":[" REF(META "OwnerReference") "]},"
  "\"x-kubernetes-list-map-keys\":[\"uid\"],\"x-kubernetes-list-type\":\"map\",\"x-kubernetes-patch-merge-key\":\"uid\",\"x-kubernetes-patch-strategy\":\"merge\"},"
  "\"resourceVersion\":{\"type\":\"string\"},"
  "\"selfLink\":{\"type\":\"string\"},"
  "\"uid\":{\"type\":\"string\"}}},"
  "\"" META "ListMeta\":{\"type\":\"object\",\"properties\":{\"continue\":{\"type\":\"string\"},"
  "\"remainingItemCount\":{\"type\":\"integer\",\"format\":\"int64\"},\"resourceVersion\":{\"type\":\"string\"},"
  "\"selfLink\":{\"type\":\"string\"}}},"
  "\"" META "Time\":{\"type\":\"string\",\"format\":\"date-time\"},"
  "\"" META "FieldsV1\":{\"type\":\"object\"},"
  "\"" META "ManagedFieldsEntry\":{\"type\":\"object\",\"properties\":{\"apiVersion\":{\"type\":\"string\"},"
  "\"fieldsType\":{\"type\":\"string\"},\"fieldsV1\":{\"allOf\":[" REF(META "FieldsV1") "]},"
  "\"manager\":{\"type\":\"string\"},\"operation\":{\"type\":\"string\"},\"subresource\":{\"type\":\"string\"},"
  "\"time\":{\"allOf\":[" REF(META "Time") "]}}},"
  "\"" META "OwnerReference\":{\"type\":\"object\",\"required\":[\"apiVersion\",\"kind\",\"name\",\"uid\"],"
  "\"properties\":{\"apiVersion\":{\"type\":\"string\",\"default\":\"\"},\"blockOwnerDeletion\":{\"type\":\"boolean\"},"
  "\"controller\":{\"type\":\"boolean\"},\"kind\":{\"type\":\"string\",\"default\":\"\"},"
  "\"name\":{\"type\":\"string\",\"default\":\"\"},\"uid\":{\"type\":\"string\",\"default\":\"\"}},"
  "\"x-kubernetes-map-type\":\"atomic\"},"
  "\"" META "Patch\":{\"description\":\"Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.\",\"type\":\"object\"},"
  "\"" META "Preconditions\":{\"type\":\"object\",\"properties\":{\"resourceVersion\":{\"type\":\"string\"},\"uid\":{\"type\":\"string\"}}},"
  "\"" META "DeleteOptions\":{\"type\":\"object\",\"properties\":{\"apiVersion\":{\"type\":\"string\"},"
  "\"dryRun\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"default\":\"\"},\"x-kubernetes-list-type\":\"atomic\"},"
  "\"gracePeriodSeconds\":{\"type\":\"integer\",\"format\":\"int64\"},\"kind\":{\"type\":\"string\"},"
  "\"orphanDependents\":{\"type\":\"boolean\"},\"preconditions\":{\"allOf\":[" REF(META "Preconditions") "]},"
  "\"propagationPolicy\":{\"type\":\"string\"}}},"
  "\"" META "Status\":{\"type\":\"object\",\"properties\":{\"apiVersion\":{\"type\":\"string\"},"
  "\"code\":{\"type\":\"integer\",\"format\":\"int32\"},\"details\":" OPEN ",\"kind\":{\"type\":\"string\"},"
  "\"message\":{\"type\":\"string\"},\"metadata\":{\"default\":{},\"allOf\":[" REF(META "ListMeta") "]},"
  "\"reason\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"}}}";

const char *sim_openapi_builtin_fields(const struct sim_rtype *rt)
{
  const char *g = rt->group, *k = rt->kind;
  if (!*g && strcmp(k, "ConfigMap") == 0) return "binaryData:bmap,data:smap,immutable:bool";
  if (!*g && strcmp(k, "Secret") == 0) return "data:bmap,immutable:bool,stringData:smap,type:str";
  if (!*g && strcmp(k, "ServiceAccount") == 0)
    return "automountServiceAccountToken:bool,imagePullSecrets:arr,secrets:arr";
  if (!*g && strcmp(k, "Endpoints") == 0) return "subsets:arr";
  if (!*g && strcmp(k, "Event") == 0)
    return "action:str,count:int,eventTime:time,firstTimestamp:time,involvedObject:obj,"
           "lastTimestamp:time,message:str,reason:str,related:obj,reportingComponent:str,"
           "reportingInstance:str,series:obj,source:obj,type:str";
  if (strcmp(g, "events.k8s.io") == 0)
    return "action:str,deprecatedCount:int,deprecatedFirstTimestamp:time,"
           "deprecatedLastTimestamp:time,deprecatedSource:obj,eventTime:time,note:str,reason:str,"
           "regarding:obj,related:obj,reportingController:str,reportingInstance:str,series:obj,type:str";
  if (strcmp(g, "coordination.k8s.io") == 0) return "spec:obj";
  if (strcmp(g, "rbac.authorization.k8s.io") == 0) {
    if (strcmp(k, "Role") == 0) return "rules:arr";
    if (strcmp(k, "ClusterRole") == 0) return "aggregationRule:obj,rules:arr";
    return "roleRef:obj,subjects:arr"; /* RoleBinding, ClusterRoleBinding */
  }
  return "spec:obj,status:obj";
}

static void put_field_schema(struct sim_buf *b, const char *type)
{
  if (strcmp(type, "smap") == 0)
    sim_buf_puts(b, "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"default\":\"\"}}");
  else if (strcmp(type, "bmap") == 0)
    sim_buf_puts(b, "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"format\":\"byte\"}}");
  else if (strcmp(type, "arr") == 0)
    sim_buf_puts(b, "{\"type\":\"array\",\"items\":" OPEN "}");
  else if (strcmp(type, "str") == 0)
    sim_buf_puts(b, "{\"type\":\"string\"}");
  else if (strcmp(type, "bool") == 0)
    sim_buf_puts(b, "{\"type\":\"boolean\"}");
  else if (strcmp(type, "int") == 0)
    sim_buf_puts(b, "{\"type\":\"integer\",\"format\":\"int32\"}");
  else if (strcmp(type, "time") == 0)
    sim_buf_puts(b, "{\"type\":\"string\",\"format\":\"date-time\"}");
  else
    sim_buf_puts(b, OPEN);
}

/* Component name of a kind: io.k8s.api.core.v1.Pod for built-ins,
 * reversed group for CRDs (com.example.stable.v1.CronTab). */
static void schema_name(char *out, size_t n, const struct sim_rtype *rt, const char *suffix)
{
  const char *g = rt->group;
  if (rt->is_crd) {
    char rev[256] = "";
    size_t len = 0;
    const char *end = g + strlen(g);
    while (end > g && len + 2 < sizeof rev) {
      const char *dot = end;
      while (dot > g && dot[-1] != '.') dot--;
      int w = snprintf(rev + len, sizeof rev - len, "%s%.*s", len ? "." : "", (int)(end - dot), dot);
      if (w < 0 || (size_t)w >= sizeof rev - len) break;
      len += (size_t)w;
      end = dot > g ? dot - 1 : g;
    }
    snprintf(out, n, "%s.%s.%s%s", rev, rt->version, rt->kind, suffix);
    return;
  }
  const char *pkg;
  if (!*g) pkg = "io.k8s.api.core";
  else if (strcmp(g, "apiextensions.k8s.io") == 0) pkg = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions";
  else if (strcmp(g, "apps") == 0) pkg = "io.k8s.api.apps";
  else if (strcmp(g, "coordination.k8s.io") == 0) pkg = "io.k8s.api.coordination";
  else if (strcmp(g, "events.k8s.io") == 0) pkg = "io.k8s.api.events";
  else pkg = "io.k8s.api.other";
  snprintf(out, n, "%s.%s.%s%s", pkg, rt->version, rt->kind, suffix);
}

static void put_gvk(struct sim_buf *b, const struct sim_rtype *rt, const char *kind_suffix)
{
  sim_buf_puts(b, "{\"group\":");
  sim_buf_put_jstr(b, rt->group, strlen(rt->group));
  sim_buf_printf(b, ",\"kind\":\"%s%s\",\"version\":\"%s\"}", rt->kind, kind_suffix, rt->version);
}

/* The CRD's schema for rt's version, or NULL. sim_mu held. */
static const jv *crd_schema_locked(const struct sim_rtype *rt)
{
  struct sim_rtype *crt = sim_type_crd_locked();
  if (!crt || !rt->crd_name) return NULL;
  const struct sim_obj *o = sim_coll_get_locked(crt->coll, rt->crd_name);
  if (!o) return NULL;
  const jv *vers = jv_geta(o->dom, "spec", "versions", (const char *)NULL);
  for (size_t i = 0; vers && vers->t == J_ARR && i < vers->n; i++) {
    const char *vn = jv_gets(vers->u.a[i], "name");
    if (vn && strcmp(vn, rt->version) == 0) {
      const jv *s = jv_geta(vers->u.a[i], "schema", "openAPIV3Schema", (const char *)NULL);
      return s && s->t == J_OBJ ? s : NULL;
    }
  }
  return NULL;
}

static void put_kind_schema_locked(struct sim_buf *b, const struct sim_rtype *rt)
{
  char name[400];
  schema_name(name, sizeof name, rt, "");
  sim_buf_put_jstr(b, name, strlen(name));
  sim_buf_putc(b, ':');
  const jv *crd = rt->is_crd ? crd_schema_locked(rt) : NULL;
  if (crd) {
    /* The CRD's own schema; the envelope replaces whatever it says about
     * apiVersion, kind and metadata (as kube-apiserver publishes it). */
    jv *s = jv_copy(crd);
    jv *props = jv_obj_ensure(s, "properties");
    char err[8];
    jv_set(props, "apiVersion", jv_parse("{\"type\":\"string\"}", 17, err, sizeof err));
    jv_set(props, "kind", jv_parse("{\"type\":\"string\"}", 17, err, sizeof err));
    static const char md[] = "{\"allOf\":[" REF(META "ObjectMeta") "]}";
    jv_set(props, "metadata", jv_parse(md, sizeof md - 1, err, sizeof err));
    if (!jv_get(s, "type")) jv_set_str(s, "type", "object");
    jv *gvk = jv_new(J_ARR);
    struct sim_buf g = {0};
    put_gvk(&g, rt, "");
    jv_push(gvk, jv_parse(g.p, g.len, err, sizeof err));
    sim_buf_free(&g);
    jv_set(s, "x-kubernetes-group-version-kind", gvk);
    jv_write(b, s);
    jv_free(s);
  } else {
    sim_buf_puts(b, "{\"type\":\"object\",\"properties\":{\"apiVersion\":{\"type\":\"string\"},"
                    "\"kind\":{\"type\":\"string\"},\"metadata\":{\"default\":{},\"allOf\":[" REF(META "ObjectMeta") "]}");
    if (rt->is_crd) {
      /* A CRD version without a schema: anything goes. */
      sim_buf_puts(b, "},\"x-kubernetes-preserve-unknown-fields\":true");
    } else {
      const char *f = sim_openapi_builtin_fields(rt);
      while (*f) {
        const char *colon = strchr(f, ':'), *comma = strchr(f, ',');
        size_t tl = comma ? (size_t)(comma - colon - 1) : strlen(colon + 1);
        char type[16];
        snprintf(type, sizeof type, "%.*s", (int)tl, colon + 1);
        sim_buf_putc(b, ',');
        sim_buf_put_jstr(b, f, (size_t)(colon - f));
        sim_buf_putc(b, ':');
        put_field_schema(b, type);
        f = comma ? comma + 1 : colon + 1 + tl;
      }
      sim_buf_putc(b, '}');
    }
    sim_buf_puts(b, ",\"x-kubernetes-group-version-kind\":[");
    put_gvk(b, rt, "");
    sim_buf_puts(b, "]}");
  }
  /* The list kind. */
  char lname[400];
  schema_name(lname, sizeof lname, rt, "List");
  sim_buf_putc(b, ',');
  sim_buf_put_jstr(b, lname, strlen(lname));
  sim_buf_puts(b, ":{\"type\":\"object\",\"required\":[\"items\"],\"properties\":{\"apiVersion\":{\"type\":\"string\"},"
                  "\"items\":{\"type\":\"array\",\"items\":{\"default\":{},\"allOf\":[{\"$ref\":\"#/components/schemas/");
  sim_buf_puts(b, name);
  sim_buf_puts(b, "\"}]}},\"kind\":{\"type\":\"string\"},\"metadata\":{\"default\":{},\"allOf\":[" REF(META "ListMeta") "]}},"
                  "\"x-kubernetes-group-version-kind\":[");
  put_gvk(b, rt, "List");
  sim_buf_puts(b, "]}");
}

/* ---- paths ---- */

static const char P_DRYRUN[] =
  "{\"name\":\"dryRun\",\"in\":\"query\",\"description\":\"When present, indicates that modifications should not be persisted.\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char P_FIELDMANAGER[] =
  "{\"name\":\"fieldManager\",\"in\":\"query\",\"description\":\"fieldManager is a name associated with the actor or entity that is making these changes.\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char P_FIELDVALIDATION[] =
  "{\"name\":\"fieldValidation\",\"in\":\"query\",\"description\":\"fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char P_FORCE[] =
  "{\"name\":\"force\",\"in\":\"query\",\"description\":\"Force is going to \\\"force\\\" Apply requests.\",\"schema\":{\"type\":\"boolean\",\"uniqueItems\":true}}";
static const char P_PRETTY[] =
  "{\"name\":\"pretty\",\"in\":\"query\",\"description\":\"If 'true', then the output is pretty printed.\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char P_NAME[] =
  "{\"name\":\"name\",\"in\":\"path\",\"description\":\"name of the object\",\"required\":true,\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char P_NAMESPACE[] =
  "{\"name\":\"namespace\",\"in\":\"path\",\"description\":\"object name and auth scope, such as for teams and projects\",\"required\":true,\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char LIST_PARAMS[] =
  "{\"name\":\"allowWatchBookmarks\",\"in\":\"query\",\"schema\":{\"type\":\"boolean\",\"uniqueItems\":true}},"
  "{\"name\":\"continue\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}},"
  "{\"name\":\"fieldSelector\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}},"
  "{\"name\":\"labelSelector\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}},"
  "{\"name\":\"limit\",\"in\":\"query\",\"schema\":{\"type\":\"integer\",\"uniqueItems\":true}},"
  "{\"name\":\"resourceVersion\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}},"
  "{\"name\":\"resourceVersionMatch\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}},"
  "{\"name\":\"sendInitialEvents\",\"in\":\"query\",\"schema\":{\"type\":\"boolean\",\"uniqueItems\":true}},"
  "{\"name\":\"timeoutSeconds\",\"in\":\"query\",\"schema\":{\"type\":\"integer\",\"uniqueItems\":true}},"
  "{\"name\":\"watch\",\"in\":\"query\",\"schema\":{\"type\":\"boolean\",\"uniqueItems\":true}}";

static void put_content(struct sim_buf *b, const char *ref, bool yaml)
{
  sim_buf_puts(b, "{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/");
  sim_buf_puts(b, ref);
  sim_buf_puts(b, "\"}}");
  if (yaml) {
    sim_buf_puts(b, ",\"application/yaml\":{\"schema\":{\"$ref\":\"#/components/schemas/");
    sim_buf_puts(b, ref);
    sim_buf_puts(b, "\"}}");
  }
  sim_buf_putc(b, '}');
}

/* One operation. action: the x-kubernetes-action value. */
static void put_op(struct sim_buf *b, const char *method, const char *op_id, const char *action,
                   const struct sim_rtype *rt, bool list_kind, const char *params,
                   const char *body_ref, bool patch_body, const char *resp_ref)
{
  sim_buf_printf(b, "\"%s\":{\"tags\":[", method);
  sim_buf_put_jstr(b, rt->gv, strlen(rt->gv));
  sim_buf_printf(b, "],\"operationId\":\"%s\"", op_id);
  if (params && *params) sim_buf_printf(b, ",\"parameters\":[%s]", params);
  if (patch_body) {
    /* No application/strategic-merge-patch+json: kubectl then computes
     * strategic merge patches from its compiled-in types (whose merge keys
     * the simulator implements) instead of from these open schemas. */
    sim_buf_puts(b, ",\"requestBody\":{\"content\":{");
    const char *types[] = {"application/apply-patch+yaml", "application/json-patch+json",
                           "application/merge-patch+json"};
    for (size_t i = 0; i < 3; i++)
      sim_buf_printf(b, "%s\"%s\":{\"schema\":" REF(META "Patch") "}", i ? "," : "", types[i]);
    sim_buf_puts(b, "},\"required\":true}");
  } else if (body_ref) {
    sim_buf_puts(b, ",\"requestBody\":{\"content\":{\"*/*\":{\"schema\":{\"$ref\":\"#/components/schemas/");
    sim_buf_puts(b, body_ref);
    sim_buf_puts(b, "\"}}},\"required\":true}");
  }
  sim_buf_puts(b, ",\"responses\":{\"200\":{\"description\":\"OK\",\"content\":");
  put_content(b, resp_ref, true);
  sim_buf_puts(b, "}");
  if (strcmp(action, "post") == 0) {
    sim_buf_puts(b, ",\"201\":{\"description\":\"Created\",\"content\":");
    put_content(b, resp_ref, true);
    sim_buf_puts(b, "}");
  }
  sim_buf_puts(b, ",\"401\":{\"description\":\"Unauthorized\"}}");
  sim_buf_printf(b, ",\"x-kubernetes-action\":\"%s\",\"x-kubernetes-group-version-kind\":", action);
  put_gvk(b, rt, list_kind ? "List" : "");
  sim_buf_putc(b, '}');
}

static void put_paths_locked(struct sim_buf *b, const struct sim_rtype *rt, bool *first)
{
  char prefix[300], kname[400], lname[400], id[300], params[2048];
  if (*rt->group) snprintf(prefix, sizeof prefix, "/apis/%s/%s", rt->group, rt->version);
  else snprintf(prefix, sizeof prefix, "/api/%s", rt->version);
  schema_name(kname, sizeof kname, rt, "");
  schema_name(lname, sizeof lname, rt, "List");
  const char *nsseg = rt->namespaced ? "/namespaces/{namespace}" : "";
  const char *nsid = rt->namespaced ? "Namespaced" : "";
  const char *pathparam_ns = rt->namespaced ? P_NAMESPACE : "";
  /* collection */
  sim_buf_printf(b, "%s\"%s%s/%s\":{", *first ? "" : ",", prefix, nsseg, rt->plural);
  *first = false;
  snprintf(id, sizeof id, "list%s%s", nsid, rt->kind);
  put_op(b, "get", id, "list", rt, true, LIST_PARAMS, NULL, false, lname);
  sim_buf_putc(b, ',');
  snprintf(params, sizeof params, "%s,%s,%s", P_DRYRUN, P_FIELDMANAGER, P_FIELDVALIDATION);
  snprintf(id, sizeof id, "create%s%s", nsid, rt->kind);
  put_op(b, "post", id, "post", rt, false, params, kname, false, kname);
  sim_buf_putc(b, ',');
  snprintf(id, sizeof id, "deletecollection%s%s", nsid, rt->kind);
  put_op(b, "delete", id, "deletecollection", rt, false, LIST_PARAMS, META "DeleteOptions", false,
         META "Status");
  sim_buf_printf(b, ",\"parameters\":[%s%s%s]}", pathparam_ns, *pathparam_ns ? "," : "", P_PRETTY);
  /* item */
  sim_buf_printf(b, ",\"%s%s/%s/{name}\":{", prefix, nsseg, rt->plural);
  snprintf(id, sizeof id, "read%s%s", nsid, rt->kind);
  put_op(b, "get", id, "get", rt, false, NULL, NULL, false, kname);
  sim_buf_putc(b, ',');
  snprintf(id, sizeof id, "replace%s%s", nsid, rt->kind);
  put_op(b, "put", id, "put", rt, false, params, kname, false, kname);
  sim_buf_putc(b, ',');
  snprintf(id, sizeof id, "delete%s%s", nsid, rt->kind);
  put_op(b, "delete", id, "delete", rt, false, P_DRYRUN, META "DeleteOptions", false, META "Status");
  sim_buf_putc(b, ',');
  char pparams[2048];
  snprintf(pparams, sizeof pparams, "%s,%s,%s,%s", P_DRYRUN, P_FIELDMANAGER, P_FIELDVALIDATION,
           P_FORCE);
  snprintf(id, sizeof id, "patch%s%s", nsid, rt->kind);
  put_op(b, "patch", id, "patch", rt, false, pparams, NULL, true, kname);
  sim_buf_printf(b, ",\"parameters\":[%s,%s%s%s]}", P_NAME, pathparam_ns, *pathparam_ns ? "," : "",
                 P_PRETTY);
  if (rt->has_status) {
    sim_buf_printf(b, ",\"%s%s/%s/{name}/status\":{", prefix, nsseg, rt->plural);
    snprintf(id, sizeof id, "read%s%sStatus", nsid, rt->kind);
    put_op(b, "get", id, "get", rt, false, NULL, NULL, false, kname);
    sim_buf_putc(b, ',');
    snprintf(id, sizeof id, "replace%s%sStatus", nsid, rt->kind);
    put_op(b, "put", id, "put", rt, false, params, kname, false, kname);
    sim_buf_putc(b, ',');
    snprintf(id, sizeof id, "patch%s%sStatus", nsid, rt->kind);
    put_op(b, "patch", id, "patch", rt, false, pparams, NULL, true, kname);
    sim_buf_printf(b, ",\"parameters\":[%s,%s%s%s]}", P_NAME, pathparam_ns,
                   *pathparam_ns ? "," : "", P_PRETTY);
  }
  if (rt->namespaced) {
    sim_buf_printf(b, ",\"%s/%s\":{", prefix, rt->plural);
    snprintf(id, sizeof id, "list%sForAllNamespaces", rt->kind);
    put_op(b, "get", id, "list", rt, true, LIST_PARAMS, NULL, false, lname);
    sim_buf_printf(b, ",\"parameters\":[%s]}", P_PRETTY);
  }
}

struct gv_ctx {
  const char *group, *version;
  struct sim_buf *b;
  bool first;
  int pass; /* 0 paths, 1 schemas */
  size_t n;
};

static void gv_each(struct sim_rtype *rt, void *arg)
{
  struct gv_ctx *c = arg;
  /* Review kinds have no schema here (kubectl posts them from its own types). */
  if (rt->review_only) return;
  if (strcmp(rt->group, c->group) != 0 || strcmp(rt->version, c->version) != 0) return;
  c->n++;
  if (c->pass == 0) {
    put_paths_locked(c->b, rt, &c->first);
  } else {
    sim_buf_putc(c->b, ',');
    put_kind_schema_locked(c->b, rt);
  }
}

/* The document of one group-version; false when nothing is served there.
 * sim_mu held. */
static bool gv_doc_locked(struct sim_buf *b, const char *group, const char *version)
{
  sim_buf_puts(b, "{\"openapi\":\"3.0.0\",\"info\":{\"title\":\"Kubernetes\",\"version\":\"v1.32.0-apisim\"},\"paths\":{");
  struct gv_ctx c = {.group = group, .version = version, .b = b, .first = true};
  sim_types_each_locked(gv_each, &c);
  sim_buf_puts(b, "},\"components\":{\"schemas\":{");
  sim_buf_puts(b, common_schemas);
  c.pass = 1;
  sim_types_each_locked(gv_each, &c);
  sim_buf_puts(b, "},\"securitySchemes\":{\"BearerToken\":{\"type\":\"apiKey\",\"description\":\"Bearer Token authentication\",\"name\":\"authorization\",\"in\":\"header\"}}},"
                  "\"security\":[{\"BearerToken\":[]}]}");
  return c.n > 0;
}

struct root_ctx {
  char **gvs;
  size_t n;
};

static void root_each(struct sim_rtype *rt, void *arg)
{
  struct root_ctx *c = arg;
  if (rt->review_only) return;
  char *p = *rt->group ? sim_xasprintf("apis/%s/%s", rt->group, rt->version)
                       : sim_xasprintf("api/%s", rt->version);
  for (size_t i = 0; i < c->n; i++)
    if (strcmp(c->gvs[i], p) == 0) {
      free(p);
      return;
    }
  c->gvs = sim_xrealloc(c->gvs, (c->n + 1) * sizeof *c->gvs);
  c->gvs[c->n++] = p;
}

static void root_doc_locked(struct sim_buf *b)
{
  struct root_ctx c = {0};
  sim_types_each_locked(root_each, &c);
  sim_buf_puts(b, "{\"paths\":{");
  for (size_t i = 0; i < c.n; i++) {
    const char *p = c.gvs[i];
    struct sim_buf d = {0};
    if (strncmp(p, "api/", 4) == 0) {
      gv_doc_locked(&d, "", p + 4);
    } else {
      char *g = sim_xstrdup(p + 5);
      char *slash = strrchr(g, '/');
      *slash = 0;
      gv_doc_locked(&d, g, slash + 1);
      free(g);
    }
    sim_buf_printf(b, "%s\"%s\":{\"serverRelativeURL\":\"/openapi/v3/%s?hash=%016llX\"}", i ? "," : "",
                   p, p, (unsigned long long)sim_openapi_hash(d.p, d.len));
    sim_buf_free(&d);
    free(c.gvs[i]);
  }
  free(c.gvs);
  sim_buf_puts(b, "}}");
}

void sim_openapi_handle(struct sim_req *req, const char *path, struct sim_resp *resp)
{
  req->verb = "get";
  if (strcmp(req->method, "GET") != 0) {
    struct sim_details d = {0};
    sim_resp_status(resp, 405, "MethodNotAllowed", &d,
                    "the server does not allow this method on the requested resource");
    return;
  }
  if (strcmp(path, "/openapi/v3") == 0 || strcmp(path, "/openapi/v3/") == 0) {
    resp->code = 200;
    pthread_mutex_lock(&sim_mu);
    root_doc_locked(&resp->body);
    pthread_mutex_unlock(&sim_mu);
    return;
  }
  const char *rest = strncmp(path, "/openapi/v3/", 12) == 0 ? path + 12 : NULL;
  char group[256], version[64];
  bool ok = false;
  if (rest && strncmp(rest, "api/", 4) == 0 && !strchr(rest + 4, '/')) {
    ok = snprintf(version, sizeof version, "%s", rest + 4) < (int)sizeof version;
    group[0] = 0;
  } else if (rest && strncmp(rest, "apis/", 5) == 0) {
    const char *g = rest + 5, *slash = strchr(g, '/');
    if (slash && !strchr(slash + 1, '/') && (size_t)(slash - g) < sizeof group) {
      snprintf(group, sizeof group, "%.*s", (int)(slash - g), g);
      ok = snprintf(version, sizeof version, "%s", slash + 1) < (int)sizeof version;
    }
  }
  if (ok) {
    pthread_mutex_lock(&sim_mu);
    ok = sim_group_version_served_locked(group, version) &&
         gv_doc_locked(&resp->body, group, version);
    pthread_mutex_unlock(&sim_mu);
    if (ok) {
      resp->code = 200;
      return;
    }
  }
  if (strcmp(path, "/openapi/v2") == 0) {
    /* A Swagger 2.0 document without definitions. kubectl falls back to it
     * for a kind whose PATCH operation v3 does not describe (a CR whose CRD
     * is created by the same `kubectl apply`): no definition means
     * kubectl's client-side validation skips the object, as with a real
     * server that has not seen the CRD yet. Protobuf is gnostic's
     * openapi_v2.Document: swagger = 1, info = 2 {title = 1, version = 2}. */
    const char *a = sim_req_header(req, "Accept");
    resp->code = 200;
    if (a && strstr(a, "protobuf")) {
      static const char pb[] = "\x0a\x03" "2.0" "\x12\x1c" "\x0a\x0a" "Kubernetes" "\x12\x0e" "v1.32.0-apisim";
      /* The Accept form has an "@", which Go's mime parser refuses. */
      resp->ctype = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
      sim_buf_put(&resp->body, pb, sizeof pb - 1);
    } else {
      sim_buf_puts(&resp->body, "{\"swagger\":\"2.0\",\"info\":{\"title\":\"Kubernetes\",\"version\":\"v1.32.0-apisim\"},\"paths\":{}}");
    }
    return;
  }
  sim_buf_free(&resp->body);
  resp->code = 404;
  resp->ctype = "text/plain; charset=utf-8";
  sim_buf_puts(&resp->body, "404 page not found\n");
}
