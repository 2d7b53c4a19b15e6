/* SPDX-License-Identifier: Apache-2.0 */
#include "table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "watch.h"

void sim_human_duration(int64_t s, char *out, size_t n)
{
  /* apimachinery/pkg/util/duration.HumanDuration, on whole seconds. */
  if (s < -1) { snprintf(out, n, "<invalid>"); return; }
  if (s < 0) { snprintf(out, n, "0s"); return; }
  if (s < 60 * 2) { snprintf(out, n, "%llds", (long long)s); return; }
  int64_t m = s / 60;
  if (m < 10) {
    if (s % 60 == 0) snprintf(out, n, "%lldm", (long long)m);
    else snprintf(out, n, "%lldm%llds", (long long)m, (long long)(s % 60));
    return;
  }
  if (m < 60 * 3) { snprintf(out, n, "%lldm", (long long)m); return; }
  int64_t h = s / 3600;
  if (h < 8) {
    if (m % 60 == 0) snprintf(out, n, "%lldh", (long long)h);
    else snprintf(out, n, "%lldh%lldm", (long long)h, (long long)(m % 60));
    return;
  }
  if (h < 48) { snprintf(out, n, "%lldh", (long long)h); return; }
  if (h < 24 * 8) {
    if (h % 24 == 0) snprintf(out, n, "%lldd", (long long)(h / 24));
    else snprintf(out, n, "%lldd%lldh", (long long)(h / 24), (long long)(h % 24));
    return;
  }
  if (h < 24 * 365 * 2) { snprintf(out, n, "%lldd", (long long)(h / 24)); return; }
  if (h < 24 * 365 * 8) {
    int64_t dy = (h / 24) % 365;
    if (dy == 0) snprintf(out, n, "%lldy", (long long)(h / 24 / 365));
    else snprintf(out, n, "%lldy%lldd", (long long)(h / 24 / 365), (long long)dy);
    return;
  }
  snprintf(out, n, "%lldy", (long long)(h / 24 / 365));
}

/* RFC 3339 ("2024-05-01T10:00:00Z", fractions and offsets allowed). */
static bool parse_time(const char *s, time_t *out)
{
  struct tm tm = {0};
  int consumed = 0;
  if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6)
    return false;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  time_t t = timegm(&tm);
  const char *p = s + consumed;
  if (*p == '.') for (p++; *p >= '0' && *p <= '9'; p++) {}
  int oh, om;
  if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &oh, &om) == 2)
    t -= (*p == '+' ? 1 : -1) * (oh * 3600 + om * 60);
  *out = t;
  return true;
}

static void age_cell(struct sim_buf *b, const char *ts)
{
  time_t t;
  if (!parse_time(ts, &t)) {
    sim_buf_puts(b, "\"<unknown>\"");
    return;
  }
  char d[32];
  sim_human_duration((int64_t)(time(NULL) - t), d, sizeof d);
  sim_buf_put_jstr(b, d, strlen(d));
}

static void str_cell(struct sim_buf *b, const char *s, const char *dflt)
{
  if (!s || !*s) s = dflt;
  if (!s) sim_buf_puts(b, "null");
  else sim_buf_put_jstr(b, s, strlen(s));
}

static int64_t int_at(const jv *o, const char *a, const char *b)
{
  int64_t v = 0;
  if (!jv_int(jv_geta(o, a, b, (const char *)NULL), &v)) v = 0;
  return v;
}

static size_t count_members(const jv *v)
{
  return v && (v->t == J_OBJ || v->t == J_ARR) ? v->n : 0;
}

/* ---- per-kind columns ---- */

struct col {
  const char *name, *type, *format;
  int priority;
};

enum kind_id { K_DEFAULT, K_POD, K_DEPLOY, K_RS, K_STS, K_DS, K_CM, K_SECRET, K_NS, K_NODE,
               K_SVC, K_SA, K_LEASE, K_CRD };

static enum kind_id kind_of(const struct sim_rtype *rt)
{
  if (rt->is_crd) return K_DEFAULT;
  static const struct { const char *g, *p; enum kind_id k; } m[] = {
    {"", "pods", K_POD},           {"apps", "deployments", K_DEPLOY},
    {"apps", "replicasets", K_RS}, {"apps", "statefulsets", K_STS},
    {"apps", "daemonsets", K_DS},  {"", "configmaps", K_CM},
    {"", "secrets", K_SECRET},     {"", "namespaces", K_NS},
    {"", "nodes", K_NODE},         {"", "services", K_SVC},
    {"", "serviceaccounts", K_SA}, {"coordination.k8s.io", "leases", K_LEASE},
    {"apiextensions.k8s.io", "customresourcedefinitions", K_CRD},
  };
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    if (strcmp(rt->group, m[i].g) == 0 && strcmp(rt->plural, m[i].p) == 0) return m[i].k;
  return K_DEFAULT;
}

/* Columns between Name and Age. */
static const struct col *kind_cols(enum kind_id k, size_t *n)
{
  static const struct col pod[] = {{"Ready", "string", "", 0}, {"Status", "string", "", 0},
                                   {"Restarts", "string", "", 0}, {"IP", "string", "", 1},
                                   {"Node", "string", "", 1}};
  static const struct col deploy[] = {{"Ready", "string", "", 0}, {"Up-to-date", "integer", "", 0},
                                      {"Available", "integer", "", 0}};
  static const struct col rs[] = {{"Desired", "integer", "", 0}, {"Current", "integer", "", 0},
                                  {"Ready", "integer", "", 0}};
  static const struct col sts[] = {{"Ready", "string", "", 0}};
  static const struct col ds[] = {{"Desired", "integer", "", 0}, {"Current", "integer", "", 0},
                                  {"Ready", "integer", "", 0}, {"Up-to-date", "integer", "", 0},
                                  {"Available", "integer", "", 0}};
  static const struct col cm[] = {{"Data", "integer", "", 0}};
  static const struct col secret[] = {{"Type", "string", "", 0}, {"Data", "integer", "", 0}};
  static const struct col ns[] = {{"Status", "string", "", 0}};
  static const struct col node[] = {{"Status", "string", "", 0}, {"Version", "string", "", 0}};
  static const struct col svc[] = {{"Type", "string", "", 0}, {"Cluster-IP", "string", "", 0}};
  static const struct col sa[] = {{"Secrets", "integer", "", 0}};
  static const struct col lease[] = {{"Holder", "string", "", 0}};
#define R(a) *n = sizeof a / sizeof a[0]; return a
  switch (k) {
  case K_POD: R(pod);
  case K_DEPLOY: R(deploy);
  case K_RS: R(rs);
  case K_STS: R(sts);
  case K_DS: R(ds);
  case K_CM: R(cm);
  case K_SECRET: R(secret);
  case K_NS: R(ns);
  case K_NODE: R(node);
  case K_SVC: R(svc);
  case K_SA: R(sa);
  case K_LEASE: R(lease);
  default: *n = 0; return NULL;
  }
#undef R
}

static const char *pod_status(const jv *o)
{
  const jv *st = jv_get(o, "status");
  const char *reason = jv_gets(st, "phase");
  if (jv_gets(st, "reason") && *jv_gets(st, "reason")) reason = jv_gets(st, "reason");
  const jv *cs = jv_get(st, "containerStatuses");
  for (size_t i = 0; cs && cs->t == J_ARR && i < cs->n; i++) {
    const char *w = jv_gets(jv_geta(cs->u.a[i], "state", "waiting", (const char *)NULL), "reason");
    const char *t = jv_gets(jv_geta(cs->u.a[i], "state", "terminated", (const char *)NULL), "reason");
    if (w && *w) reason = w;
    else if (t && *t) reason = t;
  }
  if (jv_geta(o, "metadata", "deletionTimestamp", (const char *)NULL)) reason = "Terminating";
  return reason && *reason ? reason : "Unknown";
}

/* The cells of kind_cols(k) with priority 0 (wide = false, no leading
 * comma) or 1 (wide = true, each with its leading comma). */
static void kind_cells(struct sim_buf *b, enum kind_id k, const jv *o, bool wide)
{
  if (wide) {
    if (k == K_POD) {
      const jv *spec = jv_get(o, "spec"), *st = jv_get(o, "status");
      sim_buf_putc(b, ',');
      str_cell(b, jv_gets(st, "podIP"), "<none>");
      sim_buf_putc(b, ',');
      str_cell(b, jv_gets(spec, "nodeName"), "<none>");
    }
    return;
  }
  char tmp[64];
  const jv *spec = jv_get(o, "spec"), *st = jv_get(o, "status");
  switch (k) {
  case K_POD: {
    const jv *cs = jv_get(st, "containerStatuses");
    size_t ready = 0;
    int64_t restarts = 0, rc;
    for (size_t i = 0; cs && cs->t == J_ARR && i < cs->n; i++) {
      if (jv_get(cs->u.a[i], "ready") && jv_get(cs->u.a[i], "ready")->t == J_TRUE) ready++;
      if (jv_int(jv_get(cs->u.a[i], "restartCount"), &rc)) restarts += rc;
    }
    snprintf(tmp, sizeof tmp, "%zu/%zu", ready, count_members(jv_get(spec, "containers")));
    str_cell(b, tmp, NULL);
    sim_buf_putc(b, ',');
    str_cell(b, pod_status(o), NULL);
    /* kube-apiserver's Restarts cell is a string ("3 (5m ago)"). */
    snprintf(tmp, sizeof tmp, "%lld", (long long)restarts);
    sim_buf_putc(b, ',');
    str_cell(b, tmp, NULL);
    break;
  }
  case K_DEPLOY: {
    int64_t want = 1;
    if (!jv_int(jv_get(spec, "replicas"), &want)) want = 1;
    snprintf(tmp, sizeof tmp, "%lld/%lld", (long long)int_at(o, "status", "readyReplicas"), (long long)want);
    str_cell(b, tmp, NULL);
    sim_buf_printf(b, ",%lld,%lld", (long long)int_at(o, "status", "updatedReplicas"),
                   (long long)int_at(o, "status", "availableReplicas"));
    break;
  }
  case K_RS: {
    int64_t want = 1;
    if (!jv_int(jv_get(spec, "replicas"), &want)) want = 1;
    sim_buf_printf(b, "%lld,%lld,%lld", (long long)want, (long long)int_at(o, "status", "replicas"),
                   (long long)int_at(o, "status", "readyReplicas"));
    break;
  }
  case K_STS: {
    int64_t want = 1;
    if (!jv_int(jv_get(spec, "replicas"), &want)) want = 1;
    snprintf(tmp, sizeof tmp, "%lld/%lld", (long long)int_at(o, "status", "readyReplicas"), (long long)want);
    str_cell(b, tmp, NULL);
    break;
  }
  case K_DS:
    sim_buf_printf(b, "%lld,%lld,%lld,%lld,%lld", (long long)int_at(o, "status", "desiredNumberScheduled"),
                   (long long)int_at(o, "status", "currentNumberScheduled"),
                   (long long)int_at(o, "status", "numberReady"),
                   (long long)int_at(o, "status", "updatedNumberScheduled"),
                   (long long)int_at(o, "status", "numberAvailable"));
    break;
  case K_CM:
    sim_buf_printf(b, "%zu", count_members(jv_get(o, "data")) + count_members(jv_get(o, "binaryData")));
    break;
  case K_SECRET:
    str_cell(b, jv_gets(o, "type"), "Opaque");
    sim_buf_printf(b, ",%zu", count_members(jv_get(o, "data")));
    break;
  case K_NS:
    str_cell(b, jv_gets(st, "phase"), "Active");
    break;
  case K_NODE: {
    const char *ready = "Unknown";
    const jv *conds = jv_get(st, "conditions");
    for (size_t i = 0; conds && conds->t == J_ARR && i < conds->n; i++) {
      const char *t = jv_gets(conds->u.a[i], "type"), *s = jv_gets(conds->u.a[i], "status");
      if (t && strcmp(t, "Ready") == 0) ready = s && strcmp(s, "True") == 0 ? "Ready" : "NotReady";
    }
    const jv *u = jv_get(spec, "unschedulable");
    snprintf(tmp, sizeof tmp, "%s%s", ready, u && u->t == J_TRUE ? ",SchedulingDisabled" : "");
    str_cell(b, tmp, NULL);
    sim_buf_putc(b, ',');
    str_cell(b, jv_gets(jv_get(st, "nodeInfo"), "kubeletVersion"), "");
    break;
  }
  case K_SVC:
    str_cell(b, jv_gets(spec, "type"), "ClusterIP");
    sim_buf_putc(b, ',');
    str_cell(b, jv_gets(spec, "clusterIP"), "<none>");
    break;
  case K_SA:
    sim_buf_printf(b, "%zu", count_members(jv_get(o, "secrets")));
    break;
  case K_LEASE:
    str_cell(b, jv_gets(spec, "holderIdentity"), "");
    break;
  default:
    break;
  }
}

/* ---- custom resources ---- */

/* The version's additionalPrinterColumns (a copy) or NULL. */
static jv *crd_columns(const struct sim_rtype *rt)
{
  if (!rt->is_crd || !rt->crd_name) return NULL;
  jv *cols = NULL;
  pthread_mutex_lock(&sim_mu);
  struct sim_rtype *crt = sim_type_crd_locked();
  const struct sim_obj *o = crt ? sim_coll_get_locked(crt->coll, rt->crd_name) : NULL;
  const jv *vers = o ? jv_geta(o->dom, "spec", "versions", (const char *)NULL) : NULL;
  for (size_t i = 0; vers && vers->t == J_ARR && i < vers->n; i++) {
    const char *vn = jv_gets(vers->u.a[i], "name");
    const jv *c = jv_get(vers->u.a[i], "additionalPrinterColumns");
    if (vn && strcmp(vn, rt->version) == 0 && c && c->t == J_ARR && c->n) cols = jv_copy(c);
  }
  pthread_mutex_unlock(&sim_mu);
  return cols;
}

/* jsonPath ".a.b.c" (the common form; anything else is an empty cell). */
static const jv *json_path(const jv *o, const char *path)
{
  if (!path || path[0] != '.') return NULL;
  const jv *cur = o;
  const char *p = path + 1;
  while (cur && *p) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (!n || cur->t != J_OBJ || memchr(p, '[', n)) return NULL;
    const jv *next = NULL;
    for (size_t i = 0; i < cur->n; i++)
      if (strlen(cur->u.o[i].k) == n && strncmp(cur->u.o[i].k, p, n) == 0) next = cur->u.o[i].v;
    cur = next;
    p = dot ? dot + 1 : p + n;
  }
  return cur;
}

static void crd_cell(struct sim_buf *b, const jv *col, const jv *o)
{
  const jv *v = json_path(o, jv_gets(col, "jsonPath"));
  const char *type = jv_gets(col, "type");
  if (!v || v->t == J_NULL) {
    sim_buf_puts(b, "null");
  } else if (type && strcmp(type, "date") == 0 && v->t == J_STR) {
    age_cell(b, v->u.s);
  } else if (v->t == J_STR || v->t == J_NUM || v->t == J_TRUE || v->t == J_FALSE) {
    jv_write(b, v);
  } else {
    /* Objects and lists print as their JSON text. */
    struct sim_buf t = {0};
    jv_write(&t, v);
    sim_buf_put_jstr(b, t.p, t.len);
    sim_buf_free(&t);
  }
}

/* ---- the Table ---- */

bool sim_table_wanted(struct sim_req *req)
{
  const char *a = sim_req_header(req, "Accept");
  if (!a) return false;
  const char *p = a;
  for (char *part; (part = sim_next_csv(&p));) {
    const char *s = part;
    bool json = strncmp(s, "application/json", 16) == 0 && (s[16] == ';' || s[16] == ' ' || !s[16]);
    bool any = strncmp(s, "*/*", 3) == 0 || strncmp(s, "application/*", 13) == 0;
    bool table = json && strstr(s, "as=Table") && strstr(s, "g=meta.k8s.io") &&
                 (strstr(s, "v=v1;") || strstr(s, "v=v1beta1") || (strlen(s) >= 4 && strcmp(s + strlen(s) - 4, "v=v1") == 0));
    bool has_as = json && strstr(s, "as=");
    /* PartialObjectMetadata[List] is served (sim_accept), so it wins when
     * it comes first; other as= forms are skipped like unknown types. */
    bool meta = has_as && strstr(s, "as=PartialObjectMetadata");
    free(part);
    if (table) return true;
    if ((json && !has_as) || meta || any) return false;
  }
  return false;
}

static void col_def(struct sim_buf *b, const char *name, const char *type, const char *format,
                    const char *desc, int priority)
{
  sim_buf_puts(b, "{\"name\":");
  str_cell(b, name, "");
  sim_buf_puts(b, ",\"type\":");
  str_cell(b, type, "string");
  sim_buf_puts(b, ",\"format\":");
  str_cell(b, format, "");
  sim_buf_puts(b, ",\"description\":");
  str_cell(b, desc, "");
  sim_buf_printf(b, ",\"priority\":%d}", priority);
}

int sim_table_include(struct sim_req *req, struct sim_resp *resp)
{
  const char *inc = sim_req_query(req, "includeObject");
  if (!inc || !*inc || strcmp(inc, "Metadata") == 0) return SIM_TABLE_METADATA;
  if (strcmp(inc, "None") == 0) return SIM_TABLE_NONE;
  if (strcmp(inc, "Object") == 0) return SIM_TABLE_OBJECT;
  struct sim_details d = {0};
  sim_resp_status(resp, 400, "BadRequest", &d,
                  "includeObject: Unsupported value: \"%s\": supported values: \"Metadata\", \"None\", \"Object\"",
                  inc);
  return -EINVAL;
}

int sim_table_write(struct sim_req *req, struct sim_resp *resp, const struct sim_rtype *rt,
                    struct sim_obj *const *items, size_t n, bool list, uint64_t rv,
                    const char *cont, long long remaining)
{
  int include = sim_table_include(req, resp);
  if (include < 0) return include;
  struct sim_buf md = {0};
  if (list) {
    sim_buf_printf(&md, "\"resourceVersion\":\"%llu\"", (unsigned long long)rv);
    if (cont) {
      sim_buf_puts(&md, ",\"continue\":");
      str_cell(&md, cont, "");
      if (remaining >= 0) sim_buf_printf(&md, ",\"remainingItemCount\":%lld", remaining);
    }
  } else if (n) {
    sim_buf_printf(&md, "\"resourceVersion\":\"%llu\"", (unsigned long long)items[0]->rv);
  }
  sim_table_json(&resp->body, rt, items, n, include, true, md.p ? md.p : "");
  sim_buf_free(&md);
  resp->code = 200;
  return 0;
}

void sim_table_json(struct sim_buf *b, const struct sim_rtype *rt, struct sim_obj *const *items,
                    size_t n, int include, bool headers, const char *metadata)
{
  enum kind_id k = kind_of(rt);
  jv *ccols = crd_columns(rt);
  size_t nc = 0;
  const struct col *cols = kind_cols(k, &nc);
  sim_buf_puts(b, "{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{");
  sim_buf_puts(b, metadata);
  sim_buf_puts(b, "},\"columnDefinitions\":");
  if (!headers) {
    /* Watch events after the first: kube-apiserver sets NoHeaders. */
    sim_buf_puts(b, "null,\"rows\":[");
    goto rows;
  }
  sim_buf_putc(b, '[');
  col_def(b, "Name", "string", "name",
          "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
          0);
  if (ccols) {
    for (size_t i = 0; i < ccols->n; i++) {
      const jv *c = ccols->u.a[i];
      int64_t prio = 0;
      if (!jv_int(jv_get(c, "priority"), &prio)) prio = 0;
      const char *type = jv_gets(c, "type");
      sim_buf_putc(b, ',');
      col_def(b, jv_gets(c, "name"), type && strcmp(type, "date") == 0 ? "date" : type,
              jv_gets(c, "format"), jv_gets(c, "description"), (int)prio);
    }
  } else {
    for (size_t i = 0; i < nc; i++) {
      if (cols[i].priority) continue;
      sim_buf_putc(b, ',');
      col_def(b, cols[i].name, cols[i].type, cols[i].format, "", 0);
    }
    if (k == K_CRD) {
      sim_buf_putc(b, ',');
      col_def(b, "Created At", "date", "", "", 0);
    } else {
      sim_buf_putc(b, ',');
      col_def(b, "Age", "string", "",
              "CreationTimestamp is a timestamp representing the server time when this object was created.", 0);
    }
    for (size_t i = 0; i < nc; i++) {
      if (!cols[i].priority) continue;
      sim_buf_putc(b, ',');
      col_def(b, cols[i].name, cols[i].type, cols[i].format, "", cols[i].priority);
    }
  }
  sim_buf_puts(b, "],\"rows\":[");
rows:
  for (size_t i = 0; i < n; i++) {
    const jv *o = items[i]->dom;
    const jv *md = jv_get(o, "metadata");
    sim_buf_puts(b, i ? ",{\"cells\":[" : "{\"cells\":[");
    str_cell(b, jv_gets(md, "name"), "");
    if (ccols) {
      for (size_t j = 0; j < ccols->n; j++) {
        sim_buf_putc(b, ',');
        crd_cell(b, ccols->u.a[j], o);
      }
    } else {
      if (nc) {
        sim_buf_putc(b, ',');
        kind_cells(b, k, o, false);
      }
      sim_buf_putc(b, ',');
      if (k == K_CRD) str_cell(b, jv_gets(md, "creationTimestamp"), "<unknown>");
      else age_cell(b, jv_gets(md, "creationTimestamp"));
      kind_cells(b, k, o, true);
    }
    sim_buf_putc(b, ']');
    if (include != SIM_TABLE_NONE) {
      sim_buf_puts(b, ",\"object\":");
      sim_write_obj(b, rt, items[i], true, include == SIM_TABLE_METADATA);
    }
    sim_buf_putc(b, '}');
  }
  sim_buf_puts(b, "]}");
  jv_free(ccols);
}
