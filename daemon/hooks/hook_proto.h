/* SPDX-License-Identifier: Apache-2.0 */
/* hook_proto: the wire format of hooks, `kctrld.io/hook/v1` (docs/hooks.md,
 * docs/hook-v1.schema.json): the request writer and the response parser.
 * Transport-free: exec hooks (hook_exec.h) use it over pipes, webhook hooks
 * (hook_webhook.h) over HTTP; process isolation has its own line format
 * (isolate_wire.h).
 *
 * Owns: the request document (kc_hook_request_write: the object and owned
 * objects are copied in as raw JSON from the cache) and the parsed response
 * (kc_hook_response: result, message and the list of actions, checked field
 * by field). The parser is strict: unknown fields, wrong types, a missing
 * required field, a duplicate key, an unknown action or result, a bad
 * duration or a response larger than the limit are errors naming the field
 * (`actions[2].patch: expected an object`), never a crash.
 *
 * Threads: any; no shared state. Errors: 0 or a negative errno: -EBADMSG
 * malformed response (the reason in err, one line), -E2BIG larger than
 * max_bytes, -ENOMEM.
 * Ownership: a parsed response borrows the input text (raw slices of
 * objects and patches point into it) and owns the yajl tree its strings
 * point into: keep the input alive until kc_hook_response_free.
 */
#ifndef KC_HOOK_PROTO_H
#define KC_HOOK_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "kube/kobj.h"
#include "base/kstr.h"

#define KC_HOOK_API_VERSION "kctrld.io/hook/v1"
/* Default for hook.exec.maxResponseBytes (docs/config.md). */
#define KC_HOOK_DEFAULT_MAX_RESPONSE (4u << 20)

enum kc_hook_result {
  KC_HOOK_DONE = 0,
  KC_HOOK_REQUEUE,
  KC_HOOK_REQUEUE_AFTER,
  KC_HOOK_ERROR,
  KC_HOOK_TERMINAL, /* an error no retry can fix: not requeued (plugin.h) */
};

enum kc_hook_action_type {
  KC_HOOK_APPLY = 1, /* server-side apply (api_apply) */
  KC_HOOK_CREATE,
  KC_HOOK_UPDATE,
  KC_HOOK_UPDATE_STATUS,
  KC_HOOK_PATCH,
  KC_HOOK_DELETE,
  KC_HOOK_EVENT,
};

enum kc_hook_patch_type {
  KC_HOOK_PATCH_MERGE = 1, /* = KCTRLD_PATCH_MERGE */
  KC_HOOK_PATCH_JSON = 2,  /* = KCTRLD_PATCH_JSON */
  KC_HOOK_PATCH_STRATEGIC = 3, /* = KCTRLD_PATCH_STRATEGIC */
};

/* The target of patch/delete/event: strings in the response's tree, NULL
 * when absent (namespace: cluster-scoped; event without `regarding`: the
 * reconciled object). */
typedef struct kc_hook_ref {
  const char *api_version;
  const char *kind;
  const char *namespace_;
  const char *name;
} kc_hook_ref;

typedef struct kc_hook_action {
  enum kc_hook_action_type type;
  kc_str object;                /* apply/create/update/updateStatus: raw JSON of `object` */
  kc_hook_ref ref;              /* patch, delete, event (`regarding`) */
  int patch_type;               /* patch: enum kc_hook_patch_type */
  kc_str patch;                 /* patch: raw JSON of `patch` */
  bool status;                  /* patch: subresource "status" */
  const char *precondition_uid; /* delete: NULL = none */
  const char *precondition_resource_version; /* delete: NULL = none */
  int propagation;                           /* delete: KCTRLD_PROPAGATION_* (0 = server default) */
  int64_t grace_period_seconds;              /* delete: -1 = server default */
  bool warning;                              /* event: type Warning (else Normal) */
  const char *reason;                        /* event */
  const char *message;                       /* event ("" when absent) */
  const char *field_manager;                 /* apply: NULL = the controller's name */
  bool force;                                /* apply */
} kc_hook_action;

/* A response is of one of two styles (config hook.style, docs/hooks.md):
 * actions (`result` required, `actions`) or desired state (`children`
 * required, `status`, `resyncAfter`; `result` optional: done or error).
 * `finalized` may come with either. The parser tells them apart by
 * `children`; the caller checks the style is the controller's. */
typedef struct kc_hook_response {
  enum kc_hook_result result; /* desired state: done, error, or requeueAfter (resyncAfter) */
  uint64_t after_ms;       /* KC_HOOK_REQUEUE_AFTER */
  bool has_priority;       /* KC_HOOK_REQUEUE_AFTER with "priority" */
  int priority;            /* then: KCTRLD_PRIORITY_LOW, _NORMAL or _HIGH (kctrld/plugin.h) */
  const char *message;     /* "" when absent */
  kc_hook_action *actions; /* owned */
  size_t nactions;
  bool desired;            /* `children` given: a desired-state response */
  kc_str *children;        /* owned array of raw slices of each child object */
  size_t nchildren;
  kc_str status;           /* raw JSON of `status`; ptr NULL: absent */
  bool finalized;          /* `finalized: true` */
  void *tree; /* private: the yajl tree the strings live in */
} kc_hook_response;

/* Parses one response document of len bytes (need not be NUL-terminated).
 * Returns 0 and fills *out (free with kc_hook_response_free), -E2BIG when
 * len > max_bytes (0: no limit), -EBADMSG with the reason in err, -ENOMEM.
 * On failure *out is empty (freeing it is still fine). */
int kc_hook_response_parse(const char *json, size_t len, size_t max_bytes, kc_hook_response *out,
                           char *err, size_t errlen);

/* Frees what a parse allocated; leaves *r zeroed. NULL ok. */
void kc_hook_response_free(kc_hook_response *r);

/* Names for logs and errors ("create", "updateStatus", ...). */
const char *kc_hook_action_name(enum kc_hook_action_type t);

/* The request of one reconcile, as kc_hook_request_write writes it. The
 * objects' texts are written as cached (kc_obj_text_each: shared pieces
 * included, without a contiguous copy); object NULL writes null. */
typedef struct kc_hook_request {
  const char *controller;
  const char *key;
  uint64_t attempt;    /* 1 for the first try of a key, counting failures since its last success */
  const kc_obj *object;              /* the object from the cache; NULL: deleted (null) */
  const kc_obj *const *owned;        /* the owned objects from the cache */
  size_t nowned;
  bool expectations_satisfied;
  bool finalizing;                   /* written only when true */
  /* Desired state: the owned objects go into `children` by kind
   * ("Pod.v1": {name: object}) instead of the `owned` list. */
  const char *const *child_kinds;    /* "Kind.apiVersion" per owns kind; NULL: the `owned` list */
  size_t nchild_kinds;
  const size_t *owned_kind;          /* per owned object: its index in child_kinds */
  bool children_by_namespace;        /* keys "namespace/name" (a cluster-scoped parent) */
} kc_hook_request;

/* Appends the request as one line of JSON (no newline inside, none at the
 * end) to b. Errors: b's sticky error. */
void kc_hook_request_write(kc_buf *b, const kc_hook_request *req);

#endif
