/* SPDX-License-Identifier: Apache-2.0 */
/* hook_proto: see hook_proto.h.
 *
 * The response is validated as a yajl tree (jsontree.h: nesting limit, no
 * NUL, no comments) for its structure; the raw text of `object` and `patch`
 * values is then located with the scanner (kc_json_get), so it goes to the
 * API server byte for byte without being re-serialised. Duplicate keys are
 * refused, so the tree and the scanner (which takes the first occurrence)
 * can never disagree about which value is meant. */
#include "hooks/hook_proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "json/jsonpath.h"
#include "json/jsontree.h"
#include "kctrld/plugin.h"
#include "json/yamltree.h"

_Static_assert((int)KC_HOOK_PATCH_MERGE == (int)KCTRLD_PATCH_MERGE, "patch types");
_Static_assert((int)KC_HOOK_PATCH_JSON == (int)KCTRLD_PATCH_JSON, "patch types");

const char *kc_hook_action_name(enum kc_hook_action_type t) {
  switch (t) {
  case KC_HOOK_APPLY: return "apply";
  case KC_HOOK_CREATE: return "create";
  case KC_HOOK_UPDATE: return "update";
  case KC_HOOK_UPDATE_STATUS: return "updateStatus";
  case KC_HOOK_PATCH: return "patch";
  case KC_HOOK_DELETE: return "delete";
  case KC_HOOK_EVENT: return "event";
  }
  return "?";
}

/* ---- request ---------------------------------------------------------------- */

/* A span of an object's text as cached, with line breaks (only possible as
 * whitespace outside strings) turned into spaces: one request is one line. */
static int put_span(void *ud, const char *p, size_t n) {
  kc_buf *b = ud;
  size_t start = b->len;
  kc_buf_add(b, p, n);
  if (b->err) return b->err;
  for (size_t i = start; i < b->len; i++)
    if (b->p[i] == '\n' || b->p[i] == '\r') b->p[i] = ' ';
  return 0;
}

static void put_raw(kc_buf *b, const kc_obj *o) {
  if (!o) kc_buf_puts(b, "null");
  else kc_obj_text_each(o, put_span, b);
}

void kc_hook_request_write(kc_buf *b, const kc_hook_request *req) {
  kc_buf_puts(b, "{\"apiVersion\":\"" KC_HOOK_API_VERSION "\",\"controller\":");
  kc_buf_json_c(b, req->controller);
  kc_buf_puts(b, ",\"key\":");
  kc_buf_json_c(b, req->key);
  kc_buf_printf(b, ",\"attempt\":%llu,\"expectationsSatisfied\":%s,\"object\":",
                (unsigned long long)req->attempt, req->expectations_satisfied ? "true" : "false");
  put_raw(b, req->object);
  if (req->finalizing) kc_buf_puts(b, ",\"finalizing\":true");
  if (req->child_kinds) {
    kc_buf_puts(b, ",\"children\":{");
    for (size_t k = 0; k < req->nchild_kinds; k++) {
      kc_buf_puts(b, k ? ",\"" : "\"");
      kc_buf_json_body(b, req->child_kinds[k], strlen(req->child_kinds[k]));
      kc_buf_puts(b, "\":{");
      bool first = true;
      for (size_t i = 0; i < req->nowned; i++) {
        if (req->owned_kind[i] != k) continue;
        kc_str ns = kc_obj_namespace(req->owned[i]), name = kc_obj_name(req->owned[i]);
        kc_buf_puts(b, first ? "\"" : ",\"");
        first = false;
        if (req->children_by_namespace && ns.len) {
          kc_buf_json_body(b, ns.ptr, ns.len);
          kc_buf_putc(b, '/');
        }
        kc_buf_json_body(b, name.ptr, name.len);
        kc_buf_puts(b, "\":");
        put_raw(b, req->owned[i]);
      }
      kc_buf_putc(b, '}');
    }
    kc_buf_puts(b, "}}");
    return;
  }
  kc_buf_puts(b, ",\"owned\":[");
  for (size_t i = 0; i < req->nowned; i++) {
    if (i) kc_buf_putc(b, ',');
    put_raw(b, req->owned[i]);
  }
  kc_buf_puts(b, "]}");
}

/* ---- response --------------------------------------------------------------- */

struct pctx {
  const char *json;
  size_t len;
  char *err;
  size_t errlen;
  char path[96]; /* "actions[2]" of the action being parsed */
};

__attribute__((format(printf, 2, 3))) static int bad(struct pctx *p, const char *fmt, ...) {
  if (p->err && p->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
  }
  return -EBADMSG;
}

static const char *type_name(yajl_val v) {
  if (!v) return "nothing";
  if (YAJL_IS_STRING(v)) return "a string";
  if (YAJL_IS_NUMBER(v)) return "a number";
  if (YAJL_IS_OBJECT(v)) return "an object";
  if (YAJL_IS_ARRAY(v)) return "an array";
  if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v)) return "a boolean";
  return "null";
}

/* Checks that obj (an object) has only keys of allowed[] and no key twice. */
static int check_keys(struct pctx *p, const char *where, yajl_val obj, const char *const *allowed,
                      size_t n) {
  size_t len = obj->u.object.len;
  for (size_t i = 0; i < len; i++) {
    const char *k = obj->u.object.keys[i];
    bool known = false;
    for (size_t j = 0; j < n && !known; j++)
      known = strcmp(k, allowed[j]) == 0;
    if (!known) return bad(p, "%s%s%s: unknown field", where, *where ? "." : "", k);
    for (size_t j = 0; j < i; j++)
      if (strcmp(k, obj->u.object.keys[j]) == 0)
        return bad(p, "%s%s%s: duplicate key", where, *where ? "." : "", k);
  }
  return 0;
}

static yajl_val member(yajl_val obj, const char *key) {
  for (size_t i = 0; i < obj->u.object.len; i++)
    if (strcmp(obj->u.object.keys[i], key) == 0) return obj->u.object.values[i];
  return NULL;
}

/* A string member: 0 and *out (NULL when absent and !required). */
static int get_string(struct pctx *p, const char *where, yajl_val obj, const char *key,
                      bool required, bool nonempty, const char **out) {
  yajl_val v = member(obj, key);
  *out = NULL;
  if (!v) return required ? bad(p, "%s%s%s: required", where, *where ? "." : "", key) : 0;
  if (!YAJL_IS_STRING(v))
    return bad(p, "%s%s%s: expected a string, got %s", where, *where ? "." : "", key, type_name(v));
  if (nonempty && !*v->u.string)
    return bad(p, "%s%s%s: must not be empty", where, *where ? "." : "", key);
  *out = v->u.string;
  return 0;
}

static int get_bool(struct pctx *p, const char *where, yajl_val obj, const char *key, bool *out) {
  yajl_val v = member(obj, key);
  if (!v) return 0;
  if (!YAJL_IS_TRUE(v) && !YAJL_IS_FALSE(v))
    return bad(p, "%s%s%s: expected a boolean, got %s", where, *where ? "." : "", key, type_name(v));
  *out = YAJL_IS_TRUE(v);
  return 0;
}

/* The raw text of <path>.<key> (a value the tree holds, so the scanner finds it). */
static kc_str raw_of(struct pctx *p, const char *key) {
  char path[128];
  snprintf(path, sizeof path, "%s.%s", p->path, key);
  kc_json_value v;
  if (kc_json_get((kc_str){p->json, p->len}, path, &v) != 0) return (kc_str){NULL, 0};
  return v.raw;
}

/* `object` of apply/create/update/updateStatus: an object with apiVersion,
 * kind and metadata (with name, or generateName for create). */
static int parse_object(struct pctx *p, yajl_val act, kc_hook_action *a) {
  char where[128];
  snprintf(where, sizeof where, "%s.object", p->path);
  yajl_val o = member(act, "object");
  if (!o) return bad(p, "%s: required", where);
  if (!YAJL_IS_OBJECT(o)) return bad(p, "%s: expected an object, got %s", where, type_name(o));
  const char *s;
  int rc;
  if ((rc = get_string(p, where, o, "apiVersion", true, true, &s)) ||
      (rc = get_string(p, where, o, "kind", true, true, &s)))
    return rc;
  yajl_val md = member(o, "metadata");
  char mwhere[160];
  snprintf(mwhere, sizeof mwhere, "%s.metadata", where);
  if (!md) return bad(p, "%s: required", mwhere);
  if (!YAJL_IS_OBJECT(md)) return bad(p, "%s: expected an object, got %s", mwhere, type_name(md));
  const char *name, *gen;
  if ((rc = get_string(p, mwhere, md, "name", false, true, &name)) ||
      (rc = get_string(p, mwhere, md, "generateName", false, true, &gen)) ||
      (rc = get_string(p, mwhere, md, "namespace", false, false, &s)))
    return rc;
  if (!name && !(a->type == KC_HOOK_CREATE && gen))
    return bad(p, "%s.name: required%s", mwhere,
               a->type == KC_HOOK_CREATE ? " (or generateName)" : "");
  a->object = raw_of(p, "object");
  return a->object.ptr ? 0 : bad(p, "%s: not found in the text", where);
}

/* apiVersion, kind, namespace, name of a target, in obj itself. */
static int parse_ref(struct pctx *p, const char *where, yajl_val obj, kc_hook_ref *r) {
  int rc;
  if ((rc = get_string(p, where, obj, "apiVersion", true, true, &r->api_version)) ||
      (rc = get_string(p, where, obj, "kind", true, true, &r->kind)) ||
      (rc = get_string(p, where, obj, "namespace", false, false, &r->namespace_)) ||
      (rc = get_string(p, where, obj, "name", true, true, &r->name)))
    return rc;
  if (r->namespace_ && !*r->namespace_) r->namespace_ = NULL;
  return 0;
}

static int parse_patch(struct pctx *p, yajl_val act, kc_hook_action *a) {
  static const char *const keys[] = {"action", "apiVersion", "kind",  "namespace",
                                     "name",   "patchType",  "patch", "subresource"};
  int rc = check_keys(p, p->path, act, keys, sizeof keys / sizeof keys[0]);
  if (rc || (rc = parse_ref(p, p->path, act, &a->ref))) return rc;
  const char *pt, *sub;
  if ((rc = get_string(p, p->path, act, "patchType", false, false, &pt)) ||
      (rc = get_string(p, p->path, act, "subresource", false, false, &sub)))
    return rc;
  if (!pt || strcmp(pt, "merge") == 0)
    a->patch_type = KC_HOOK_PATCH_MERGE;
  else if (strcmp(pt, "json") == 0)
    a->patch_type = KC_HOOK_PATCH_JSON;
  else if (strcmp(pt, "strategic") == 0)
    a->patch_type = KC_HOOK_PATCH_STRATEGIC;
  else
    return bad(p, "%s.patchType: must be merge, json or strategic, not \"%s\"", p->path, pt);
  if (sub && *sub && strcmp(sub, "status") != 0)
    return bad(p, "%s.subresource: only \"status\" is supported, not \"%s\"", p->path, sub);
  a->status = sub && *sub;
  yajl_val v = member(act, "patch");
  if (!v) return bad(p, "%s.patch: required", p->path);
  if (a->patch_type == KC_HOOK_PATCH_JSON && !YAJL_IS_ARRAY(v))
    return bad(p, "%s.patch: expected an array (patchType json), got %s", p->path, type_name(v));
  if (a->patch_type != KC_HOOK_PATCH_JSON && !YAJL_IS_OBJECT(v))
    return bad(p, "%s.patch: expected an object, got %s", p->path, type_name(v));
  a->patch = raw_of(p, "patch");
  return a->patch.ptr ? 0 : bad(p, "%s.patch: not found in the text", p->path);
}

static int parse_delete(struct pctx *p, yajl_val act, kc_hook_action *a) {
  static const char *const keys[] = {"action",
                                     "apiVersion",
                                     "kind",
                                     "namespace",
                                     "name",
                                     "preconditions",
                                     "propagationPolicy",
                                     "gracePeriodSeconds"};
  int rc = check_keys(p, p->path, act, keys, sizeof keys / sizeof keys[0]);
  if (rc || (rc = parse_ref(p, p->path, act, &a->ref))) return rc;
  a->grace_period_seconds = -1;
  yajl_val pre = member(act, "preconditions");
  if (pre) {
    char where[128];
    snprintf(where, sizeof where, "%s.preconditions", p->path);
    if (!YAJL_IS_OBJECT(pre))
      return bad(p, "%s: expected an object, got %s", where, type_name(pre));
    static const char *const pkeys[] = {"uid", "resourceVersion"};
    if ((rc = check_keys(p, where, pre, pkeys, 2)) ||
        (rc = get_string(p, where, pre, "uid", false, true, &a->precondition_uid)) ||
        (rc = get_string(p, where, pre, "resourceVersion", false, true,
                         &a->precondition_resource_version)))
      return rc;
  }
  const char *pp;
  if ((rc = get_string(p, p->path, act, "propagationPolicy", false, false, &pp))) return rc;
  if (!pp)
    a->propagation = KCTRLD_PROPAGATION_DEFAULT;
  else if (strcmp(pp, "Background") == 0)
    a->propagation = KCTRLD_PROPAGATION_BACKGROUND;
  else if (strcmp(pp, "Foreground") == 0)
    a->propagation = KCTRLD_PROPAGATION_FOREGROUND;
  else if (strcmp(pp, "Orphan") == 0)
    a->propagation = KCTRLD_PROPAGATION_ORPHAN;
  else
    return bad(p, "%s.propagationPolicy: must be Background, Foreground or Orphan, not \"%s\"",
               p->path, pp);
  yajl_val g = member(act, "gracePeriodSeconds");
  if (g) {
    if (!YAJL_IS_INTEGER(g) || YAJL_GET_INTEGER(g) < 0)
      return bad(p, "%s.gracePeriodSeconds: expected a non-negative integer, got %s", p->path,
                 YAJL_IS_NUMBER(g) ? "another number" : type_name(g));
    a->grace_period_seconds = YAJL_GET_INTEGER(g);
  }
  return 0;
}

static int parse_event(struct pctx *p, yajl_val act, kc_hook_action *a) {
  static const char *const keys[] = {"action", "type", "reason", "message", "regarding"};
  int rc = check_keys(p, p->path, act, keys, sizeof keys / sizeof keys[0]);
  const char *type;
  if (rc || (rc = get_string(p, p->path, act, "type", false, false, &type)) ||
      (rc = get_string(p, p->path, act, "reason", true, true, &a->reason)) ||
      (rc = get_string(p, p->path, act, "message", false, false, &a->message)))
    return rc;
  if (!a->message) a->message = "";
  if (type && strcmp(type, "Warning") == 0)
    a->warning = true;
  else if (type && strcmp(type, "Normal") != 0)
    return bad(p, "%s.type: must be Normal or Warning, not \"%s\"", p->path, type);
  yajl_val r = member(act, "regarding");
  if (r) {
    char where[128];
    snprintf(where, sizeof where, "%s.regarding", p->path);
    if (!YAJL_IS_OBJECT(r)) return bad(p, "%s: expected an object, got %s", where, type_name(r));
    static const char *const rkeys[] = {"apiVersion", "kind", "namespace", "name"};
    if ((rc = check_keys(p, where, r, rkeys, 4)) || (rc = parse_ref(p, where, r, &a->ref)))
      return rc;
  }
  return 0;
}

static int parse_action(struct pctx *p, yajl_val act, kc_hook_action *a) {
  if (!YAJL_IS_OBJECT(act))
    return bad(p, "%s: expected an object, got %s", p->path, type_name(act));
  const char *name;
  int rc = get_string(p, p->path, act, "action", true, true, &name);
  if (rc) return rc;
  static const struct {
    const char *name;
    enum kc_hook_action_type type;
  } names[] = {{"apply", KC_HOOK_APPLY},   {"create", KC_HOOK_CREATE},
               {"update", KC_HOOK_UPDATE}, {"updateStatus", KC_HOOK_UPDATE_STATUS},
               {"patch", KC_HOOK_PATCH},   {"delete", KC_HOOK_DELETE},
               {"event", KC_HOOK_EVENT}};
  a->type = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i].name) == 0) a->type = names[i].type;
  switch (a->type) {
  case KC_HOOK_APPLY: {
    static const char *const keys[] = {"action", "object", "fieldManager", "force"};
    if ((rc = check_keys(p, p->path, act, keys, 4)) ||
        (rc = get_string(p, p->path, act, "fieldManager", false, true, &a->field_manager)) ||
        (rc = get_bool(p, p->path, act, "force", &a->force)))
      return rc;
    return parse_object(p, act, a);
  }
  case KC_HOOK_CREATE:
  case KC_HOOK_UPDATE:
  case KC_HOOK_UPDATE_STATUS: {
    static const char *const keys[] = {"action", "object"};
    if ((rc = check_keys(p, p->path, act, keys, 2))) return rc;
    return parse_object(p, act, a);
  }
  case KC_HOOK_PATCH: return parse_patch(p, act, a);
  case KC_HOOK_DELETE: return parse_delete(p, act, a);
  case KC_HOOK_EVENT: return parse_event(p, act, a);
  }
  return bad(p,
             "%s.action: unknown action \"%s\" (apply, create, update, updateStatus, patch, "
             "delete, event)",
             p->path, name);
}

/* "priority": the queue priority a requeueAfter comes back at. */
static int parse_priority(struct pctx *p, const char *prio, kc_hook_response *out) {
  if (strcmp(prio, "low") == 0)
    out->priority = KCTRLD_PRIORITY_LOW;
  else if (strcmp(prio, "normal") == 0)
    out->priority = KCTRLD_PRIORITY_NORMAL;
  else if (strcmp(prio, "high") == 0)
    out->priority = KCTRLD_PRIORITY_HIGH;
  else
    return bad(p, "priority: must be low, normal or high, not \"%s\"", prio);
  out->has_priority = true;
  return 0;
}

static int parse_result(struct pctx *p, yajl_val root, kc_hook_response *out) {
  const char *res, *after, *msg, *prio;
  int rc;
  if ((rc = get_string(p, "", root, "result", !out->desired, true, &res)) ||
      (rc = get_string(p, "", root, "requeueAfter", false, false, &after)) ||
      (rc = get_string(p, "", root, "priority", false, true, &prio)) ||
      (rc = get_string(p, "", root, "message", false, false, &msg)))
    return rc;
  out->message = msg ? msg : "";
  if (out->desired) {
    /* Desired state: done, error or terminal; a resync is asked with resyncAfter. */
    if (res && strcmp(res, "done") != 0 && strcmp(res, "error") != 0 &&
        strcmp(res, "terminal") != 0)
      return bad(p,
                 "result: must be done, error or terminal with children, not \"%s\" (use "
                 "resyncAfter)",
                 res);
    if (after) return bad(p, "requeueAfter: not with children (use resyncAfter)");
    if (prio) return bad(p, "priority: not with children");
    out->result = !res || strcmp(res, "done") == 0 ? KC_HOOK_DONE
                  : strcmp(res, "error") == 0      ? KC_HOOK_ERROR
                                                   : KC_HOOK_TERMINAL;
    const char *resync;
    if ((rc = get_string(p, "", root, "resyncAfter", false, false, &resync))) return rc;
    if (resync && out->result == KC_HOOK_DONE) {
      int64_t ns;
      if (kc_yaml_parse_duration(resync, &ns) != 0)
        return bad(p, "resyncAfter: \"%s\" is not a duration (e.g. 30s, 1m30s, 500ms)", resync);
      out->result = KC_HOOK_REQUEUE_AFTER;
      out->after_ms = (uint64_t)(ns / 1000000);
    }
    return 0;
  }
  if (strcmp(res, "done") == 0)
    out->result = KC_HOOK_DONE;
  else if (strcmp(res, "requeue") == 0)
    out->result = KC_HOOK_REQUEUE;
  else if (strcmp(res, "requeueAfter") == 0)
    out->result = KC_HOOK_REQUEUE_AFTER;
  else if (strcmp(res, "error") == 0)
    out->result = KC_HOOK_ERROR;
  else if (strcmp(res, "terminal") == 0)
    out->result = KC_HOOK_TERMINAL;
  else
    return bad(p, "result: must be done, requeue, requeueAfter, error or terminal, not \"%s\"", res);
  if (out->result == KC_HOOK_REQUEUE_AFTER) {
    if (!after) return bad(p, "requeueAfter: required when result is requeueAfter");
    int64_t ns;
    if (kc_yaml_parse_duration(after, &ns) != 0)
      return bad(p, "requeueAfter: \"%s\" is not a duration (e.g. 30s, 1m30s, 500ms)", after);
    out->after_ms = (uint64_t)(ns / 1000000);
    if (prio) return parse_priority(p, prio, out);
  } else if (after) {
    return bad(p, "requeueAfter: only allowed when result is requeueAfter");
  } else if (prio) {
    return bad(p, "priority: only allowed when result is requeueAfter");
  }
  return 0;
}

/* `children`, `status`, `resyncAfter` (checked in parse_result) and
 * `finalized`: the members of a desired-state response. */
static int parse_desired(struct pctx *p, yajl_val root, kc_hook_response *out) {
  int rc = get_bool(p, "", root, "finalized", &out->finalized);
  if (rc) return rc;
  yajl_val ch = member(root, "children");
  if (!ch) {
    if (member(root, "status")) return bad(p, "status: only with children (a desired-state response)");
    if (member(root, "resyncAfter"))
      return bad(p, "resyncAfter: only with children (a desired-state response)");
    return 0;
  }
  if (!YAJL_IS_ARRAY(ch)) return bad(p, "children: expected an array, got %s", type_name(ch));
  if (member(root, "actions"))
    return bad(p, "actions: not with children (a desired-state response lists no actions)");
  out->desired = true;
  size_t n = ch->u.array.len;
  if (n && !(out->children = calloc(n, sizeof *out->children))) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    yajl_val o = ch->u.array.values[i];
    char where[64];
    snprintf(where, sizeof where, "children[%zu]", i);
    if (!YAJL_IS_OBJECT(o)) return bad(p, "%s: expected an object, got %s", where, type_name(o));
    const char *s;
    if ((rc = get_string(p, where, o, "apiVersion", true, true, &s)) ||
        (rc = get_string(p, where, o, "kind", true, true, &s)))
      return rc;
    yajl_val md = member(o, "metadata");
    char mwhere[96];
    snprintf(mwhere, sizeof mwhere, "%s.metadata", where);
    if (!md) return bad(p, "%s: required", mwhere);
    if (!YAJL_IS_OBJECT(md)) return bad(p, "%s: expected an object, got %s", mwhere, type_name(md));
    if ((rc = get_string(p, mwhere, md, "name", true, true, &s)) ||
        (rc = get_string(p, mwhere, md, "namespace", false, false, &s)))
      return rc;
    kc_json_value v;
    if (kc_json_get((kc_str){p->json, p->len}, where, &v) != 0 || v.type != KC_JSON_OBJECT)
      return bad(p, "%s: not found in the text", where);
    out->children[out->nchildren++] = v.raw;
  }
  yajl_val st = member(root, "status");
  if (st && !YAJL_IS_NULL(st)) {
    if (!YAJL_IS_OBJECT(st)) return bad(p, "status: expected an object, got %s", type_name(st));
    kc_json_value v;
    if (kc_json_get((kc_str){p->json, p->len}, "status", &v) != 0 || v.type != KC_JSON_OBJECT)
      return bad(p, "status: not found in the text");
    out->status = v.raw;
  }
  return 0;
}

int kc_hook_response_parse(const char *json, size_t len, size_t max_bytes, kc_hook_response *out,
                           char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  out->message = "";
  if (err && errlen) err[0] = '\0';
  struct pctx p = {.json = json, .len = len, .err = err, .errlen = errlen};
  if (max_bytes && len > max_bytes) {
    kc_errf(err, errlen, "response of %zu bytes exceeds the limit of %zu bytes", len, max_bytes);
    return -E2BIG;
  }
  char why[200];
  yajl_val root = NULL;
  int rc = kc_jsontree_parse(json, len, &root, why, sizeof why);
  if (rc == -ENOMEM) return rc;
  if (rc < 0) return bad(&p, "response is not JSON: %s", why);
  out->tree = root;
  if (!YAJL_IS_OBJECT(root)) {
    rc = bad(&p, "response: expected an object, got %s", type_name(root));
    goto fail;
  }
  static const char *const keys[] = {"apiVersion", "result",   "requeueAfter", "priority",
                                     "message",    "actions",  "children",     "status",
                                     "resyncAfter", "finalized"};
  if ((rc = check_keys(&p, "", root, keys, sizeof keys / sizeof keys[0]))) goto fail;
  if ((rc = parse_desired(&p, root, out))) goto fail;
  const char *av;
  if ((rc = get_string(&p, "", root, "apiVersion", false, false, &av))) goto fail;
  if (av && strcmp(av, KC_HOOK_API_VERSION) != 0) {
    rc = bad(&p, "apiVersion: \"%s\" is not supported (this daemon speaks %s)", av,
             KC_HOOK_API_VERSION);
    goto fail;
  }
  if ((rc = parse_result(&p, root, out))) goto fail;
  yajl_val acts = member(root, "actions");
  if (acts && !YAJL_IS_NULL(acts)) {
    if (!YAJL_IS_ARRAY(acts)) {
      rc = bad(&p, "actions: expected an array, got %s", type_name(acts));
      goto fail;
    }
    size_t n = acts->u.array.len;
    if (n) {
      out->actions = calloc(n, sizeof *out->actions);
      if (!out->actions) {
        rc = -ENOMEM;
        goto fail;
      }
    }
    for (size_t i = 0; i < n; i++) {
      snprintf(p.path, sizeof p.path, "actions[%zu]", i);
      if ((rc = parse_action(&p, acts->u.array.values[i], &out->actions[i]))) goto fail;
      out->nactions++;
    }
  }
  return 0;
fail:
  kc_hook_response_free(out);
  return rc;
}

void kc_hook_response_free(kc_hook_response *r) {
  if (!r) return;
  free(r->actions);
  free(r->children);
  if (r->tree) yajl_tree_free(r->tree);
  memset(r, 0, sizeof *r);
  r->message = "";
}
