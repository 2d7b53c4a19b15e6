/* SPDX-License-Identifier: Apache-2.0 */
/* review: see review.h. */
#include "review.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"
#include "protobuf.h"
#include "rbac.h"

#define API_AUDIENCE "https://kubernetes.default.svc.cluster.local"

static void bad(struct sim_resp *resp, int code, const char *reason, const char *msg)
{
  struct sim_details d = {0};
  sim_resp_status(resp, code, reason, &d, "%s", msg);
}

/* A 422 naming the kind and one field. */
static void invalid(struct sim_resp *resp, const struct sim_rtype *rt, const char *field,
                    const char *msg)
{
  struct sim_details d = {.group = rt->group, .kind = rt->kind, .cfield = field,
                          .creason = "FieldValueInvalid", .cmsg = msg};
  sim_resp_status(resp, 422, "Invalid", &d, "%s.%s \"\" is invalid: %s", rt->kind, rt->group, msg);
}

static void put_str_member(struct sim_buf *b, const char *key, const char *v, bool comma)
{
  if (comma) sim_buf_putc(b, ',');
  sim_buf_put_jstr(b, key, strlen(key));
  sim_buf_putc(b, ':');
  sim_buf_put_jstr(b, v ? v : "", v ? strlen(v) : 0);
}

/* {"username":..,"uid":..,"groups":[..]} (a UserInfo). */
static void put_user(struct sim_buf *b, const struct sim_user *u)
{
  put_str_member(b, "username", u->name, false);
  if (u->uid && *u->uid) put_str_member(b, "uid", u->uid, true);
  sim_buf_puts(b, ",\"groups\":[");
  for (size_t i = 0; i < u->ngroups; i++) {
    if (i) sim_buf_putc(b, ',');
    sim_buf_put_jstr(b, u->groups[i], strlen(u->groups[i]));
  }
  sim_buf_putc(b, ']');
}

/* The answer's head: kind, apiVersion, metadata and the spec as sent. */
static void put_head(struct sim_buf *b, const struct sim_rtype *rt, const jv *doc)
{
  sim_buf_printf(b, "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":", rt->kind, rt->gv);
  const jv *md = jv_get(doc, "metadata");
  if (md && md->t == J_OBJ && md->n) jv_write(b, md);
  else sim_buf_puts(b, "{\"creationTimestamp\":null}");
  sim_buf_puts(b, ",\"spec\":");
  const jv *spec = jv_get(doc, "spec");
  if (spec && spec->t == J_OBJ && jv_get(spec, "token")) {
    jv *copy = jv_copy(spec); /* a credential is not written back */
    jv_del(copy, "token");
    jv_write(b, copy);
    jv_free(copy);
  } else if (spec && spec->t == J_OBJ) {
    jv_write(b, spec);
  } else {
    sim_buf_puts(b, "{}");
  }
}

static const struct sim_user *requester(const struct sim_req *req)
{
  return req->user ? req->user : &sim_admin_user;
}

static void token_review(const jv *doc, const struct sim_rtype *rt, struct sim_resp *resp)
{
  const jv *spec = jv_get(doc, "spec");
  const char *token = jv_gets(spec, "token");
  const struct sim_user *u = token && *token ? sim_server_authenticate(token) : NULL;
  put_head(&resp->body, rt, doc);
  sim_buf_puts(&resp->body, ",\"status\":{");
  if (!u) {
    sim_buf_puts(&resp->body, "\"user\":{},\"error\":\"invalid bearer token\"}}");
    resp->code = 201;
    return;
  }
  sim_buf_puts(&resp->body, "\"authenticated\":true,\"user\":{");
  put_user(&resp->body, u);
  sim_buf_puts(&resp->body, "},\"audiences\":");
  const jv *aud = jv_get(spec, "audiences");
  if (aud && aud->t == J_ARR && aud->n) jv_write(&resp->body, aud);
  else sim_buf_puts(&resp->body, "[\"" API_AUDIENCE "\"]");
  sim_buf_puts(&resp->body, "}}");
  resp->code = 201;
}

static void self_subject_review(const struct sim_req *req, const jv *doc,
                                const struct sim_rtype *rt, struct sim_resp *resp)
{
  sim_buf_printf(&resp->body, "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":", rt->kind, rt->gv);
  const jv *md = jv_get(doc, "metadata");
  if (md && md->t == J_OBJ && md->n) jv_write(&resp->body, md);
  else sim_buf_puts(&resp->body, "{\"creationTimestamp\":null}");
  sim_buf_puts(&resp->body, ",\"status\":{\"userInfo\":{");
  put_user(&resp->body, requester(req));
  sim_buf_puts(&resp->body, "}}}");
  resp->code = 201;
}

/* The SubjectAccessReview's subject from spec: user, uid and groups as
 * given (the authorizer adds none). */
static struct sim_user subject_of(const jv *spec)
{
  struct sim_user u = {.name = (char *)(jv_gets(spec, "user") ? jv_gets(spec, "user") : ""),
                       .uid = (char *)jv_gets(spec, "uid")};
  const jv *g = jv_get(spec, "groups");
  if (g && g->t == J_ARR && g->n) {
    u.groups = sim_xcalloc(g->n, sizeof *u.groups);
    for (size_t i = 0; i < g->n; i++)
      if (jv_str(g->u.a[i])) u.groups[u.ngroups++] = (char *)jv_str(g->u.a[i]);
  }
  return u;
}

static void access_review(const struct sim_req *req, const jv *doc, const struct sim_rtype *rt,
                          bool self, struct sim_resp *resp)
{
  const jv *spec = jv_get(doc, "spec");
  const jv *ra = jv_get(spec, "resourceAttributes"), *nra = jv_get(spec, "nonResourceAttributes");
  bool has_ra = ra && ra->t == J_OBJ, has_nra = nra && nra->t == J_OBJ;
  if (has_ra == has_nra) {
    invalid(resp, rt, "spec.resourceAttributes",
            "spec.resourceAttributes: Invalid value: \"null\": exactly one of "
            "nonResourceAttributes or resourceAttributes must be specified");
    return;
  }
  struct sim_user subject = {0};
  if (!self) {
    subject = subject_of(spec);
    if (!*subject.name && !subject.ngroups) {
      free(subject.groups);
      invalid(resp, rt, "spec.user",
              "spec.user: Invalid value: \"\": at least one of user or group must be specified");
      return;
    }
  }
  struct sim_access acc = {0};
  if (has_ra) {
    acc.verb = jv_gets(ra, "verb");
    acc.group = jv_gets(ra, "group");
    acc.resource = jv_gets(ra, "resource");
    acc.sub = jv_gets(ra, "subresource");
    acc.ns = jv_gets(ra, "namespace");
    acc.name = jv_gets(ra, "name");
    if (acc.sub && !*acc.sub) acc.sub = NULL;
    if (acc.ns && !*acc.ns) acc.ns = NULL;
    if (acc.name && !*acc.name) acc.name = NULL;
    if (!acc.resource) acc.resource = "";
  } else {
    acc.verb = jv_gets(nra, "verb");
    acc.path = jv_gets(nra, "path");
    if (!acc.path) acc.path = "";
  }
  if (!acc.verb) acc.verb = "";
  char *why = NULL;
  bool allowed = sim_rbac_decide(self ? requester(req) : &subject, &acc, &why);
  free(subject.groups);
  put_head(&resp->body, rt, doc);
  sim_buf_printf(&resp->body, ",\"status\":{\"allowed\":%s", allowed ? "true" : "false");
  if (why) put_str_member(&resp->body, "reason", why, true);
  sim_buf_puts(&resp->body, "}}");
  free(why);
  resp->code = 201;
}

void sim_review_handle(struct sim_req *req, const struct sim_rtype *rt, const char *ns,
                       const char *name, struct sim_resp *resp)
{
  if (ns || name) {
    bad(resp, 404, "NotFound", "the server could not find the requested resource");
    return;
  }
  if (strcmp(req->method, "POST") != 0) {
    bad(resp, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
    return;
  }
  req->verb = "create";
  const char *ct = sim_req_header(req, "Content-Type");
  bool pb = ct && strncasecmp(ct, SIM_PB_MEDIA_TYPE, strlen(SIM_PB_MEDIA_TYPE)) == 0;
  if (ct && !pb && strncasecmp(ct, "application/json", 16) != 0) {
    struct sim_details d = {0};
    sim_resp_status(resp, 415, "UnsupportedMediaType", &d,
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json, " SIM_PB_MEDIA_TYPE);
    return;
  }
  if (req->too_large) {
    bad(resp, 413, "RequestEntityTooLarge", "Request entity too large");
    return;
  }
  char err[256] = "";
  jv *doc = NULL;
  if (pb) {
    char *perr = NULL;
    int rc = sim_pb_decode(req->body ? req->body : "", req->blen, &doc, &perr);
    if (rc < 0) {
      struct sim_details d = {0};
      sim_resp_status(resp, rc == -ENOTSUP ? 415 : 400,
                      rc == -ENOTSUP ? "UnsupportedMediaType" : "BadRequest", &d, "%s",
                      perr ? perr : "malformed protobuf body");
      free(perr);
      return;
    }
  } else if (req->body) {
    doc = jv_parse(req->body, req->blen, err, sizeof err);
  }
  if (!doc || doc->t != J_OBJ) {
    jv_free(doc);
    struct sim_details d = {0};
    sim_resp_status(resp, 400, "BadRequest", &d, "the body of %s is not a JSON object%s%s",
                    rt->kind, *err ? ": " : "", err);
    return;
  }
  if (strcmp(rt->plural, "tokenreviews") == 0) token_review(doc, rt, resp);
  else if (strcmp(rt->plural, "selfsubjectreviews") == 0) self_subject_review(req, doc, rt, resp);
  else if (strcmp(rt->plural, "subjectaccessreviews") == 0) access_review(req, doc, rt, false, resp);
  else access_review(req, doc, rt, true, resp);
  jv_free(doc);
}
