/* SPDX-License-Identifier: Apache-2.0 */
/* Write side of the REST handlers: create, update, patch, delete. */
#include "api_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fieldmgr.h"
#include "fieldval.h"
#include "patch.h"
#include "protobuf.h"

static void set_uid_time(jv *md)
{
  char uid[40], now[32];
  sim_uuid(uid);
  sim_time_rfc3339(now, sizeof now);
  jv_set_str(md, "uid", uid);
  jv_set_str(md, "creationTimestamp", now);
}

static void invalid(struct sim_resp *resp, const struct sim_rtype *rt, const char *name,
                    const char *field, const char *creason, const char *cmsg)
{
  struct sim_details d = {0};
  d.name = name;
  d.group = rt->group;
  d.kind = rt->kind;
  d.cfield = field;
  d.creason = creason;
  d.cmsg = cmsg;
  sim_resp_status(resp, 422, "Invalid", &d, "%s.%s \"%s\" is invalid: %s: %s", rt->kind,
                  *rt->group ? rt->group : "", name ? name : "", field, cmsg);
  /* kube-apiserver writes Kind "name" for core types (no trailing dot). */
  if (!*rt->group) {
    sim_buf_free(&resp->body);
    sim_resp_status(resp, 422, "Invalid", &d, "%s \"%s\" is invalid: %s: %s", rt->kind,
                    name ? name : "", field, cmsg);
  }
}

static void conflict(struct sim_resp *resp, const struct sim_rtype *rt, const char *name,
                     const char *why)
{
  struct sim_details d;
  char q[300];
  sim_details_for(&d, rt, name);
  sim_qualified(q, sizeof q, rt);
  sim_resp_status(resp, 409, "Conflict", &d, "Operation cannot be fulfilled on %s \"%s\": %s", q,
                  name, why);
}

static void not_found(struct sim_resp *resp, const struct sim_rtype *rt, const char *name)
{
  struct sim_details d;
  char q[300];
  sim_details_for(&d, rt, name);
  sim_qualified(q, sizeof q, rt);
  sim_resp_status(resp, 404, "NotFound", &d, "%s \"%s\" not found", q, name);
}

static const char *OPTIMISTIC =
  "the object has been modified; please apply your changes to the latest version and try again";

/* ---- body decoding ---- */

static char *media_type(const char *ct)
{
  if (!ct) return sim_xstrdup("");
  const char *semi = strchr(ct, ';');
  size_t n = semi ? (size_t)(semi - ct) : strlen(ct);
  while (n && ct[n - 1] == ' ') n--;
  char *m = sim_xstrndup(ct, n);
  for (char *c = m; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
  return m;
}

static bool too_large(struct sim_req *req, struct sim_resp *resp)
{
  if (!req->too_large) return false;
  struct sim_details d = {0};
  sim_resp_status(resp, 413, "RequestEntityTooLarge", &d, "Request entity too large: limit is %u",
                  SIM_MAX_BODY);
  return true;
}

static jv *parse_doc(const char *buf, size_t len, bool yaml, char *err, size_t errlen)
{
  if (!yaml) return jv_parse(buf, len, err, errlen);
  jv **docs = NULL;
  size_t n = 0;
  char *e = NULL;
  if (sim_yaml_parse_all(buf, len, &docs, &n, &e) < 0 || n == 0) {
    snprintf(err, errlen, "%s", e ? e : "empty document");
    free(e);
    for (size_t i = 0; i < n; i++) jv_free(docs[i]);
    free(docs);
    return NULL;
  }
  for (size_t i = 1; i < n; i++) jv_free(docs[i]);
  jv *d = docs[0];
  free(docs);
  return d;
}

/* Go's unmarshal errors for the typed ObjectMeta fields we check. */
static const char *meta_type_error(const jv *dom)
{
  const jv *md = jv_get(dom, "metadata");
  if (!md) return NULL;
  if (md->t != J_OBJ) return "json: cannot unmarshal into Go struct field .metadata of type v1.ObjectMeta";
  static const char *strs[] = {"name", "namespace", "generateName", "resourceVersion", "uid", NULL};
  for (int i = 0; strs[i]; i++) {
    const jv *v = jv_get(md, strs[i]);
    if (v && v->t != J_STR && v->t != J_NULL) return "json: cannot unmarshal into Go struct field ObjectMeta.metadata of type string";
  }
  static const char *maps[] = {"labels", "annotations", NULL};
  for (int i = 0; maps[i]; i++) {
    const jv *v = jv_get(md, maps[i]);
    if (!v || v->t == J_NULL) continue;
    if (v->t != J_OBJ) return "json: cannot unmarshal into Go struct field ObjectMeta.metadata.labels of type map[string]string";
    for (size_t j = 0; j < v->n; j++)
      if (v->u.o[j].v->t != J_STR) return "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string";
  }
  const jv *f = jv_get(md, "finalizers");
  if (f && f->t != J_NULL) {
    if (f->t != J_ARR) return "json: cannot unmarshal into Go struct field ObjectMeta.metadata.finalizers of type []string";
    for (size_t j = 0; j < f->n; j++)
      if (f->u.a[j]->t != J_STR) return "json: cannot unmarshal into Go struct field ObjectMeta.metadata.finalizers of type string";
  }
  return NULL;
}

static bool microtime_ok(const char *s)
{
  /* 2006-01-02T15:04:05.000000Z07:00 */
  const char *pat = "dddd-dd-ddTdd:dd:dd.dddddd";
  for (size_t i = 0; pat[i]; i++) {
    if (!s[i]) return false;
    if (pat[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i]) return false;
  }
  s += strlen(pat);
  if (strcmp(s, "Z") == 0) return true;
  return (s[0] == '+' || s[0] == '-') && strlen(s) == 6 && s[3] == ':';
}

/* fieldValidation=Strict: unknown fields are a 400 (false); Warn: a
 * Warning header; absent or Ignore: nothing (tests/apisim/fieldval.h). */
static bool field_validation(struct sim_req *req, const struct sim_rtype *rt, const jv *dom,
                             struct sim_resp *resp)
{
  const char *fv = sim_req_query(req, "fieldValidation");
  bool strict = fv && strcmp(fv, "Strict") == 0, warn = fv && strcmp(fv, "Warn") == 0;
  char *unk = NULL;
  if (!(strict || warn) || !sim_fieldval_unknown(rt, dom, &unk)) return true;
  if (strict) {
    struct sim_details d = {0};
    sim_resp_status(resp, 400, "BadRequest", &d,
                    "%s in version \"%s\" cannot be handled as a %s: strict decoding error: %s",
                    rt->kind, rt->version, rt->kind, unk);
    free(unk);
    return false;
  }
  struct sim_buf w = {0};
  sim_buf_puts(&w, "299 - ");
  sim_buf_put_jstr(&w, unk, strlen(unk));
  free(resp->warning);
  resp->warning = sim_buf_steal(&w, NULL);
  free(unk);
  return true;
}

/* Decodes the body of a POST/PUT into an object of type rt. */
static jv *decode_object(struct sim_req *req, const struct sim_rtype *rt, struct sim_resp *resp)
{
  struct sim_details d = {0};
  if (too_large(req, resp)) return NULL;
  char *mt = media_type(sim_req_header(req, "Content-Type"));
  bool yaml = strcmp(mt, "application/yaml") == 0;
  bool pb = strcmp(mt, SIM_PB_MEDIA_TYPE) == 0;
  if (*mt && strcmp(mt, "application/json") != 0 && !yaml && !pb) {
    sim_resp_status(resp, 415, "UnsupportedMediaType", &d,
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf");
    free(mt);
    return NULL;
  }
  free(mt);
  char err[512];
  jv *dom = NULL;
  if (pb) {
    char *perr = NULL;
    int rc = sim_pb_decode(req->body ? req->body : "", req->blen, &dom, &perr);
    if (rc == -ENOTSUP)
      sim_resp_status(resp, 415, "UnsupportedMediaType", &d, "%s", perr);
    else if (rc < 0)
      sim_resp_status(resp, 400, "BadRequest", &d, "%s in version \"%s\" cannot be handled as a %s: %s",
                      rt->kind, rt->version, rt->kind, perr);
    free(perr);
    if (rc < 0) return NULL;
  } else {
    dom = parse_doc(req->body ? req->body : "", req->blen, yaml, err, sizeof err);
  }
  if (!dom || dom->t != J_OBJ) {
    if (dom) snprintf(err, sizeof err, "json: cannot unmarshal into Go value of type struct");
    sim_resp_status(resp, 400, "BadRequest", &d, "%s in version \"%s\" cannot be handled as a %s: %s",
                    rt->kind, rt->version, rt->kind, err);
    for (char *c = err; *c; c++) if (*c == '\n') *c = ' ';
    jv_free(dom);
    return NULL;
  }
  const char *av = jv_gets(dom, "apiVersion"), *kind = jv_gets(dom, "kind");
  if (av && *av && strcmp(av, rt->gv) != 0) {
    sim_resp_status(resp, 400, "BadRequest", &d,
                    "the API version in the data (%s) does not match the expected API version (%s)", av, rt->gv);
    jv_free(dom);
    return NULL;
  }
  if (kind && *kind && strcmp(kind, rt->kind) != 0) {
    sim_resp_status(resp, 400, "BadRequest", &d,
                    "%s in version \"%s\" cannot be handled as a %s: the kind in the data (%s) does not match the expected kind (%s)",
                    rt->kind, rt->version, rt->kind, kind, rt->kind);
    jv_free(dom);
    return NULL;
  }
  const char *te = meta_type_error(dom);
  if (te) {
    sim_resp_status(resp, 400, "BadRequest", &d, "%s in version \"%s\" cannot be handled as a %s: %s",
                    rt->kind, rt->version, rt->kind, te);
    jv_free(dom);
    return NULL;
  }
  if (!field_validation(req, rt, dom, resp)) {
    jv_free(dom);
    return NULL;
  }
  if (rt->is_lease) {
    const jv *spec = jv_get(dom, "spec");
    const char *f[] = {"acquireTime", "renewTime"};
    for (int i = 0; i < 2; i++) {
      const jv *v = jv_get(spec, f[i]);
      if (v && v->t != J_NULL && (v->t != J_STR || !microtime_ok(v->u.s))) {
        sim_resp_status(resp, 400, "BadRequest", &d,
                        "Lease in version \"v1\" cannot be handled as a Lease: parsing time \"%s\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse",
                        jv_str(v) ? jv_str(v) : "");
        jv_free(dom);
        return NULL;
      }
    }
  }
  return dom;
}

/* ---- validation (422) ---- */

static bool dns_subdomain(const char *s)
{
  size_t n = strlen(s);
  if (!n || n > 253) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (alnum) continue;
    if ((c == '-' || c == '.') && i && i + 1 < n && s[i - 1] != '.' && (c != '.' || s[i + 1] != '.')) continue;
    return false;
  }
  return true;
}

static bool dns_label(const char *s)
{
  return dns_subdomain(s) && !strchr(s, '.') && strlen(s) <= 63;
}

/* Returns false (and fills resp) when the object is invalid. */
static bool validate(struct sim_resp *resp, const struct sim_rtype *rt, const jv *dom, bool create)
{
  const jv *md = jv_get(dom, "metadata");
  const char *name = jv_gets(md, "name");
  char msg[600];
  if (create) {
    if (!name || !*name) {
      invalid(resp, rt, "", "metadata.name", "FieldValueRequired",
              "Required value: name or generateName is required");
      return false;
    }
    bool label_only = strcmp(rt->plural, "namespaces") == 0;
    if (label_only ? !dns_label(name) : !dns_subdomain(name)) {
      snprintf(msg, sizeof msg,
               label_only
                 ? "Invalid value: \"%s\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                 : "Invalid value: \"%s\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
               name);
      invalid(resp, rt, name, "metadata.name", "FieldValueInvalid", msg);
      return false;
    }
  }
  const jv *spec = jv_get(dom, "spec");
  if (!rt->is_crd && strcmp(rt->plural, "pods") == 0) {
    const jv *c = jv_get(spec, "containers");
    if (!c || c->t != J_ARR || c->n == 0) {
      invalid(resp, rt, name, "spec.containers", "FieldValueRequired", "Required value");
      return false;
    }
    for (size_t i = 0; i < c->n; i++) {
      char f[64];
      if (!jv_gets(c->u.a[i], "name") || !*jv_gets(c->u.a[i], "name")) {
        snprintf(f, sizeof f, "spec.containers[%zu].name", i);
        invalid(resp, rt, name, f, "FieldValueRequired", "Required value");
        return false;
      }
      if (!jv_gets(c->u.a[i], "image") || !*jv_gets(c->u.a[i], "image")) {
        snprintf(f, sizeof f, "spec.containers[%zu].image", i);
        invalid(resp, rt, name, f, "FieldValueRequired", "Required value");
        return false;
      }
    }
  }
  if (!rt->is_crd && strcmp(rt->group, "apps") == 0) {
    const jv *sel = jv_get(spec, "selector");
    if (!sel || sel->t != J_OBJ) {
      invalid(resp, rt, name, "spec.selector", "FieldValueRequired", "Required value");
      return false;
    }
    const jv *ml = jv_get(sel, "matchLabels");
    const jv *tl = jv_geta(spec, "template", "metadata", "labels", (const char *)NULL);
    for (size_t i = 0; ml && ml->t == J_OBJ && i < ml->n; i++) {
      const char *v = jv_gets(tl, ml->u.o[i].k);
      if (!v || !jv_str(ml->u.o[i].v) || strcmp(v, jv_str(ml->u.o[i].v)) != 0) {
        invalid(resp, rt, name, "spec.template.metadata.labels", "FieldValueInvalid",
                "Invalid value: map[string]string(nil): `selector` does not match template `labels`");
        return false;
      }
    }
  }
  if (!rt->is_crd && strcmp(rt->plural, "customresourcedefinitions") == 0) {
    char *field, *m;
    if (sim_crd_validate(dom, &field, &m) < 0) {
      invalid(resp, rt, name, field, "FieldValueInvalid", m);
      free(field);
      free(m);
      return false;
    }
  }
  return true;
}

/* ---- create ---- */

static bool ns_exists_locked(const char *ns)
{
  struct sim_rtype *nt = sim_type_find_locked("", "v1", "namespaces");
  return sim_coll_get_locked(nt->coll, ns) != NULL;
}

/* Stores a new object (sim_mu held). Takes dom. */
static struct sim_obj *commit_create_locked(const struct sim_rtype *rt, jv *dom)
{
  struct sim_obj *o = sim_obj_new(dom, ++sim_rv);
  sim_coll_put_locked(rt->coll, sim_obj_ref(o));
  sim_emit_locked(SIM_ADDED, rt->coll, sim_obj_ref(o), NULL);
  if (!rt->is_crd && strcmp(rt->plural, "customresourcedefinitions") == 0)
    sim_crd_apply_locked(o->dom);
  return o;
}

static void prepare_create(const struct sim_rtype *rt, jv *dom)
{
  jv *md = jv_obj_ensure(dom, "metadata");
  set_uid_time(md);
  jv_del(md, "deletionTimestamp");
  jv_del(md, "deletionGracePeriodSeconds");
  if (rt->track_generation) jv_set(md, "generation", jv_int_new(1));
  if (rt->is_crd) {
    if (rt->has_status) jv_del(dom, "status");
  } else if (strcmp(rt->plural, "pods") == 0) {
    jv *st = jv_new(J_OBJ);
    jv_set_str(st, "phase", "Pending");
    jv_set_str(st, "qosClass", "BestEffort");
    jv_set(dom, "status", st);
  } else if (strcmp(rt->plural, "namespaces") == 0) {
    jv *spec = jv_new(J_OBJ), *fin = jv_new(J_ARR);
    jv_push(fin, jv_str_new("kubernetes"));
    jv_set(spec, "finalizers", fin);
    jv_set(dom, "spec", spec);
    jv *st = jv_new(J_OBJ);
    jv_set_str(st, "phase", "Active");
    jv_set(dom, "status", st);
    jv *labels = jv_obj_ensure(md, "labels");
    jv_set_str(labels, "kubernetes.io/metadata.name", jv_gets(md, "name") ? jv_gets(md, "name") : "");
  } else if (strcmp(rt->plural, "customresourcedefinitions") == 0) {
    sim_crd_set_status(dom);
  } else if (rt->has_status) {
    jv_del(dom, "status");
  }
}

static bool dry_run(struct sim_req *req)
{
  const char *d = sim_req_query(req, "dryRun");
  return d && strcmp(d, "All") == 0;
}

static struct sim_fm_opts fm_opts(const struct route *r)
{
  return (struct sim_fm_opts){.api_version = r->rt->gv, .sub = r->sub,
                              .ignore_status = r->rt->has_status && !r->sub,
                              .builtin = !r->rt->is_crd};
}

/* The manager of a non-apply write: fieldManager, else from the User-Agent
 * (malloc'd). */
static char *update_manager(struct sim_req *req)
{
  const char *fm = sim_req_query(req, "fieldManager");
  if (fm && *fm) return sim_xstrdup(fm);
  return sim_fm_manager_from_ua(sim_req_header(req, "User-Agent"));
}

/* The create path (POST, create-on-PUT, apply of a missing object: fm_done,
 * its managedFields are set already). Takes dom. */
static void do_create(struct sim_req *req, struct route *r, jv *dom, bool fm_done,
                      struct sim_resp *resp)
{
  struct sim_details d = {0};
  const struct sim_rtype *rt = r->rt;
  jv *md = jv_obj_ensure(dom, "metadata");
  if (rt->namespaced) {
    const char *bns = jv_gets(md, "namespace");
    if (bns && *bns && strcmp(bns, r->ns) != 0) {
      sim_resp_status(resp, 400, "BadRequest", &d,
                      "the namespace of the provided object does not match the namespace sent on the request");
      jv_free(dom);
      return;
    }
    jv_set_str(md, "namespace", r->ns);
  } else {
    jv_del(md, "namespace");
  }
  const char *name = jv_gets(md, "name");
  const char *gen = jv_gets(md, "generateName");
  if ((!name || !*name) && gen && *gen) {
    char sfx[8];
    sim_rand_suffix(sfx, 5);
    char *n = sim_xasprintf("%s%s", gen, sfx);
    jv_set_str(md, "name", n);
    free(n);
  }
  const char *rv = jv_gets(md, "resourceVersion");
  if (rv && *rv) {
    sim_resp_status(resp, 500, NULL, &d, "resourceVersion should not be set on objects to be created");
    jv_free(dom);
    return;
  }
  if (!fm_done) {
    struct sim_fm_opts fo = fm_opts(r);
    char *mgr = update_manager(req);
    sim_fm_update(&fo, NULL, dom, mgr);
    free(mgr);
  }
  prepare_create(rt, dom);
  if (!validate(resp, rt, dom, true)) {
    jv_free(dom);
    return;
  }
  name = jv_gets(md, "name");
  char *key = rt->namespaced ? sim_xasprintf("%s/%s", r->ns, name) : sim_xstrdup(name);
  pthread_mutex_lock(&sim_mu);
  if (rt->namespaced && !ns_exists_locked(r->ns)) {
    pthread_mutex_unlock(&sim_mu);
    d.name = r->ns;
    d.kind = "namespaces";
    sim_resp_status(resp, 404, "NotFound", &d, "namespaces \"%s\" not found", r->ns);
    goto out;
  }
  struct sim_obj *ex = sim_coll_get_locked(rt->coll, key);
  if (ex) {
    bool term = jv_geta(ex->dom, "metadata", "deletionTimestamp", (const char *)NULL) != NULL;
    pthread_mutex_unlock(&sim_mu);
    char q[300];
    sim_details_for(&d, rt, name);
    sim_qualified(q, sizeof q, rt);
    sim_resp_status(resp, 409, "AlreadyExists", &d, "%s%s \"%s\" already exists",
                    term ? "object is being deleted: " : "", q, name);
    goto out;
  }
  if (dry_run(req)) {
    pthread_mutex_unlock(&sim_mu);
    struct sim_obj *o = sim_obj_new(dom, sim_rv);
    dom = NULL;
    sim_respond_obj(resp, 201, rt, o, false);
    sim_obj_unref(o);
    goto out;
  }
  struct sim_obj *o = commit_create_locked(rt, dom);
  dom = NULL;
  pthread_mutex_unlock(&sim_mu);
  sim_respond_obj(resp, 201, rt, o, false);
  sim_obj_unref(o);
out:
  free(key);
  jv_free(dom);
}

void sim_handle_create(struct sim_req *req, struct route *r, struct sim_resp *resp)
{
  jv *dom = decode_object(req, r->rt, resp);
  if (!dom) return;
  do_create(req, r, dom, false, resp);
}

/* ---- update (shared by PUT and PATCH) ---- */

static bool strset_has(const jv *arr, const char *s)
{
  for (size_t i = 0; arr && arr->t == J_ARR && i < arr->n; i++)
    if (jv_str(arr->u.a[i]) && strcmp(jv_str(arr->u.a[i]), s) == 0) return true;
  return false;
}

static void copy_member(jv *dst, const jv *src, const char *key)
{
  const jv *v = jv_get(src, key);
  if (v) jv_set(dst, key, jv_copy(v));
  else jv_del(dst, key);
}

/* True when anything outside metadata (and status, with a status
 * subresource) differs: that bumps generation. */
static bool spec_changed(const struct sim_rtype *rt, const jv *a, const jv *b)
{
  const jv *objs[2] = {a, b};
  for (int pass = 0; pass < 2; pass++) {
    const jv *x = objs[pass], *y = objs[1 - pass];
    for (size_t i = 0; i < x->n; i++) {
      const char *k = x->u.o[i].k;
      if (strcmp(k, "metadata") == 0 || strcmp(k, "kind") == 0 || strcmp(k, "apiVersion") == 0) continue;
      if (rt->has_status && strcmp(k, "status") == 0) continue;
      if (!jv_equal(x->u.o[i].v, jv_get(y, k))) return true;
    }
  }
  return false;
}

/* Applies nd (taken) over old (sim_mu held). On success fills resp.
 * fm_done: nd's managedFields are computed (apply); else the write is
 * recorded as an Update of its manager. */
/* A ConfigMap or Secret with `immutable: true` keeps its data, binaryData
 * and immutable (kube's ValidateConfigMapUpdate / ValidateSecretUpdate):
 * false with a 422 in resp when an update changes one. */
static bool immutable_kept(struct sim_resp *resp, const struct sim_rtype *rt, const char *name,
                           const jv *old, const jv *nd)
{
  static const char *const fields[] = {"immutable", "data", "binaryData"};
  const jv *im = jv_get(old, "immutable");
  if (*rt->group || (strcmp(rt->kind, "ConfigMap") && strcmp(rt->kind, "Secret")) || !im ||
      im->t != J_TRUE)
    return true;
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    if (jv_equal(jv_get(old, fields[i]), jv_get(nd, fields[i]))) continue;
    invalid(resp, rt, name, fields[i], "FieldValueForbidden",
            "Forbidden: field is immutable when `immutable` is set");
    return false;
  }
  return true;
}

static void commit_update_locked(struct sim_req *req, struct route *r, struct sim_obj *old,
                                 jv *nd, bool is_put, bool fm_done, struct sim_resp *resp)
{
  const struct sim_rtype *rt = r->rt;
  const jv *omd = jv_get(old->dom, "metadata");
  jv *md = jv_obj_ensure(nd, "metadata");
  const char *name = old->name;
  const char *brv = jv_gets(md, "resourceVersion");
  char oldrv[24];
  snprintf(oldrv, sizeof oldrv, "%llu", (unsigned long long)old->rv);
  if (is_put && (!brv || !*brv) && !rt->allow_unconditional_update) {
    invalid(resp, rt, name, "metadata.resourceVersion", "FieldValueInvalid",
            "Invalid value: 0x0: must be specified for an update");
    goto fail;
  }
  if (brv && *brv && strcmp(brv, oldrv) != 0) {
    conflict(resp, rt, name, OPTIMISTIC);
    goto fail;
  }
  const char *buid = jv_gets(md, "uid"), *ouid = jv_gets(omd, "uid");
  if (buid && *buid && ouid && strcmp(buid, ouid) != 0) {
    char *why = sim_xasprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", buid, ouid);
    conflict(resp, rt, name, why);
    free(why);
    goto fail;
  }
  if (r->sub) {
    if (rt->status_reset == SIM_RESET_CR) {
      jv *res = jv_copy(old->dom);
      copy_member(res, nd, "status");
      jv_free(nd);
      nd = res;
      md = jv_obj_ensure(nd, "metadata");
    } else {
      copy_member(nd, old->dom, "spec");
      copy_member(md, omd, "ownerReferences");
      if (rt->status_reset == SIM_RESET_META) {
        copy_member(md, omd, "labels");
        copy_member(md, omd, "annotations");
        copy_member(md, omd, "finalizers");
      }
    }
  } else if (rt->has_status) {
    copy_member(nd, old->dom, "status");
  }
  /* Server-owned metadata comes from storage. */
  copy_member(md, omd, "uid");
  copy_member(md, omd, "name");
  copy_member(md, omd, "namespace");
  copy_member(md, omd, "creationTimestamp");
  if (jv_get(omd, "generation") || rt->track_generation) copy_member(md, omd, "generation");
  const jv *odel = jv_get(omd, "deletionTimestamp");
  if (odel) {
    copy_member(md, omd, "deletionTimestamp");
    copy_member(md, omd, "deletionGracePeriodSeconds");
    const jv *nf = jv_get(md, "finalizers");
    for (size_t i = 0; nf && nf->t == J_ARR && i < nf->n; i++) {
      const char *f = jv_str(nf->u.a[i]);
      if (f && !strset_has(jv_get(omd, "finalizers"), f)) {
        char *m = sim_xasprintf("Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"%s\"}", f);
        invalid(resp, rt, name, "metadata.finalizers", "FieldValueForbidden", m);
        free(m);
        goto fail;
      }
    }
  } else if (jv_get(md, "deletionTimestamp") && jv_get(md, "deletionTimestamp")->t != J_NULL) {
    invalid(resp, rt, name, "metadata.deletionTimestamp", "FieldValueInvalid",
            "Invalid value: \"set\": field is immutable; may only be changed via deletion");
    goto fail;
  } else {
    jv_del(md, "deletionTimestamp");
    jv_del(md, "deletionGracePeriodSeconds");
  }
  if (!fm_done) {
    struct sim_fm_opts fo = fm_opts(r);
    char *mgr = update_manager(req);
    sim_fm_update(&fo, old->dom, nd, mgr);
    free(mgr);
  }
  if (!validate(resp, rt, nd, false)) goto fail;
  if (!immutable_kept(resp, rt, name, old->dom, nd)) goto fail;
  if (rt->track_generation && spec_changed(rt, old->dom, nd)) {
    int64_t g = 0;
    jv_int(jv_get(omd, "generation"), &g);
    jv_set(md, "generation", jv_int_new(g + 1));
  }
  jv_del(nd, "kind");
  jv_del(nd, "apiVersion");
  jv_set_str(md, "resourceVersion", oldrv);
  size_t blen;
  char *body = jv_dump(nd, &blen);
  bool noop = blen == old->blen && memcmp(body, old->body, blen) == 0;
  free(body);
  if (noop) {
    /* Identical to storage: not written, same RV, no event. */
    sim_respond_obj(resp, 200, rt, old, false);
    jv_free(nd);
    return;
  }
  if (dry_run(req)) {
    struct sim_obj *o = sim_obj_new(nd, old->rv);
    sim_respond_obj(resp, 200, rt, o, false);
    sim_obj_unref(o);
    return;
  }
  const jv *fin = jv_get(md, "finalizers");
  if (odel && (!fin || fin->t != J_ARR || fin->n == 0)) {
    /* The last finalizer went: the object is deleted. Watchers get the last
     * stored state; the writer gets the object as its update made it. */
    struct sim_obj *dobj = sim_obj_new(jv_copy(old->dom), ++sim_rv);
    struct sim_obj *oldref = sim_obj_ref(old);
    sim_coll_del_locked(rt->coll, old->key);
    sim_emit_locked(SIM_DELETED, rt->coll, dobj, oldref);
    struct sim_obj *resobj = sim_obj_new(nd, oldref->rv);
    sim_respond_obj(resp, 200, rt, resobj, false);
    sim_obj_unref(resobj);
    if (!rt->is_crd && strcmp(rt->plural, "customresourcedefinitions") == 0)
      sim_crd_remove_locked(oldref->name);
    return;
  }
  struct sim_obj *o = sim_obj_new(nd, ++sim_rv);
  struct sim_obj *oldref = sim_obj_ref(old);
  sim_coll_put_locked(rt->coll, sim_obj_ref(o));
  sim_emit_locked(SIM_MODIFIED, rt->coll, sim_obj_ref(o), oldref);
  if (!rt->is_crd && strcmp(rt->plural, "customresourcedefinitions") == 0)
    sim_crd_apply_locked(o->dom);
  sim_respond_obj(resp, 200, rt, o, false);
  sim_obj_unref(o);
  return;
fail:
  jv_free(nd);
}

static char *item_key(struct route *r)
{
  return r->ns ? sim_xasprintf("%s/%s", r->ns, r->name) : sim_xstrdup(r->name);
}

static bool name_matches(const jv *dom, struct route *r, struct sim_resp *resp)
{
  const jv *md = jv_get(dom, "metadata");
  const char *n = jv_gets(md, "name");
  struct sim_details d = {0};
  if (n && *n && strcmp(n, r->name) != 0) {
    sim_resp_status(resp, 400, "BadRequest", &d,
                    "the name of the object (%s) does not match the name on the URL (%s)", n, r->name);
    return false;
  }
  const char *ns = jv_gets(md, "namespace");
  if (r->ns && ns && *ns && strcmp(ns, r->ns) != 0) {
    sim_resp_status(resp, 400, "BadRequest", &d,
                    "the namespace of the provided object does not match the namespace sent on the request");
    return false;
  }
  return true;
}

void sim_handle_update(struct sim_req *req, struct route *r, struct sim_resp *resp)
{
  jv *dom = decode_object(req, r->rt, resp);
  if (!dom) return;
  if (!name_matches(dom, r, resp)) {
    jv_free(dom);
    return;
  }
  char *key = item_key(r);
  pthread_mutex_lock(&sim_mu);
  struct sim_obj *old = sim_coll_get_locked(r->rt->coll, key);
  if (!old) {
    pthread_mutex_unlock(&sim_mu);
    if (r->rt->create_on_update && !r->sub) {
      jv_set_str(jv_obj_ensure(dom, "metadata"), "name", r->name);
      jv_del(jv_get(dom, "metadata"), "resourceVersion");
      do_create(req, r, dom, false, resp);
    } else {
      not_found(resp, r->rt, r->name);
      jv_free(dom);
    }
    free(key);
    return;
  }
  commit_update_locked(req, r, old, dom, true, false, resp);
  pthread_mutex_unlock(&sim_mu);
  free(key);
}

/* ---- patch ---- */

/* Server-side apply of config over live (NULL: create). Returns the new
 * object with its managedFields, or NULL with resp filled (409 conflicts,
 * 400/422 malformed intent). */
static jv *apply_intent(struct sim_req *req, struct route *r, const jv *live, const jv *config,
                        const char *manager, struct sim_resp *resp)
{
  struct sim_fm_opts fo = fm_opts(r);
  jv *out = NULL;
  char *status = NULL, *err = NULL;
  int code = 0;
  int rc = sim_fm_apply(&fo, live, config, manager, sim_query_bool(req, "force"), &out, &status,
                        &code, &err);
  if (rc == -EBUSY) {
    resp->code = 409;
    resp->body.len = 0;
    sim_buf_puts(&resp->body, status);
  } else if (rc < 0) {
    struct sim_details d = {0};
    if (code == 422) {
      d.name = r->name;
      d.group = r->rt->group;
      d.kind = r->rt->kind;
      sim_resp_status(resp, 422, "Invalid", &d, "%s", err);
    } else {
      sim_resp_status(resp, 400, "BadRequest", &d, "%s", err);
    }
  }
  free(status);
  free(err);
  return out;
}

void sim_handle_patch(struct sim_req *req, struct route *r, struct sim_resp *resp)
{
  struct sim_details d = {0};
  if (too_large(req, resp)) return;
  char *mt = media_type(sim_req_header(req, "Content-Type"));
  enum { P_MERGE, P_JSON, P_SMP, P_APPLY } kind;
  if (strcmp(mt, "application/merge-patch+json") == 0) kind = P_MERGE;
  else if (strcmp(mt, "application/json-patch+json") == 0) kind = P_JSON;
  else if (strcmp(mt, "application/strategic-merge-patch+json") == 0) kind = P_SMP;
  else if (strcmp(mt, "application/apply-patch+yaml") == 0) kind = P_APPLY;
  else {
    sim_resp_status(resp, 415, "UnsupportedMediaType", &d,
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml%s",
                    r->rt->is_crd ? "" : ", application/strategic-merge-patch+json");
    free(mt);
    return;
  }
  free(mt);
  if (kind == P_SMP && r->rt->is_crd) {
    sim_resp_status(resp, 415, "UnsupportedMediaType", &d,
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
    return;
  }
  const char *fm = sim_req_query(req, "fieldManager");
  if (kind == P_APPLY && (!fm || !*fm)) {
    d.group = "meta.k8s.io";
    d.kind = "PatchOptions";
    d.cfield = "fieldManager";
    d.creason = "FieldValueRequired";
    d.cmsg = "Required value: is required for apply patch";
    sim_resp_status(resp, 422, "Invalid", &d,
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch");
    return;
  }
  if (kind != P_APPLY && sim_req_query(req, "force")) {
    d.group = "meta.k8s.io";
    d.kind = "PatchOptions";
    d.cfield = "force";
    d.creason = "FieldValueForbidden";
    d.cmsg = "Forbidden: may not be specified for non-apply patch";
    sim_resp_status(resp, 422, "Invalid", &d,
                    "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch");
    return;
  }
  char err[512];
  jv *patch = parse_doc(req->body ? req->body : "", req->blen, kind == P_APPLY, err, sizeof err);
  if (!patch) {
    sim_resp_status(resp, 400, "BadRequest", &d, "error decoding patch: %s", err);
    return;
  }
  if (kind != P_JSON && patch->t != J_OBJ) {
    sim_resp_status(resp, 400, "BadRequest", &d, "error decoding patch: json: cannot unmarshal into Go value of type map[string]interface {}");
    jv_free(patch);
    return;
  }
  /* Merge, strategic and apply patches are partial objects: their
   * unknown fields are the object's (JSON patches are not checked). */
  if (kind != P_JSON && !field_validation(req, r->rt, patch, resp)) {
    jv_free(patch);
    return;
  }
  char *key = item_key(r);
  pthread_mutex_lock(&sim_mu);
  struct sim_obj *old = sim_coll_get_locked(r->rt->coll, key);
  if (!old) {
    pthread_mutex_unlock(&sim_mu);
    if (kind == P_APPLY && !r->sub) {
      if (name_matches(patch, r, resp)) {
        jv_set_str(jv_obj_ensure(patch, "metadata"), "name", r->name);
        jv *created = apply_intent(req, r, NULL, patch, fm, resp);
        if (created) do_create(req, r, created, true, resp);
      }
    } else {
      not_found(resp, r->rt, r->name);
    }
    jv_free(patch);
    free(key);
    return;
  }
  jv *cur = jv_copy(old->dom);
  jv_set_str(cur, "apiVersion", r->rt->gv);
  jv_set_str(cur, "kind", r->rt->kind);
  char *perr = NULL;
  int rc = 0;
  switch (kind) {
  case P_APPLY: {
    jv *res = apply_intent(req, r, cur, patch, fm, resp);
    jv_free(cur);
    jv_free(patch);
    if (!res) {
      pthread_mutex_unlock(&sim_mu);
      free(key);
      return;
    }
    cur = res;
    patch = NULL;
    break;
  }
  case P_MERGE: cur = sim_merge_patch(cur, patch); break;
  case P_SMP: cur = sim_strategic_patch(cur, patch); break;
  case P_JSON: rc = sim_json_patch(&cur, patch, &perr); break;
  }
  jv_free(patch);
  if (rc < 0 || !cur || cur->t != J_OBJ) {
    pthread_mutex_unlock(&sim_mu);
    if (rc == -EBADMSG) sim_resp_status(resp, 400, "BadRequest", &d, "%s", perr ? perr : "invalid patch");
    else if (rc == -E2BIG) sim_resp_status(resp, 413, "RequestEntityTooLarge", &d, "%s", perr);
    else {
      d.name = r->name;
      d.group = r->rt->group;
      d.kind = r->rt->kind;
      sim_resp_status(resp, 422, "Invalid", &d, "%s", perr ? perr : "patch result is not an object");
    }
    free(perr);
    jv_free(cur);
    free(key);
    return;
  }
  if (!name_matches(cur, r, resp)) {
    pthread_mutex_unlock(&sim_mu);
    jv_free(cur);
    free(key);
    return;
  }
  commit_update_locked(req, r, old, cur, false, kind == P_APPLY, resp);
  pthread_mutex_unlock(&sim_mu);
  free(key);
}

/* ---- delete ---- */

struct delopts {
  const char *propagation;
  const char *pre_uid, *pre_rv;
  bool orphan_false;
  jv *doc;
};

static bool parse_delopts(struct sim_req *req, struct delopts *o, struct sim_resp *resp)
{
  memset(o, 0, sizeof *o);
  struct sim_details d = {0};
  if (too_large(req, resp)) return false;
  if (req->blen) {
    char err[256];
    o->doc = jv_parse(req->body, req->blen, err, sizeof err);
    if (!o->doc || o->doc->t != J_OBJ) {
      sim_resp_status(resp, 400, "BadRequest", &d, "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: %s", o->doc ? "not an object" : err);
      jv_free(o->doc);
      o->doc = NULL;
      return false;
    }
    o->propagation = jv_gets(o->doc, "propagationPolicy");
    o->pre_uid = jv_gets(jv_get(o->doc, "preconditions"), "uid");
    o->pre_rv = jv_gets(jv_get(o->doc, "preconditions"), "resourceVersion");
    o->orphan_false = jv_get(o->doc, "orphanDependents") && jv_get(o->doc, "orphanDependents")->t == J_FALSE;
  }
  if (!o->propagation) o->propagation = sim_req_query(req, "propagationPolicy");
  if (o->propagation && *o->propagation && strcmp(o->propagation, "Orphan") != 0 &&
      strcmp(o->propagation, "Background") != 0 && strcmp(o->propagation, "Foreground") != 0) {
    d.group = "meta.k8s.io";
    d.kind = "DeleteOptions";
    sim_resp_status(resp, 422, "Invalid", &d,
                    "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"%s\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                    o->propagation);
    jv_free(o->doc);
    return false;
  }
  const char *od = sim_req_query(req, "orphanDependents");
  if (od && strcmp(od, "false") == 0) o->orphan_false = true;
  return true;
}

/* Deletes one object (sim_mu held); returns the object to report (ref). */
static struct sim_obj *delete_one_locked(const struct sim_rtype *rt, struct sim_obj *old,
                                         const struct delopts *o, bool *pending)
{
  const jv *omd = jv_get(old->dom, "metadata");
  const char *add = NULL;
  if (o->propagation && strcmp(o->propagation, "Foreground") == 0) add = "foregroundDeletion";
  if (o->propagation && strcmp(o->propagation, "Orphan") == 0) add = "orphan";
  const jv *fin = jv_get(omd, "finalizers");
  bool has_fin = (fin && fin->t == J_ARR && fin->n) || add;
  *pending = false;
  if (has_fin) {
    *pending = true;
    if (jv_get(omd, "deletionTimestamp")) return sim_obj_ref(old);
    jv *nd = jv_copy(old->dom);
    jv *md = jv_obj_ensure(nd, "metadata");
    char now[32];
    sim_time_rfc3339(now, sizeof now);
    jv_set_str(md, "deletionTimestamp", now);
    jv_set(md, "deletionGracePeriodSeconds", jv_int_new(0));
    if (add && !strset_has(jv_get(md, "finalizers"), add)) {
      jv *f = jv_get(md, "finalizers");
      if (!f || f->t != J_ARR) {
        f = jv_new(J_ARR);
        jv_set(md, "finalizers", f);
      }
      jv_push(f, jv_str_new(add));
    }
    int64_t g;
    if (jv_int(jv_get(md, "generation"), &g) && g > 0) jv_set(md, "generation", jv_int_new(g + 1));
    struct sim_obj *no = sim_obj_new(nd, ++sim_rv);
    struct sim_obj *oldref = sim_obj_ref(old);
    sim_coll_put_locked(rt->coll, sim_obj_ref(no));
    sim_emit_locked(SIM_MODIFIED, rt->coll, sim_obj_ref(no), oldref);
    return no;
  }
  struct sim_obj *oldref = sim_obj_ref(old);
  struct sim_obj *dobj = sim_obj_new(jv_copy(old->dom), ++sim_rv);
  sim_coll_del_locked(rt->coll, oldref->key);
  sim_emit_locked(SIM_DELETED, rt->coll, dobj, sim_obj_ref(oldref));
  if (!rt->is_crd && strcmp(rt->plural, "customresourcedefinitions") == 0)
    sim_crd_remove_locked(oldref->name);
  return oldref;
}

static void purge_namespace_locked(const char *ns);

void sim_handle_delete(struct sim_req *req, struct route *r, struct sim_resp *resp)
{
  struct delopts o;
  if (!parse_delopts(req, &o, resp)) return;
  char *key = item_key(r);
  pthread_mutex_lock(&sim_mu);
  struct sim_obj *old = sim_coll_get_locked(r->rt->coll, key);
  if (!old) {
    pthread_mutex_unlock(&sim_mu);
    not_found(resp, r->rt, r->name);
    goto out;
  }
  const char *ouid = jv_gets(jv_get(old->dom, "metadata"), "uid");
  if (o.pre_uid && ouid && strcmp(o.pre_uid, ouid) != 0) {
    char *why = sim_xasprintf("StorageError: invalid object, Code: 4, Key: /registry/%s/%s, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: %s, UID in object meta: %s",
                              r->rt->plural, key, o.pre_uid, ouid);
    pthread_mutex_unlock(&sim_mu);
    conflict(resp, r->rt, r->name, why);
    free(why);
    goto out;
  }
  if (o.pre_rv) {
    char rvs[24];
    snprintf(rvs, sizeof rvs, "%llu", (unsigned long long)old->rv);
    if (strcmp(o.pre_rv, rvs) != 0) {
      char *why = sim_xasprintf("StorageError: invalid object, Code: 4, Key: /registry/%s/%s, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s",
                                r->rt->plural, key, o.pre_rv, rvs);
      pthread_mutex_unlock(&sim_mu);
      conflict(resp, r->rt, r->name, why);
      free(why);
      goto out;
    }
  }
  if (dry_run(req)) {
    struct sim_obj *keep = sim_obj_ref(old);
    pthread_mutex_unlock(&sim_mu);
    sim_respond_obj(resp, 200, r->rt, keep, false);
    sim_obj_unref(keep);
    goto out;
  }
  bool pending;
  struct sim_obj *res = delete_one_locked(r->rt, old, &o, &pending);
  /* The namespace controller empties a deleted namespace. */
  if (!pending && !r->rt->is_crd && strcmp(r->rt->plural, "namespaces") == 0)
    purge_namespace_locked(r->name);
  pthread_mutex_unlock(&sim_mu);
  sim_respond_obj(resp, pending && o.orphan_false ? 202 : 200, r->rt, res, false);
  sim_obj_unref(res);
out:
  free(key);
  jv_free(o.doc);
}

void sim_handle_deletecollection(struct sim_req *req, struct route *r, struct sim_resp *resp)
{
  struct delopts o;
  if (!parse_delopts(req, &o, resp)) return;
  struct sim_filter f = {0};
  if (r->ns) f.ns = sim_xstrdup(r->ns);
  struct sim_details d = {0};
  const char *ls = sim_req_query(req, "labelSelector");
  const char *fs = sim_req_query(req, "fieldSelector");
  char *err = NULL;
  if (ls && *ls) {
    if (sim_lsel_parse(ls, &f.lsel, &err) < 0) goto bad;
    f.has_lsel = true;
  }
  if (fs && *fs) {
    if (sim_fsel_parse(fs, &f.fsel, &err) < 0) goto bad;
    f.has_fsel = true;
  }
  pthread_mutex_lock(&sim_mu);
  size_t n = 0;
  struct sim_obj **items = sim_snapshot_locked(r->rt->coll, sim_rv, r->ns, NULL, sim_filter_match,
                                               &f, 0, &n, NULL, NULL);
  sim_buf_printf(&resp->body, "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"",
                 r->rt->kind, r->rt->gv);
  struct sim_buf items_json = {0};
  for (size_t i = 0; i < n; i++) {
    bool pending;
    struct sim_obj *res = delete_one_locked(r->rt, items[i], &o, &pending);
    if (i) sim_buf_putc(&items_json, ',');
    sim_write_obj(&items_json, r->rt, res, r->rt->is_crd, false);
    sim_obj_unref(res);
    sim_obj_unref(items[i]);
  }
  sim_buf_printf(&resp->body, "%llu\"},\"items\":[", (unsigned long long)sim_rv);
  pthread_mutex_unlock(&sim_mu);
  if (items_json.len) sim_buf_put(&resp->body, items_json.p, items_json.len);
  sim_buf_puts(&resp->body, "]}");
  sim_buf_free(&items_json);
  free(items);
  resp->code = 200;
  sim_filter_free(&f);
  jv_free(o.doc);
  return;
bad:
  sim_resp_status(resp, 400, "BadRequest", &d, "%s", err);
  free(err);
  sim_filter_free(&f);
  jv_free(o.doc);
}

/* ---- namespace cleanup, seeds, load generation ---- */

struct purge_ctx {
  const char *ns;
  struct sim_coll *done[256];
  size_t ndone;
};

static void purge_coll(struct sim_rtype *rt, void *arg)
{
  struct purge_ctx *p = arg;
  if (!rt->namespaced) return;
  for (size_t i = 0; i < p->ndone; i++)
    if (p->done[i] == rt->coll) return;
  if (p->ndone < 256) p->done[p->ndone++] = rt->coll;
  size_t n = 0;
  struct sim_obj **items = sim_snapshot_locked(rt->coll, sim_rv, p->ns, NULL, NULL, NULL, 0, &n,
                                               NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    struct sim_obj *dobj = sim_obj_new(jv_copy(items[i]->dom), ++sim_rv);
    sim_coll_del_locked(rt->coll, items[i]->key);
    sim_emit_locked(SIM_DELETED, rt->coll, dobj, items[i]);
  }
  free(items);
}

static void purge_namespace_locked(const char *ns)
{
  struct purge_ctx p = {.ns = ns};
  sim_types_each_locked(purge_coll, &p);
}

int sim_api_seed_locked(jv *dom, char **err)
{
  *err = NULL;
  if (!dom || dom->t != J_OBJ) {
    *err = sim_xstrdup("not an object");
    jv_free(dom);
    return -EINVAL;
  }
  struct sim_rtype *rt = sim_type_by_kind_locked(jv_gets(dom, "apiVersion"), jv_gets(dom, "kind"));
  if (!rt) {
    *err = sim_xasprintf("no resource for apiVersion %s kind %s",
                         jv_gets(dom, "apiVersion") ? jv_gets(dom, "apiVersion") : "(none)",
                         jv_gets(dom, "kind") ? jv_gets(dom, "kind") : "(none)");
    jv_free(dom);
    return -EINVAL;
  }
  jv *md = jv_obj_ensure(dom, "metadata");
  const char *name = jv_gets(md, "name");
  if (!name || !*name) {
    *err = sim_xstrdup("metadata.name missing");
    jv_free(dom);
    return -EINVAL;
  }
  if (rt->namespaced) {
    const char *ns = jv_gets(md, "namespace");
    if (!ns || !*ns) jv_set_str(md, "namespace", "default");
    ns = jv_gets(md, "namespace");
    if (!ns_exists_locked(ns)) {
      struct sim_rtype *nt = sim_type_find_locked("", "v1", "namespaces");
      jv *n = jv_new(J_OBJ);
      jv *nmd = jv_obj_ensure(n, "metadata");
      jv_set_str(nmd, "name", ns);
      prepare_create(nt, n);
      sim_obj_unref(commit_create_locked(nt, n));
    }
  } else {
    jv_del(md, "namespace");
  }
  char *key = rt->namespaced ? sim_xasprintf("%s/%s", jv_gets(md, "namespace"), name) : sim_xstrdup(name);
  if (sim_coll_get_locked(rt->coll, key)) {
    *err = sim_xasprintf("%s %s already exists", rt->plural, key);
    free(key);
    jv_free(dom);
    return -EEXIST;
  }
  free(key);
  if (!jv_gets(md, "uid")) {
    char uid[40];
    sim_uuid(uid);
    jv_set_str(md, "uid", uid);
  }
  if (!jv_gets(md, "creationTimestamp")) {
    char now[32];
    sim_time_rfc3339(now, sizeof now);
    jv_set_str(md, "creationTimestamp", now);
  }
  if (rt->track_generation && !jv_get(md, "generation")) jv_set(md, "generation", jv_int_new(1));
  jv_del(md, "resourceVersion");
  if (!rt->is_crd && strcmp(rt->plural, "customresourcedefinitions") == 0) {
    char *field, *m;
    if (sim_crd_validate(dom, &field, &m) < 0) {
        *err = sim_xasprintf("%s: %s", field, m);
      free(field);
      free(m);
      jv_free(dom);
      return -EINVAL;
    }
    if (!jv_get(dom, "status")) sim_crd_set_status(dom);
  }
  sim_obj_unref(commit_create_locked(rt, dom));
  return 0;
}

int sim_api_seed(jv *dom, char **err)
{
  pthread_mutex_lock(&sim_mu);
  int rc = sim_api_seed_locked(dom, err);
  pthread_mutex_unlock(&sim_mu);
  return rc;
}

int sim_api_modify(struct sim_rtype *rt, char **cursor, bool spec, bool silent)
{
  pthread_mutex_lock(&sim_mu);
  struct sim_obj *old = sim_coll_next_locked(rt->coll, *cursor, false);
  if (!old) old = sim_coll_next_locked(rt->coll, NULL, false);
  if (!old) {
    pthread_mutex_unlock(&sim_mu);
    return -ENOENT;
  }
  free(*cursor);
  *cursor = sim_xstrdup(old->key);
  jv *nd = jv_copy(old->dom);
  jv *md = jv_obj_ensure(nd, "metadata");
  char tick[24];
  snprintf(tick, sizeof tick, "%llu", (unsigned long long)sim_rv + 1);
  jv_set_str(jv_obj_ensure(md, "annotations"), "apisim.kctrld.io/tick", tick);
  if (spec) {
    jv *s = jv_obj_ensure(nd, "spec");
    int64_t rep = 0;
    if (jv_int(jv_get(s, "replicas"), &rep)) jv_set(s, "replicas", jv_int_new(rep % 5 + 1));
    else jv_set_str(s, "apisimTick", tick);
    int64_t g = 0;
    if (rt->track_generation && jv_int(jv_get(md, "generation"), &g))
      jv_set(md, "generation", jv_int_new(g + 1));
  }
  struct sim_obj *o = sim_obj_new(nd, ++sim_rv);
  struct sim_obj *oldref = sim_obj_ref(old);
  sim_coll_put_locked(rt->coll, o);
  if (silent) {
    sim_obj_unref(oldref); /* a lost event: stored, never in the history */
    pthread_cond_broadcast(&sim_cond);
  } else {
    sim_emit_locked(SIM_MODIFIED, rt->coll, sim_obj_ref(o), oldref);
  }
  pthread_mutex_unlock(&sim_mu);
  return 0;
}
