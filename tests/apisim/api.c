/* SPDX-License-Identifier: Apache-2.0 */
#include "api_int.h"
#include "rbac.h"
#include "review.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "control.h"
#include "openapi.h"
#include "table.h"

struct sim_config sim_cfg = {
  .continue_expiry = true,
  .watch_list = true,
  .rv0_ignores_limit = true,
  .min_request_timeout_s = 1800,
};

void sim_qualified(char *out, size_t n, const struct sim_rtype *rt)
{
  if (*rt->group) snprintf(out, n, "%s.%s", rt->plural, rt->group);
  else snprintf(out, n, "%s", rt->plural);
}

void sim_details_for(struct sim_details *d, const struct sim_rtype *rt, const char *name)
{
  memset(d, 0, sizeof *d);
  d->name = name;
  d->group = rt->group;
  d->kind = rt->plural;
}

bool sim_query_bool(struct sim_req *req, const char *key)
{
  const char *v = sim_req_query(req, key);
  if (!v) return false;
  return !(strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0);
}

int sim_accept(struct sim_req *req, bool list)
{
  const char *a = sim_req_header(req, "Accept");
  if (!a || !*a) return 0;
  const char *p = a;
  for (char *part; (part = sim_next_csv(&p));) {
    char *s = part;
    char *semi = strchr(s, ';');
    char *params = semi ? semi + 1 : "";
    if (semi) *semi = 0;
    for (char *t = s + strlen(s); t > s && t[-1] == ' '; t--) t[-1] = 0;
    bool json = strcmp(s, "application/json") == 0 || strcmp(s, "*/*") == 0 ||
                strcmp(s, "application/*") == 0;
    int res = -2;
    if (json) {
      const char *as = strstr(params, "as=");
      if (!as) {
        res = 0;
      } else {
        as += 3;
        if (strncmp(as, "PartialObjectMetadataList", 25) == 0 && (as[25] == ';' || !as[25] || as[25] == ' ')) {
          if (list) res = 1;
        } else if (strncmp(as, "PartialObjectMetadata", 21) == 0 && (as[21] == ';' || !as[21] || as[21] == ' ')) {
          if (!list) res = 1;
        }
      }
    }
    free(part);
    if (res != -2) return res;
  }
  return -1;
}

void sim_respond_obj(struct sim_resp *resp, int code, const struct sim_rtype *rt,
                     const struct sim_obj *o, bool meta_only)
{
  resp->code = code;
  sim_write_obj(&resp->body, rt, o, true, meta_only);
}

static void not_acceptable(struct sim_resp *resp, bool list)
{
  struct sim_details d = {0};
  if (list)
    sim_resp_status(resp, 406, "NotAcceptable", &d, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
  else
    sim_resp_status(resp, 406, "NotAcceptable", &d, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
}

/* ---- routing ---- */

static void plain_404(struct sim_resp *resp)
{
  resp->code = 404;
  resp->ctype = "text/plain; charset=utf-8";
  sim_buf_puts(&resp->body, "404 page not found\n");
}

static void resource_404(struct sim_resp *resp)
{
  struct sim_details d = {0};
  sim_resp_status(resp, 404, "NotFound", &d, "the server could not find the requested resource");
}

static void method_not_allowed(struct sim_req *req, struct sim_resp *resp)
{
  struct sim_details d = {0};
  sim_resp_status(resp, 405, "MethodNotAllowed", &d,
                  "the server does not allow this method on the requested resource");
  (void)req;
}

static void handle_list(struct sim_req *req, struct route *r, struct sim_resp *resp);
static void handle_watch(struct sim_req *req, struct route *r, struct sim_resp *resp);
static void handle_get(struct sim_req *req, struct route *r, struct sim_resp *resp);

static bool is_get(struct sim_req *req) { return strcmp(req->method, "GET") == 0; }

void sim_api_handle(struct sim_req *req, struct sim_resp *resp)
{
  const char *url = req->url;
  char *segs[8];
  size_t nseg = 0;
  char *copy = sim_xstrdup(url), *save = NULL;
  /* strtok_r: requests are handled on one thread per connection, and
   * strtok's hidden cursor would hand one thread another's segments. */
  for (char *s = strtok_r(copy, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
    if (nseg == 8) { nseg = 9; break; }
    segs[nseg++] = s;
  }
  /* --rbac: a non-resource path (not /api/v1/R..., /apis/G/V/R...) is
   * authorized by path, before it is served. */
  bool resource = nseg >= 3 && (strcmp(segs[0], "api") == 0 ||
                                (nseg >= 4 && strcmp(segs[0], "apis") == 0));
  if (!resource && !sim_rbac_allow_path(req, url, resp)) goto out;
  if (nseg == 0) {
    resp->code = 200;
    sim_buf_puts(&resp->body, "{\"paths\":[\"/api\",\"/api/v1\",\"/apis\",\"/healthz\",\"/livez\",\"/readyz\",\"/version\"]}");
    goto out;
  }
  if (nseg == 1 && (strcmp(segs[0], "healthz") == 0 || strcmp(segs[0], "livez") == 0 ||
                    strcmp(segs[0], "readyz") == 0)) {
    resp->code = 200;
    resp->ctype = "text/plain; charset=utf-8";
    sim_buf_puts(&resp->body, "ok");
    goto out;
  }
  if (nseg == 1 && strcmp(segs[0], "version") == 0) {
    resp->code = 200;
    sim_buf_puts(&resp->body,
                 "{\"major\":\"1\",\"minor\":\"32\",\"gitVersion\":\"v1.32.0-apisim\","
                 "\"gitCommit\":\"0000000000000000000000000000000000000000\",\"gitTreeState\":\"clean\","
                 "\"buildDate\":\"2024-12-11T00:00:00Z\",\"goVersion\":\"go1.23.3\",\"compiler\":\"gc\","
                 "\"platform\":\"linux/amd64\"}");
    goto out;
  }
  if (strcmp(segs[0], "openapi") == 0) {
    sim_openapi_handle(req, url, resp);
    goto out;
  }
  size_t base;
  const char *group, *version;
  if (strcmp(segs[0], "api") == 0) {
    if (nseg == 1) {
      if (!is_get(req)) { method_not_allowed(req, resp); goto out; }
      const char *host = sim_req_header(req, "Host");
      resp->code = 200;
      sim_disc_api(&resp->body, host ? host : "127.0.0.1");
      goto out;
    }
    if (strcmp(segs[1], "v1") != 0) { plain_404(resp); goto out; }
    group = "";
    version = "v1";
    base = 2;
  } else if (strcmp(segs[0], "apis") == 0) {
    if (nseg == 1) {
      resp->code = 200;
      pthread_mutex_lock(&sim_mu);
      sim_disc_apis_locked(&resp->body);
      pthread_mutex_unlock(&sim_mu);
      goto out;
    }
    pthread_mutex_lock(&sim_mu);
    bool gserved = sim_group_served_locked(segs[1]);
    bool gvserved = nseg > 2 && sim_group_version_served_locked(segs[1], segs[2]);
    if (nseg == 2 && gserved) {
      resp->code = 200;
      sim_disc_group_locked(&resp->body, segs[1]);
    }
    pthread_mutex_unlock(&sim_mu);
    if (nseg == 2) {
      if (!gserved) plain_404(resp);
      goto out;
    }
    if (!gvserved) { plain_404(resp); goto out; }
    group = segs[1];
    version = segs[2];
    base = 3;
  } else {
    plain_404(resp);
    goto out;
  }
  if (nseg == base) {
    resp->code = 200;
    pthread_mutex_lock(&sim_mu);
    sim_disc_resources_locked(&resp->body, group, version);
    pthread_mutex_unlock(&sim_mu);
    goto out;
  }
  char **s = segs + base;
  size_t n = nseg - base;
  struct route r = {0};
  const char *plural;
  /* namespaces/{ns}/{plural}... except namespaces/{name}/status|finalize */
  if (strcmp(s[0], "namespaces") == 0 && n >= 3 &&
      !(n == 3 && !*group && (strcmp(s[2], "status") == 0 || strcmp(s[2], "finalize") == 0))) {
    r.ns = s[1];
    plural = s[2];
    r.name = n > 3 ? s[3] : NULL;
    r.sub = n > 4 ? s[4] : NULL;
    if (n > 5) { resource_404(resp); goto out; }
  } else {
    plural = s[0];
    r.name = n > 1 ? s[1] : NULL;
    r.sub = n > 2 ? s[2] : NULL;
    if (n > 3) { resource_404(resp); goto out; }
  }
  /* --rbac: authorized before the resource is looked up, as kube-apiserver
   * does (a forbidden user learns nothing about what exists). */
  if (!sim_rbac_allow(req, group, plural, r.sub, r.ns, r.name, resp)) goto out;
  pthread_mutex_lock(&sim_mu);
  r.rt = sim_type_find_locked(group, version, plural);
  pthread_mutex_unlock(&sim_mu);
  if (!r.rt) { resource_404(resp); goto out; }
  if (r.rt->review_only) {
    sim_review_handle(req, r.rt, r.ns, r.name, resp);
    goto out;
  }
  if (r.ns && !r.rt->namespaced) { resource_404(resp); goto out; }
  if (r.rt->namespaced && !r.ns && r.name) { resource_404(resp); goto out; }
  if (r.sub && (strcmp(r.sub, "status") != 0 || !r.rt->has_status)) {
    resource_404(resp);
    goto out;
  }
  const char *m = req->method;
  if (!r.name) {
    if (strcmp(m, "GET") == 0) {
      if (sim_query_bool(req, "watch")) {
        req->verb = "watch";
        handle_watch(req, &r, resp);
      } else {
        req->verb = "list";
        handle_list(req, &r, resp);
      }
    } else if (strcmp(m, "POST") == 0 && (r.ns || !r.rt->namespaced)) {
      req->verb = "create";
      sim_handle_create(req, &r, resp);
    } else if (strcmp(m, "DELETE") == 0 && (r.ns || !r.rt->namespaced)) {
      req->verb = "deletecollection";
      sim_handle_deletecollection(req, &r, resp);
    } else {
      method_not_allowed(req, resp);
    }
  } else if (strcmp(m, "GET") == 0) {
    req->verb = "get";
    handle_get(req, &r, resp);
  } else if (strcmp(m, "PUT") == 0) {
    req->verb = "update";
    sim_handle_update(req, &r, resp);
  } else if (strcmp(m, "PATCH") == 0) {
    req->verb = "patch";
    sim_handle_patch(req, &r, resp);
  } else if (strcmp(m, "DELETE") == 0 && !r.sub) {
    req->verb = "delete";
    sim_handle_delete(req, &r, resp);
  } else {
    method_not_allowed(req, resp);
  }
out:
  free(copy);
}

/* ---- get ---- */

static void handle_get(struct sim_req *req, struct route *r, struct sim_resp *resp)
{
  bool table = sim_table_wanted(req);
  int acc = table ? 0 : sim_accept(req, false);
  if (acc < 0) {
    /* A PartialObjectMetadataList request on a single object. */
    not_acceptable(resp, false);
    return;
  }
  char *key = r->ns ? sim_xasprintf("%s/%s", r->ns, r->name) : sim_xstrdup(r->name);
  pthread_mutex_lock(&sim_mu);
  struct sim_obj *o = sim_obj_ref(sim_coll_get_locked(r->rt->coll, key));
  pthread_mutex_unlock(&sim_mu);
  free(key);
  if (!o) {
    struct sim_details d;
    char q[300];
    sim_details_for(&d, r->rt, r->name);
    sim_qualified(q, sizeof q, r->rt);
    sim_resp_status(resp, 404, "NotFound", &d, "%s \"%s\" not found", q, r->name);
    return;
  }
  if (table) sim_table_write(req, resp, r->rt, &o, 1, false, 0, NULL, -1);
  else sim_respond_obj(resp, 200, r->rt, o, acc == 1);
  sim_obj_unref(o);
}

/* ---- shared list/watch parameter handling ---- */

static void invalid_listopts(struct sim_resp *resp, const char *field, const char *cause_reason,
                             const char *cmsg, const char *value_for_msg)
{
  struct sim_details d = {0};
  d.group = "meta.k8s.io";
  d.kind = "ListOptions";
  d.cfield = field;
  d.creason = cause_reason;
  d.cmsg = cmsg;
  (void)value_for_msg;
  sim_resp_status(resp, 422, "Invalid", &d, "ListOptions.meta.k8s.io \"\" is invalid: %s: %s",
                  field, cmsg);
}

static int parse_rv(const char *s, uint64_t *out)
{
  if (!s || !*s) return 1;
  char *end;
  if (*s < '0' || *s > '9') return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno) return -1;
  *out = v;
  return 0;
}

static void bad_rv(struct sim_resp *resp, const char *s)
{
  struct sim_details d = {0};
  sim_resp_status(resp, 500, NULL, &d,
                  "resourceVersion: Invalid value: \"%s\": strconv.ParseUint: parsing \"%s\": invalid syntax",
                  s, s);
}

/* Waits (up to 3 s, like the watch cache) for rv to exist. sim_mu held. */
static bool wait_for_rv_locked(uint64_t rv)
{
  if (rv <= sim_rv) return true;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += 3;
  while (rv > sim_rv)
    if (pthread_cond_timedwait(&sim_cond, &sim_mu, &ts) == ETIMEDOUT) break;
  return rv <= sim_rv;
}

static void too_large_rv(struct sim_resp *resp, uint64_t rv, uint64_t cur)
{
  struct sim_details d = {0};
  char msg[128];
  snprintf(msg, sizeof msg, "Too large resource version: %llu, current: %llu",
           (unsigned long long)rv, (unsigned long long)cur);
  d.creason = "ResourceVersionTooLarge";
  d.cmsg = msg;
  d.retry_after = 1;
  resp->retry_after = 1;
  sim_resp_status(resp, 504, "Timeout", &d, "%s", msg);
}

/* Parses selectors into f; on error fills resp and returns false. */
static bool parse_filter(struct sim_req *req, struct route *r, struct sim_filter *f,
                         struct sim_resp *resp)
{
  memset(f, 0, sizeof *f);
  if (r->ns) f->ns = sim_xstrdup(r->ns);
  const char *ls = sim_req_query(req, "labelSelector");
  const char *fs = sim_req_query(req, "fieldSelector");
  const char *ss = sim_cfg.sharded_list_watch ? sim_req_query(req, "shardSelector") : NULL;
  char *err = NULL;
  struct sim_details d = {0};
  /* KEP-5866: parsed while the query is decoded into ListOptions, so a bad
   * one is a 400 BadRequest (a server without the gate ignores it). */
  if (ss && *ss) {
    if (sim_shardsel_parse(ss, &f->ssel, &err) < 0) {
      sim_resp_status(resp, 400, "BadRequest", &d, "invalid shard selector: %s", err);
      free(err);
      sim_filter_free(f);
      return false;
    }
    f->has_ssel = true;
  }
  if (ls && *ls) {
    if (sim_lsel_parse(ls, &f->lsel, &err) < 0) {
      sim_resp_status(resp, 400, "BadRequest", &d, "%s", err);
      free(err);
      sim_filter_free(f);
      return false;
    }
    f->has_lsel = true;
  }
  if (fs && *fs) {
    if (sim_fsel_parse(fs, &f->fsel, &err) < 0) {
      sim_resp_status(resp, 400, "BadRequest", &d, "%s", err);
      free(err);
      sim_filter_free(f);
      return false;
    }
    f->has_fsel = true;
    for (size_t i = 0; i < f->fsel.n; i++) {
      const char *fld = f->fsel.r[i].field;
      bool ok = strcmp(fld, "metadata.name") == 0 ||
                (r->rt->namespaced && strcmp(fld, "metadata.namespace") == 0);
      for (size_t j = 0; !ok && r->rt->fields && r->rt->fields[j]; j++)
        ok = strcmp(fld, r->rt->fields[j]) == 0;
      for (size_t j = 0; !ok && j < r->rt->n_crd_fields; j++)
        ok = strcmp(fld, r->rt->crd_fields[j]) == 0;
      if (strcmp(r->rt->plural, "pods") == 0 && strcmp(fld, "spec.host") == 0) {
        free(f->fsel.r[i].field);
        f->fsel.r[i].field = sim_xstrdup("spec.nodeName");
        ok = true;
      }
      if (!ok) {
        if (r->rt->own_field_list || r->rt->is_crd)
          sim_resp_status(resp, 400, "BadRequest", &d, "field label not supported: %s", fld);
        else if (r->rt->namespaced)
          sim_resp_status(resp, 400, "BadRequest", &d,
                          "\"%s\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"", fld);
        else
          sim_resp_status(resp, 400, "BadRequest", &d,
                          "\"%s\" is not a known field selector: only \"metadata.name\"", fld);
        sim_filter_free(f);
        return false;
      }
    }
  }
  return true;
}

/* ---- continue tokens: base64 of {"v":"meta.k8s.io/v1","rv":N,"start":"key\u0000"} ---- */

static char *make_continue(uint64_t rv, const char *last_key)
{
  struct sim_buf b = {0};
  sim_buf_printf(&b, "{\"v\":\"meta.k8s.io/v1\",\"rv\":%llu,\"start\":", (unsigned long long)rv);
  size_t kl = strlen(last_key);
  char *k = sim_xmalloc(kl + 1);
  memcpy(k, last_key, kl);
  k[kl] = 0;
  struct sim_buf kb = {0};
  sim_buf_put(&kb, k, kl);
  sim_buf_putc(&kb, 0);
  kb.len = kl + 1;
  sim_buf_put_jstr(&b, kb.p, kb.len);
  sim_buf_putc(&b, '}');
  char *tok = sim_b64_encode(b.p, b.len);
  sim_buf_free(&b);
  sim_buf_free(&kb);
  free(k);
  return tok;
}

static int parse_continue(const char *tok, uint64_t *rv, char **start, bool *exclusive)
{
  size_t n;
  char *raw = sim_b64_decode(tok, &n);
  if (!raw) return -EINVAL;
  char err[128];
  jv *d = jv_parse(raw, n, err, sizeof err);
  free(raw);
  int64_t r;
  const jv *s = jv_get(d, "start");
  if (!d || !jv_gets(d, "v") || strcmp(jv_gets(d, "v"), "meta.k8s.io/v1") != 0 ||
      !jv_int(jv_get(d, "rv"), &r) || r < 0 || !s || s->t != J_STR) {
    jv_free(d);
    return -EINVAL;
  }
  *rv = (uint64_t)r;
  *exclusive = strlen(s->u.s) < s->n;
  *start = sim_xstrdup(s->u.s);
  jv_free(d);
  return 0;
}

/* Validation shared by list and watch (apimachinery ListOptions rules). */
static bool validate_listopts(struct sim_req *req, bool watch, struct sim_resp *resp)
{
  const char *rvs = sim_req_query(req, "resourceVersion");
  const char *rvm = sim_req_query(req, "resourceVersionMatch");
  const char *cont = sim_req_query(req, "continue");
  const char *sie = sim_req_query(req, "sendInitialEvents");
  if (rvm && *rvm) {
    if (strcmp(rvm, "Exact") != 0 && strcmp(rvm, "NotOlderThan") != 0) {
      char *m = sim_xasprintf("Unsupported value: \"%s\": supported values: \"Exact\", \"NotOlderThan\"", rvm);
      invalid_listopts(resp, "resourceVersionMatch", "FieldValueNotSupported", m, NULL);
      free(m);
      return false;
    }
    if (watch && !sie) {
      invalid_listopts(resp, "resourceVersionMatch", "FieldValueForbidden",
                       "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided", NULL);
      return false;
    }
    if (!watch && (!rvs || !*rvs)) {
      invalid_listopts(resp, "resourceVersionMatch", "FieldValueForbidden",
                       "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided", NULL);
      return false;
    }
    if (cont && *cont) {
      invalid_listopts(resp, "resourceVersionMatch", "FieldValueForbidden",
                       "Forbidden: resourceVersionMatch is forbidden when continue is provided", NULL);
      return false;
    }
    if (!watch && strcmp(rvm, "Exact") == 0 && rvs && strcmp(rvs, "0") == 0) {
      invalid_listopts(resp, "resourceVersionMatch", "FieldValueForbidden",
                       "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"", NULL);
      return false;
    }
  }
  if (sie && !watch) {
    invalid_listopts(resp, "sendInitialEvents", "FieldValueForbidden",
                     "Forbidden: sendInitialEvents is forbidden for list", NULL);
    return false;
  }
  if (sie && watch) {
    if (!sim_cfg.watch_list) {
      invalid_listopts(resp, "sendInitialEvents", "FieldValueForbidden",
                       "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled", NULL);
      return false;
    }
    if (!rvm || strcmp(rvm, "NotOlderThan") != 0) {
      invalid_listopts(resp, "resourceVersionMatch", "FieldValueForbidden",
                       "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan", NULL);
      return false;
    }
    if (sim_query_bool(req, "sendInitialEvents") && !sim_query_bool(req, "allowWatchBookmarks")) {
      invalid_listopts(resp, "allowWatchBookmarks", "FieldValueForbidden",
                       "Forbidden: allowWatchBookmarks required when sendInitialEvents is true", NULL);
      return false;
    }
  }
  return true;
}

/* ---- list ---- */

static void expired_continue(struct sim_resp *resp, struct route *r, const char *start,
                             bool exclusive)
{
  (void)r;
  struct sim_details d = {0};
  char *tok = make_continue(sim_rv, start);
  (void)exclusive;
  d.continue_token = tok;
  sim_resp_status(resp, 410, "Expired", &d,
                  "The provided continue parameter is too old to display a consistent list result. "
                  "You can start a new list without the continue parameter, or use the continue token "
                  "in this response to retrieve the remainder of the results. Continuing with the "
                  "provided token results in an inconsistent list - objects that were created, "
                  "modified, or deleted between the time the first chunk was returned and now may "
                  "show up in the list.");
  free(tok);
}

static void handle_list(struct sim_req *req, struct route *r, struct sim_resp *resp)
{
  bool table = sim_table_wanted(req);
  int acc = table ? 0 : sim_accept(req, true);
  if (acc < 0) {
    const char *a = sim_req_header(req, "Accept");
    struct sim_details d = {0};
    if (a && strstr(a, "as=PartialObjectMetadata;") )
      sim_resp_status(resp, 406, "NotAcceptable", &d,
                      "you requested PartialObjectMetadata, but the requested object is a list (*v1.PartialObjectMetadataList)");
    else
      not_acceptable(resp, true);
    return;
  }
  if (!validate_listopts(req, false, resp)) return;
  const char *rvs = sim_req_query(req, "resourceVersion");
  const char *rvm = sim_req_query(req, "resourceVersionMatch");
  const char *cont = sim_req_query(req, "continue");
  const char *lim = sim_req_query(req, "limit");
  uint64_t rvn = 0;
  int prv = parse_rv(rvs, &rvn);
  if (prv < 0) { bad_rv(resp, rvs); return; }
  size_t limit = 0;
  if (lim && *lim) {
    char *end;
    long long l = strtoll(lim, &end, 10);
    if (*end) {
      struct sim_details d = {0};
      sim_resp_status(resp, 400, "BadRequest", &d, "limit: Invalid value: \"%s\": strconv.ParseInt: parsing \"%s\": invalid syntax", lim, lim);
      return;
    }
    if (l > 0) limit = (size_t)l;
  }
  char *start = NULL;
  bool exclusive = false;
  uint64_t tok_rv = 0;
  struct sim_details d = {0};
  if (cont && *cont) {
    if (parse_continue(cont, &tok_rv, &start, &exclusive) < 0) {
      sim_resp_status(resp, 400, "BadRequest", &d, "invalid continue token: %s", "illegal base64 data or malformed token");
      return;
    }
    if (rvs && *rvs && strcmp(rvs, "0") != 0) {
      sim_resp_status(resp, 400, "BadRequest", &d,
                      "specifying resource version is not allowed when using continue");
      free(start);
      return;
    }
  }
  struct sim_filter f;
  if (!parse_filter(req, r, &f, resp)) {
    free(start);
    return;
  }
  bool exact = false;
  if (rvm && strcmp(rvm, "Exact") == 0) exact = true;
  else if ((!rvm || !*rvm) && limit && prv == 0 && rvn != 0 && !start) exact = true;
  if (prv == 0 && rvn == 0 && !exact && sim_cfg.rv0_ignores_limit && !start) limit = 0;

  pthread_mutex_lock(&sim_mu);
  uint64_t target = sim_rv;
  if (start) {
    target = tok_rv;
    if (target > sim_rv || (target < sim_hist_floor && target != sim_rv)) {
      if (sim_cfg.continue_expiry || target > sim_rv) {
        pthread_mutex_unlock(&sim_mu);
        expired_continue(resp, r, start, exclusive);
        goto done;
      }
      target = sim_rv;
    }
  } else if (prv == 0 && rvn > sim_rv) {
    if (!wait_for_rv_locked(rvn)) {
      uint64_t cur = sim_rv;
      pthread_mutex_unlock(&sim_mu);
      too_large_rv(resp, rvn, cur);
      goto done;
    }
    target = exact ? rvn : sim_rv;
  } else if (exact) {
    if (rvn < sim_hist_floor && rvn != sim_rv) {
      pthread_mutex_unlock(&sim_mu);
      sim_resp_status(resp, 410, "Expired", &d, "The resourceVersion for the provided list is too old.");
      goto done;
    }
    target = rvn;
  }
  size_t n = 0, remaining = 0;
  bool more = false;
  bool filtered = f.has_lsel || f.has_fsel || f.has_ssel;
  struct sim_obj **items = sim_snapshot_locked(r->rt->coll, target, r->ns, start,
                                               filtered ? sim_filter_match : NULL, &f, limit,
                                               &n, &more, &remaining);
  pthread_mutex_unlock(&sim_mu);
  (void)exclusive;
  /* Serialize outside the lock: objects are immutable. */
  if (table) {
    char *tok = more && n ? make_continue(target, items[n - 1]->key) : NULL;
    sim_table_write(req, resp, r->rt, items, n, true, target, tok,
                    tok && !filtered ? (long long)remaining : -1);
    free(tok);
    for (size_t i = 0; i < n; i++) sim_obj_unref(items[i]);
    free(items);
    goto done;
  }
  size_t est = 128;
  for (size_t i = 0; i < n; i++) est += items[i]->blen + 64;
  sim_buf_reserve(&resp->body, est);
  bool meta = acc == 1;
  if (meta)
    sim_buf_puts(&resp->body, "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{");
  else
    sim_buf_printf(&resp->body, "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"metadata\":{", r->rt->kind, r->rt->gv);
  sim_buf_printf(&resp->body, "\"resourceVersion\":\"%llu\"", (unsigned long long)target);
  if (more && n) {
    char *tok = make_continue(target, items[n - 1]->key);
    sim_buf_printf(&resp->body, ",\"continue\":\"%s\"", tok);
    free(tok);
    if (!filtered) sim_buf_printf(&resp->body, ",\"remainingItemCount\":%zu", remaining);
  }
  if (f.has_ssel) {
    sim_buf_puts(&resp->body, ",\"shardInfo\":{\"selector\":");
    sim_buf_put_jstr(&resp->body, f.ssel.text, strlen(f.ssel.text));
    sim_buf_putc(&resp->body, '}');
  }
  sim_buf_puts(&resp->body, "},\"items\":[");
  for (size_t i = 0; i < n; i++) {
    if (i) sim_buf_putc(&resp->body, ',');
    sim_write_obj(&resp->body, r->rt, items[i], r->rt->is_crd, meta);
    sim_obj_unref(items[i]);
  }
  free(items);
  sim_buf_puts(&resp->body, "]}");
  resp->code = 200;
done:
  sim_filter_free(&f);
  free(start);
}

/* ---- watch ---- */

static void handle_watch(struct sim_req *req, struct route *r, struct sim_resp *resp)
{
  int table = sim_table_wanted(req) ? sim_table_include(req, resp) : 0;
  if (table < 0) return;
  int acc = table ? 0 : sim_accept(req, false);
  if (acc < 0) {
    not_acceptable(resp, false);
    return;
  }
  if (!validate_listopts(req, true, resp)) return;
  const char *rvs = sim_req_query(req, "resourceVersion");
  uint64_t rvn = 0;
  int prv = parse_rv(rvs, &rvn);
  if (prv < 0) { bad_rv(resp, rvs); return; }
  struct sim_watch_opts o = {0};
  if (!parse_filter(req, r, &o.filter, resp)) return;
  if (r->name) {
    /* not reachable: watches are collection requests */
  }
  o.rt = r->rt;
  o.bookmarks = sim_query_bool(req, "allowWatchBookmarks");
  o.meta_only = acc == 1;
  o.table = table;
  o.reset_after = -1;
  o.chunk_split = sim_cfg.watch_chunk_split;
  bool sie = sim_query_bool(req, "sendInitialEvents");
  const char *to = sim_req_query(req, "timeoutSeconds");
  long long tsec = to && *to ? strtoll(to, NULL, 10) : 0;
  if (tsec > 0) {
    o.timeout_ms = (uint64_t)tsec * 1000u;
  } else {
    unsigned m = sim_cfg.min_request_timeout_s;
    o.timeout_ms = ((uint64_t)m + (uint64_t)rand() % (m ? m : 1)) * 1000u;
  }
  struct sim_details d = {0};
  pthread_mutex_lock(&sim_mu);
  bool initial = prv == 1 || rvn == 0 || sie;
  if (sim_query_bool(req, "sendInitialEvents") == false && sim_req_query(req, "sendInitialEvents"))
    initial = false;
  if (prv == 0 && rvn > sim_rv && !wait_for_rv_locked(rvn)) {
    uint64_t cur = sim_rv;
    pthread_mutex_unlock(&sim_mu);
    too_large_rv(resp, rvn, cur);
    sim_filter_free(&o.filter);
    return;
  }
  if (initial) {
    size_t n = 0;
    bool filtered = o.filter.has_lsel || o.filter.has_fsel || o.filter.has_ssel;
    o.initial = sim_snapshot_locked(r->rt->coll, sim_rv, r->ns, NULL,
                                    filtered ? sim_filter_match : NULL, &o.filter, 0, &n, NULL,
                                    NULL);
    o.ninitial = n;
    o.from_rv = sim_rv;
    o.initial_end_bookmark = sie;
  } else if (prv == 1 || rvn == 0) {
    o.from_rv = sim_rv; /* sendInitialEvents=false: changes from now on */
  } else {
    o.from_rv = rvn;
    if (rvn < sim_hist_floor) {
      uint64_t floor = sim_hist_floor;
      pthread_mutex_unlock(&sim_mu);
      char *msg = sim_xasprintf("too old resource version: %llu (%llu)", (unsigned long long)rvn,
                                (unsigned long long)(floor + 1));
      if (sim_cfg.watch_410_http) {
        sim_resp_status(resp, 410, "Expired", &d, "%s", msg);
        free(msg);
        sim_filter_free(&o.filter);
        return;
      }
      o.expired = true;
      o.expired_msg = msg;
      pthread_mutex_lock(&sim_mu);
    }
  }
  pthread_mutex_unlock(&sim_mu);
  resp->code = 200;
  o.event_delay_ms = sim_control_event_latency_ms(req->method, req->url);
  resp->watch = sim_watch_new(&o, -1);
}
