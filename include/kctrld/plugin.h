/* SPDX-License-Identifier: Apache-2.0 */
/* kctrld/plugin.h: the public plugin ABI of kctrld (installed with kctrld/plugin_util.h, the header-only helpers).
 *
 * A plugin is a shared object that exports exactly one symbol,
 * kctrld_plugin_entry. The daemon loads it with dlopen(RTLD_NOW | RTLD_LOCAL |
 * RTLD_NODELETE) and calls the entry point once with the host function table;
 * the plugin returns its own table. Both tables start with abi_major,
 * abi_minor and struct_size; members are only ever appended, so:
 *   - the host refuses a plugin whose abi_major differs from its own or whose
 *     table is smaller than the 1.0 layout, naming both versions;
 *   - a plugin that calls a host function added after 1.0 first checks
 *     KCTRLD_HOST_HAS(host, member) (abi_minor and struct_size);
 *   - the host reads a plugin-table member added after 1.0 only when
 *     KCTRLD_PLUGIN_HAS(table, member) says the plugin's table has it, so a
 *     plugin built against an older header (smaller struct_size) still loads.
 * 1.1 appended kctrld_plugin.permissions.
 * 1.2 appended kctrld_host_api.api_apply and KCTRLD_PATCH_STRATEGIC (check
 *     KCTRLD_HOST_HAS(host, api_apply) before using either).
 * 1.3 appended kctrld_host_api.result_terminal and KCTRLD_RESULT_TERMINAL
 *     (check KCTRLD_HOST_HAS(host, result_terminal) before using either: a
 *     1.2 host counts KCTRLD_RESULT_TERMINAL as an invalid result, an error
 *     retried with backoff).
 * 1.4 appended kctrld_host_api.result_requeue_priority and enum
 *     kctrld_priority (check KCTRLD_HOST_HAS(host, result_requeue_priority)).
 * 1.5 appended kctrld_host_api.ctx_finalizing, result_finalized and the
 *     desired_* functions (desired state: the host applies and prunes).
 *
 * Build a plugin out of tree with
 *     cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags kctrld-plugin) \
 *        -o myplugin.so myplugin.c
 * Everything but kctrld_plugin_entry stays hidden (KCTRLD_EXPORT marks it).
 *
 * Threads. init runs on the daemon's loop thread; fini too, except after a
 * reconcile that outlived shutdownTimeout was abandoned: then fini runs on
 * that worker thread once the reconcile returns. reconcile runs on
 * one of the controller's worker threads (`workers: N`); the host never runs
 * two reconciles of the same key at once, but different keys of the same
 * instance run concurrently, so instance state shared between keys must be
 * locked or atomic. Every host function says in its comment where it may be
 * called ("Context:").
 *
 * Memory. Memory crosses the boundary only through the host's alloc/free
 * (or is released by the side that allocated it, e.g. object_release). All
 * strings passed in are borrowed for the duration of the call unless the
 * comment says otherwise. Objects from the cache are immutable and shared:
 * never write through a pointer obtained from the host.
 *
 * Errors. Functions returning int return 0 (or a count) on success and a
 * negative errno on failure. API writes map Kubernetes Status codes as:
 *   -ENOENT     404 NotFound            -EEXIST   409 AlreadyExists
 *   -ESTALE     409 Conflict (stale resourceVersion or failed precondition)
 *   -EINVAL     400 BadRequest / 422 Invalid
 *   -ENOTSUP    404 / 405 on a subresource the kind does not have (a status
 *               write to a ConfigMap), or a kind the server does not serve
 *   -EACCES     401 Unauthorized / 403 Forbidden
 *   -ETIMEDOUT  no answer within the write timeout / 504
 *   -EAGAIN     429 TooManyRequests / 5xx (retry later)
 *   -EPROTO     any other failure
 * and the server's message is available with ctx_api_error(). A -ESTALE is
 * normal under optimistic concurrency: return KCTRLD_RESULT_REQUEUE.
 *
 * Terminal errors. Some answers no retry can fix: a 404 or 405 on a
 * subresource the kind does not have (-ENOTSUP), a 400 or 422 (-EINVAL;
 * not a failed JSON patch "test", which is -ESTALE). The host remembers
 * such a failure for the rest of the reconcile, with a reason naming the
 * subresource or the field ("configmaps has no status subresource"), which
 * ctx_api_error returns. When reconcile then returns KCTRLD_RESULT_ERROR
 * and the last API call of this reconcile that failed was such a call, the
 * error is terminal (below); a later call that fails for another reason
 * makes it an ordinary error again. A plugin can also say so itself with
 * result_terminal (ABI 1.3).
 *
 * A terminal error is logged once at error level ("Reconciler error
 * terminal=true ...", with the reason), counted in
 * controller_runtime_reconcile_errors_total and
 * controller_runtime_terminal_reconcile_errors_total, and the key is not
 * retried: the next event that queues it (the object or an owned or watched
 * object changes, a resync) reconciles it again.
 */
#ifndef KCTRLD_PLUGIN_H
#define KCTRLD_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KCTRLD_ABI_MAJOR 1
#define KCTRLD_ABI_MINOR 5

#define KCTRLD_EXPORT __attribute__((visibility("default")))

#define KCTRLD__STR2(KCTRLD_x) #KCTRLD_x
#define KCTRLD__STR(KCTRLD_x) KCTRLD__STR2(KCTRLD_x)
#if (defined(_FILE_OFFSET_BITS) && _FILE_OFFSET_BITS == 64) || __SIZEOF_LONG__ == 8
#define KCTRLD__OFF_T "off64"
#else
#define KCTRLD__OFF_T "off32"
#endif
#if (defined(_TIME_BITS) && _TIME_BITS == 64) || __SIZEOF_LONG__ == 8
#define KCTRLD__TIME_T "time64"
#else
#define KCTRLD__TIME_T "time32"
#endif
/* Build signature: what must agree between host and plugin beyond the ABI
 * version (pointer, long and size_t sizes, off_t and time_t widths, byte
 * order). NDEBUG is deliberately not part of it: no ABI struct depends on it,
 * and release builds of plugins (-DNDEBUG) must load into any daemon. */
#define KCTRLD_BUILD_SIGNATURE                                                      \
  "kctrld-abi-" KCTRLD__STR(KCTRLD_ABI_MAJOR) ",ptr" KCTRLD__STR(__SIZEOF_POINTER__) \
  ",long" KCTRLD__STR(__SIZEOF_LONG__) ",size" KCTRLD__STR(__SIZEOF_SIZE_T__) ","  \
  KCTRLD__OFF_T "," KCTRLD__TIME_T ",order" KCTRLD__STR(__BYTE_ORDER__)

/* ------------------------------------------------------------------------ */
/* Opaque handles and small value types                                     */
/* ------------------------------------------------------------------------ */

/* Per-call context of one reconcile (or of init/fini). Identifies the
 * controller, carries the result being built and the last API error.
 * Borrowed: valid only during the call it was passed to. */
typedef struct kctrld_ctx kctrld_ctx;

/* A cached Kubernetes object: immutable, reference counted, shared with the
 * daemon and other workers. Obtained from cache_get/list_item/api_*; release
 * every reference you own with object_release. */
typedef struct kctrld_object kctrld_object;

/* The result of cache_list: an array of object references. */
typedef struct kctrld_list kctrld_list;

/* The plugin's own `settings:` subtree of the controller's YAML config,
 * read-only. Valid from init until fini returns. */
typedef struct kctrld_settings kctrld_settings;

/* A borrowed byte slice, NOT NUL-terminated. {NULL, 0} means absent. */
typedef struct kctrld_str {
  const char *ptr;
  size_t len;
} kctrld_str;

enum kctrld_json_type {
  KCTRLD_JSON_ABSENT = 0,
  KCTRLD_JSON_NULL,
  KCTRLD_JSON_BOOL,
  KCTRLD_JSON_NUMBER,
  KCTRLD_JSON_STRING,
  KCTRLD_JSON_OBJECT,
  KCTRLD_JSON_ARRAY,
};

/* One JSON value inside an object: `raw` is its exact JSON text (strings
 * keep their quotes and escapes), pointing into the object. Valid while the
 * object reference it came from is held. This layout is frozen. */
typedef struct kctrld_value {
  int type; /* enum kctrld_json_type */
  kctrld_str raw;
} kctrld_value;

/* Identifies one object for get/patch/delete. namespace_ is NULL or "" for
 * cluster-scoped kinds. api_version is "v1", "apps/v1", "demo.kctrld.io/v1". */
typedef struct kctrld_ref {
  const char *api_version;
  const char *kind;
  const char *namespace_;
  const char *name;
} kctrld_ref;

/* Options of cache_list. Set struct_size = sizeof(struct kctrld_list_opts);
 * unset (NULL) members do not filter. */
typedef struct kctrld_list_opts {
  uint32_t struct_size;
  const char *namespace_;     /* only this namespace; NULL = all */
  const char *label_selector; /* Kubernetes syntax: "app=web,tier in (a,b),!x" */
  const char *field_index;    /* name of a field index declared in the config */
  const char *field_value;    /* value looked up in field_index */
} kctrld_list_opts;

enum kctrld_patch_type {
  KCTRLD_PATCH_MERGE = 1, /* application/merge-patch+json (RFC 7386) */
  KCTRLD_PATCH_JSON = 2,  /* application/json-patch+json (RFC 6902) */
  KCTRLD_PATCH_STRATEGIC = 3, /* application/strategic-merge-patch+json (built-in
                               * kinds only: the server refuses it for custom
                               * resources); ABI 1.2, a 1.1 host answers -EINVAL */
};

enum kctrld_propagation {
  KCTRLD_PROPAGATION_DEFAULT = 0, /* the server's default for the kind */
  KCTRLD_PROPAGATION_BACKGROUND,
  KCTRLD_PROPAGATION_FOREGROUND,
  KCTRLD_PROPAGATION_ORPHAN,
};

/* Options of api_delete. Set struct_size = sizeof(struct kctrld_delete_opts). */
typedef struct kctrld_delete_opts {
  uint32_t struct_size;
  const char *precondition_uid;              /* delete only this incarnation */
  const char *precondition_resource_version; /* delete only this version */
  int propagation;                           /* enum kctrld_propagation */
  int64_t grace_period_seconds;              /* < 0: the server's default */
} kctrld_delete_opts;

enum kctrld_log_level {
  KCTRLD_LOG_ERROR = 3,
  KCTRLD_LOG_WARN = 4,
  KCTRLD_LOG_INFO = 6,
  KCTRLD_LOG_DEBUG = 7,
};

enum kctrld_event_type {
  KCTRLD_EVENT_NORMAL = 0,
  KCTRLD_EVENT_WARNING = 1,
};

/* What reconcile returns. */
enum kctrld_result {
  KCTRLD_RESULT_DONE = 0,          /* success: the key's backoff is forgotten */
  KCTRLD_RESULT_REQUEUE = 1,       /* try again with per-key backoff */
  KCTRLD_RESULT_REQUEUE_AFTER = 2, /* use host->result_requeue_after() */
  KCTRLD_RESULT_ERROR = 3,         /* use host->result_error(): logged, backoff */
  KCTRLD_RESULT_TERMINAL = 4,      /* ABI 1.3: use host->result_terminal(): logged,
                                    * not retried until the key is queued again */
};

/* Queue priorities (ABI 1.4), as controller-runtime counts them: higher runs
 * first. The daemon's queue has three levels: any value below 0 is LOW, 0
 * NORMAL, above 0 HIGH. A key a watch event queued is NORMAL; a key queued by
 * a list, relist or resync is LOW; a key that waits long is served anyway
 * (docs/design.md "Workqueue priorities"). */
enum kctrld_priority {
  KCTRLD_PRIORITY_LOW = -100,
  KCTRLD_PRIORITY_NORMAL = 0,
  KCTRLD_PRIORITY_HIGH = 100,
};

/* ------------------------------------------------------------------------ */
/* Host function table (the daemon fills it; the plugin only reads it)      */
/* ------------------------------------------------------------------------ */

struct kctrld_host_api {
  uint16_t abi_major;          /* KCTRLD_ABI_MAJOR of the daemon */
  uint16_t abi_minor;          /* KCTRLD_ABI_MINOR of the daemon */
  uint32_t struct_size;        /* sizeof(struct kctrld_host_api) in the daemon */
  const char *build_signature; /* KCTRLD_BUILD_SIGNATURE of the daemon */
  const char *version;         /* daemon version, e.g. "0.1.0" */

  /* --- memory --- */

  /* alloc: allocates size bytes (uninitialised).
   * Returns: the memory, or NULL when out of memory (or size is 0).
   * Ownership: the caller owns it; free it with host->free.
   * Context: any thread. Errors: NULL only. */
  void *(*alloc)(size_t size);
  /* realloc: resizes memory from alloc/realloc, like realloc(3).
   * Returns: the new block, or NULL (the old block is then unchanged).
   * Ownership: as alloc. Context: any thread. Errors: NULL only. */
  void *(*realloc)(void *ptr, size_t size);
  /* free: releases memory from alloc/realloc; free(NULL) is a no-op.
   * Returns: nothing. Ownership: ptr is consumed. Context: any thread.
   * Errors: none. */
  void (*free)(void *ptr);

  /* --- logging --- */

  /* log: writes one structured log line. Put context as key=value pairs in
   * the message ("created pod=%s replicas=%d"); the daemon adds the
   * controller name, the plugin name and the key being reconciled.
   * Returns: nothing. Ownership: fmt and arguments borrowed.
   * Context: any thread. Errors: none (lines are truncated at 4 KiB). */
  void (*log)(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

  /* --- results and context --- */

  /* result_requeue_after: asks for the key to be reconciled again after ms
   * milliseconds (and forgets its backoff), as controller-runtime's
   * RequeueAfter does. An event for the key meanwhile reconciles it sooner.
   * Returns: KCTRLD_RESULT_REQUEUE_AFTER, so `return h->result_requeue_after(ctx, ms);`.
   * Ownership: none. Context: the reconcile's worker thread, with its ctx.
   * Errors: none. */
  int (*result_requeue_after)(kctrld_ctx *ctx, uint64_t ms);
  /* result_error: records an error message for this reconcile; the daemon
   * logs it and retries the key with backoff.
   * Returns: KCTRLD_RESULT_ERROR, so `return h->result_error(ctx, "...: %d", rc);`.
   * Ownership: fmt/arguments borrowed; the text is copied (up to 511 bytes).
   * Context: the reconcile's worker thread, with its ctx. Errors: none. */
  int (*result_error)(kctrld_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
  /* ctx_controller: the name of the controller this call belongs to.
   * Returns: a NUL-terminated name. Ownership: borrowed for the call.
   * Context: the thread the ctx was passed on. Errors: none. */
  const char *(*ctx_controller)(const kctrld_ctx *ctx);
  /* ctx_api_error: the message of the last failed API call made with ctx
   * (the Kubernetes Status message, or a transport error; for a terminal
   * failure the reason naming the subresource or field, "Terminal errors").
   * Returns: a NUL-terminated message, "" when none failed yet.
   * Ownership: borrowed until the next API call with ctx or the end of the
   * call. Context: as ctx_controller. Errors: none. */
  const char *(*ctx_api_error)(const kctrld_ctx *ctx);

  /* --- settings (the plugin's `settings:` subtree, read-only) ---
   * Paths are dot-separated keys with [i] for sequence items:
   * "resync", "kinds[0].kind", "selector.matchLabels". Reading a key marks it
   * as used; the daemon warns about settings keys no plugin read. */

  /* The settings follow the config file's rules (docs/plugins.md
   * "Settings"): a plain null is absent, a quoted scalar is a string, a
   * refused value is also logged with its file:line:col.
   * settings_string: reads a scalar as text (also a plain 5 or true).
   * Returns: 0 and *out, -ENOENT if the path is absent, -EINVAL if it is not
   * a scalar or the path is malformed.
   * Ownership: *out is borrowed until fini returns.
   * Context: any thread. Errors: as Returns. */
  int (*settings_string)(const kctrld_settings *s, const char *path, const char **out);
  /* settings_int: reads a plain decimal integer ("5" quoted is a string).
   * Returns: 0, -ENOENT absent, -EINVAL not an integer, -ERANGE overflow.
   * Ownership: none. Context: any thread. Errors: as Returns. */
  int (*settings_int)(const kctrld_settings *s, const char *path, int64_t *out);
  /* settings_bool: reads a plain true/false (YAML 1.2 core schema; a quoted
   * "true" is a string, yes/on are strings).
   * Returns: 0, -ENOENT absent, -EINVAL not a boolean.
   * Ownership: none. Context: any thread. Errors: as Returns. */
  int (*settings_bool)(const kctrld_settings *s, const char *path, bool *out);
  /* settings_duration_ms: reads a duration ("250ms", "90s", "10m", "2h",
   * "1h30m"; a unit is required except for 0, as everywhere in the config)
   * in whole milliseconds.
   * Returns: 0, -ENOENT absent, -EINVAL malformed, -ERANGE overflow.
   * Ownership: none. Context: any thread. Errors: as Returns. */
  int (*settings_duration_ms)(const kctrld_settings *s, const char *path, int64_t *out_ms);
  /* settings_len: the number of items of a sequence or keys of a mapping.
   * Returns: 0 and *out, -ENOENT absent, -EINVAL scalar.
   * Ownership: none. Context: any thread. Errors: as Returns. */
  int (*settings_len)(const kctrld_settings *s, const char *path, size_t *out);

  /* --- cache (the daemon's informer caches; read-only, zero-copy) --- */

  /* cache_get: looks up one object in the cache of its kind.
   * Returns: 0 and a new reference in *out; -ENOENT when the cache has no
   * such object; -ENOTSUP when no controller config watches that kind.
   * Ownership: the caller owns *out; release it with object_release.
   * Context: worker thread (reconcile) with its ctx. Errors: as Returns. */
  int (*cache_get)(kctrld_ctx *ctx, const kctrld_ref *ref, const kctrld_object **out);
  /* cache_list: lists cached objects of a kind, filtered by namespace, label
   * selector and/or a field index (indexes make this O(matches)).
   * Returns: 0 and *out (possibly empty); -EINVAL bad selector or unknown
   * field index; -ENOTSUP kind not cached; -ENOMEM.
   * Ownership: the caller owns *out; release it with list_release (which
   * releases the references it holds; object_ref what you keep longer).
   * Context: worker thread with its ctx. Errors: as Returns. */
  int (*cache_list)(kctrld_ctx *ctx, const char *api_version, const char *kind,
                    const kctrld_list_opts *opts, kctrld_list **out);
  /* list_len: the number of objects in a list.
   * Returns: the count. Ownership: none. Context: any thread. Errors: none. */
  size_t (*list_len)(const kctrld_list *list);
  /* list_item: the i-th object (i < list_len), in namespace/name order.
   * Returns: the object, NULL when i is out of range.
   * Ownership: borrowed from the list until list_release.
   * Context: any thread. Errors: none. */
  const kctrld_object *(*list_item)(const kctrld_list *list, size_t i);
  /* list_release: releases a list and its references; NULL is a no-op.
   * Returns: nothing. Ownership: consumes list. Context: any thread.
   * Errors: none. */
  void (*list_release)(kctrld_list *list);
  /* object_ref: takes another reference to an object.
   * Returns: obj. Ownership: the caller owns the new reference.
   * Context: any thread. Errors: none. */
  const kctrld_object *(*object_ref)(const kctrld_object *obj);
  /* object_release: drops a reference; NULL is a no-op.
   * Returns: nothing. Ownership: consumes one reference. Context: any
   * thread. Errors: none. */
  void (*object_release)(const kctrld_object *obj);

  /* --- object fields (no copies; slices valid while a reference is held) --- */

  /* object_namespace / name / uid / resource_version / api_version / kind /
   * creation_timestamp: identity fields of an object.
   * Returns: the slice; absent ({NULL,0}) when the field is missing (e.g.
   * the namespace of a cluster-scoped object).
   * Ownership: borrowed while the object reference is held.
   * Context: any thread. Errors: none. */
  kctrld_str (*object_namespace)(const kctrld_object *obj);
  kctrld_str (*object_name)(const kctrld_object *obj);
  kctrld_str (*object_uid)(const kctrld_object *obj);
  kctrld_str (*object_resource_version)(const kctrld_object *obj);
  kctrld_str (*object_api_version)(const kctrld_object *obj);
  kctrld_str (*object_kind)(const kctrld_object *obj);
  kctrld_str (*object_creation_timestamp)(const kctrld_object *obj);
  /* object_generation: metadata.generation (0 when absent).
   * Returns: the generation. Ownership: none. Context: any thread.
   * Errors: none. */
  int64_t (*object_generation)(const kctrld_object *obj);
  /* object_deleting: whether metadata.deletionTimestamp is set.
   * Returns: true while the object is being deleted. Ownership: none.
   * Context: any thread. Errors: none. */
  bool (*object_deleting)(const kctrld_object *obj);
  /* object_json: the whole object as minified JSON text.
   * Returns: the slice. Ownership: borrowed while the reference is held.
   * Context: any thread. Errors: none. */
  kctrld_str (*object_json)(const kctrld_object *obj);
  /* object_label: the value of one label.
   * Returns: the value, absent when the object has no such label.
   * Ownership: borrowed while the reference is held. Context: any thread.
   * Errors: none. */
  kctrld_str (*object_label)(const kctrld_object *obj, const char *key);
  /* object_each_label: calls cb for every label in key order; cb returns
   * false to stop.
   * Returns: the number of labels visited. Ownership: slices borrowed for
   * the callback. Context: any thread. Errors: none. */
  int (*object_each_label)(const kctrld_object *obj,
                           bool (*cb)(kctrld_str key, kctrld_str value, void *ud), void *ud);
  /* object_get: looks up a field by path: "spec.replicas",
   * "metadata.annotations[\"kctrld.io/ttl\"]", "spec.containers[0].image".
   * Returns: 0 with out->type KCTRLD_JSON_ABSENT when the path does not
   * exist, 0 with the value otherwise, -EINVAL for a malformed path.
   * Ownership: out->raw is borrowed while the reference is held.
   * Context: any thread. Errors: as Returns. */
  int (*object_get)(const kctrld_object *obj, const char *path, kctrld_value *out);
  /* object_each: visits every value of a path with [] (every array item):
   * "spec.volumes[].configMap.name", "spec.containers[].envFrom[].secretRef.name".
   * Absent values are skipped; cb returns false to stop.
   * Returns: the number of values visited, or -EINVAL for a malformed path.
   * Ownership: values borrowed for the callback. Context: any thread.
   * Errors: as Returns. */
  int (*object_each)(const kctrld_object *obj, const char *path,
                     bool (*cb)(const kctrld_value *v, void *ud), void *ud);
  /* object_string: reads a string field, unescaped, into buf (NUL-terminated).
   * Returns: its length; -ENOENT absent; -EINVAL not a string or bad path;
   * -ENOSPC when it does not fit in cap bytes.
   * Ownership: buf is the caller's. Context: any thread. Errors: as Returns. */
  int (*object_string)(const kctrld_object *obj, const char *path, char *buf, size_t cap);
  /* object_int: reads an integer field.
   * Returns: 0; -ENOENT absent; -EINVAL not an integer; -ERANGE overflow.
   * Ownership: none. Context: any thread. Errors: as Returns. */
  int (*object_int)(const kctrld_object *obj, const char *path, int64_t *out);
  /* object_bool: reads a boolean field.
   * Returns: 0; -ENOENT absent; -EINVAL not a boolean.
   * Ownership: none. Context: any thread. Errors: as Returns. */
  int (*object_bool)(const kctrld_object *obj, const char *path, bool *out);
  /* value_get: object_get relative to a value (e.g. an item from object_each).
   * Returns, Ownership, Errors: as object_get. Context: any thread. */
  int (*value_get)(const kctrld_value *v, const char *path, kctrld_value *out);
  /* value_string: unescapes a string value into buf (NUL-terminated).
   * Returns: its length; -EINVAL not a string; -ENOSPC too long.
   * Ownership: buf is the caller's. Context: any thread. Errors: as Returns. */
  int (*value_string)(const kctrld_value *v, char *buf, size_t cap);
  /* value_int: parses an integer value.
   * Returns: 0; -EINVAL not an integer; -ERANGE overflow.
   * Ownership: none. Context: any thread. Errors: as Returns. */
  int (*value_int)(const kctrld_value *v, int64_t *out);
  /* object_has_finalizer: whether metadata.finalizers contains finalizer.
   * Returns: true or false. Ownership: none. Context: any thread.
   * Errors: none. */
  bool (*object_has_finalizer)(const kctrld_object *obj, const char *finalizer);

  /* --- API writes (straight to the API server, synchronous, with the
   * daemon's write timeout; the cache learns of them from the watch) --- */

  /* api_create: POSTs a new object (JSON text with apiVersion, kind,
   * metadata.name or generateName, and metadata.namespace if namespaced).
   * Returns: 0; see the error table at the top (-EEXIST when it exists).
   * Ownership: json borrowed; if out is not NULL, *out is a new reference to
   * the created object as the server returned it (release it).
   * Context: worker thread with its ctx. Errors: as Returns. */
  int (*api_create)(kctrld_ctx *ctx, const char *json, size_t len, const kctrld_object **out);
  /* api_update: PUTs a whole object; metadata.resourceVersion in json makes
   * it conditional (optimistic concurrency: -ESTALE when it is stale).
   * Returns, Ownership, Context, Errors: as api_create. */
  int (*api_update)(kctrld_ctx *ctx, const char *json, size_t len, const kctrld_object **out);
  /* api_update_status: PUTs the status subresource (the server ignores
   * everything but status; resourceVersion is honoured as in api_update).
   * Returns, Ownership, Context, Errors: as api_create. */
  int (*api_update_status)(kctrld_ctx *ctx, const char *json, size_t len,
                           const kctrld_object **out);
  /* api_patch: PATCHes an object (or its status subresource when status is
   * true) with a merge patch, a JSON patch or (ABI 1.2) a strategic merge
   * patch (type: enum kctrld_patch_type).
   * Returns: 0 or an error from the table (-ENOENT, -ESTALE when a JSON
   * patch "test" op fails, -EINVAL for a bad patch, -ENOTSUP when status is
   * true and the kind has no status subresource: a terminal failure).
   * Ownership: ref and patch borrowed; *out as api_create.
   * Context: worker thread with its ctx. Errors: as Returns. */
  int (*api_patch)(kctrld_ctx *ctx, const kctrld_ref *ref, int type, const char *patch,
                   size_t len, bool status, const kctrld_object **out);
  /* api_delete: DELETEs an object, with optional preconditions (uid,
   * resourceVersion), propagation policy and grace period (opts may be NULL).
   * Returns: 0 (also when deletion is merely started: finalizers pending);
   * -ENOENT already gone; -ESTALE a precondition failed; others per table.
   * Ownership: ref and opts borrowed. Context: worker thread with its ctx.
   * Errors: as Returns. */
  int (*api_delete)(kctrld_ctx *ctx, const kctrld_ref *ref, const kctrld_delete_opts *opts);
  /* api_get: reads one object from the API server, bypassing the cache (use
   * sparingly: the cache is the normal read path).
   * Returns: 0 and a new reference in *out; errors per table.
   * Ownership: release *out. Context: worker thread with its ctx.
   * Errors: as Returns. */
  int (*api_get)(kctrld_ctx *ctx, const kctrld_ref *ref, const kctrld_object **out);

  /* --- finalizers --- */

  /* finalizer_add: adds finalizer to obj's metadata.finalizers with a JSON
   * patch guarded by obj's resourceVersion; a no-op if already present.
   * finalizer must be a qualified name, as the API server requires
   * ("example.com/cleanup", or a name alone such as "kubernetes").
   * Returns: 0; -EINVAL finalizer is not a qualified name; -ESTALE when obj
   * changed meanwhile (requeue); errors per table.
   * Ownership: obj and finalizer borrowed. Context: worker thread with ctx.
   * Errors: as Returns. */
  int (*finalizer_add)(kctrld_ctx *ctx, const kctrld_object *obj, const char *finalizer);
  /* finalizer_remove: removes finalizer (guarded by a JSON patch "test" of
   * that list item); a no-op if absent.
   * Returns, Ownership, Context, Errors: as finalizer_add. */
  int (*finalizer_remove)(kctrld_ctx *ctx, const kctrld_object *obj, const char *finalizer);

  /* --- Kubernetes Events --- */

  /* event: records a core/v1 Event about `regarding` (in its namespace,
   * "default" when cluster-scoped), with type (enum kctrld_event_type), a
   * CamelCase reason and a message (cut at 1 KiB). The call only queues a
   * copy; the daemon writes it asynchronously with client-go's recorder
   * rules: a repeated event (same object, type, reason, message) bumps the
   * existing Event's count; from the 10th distinct message of one
   * object+type+reason within 10 minutes they share one Event "(combined
   * from similar events): <message>"; per object a burst of 25, then one
   * per 5 minutes. Losing one under pressure (full queue, not the leader,
   * API errors) is not an error and is not reported.
   * Returns: 0, -EINVAL (empty reason), -ENOMEM.
   * Ownership: all arguments borrowed (copied).
   * Context: worker thread with its ctx. Errors: as Returns. */
  int (*event)(kctrld_ctx *ctx, const kctrld_object *regarding, int type, const char *reason,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

  /* --- expectations (kube-controller-manager's ControllerExpectations) ---
   * A controller that creates or deletes objects it owns must not act again
   * on a stale cache. Before N creates, call expect_creations(key, N); the
   * daemon calls "observed" for each owned object whose add (or delete)
   * event arrives (objects mapped to key through `owns:`); a failed create or
   * delete must be observed by the plugin itself. While expectations are not
   * satisfied, skip the create/delete step (status updates are still fine).
   * Expectations older than 5 minutes count as satisfied (lost events). */

  /* expect_creations: replaces key's record with n creations and 0
   * deletions expected (kube's ExpectCreations).
   * Returns: 0, -EINVAL (n < 0), -ENOMEM. Ownership: key copied.
   * Context: any thread (worker, usually). Errors: as Returns. */
  int (*expect_creations)(kctrld_ctx *ctx, const char *key, int64_t n);
  /* expect_deletions: replaces key's record with 0 creations and n
   * deletions expected (kube's ExpectDeletions).
   * Returns, Ownership, Context, Errors: as expect_creations. */
  int (*expect_deletions)(kctrld_ctx *ctx, const char *key, int64_t n);
  /* creation_observed / deletion_observed: lowers the expectation by one.
   * Returns: nothing. Ownership: key borrowed. Context: any thread.
   * Errors: none (unknown keys are ignored). */
  void (*creation_observed)(kctrld_ctx *ctx, const char *key);
  void (*deletion_observed)(kctrld_ctx *ctx, const char *key);
  /* expectations_satisfied: whether key may act on the cache again (no
   * record, all observed, or the record expired).
   * Returns: true or false. Ownership: none. Context: any thread.
   * Errors: none. */
  bool (*expectations_satisfied)(kctrld_ctx *ctx, const char *key);
  /* expectations_forget: drops key's record (e.g. the owner was deleted).
   * Returns: nothing. Ownership: none. Context: any thread. Errors: none. */
  void (*expectations_forget)(kctrld_ctx *ctx, const char *key);

  /* --- ABI 1.2 --- */

  /* api_apply: server-side apply (PATCH application/apply-patch+yaml) of
   * json, the fields this controller wants to own: apiVersion, kind,
   * metadata.name (and metadata.namespace if namespaced) and only the fields
   * it manages. The server merges them into the object (or creates it),
   * records field_manager as their owner in metadata.managedFields, and
   * removes fields this manager applied before and no longer lists (unless
   * another manager owns them). A field another manager owns with a
   * different value is a conflict (-ESTALE, 409: requeue, or apply with
   * force = true to take the field; the message names manager and field).
   * field_manager: NULL or "" = the controller's name.
   * Returns: 1 when the apply created the object (201), 0 when it updated
   * (or left) it; errors from the table. A create counts for expectations
   * like api_create: call expect_creations before an apply that may create
   * an owned object, and creation_observed yourself when it returns 0.
   * Ownership: json and field_manager borrowed; *out as api_create.
   * Context: worker thread with its ctx. Errors: as Returns. */
  int (*api_apply)(kctrld_ctx *ctx, const char *json, size_t len, const char *field_manager,
                   bool force, const kctrld_object **out);

  /* --- ABI 1.3 --- */

  /* result_terminal: records an error no retry can fix (controller-runtime's
   * TerminalError) for this reconcile: the daemon logs it once and counts
   * it, and does not retry the key until an event queues it again ("Terminal
   * errors" above). `h->result_terminal(ctx, "%s", h->ctx_api_error(ctx))`
   * passes on the reason of a failed call.
   * Returns: KCTRLD_RESULT_TERMINAL, so `return h->result_terminal(ctx, "...");`.
   * Ownership: fmt/arguments borrowed; the text is copied (up to 511 bytes).
   * Context: the reconcile's worker thread, with its ctx. Errors: none. */
  int (*result_terminal)(kctrld_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

  /* --- ABI 1.4 --- */

  /* result_requeue_priority: result_requeue_after with a queue priority
   * (enum kctrld_priority): after ms milliseconds (0: at once) the key is
   * queued at `priority` instead of the priority it ran at. A key queued
   * already at a lower priority is raised; it is never lowered (an event
   * at NORMAL meanwhile keeps NORMAL).
   * Returns: KCTRLD_RESULT_REQUEUE_AFTER, so
   * `return h->result_requeue_priority(ctx, 0, KCTRLD_PRIORITY_HIGH);`.
   * Ownership: none. Context: the reconcile's worker thread, with its ctx.
   * Errors: none. */
  int (*result_requeue_priority)(kctrld_ctx *ctx, uint64_t ms, int priority);

  /* --- ABI 1.5: finalizing and desired state (docs/plugins.md) ---
   * A controller with `finalizer: NAME` in its config gets NAME added to
   * every live object it reconciles; while such an object is being
   * deleted, its reconciles are finalizing ones, and the finalizer is
   * removed after one that called result_finalized and succeeded
   * (KCTRLD_RESULT_DONE or KCTRLD_RESULT_REQUEUE_AFTER). */

  /* ctx_finalizing: whether this reconcile finalizes its object (being
   * deleted, still holding the controller's finalizer): clean up, then
   * call result_finalized.
   * Returns: true or false. Ownership: none. Context: the reconcile's
   * worker thread, with its ctx. Errors: none. */
  bool (*ctx_finalizing)(const kctrld_ctx *ctx);
  /* result_finalized: says the cleanup of a finalizing reconcile is done:
   * the host removes the finalizer if the reconcile succeeds (DONE or
   * REQUEUE_AFTER).
   * Returns: nothing. Ownership: none. Context: as ctx_finalizing.
   * Errors: none (ignored when not finalizing). */
  void (*result_finalized)(kctrld_ctx *ctx);
  /* desired_begin: starts the desired state of the reconciled object: the
   * children it should have (of the controller's `owns` kinds) and its
   * status; the host then applies the children (server-side apply, with
   * the object's controller ownerReference), deletes the children it owns
   * that the set does not list, and writes the status when it changed.
   * A second begin drops what an earlier one collected.
   * Returns: 0, -ENOMEM, -ENOTSUP (not in a reconcile).
   * Ownership: none. Context: the reconcile's worker thread, with its ctx.
   * Errors: as Returns. */
  int (*desired_begin)(kctrld_ctx *ctx);
  /* desired_add_child: adds one desired child, a whole object as JSON text
   * (apiVersion, kind, metadata.name, optional metadata.namespace: the
   * object's own when absent). Checked at commit.
   * Returns: 0, -EINVAL (no begin, or empty), -ENOMEM.
   * Ownership: json is copied. Context: as desired_begin.
   * Errors: as Returns. */
  int (*desired_add_child)(kctrld_ctx *ctx, const char *json, size_t len);
  /* desired_set_status: the object's desired status (a JSON object); not
   * called: the status is left alone.
   * Returns, Ownership, Context, Errors: as desired_add_child. */
  int (*desired_set_status)(kctrld_ctx *ctx, const char *json, size_t len);
  /* desired_commit: checks the whole set first (a child of a kind not in
   * `owns`, in another namespace than a namespaced object, or listed twice
   * fails it before any write), then applies (not a child unchanged since
   * this controller's last apply of it: same body, cached object at the
   * resourceVersion that apply returned), prunes and writes the status
   * (docs/plugins.md "Desired state"), and ends the set.
   * Returns: KCTRLD_RESULT_DONE; KCTRLD_RESULT_REQUEUE on a conflict (409);
   * KCTRLD_RESULT_ERROR with a message naming the child or the write, so
   * `return h->desired_commit(ctx);`.
   * Ownership: none. Context: as desired_begin. Errors: as Returns. */
  int (*desired_commit)(kctrld_ctx *ctx);
};

/* True when the host table has `member` (added in some 1.x). Macro
 * parameters here and in kctrld/plugin_util.h carry the KCTRLD_ prefix, so
 * they can never stand for a name of the plugin's by accident. */
#define KCTRLD_HOST_HAS(KCTRLD_host, KCTRLD_member)                                 \
  ((KCTRLD_host)->struct_size >=                                                    \
       offsetof(struct kctrld_host_api, KCTRLD_member) + sizeof((KCTRLD_host)->KCTRLD_member) && \
   (KCTRLD_host)->KCTRLD_member != NULL)

/* ------------------------------------------------------------------------ */
/* Plugin table (the plugin fills it; static storage)                       */
/* ------------------------------------------------------------------------ */

/* One RBAC permission the plugin's own API calls need (ABI 1.1): `verbs` on
 * `resource` of API group `group`. `kctrld rbac` (docs/deploy.md) turns the
 * declarations of every configured plugin into the daemon's Role rules; what
 * the daemon itself reads (informers) and writes (Leases, and Events only for
 * plugins that declare them) it adds on its own.
 *   group:    "" for the core group, else e.g. "apps" or "demo.kctrld.io";
 *             ignored for KCTRLD_RESOURCE_FOR.
 *   resource: the plural as in the URL, optionally with a subresource
 *             ("pods", "podsets/status"), or KCTRLD_RESOURCE_FOR: the
 *             resource of the controller's `for:` kind, whatever the config
 *             says it is.
 *   verbs:    comma-separated Kubernetes verbs ("create,delete,patch");
 *             api_create = create, api_update(_status) = update, api_patch
 *             and finalizer_add/remove = patch, api_delete = delete,
 *             api_get = get. Reads through the cache need nothing here.
 * The array ends with KCTRLD_PERMISSIONS_END; static storage. */
typedef struct kctrld_permission {
  const char *group;
  const char *resource;
  const char *verbs;
} kctrld_permission;

#define KCTRLD_RESOURCE_FOR "@for"
/* What the `event` host function needs: the recorder POSTs core/v1 Events
 * and PATCHes them to count repeats. */
#define KCTRLD_PERMISSION_EVENTS {"", "events", "create,patch"}
#define KCTRLD_PERMISSIONS_END {NULL, NULL, NULL}

struct kctrld_plugin {
  uint16_t abi_major;          /* KCTRLD_ABI_MAJOR the plugin was built with */
  uint16_t abi_minor;          /* KCTRLD_ABI_MINOR the plugin was built with */
  uint32_t struct_size;        /* sizeof(struct kctrld_plugin) */
  const char *build_signature; /* KCTRLD_BUILD_SIGNATURE */
  const char *name;            /* short name, e.g. "podset"; required */
  const char *version;         /* the plugin's own version; may be NULL */

  /* init: creates one instance for one controller, from its settings.
   * Returns: 0 and *instance (any pointer, NULL allowed), or a negative
   * errno; the daemon then refuses to start the controller and logs the
   * error (log a precise reason with host->log first).
   * Ownership: settings borrowed until fini returns; the instance is the
   * plugin's, freed in fini. ctx borrowed for the call (only log,
   * ctx_controller and settings may be used; the cache is not synced yet).
   * Context: loop thread. Errors: as Returns. */
  int (*init)(kctrld_ctx *ctx, const kctrld_settings *settings, void **instance);

  /* reconcile: brings the object named by key ("namespace/name", or "name"
   * when cluster-scoped) to its desired state. Idempotent: it may run again
   * at any time. The object may be gone from the cache (deleted).
   * Returns: a KCTRLD_RESULT_* value; use host->result_requeue_after and
   * host->result_error to return the two kinds that carry data.
   * Ownership: key and ctx borrowed for the call.
   * Context: a worker thread; never concurrently for the same key.
   * Errors: KCTRLD_RESULT_ERROR (with a message) is retried with backoff;
   * KCTRLD_RESULT_TERMINAL (ABI 1.3), and an error right after a terminal
   * API failure ("Terminal errors" above), only when the key is queued
   * again. */
  int (*reconcile)(void *instance, kctrld_ctx *ctx, const char *key);

  /* fini: frees an instance; called once no reconcile of it is running.
   * Optional (NULL). Returns: nothing. Ownership: consumes instance.
   * Context: loop thread, or the worker thread of an abandoned reconcile
   * (the last to use the instance). Errors: none. */
  void (*fini)(void *instance);

  /* --- ABI 1.1 --- */

  /* permissions: the API permissions reconcile needs (kctrld_permission),
   * terminated by KCTRLD_PERMISSIONS_END; {KCTRLD_PERMISSIONS_END} alone
   * declares a plugin that writes nothing. NULL (or a 1.0 table without the
   * member): undeclared; `kctrld rbac` then grants the plugin nothing and
   * says so, and `kctrld --check-config` warns. Static storage. */
  const kctrld_permission *permissions;
};

/* True when the plugin table has `member` (added in some 1.x). The host
 * checks this before reading any member added after 1.0. */
#define KCTRLD_PLUGIN_HAS(KCTRLD_table, KCTRLD_member)                              \
  ((KCTRLD_table)->struct_size >=                                                   \
   offsetof(struct kctrld_plugin, KCTRLD_member) + sizeof((KCTRLD_table)->KCTRLD_member))

/* The single exported entry point. Called once per loaded file, on the loop
 * thread, before any init.
 * Returns: the plugin's table (static storage), or NULL to refuse loading
 * (e.g. host->abi_major is not the one the plugin was built for).
 * Ownership: host is borrowed for the life of the process (keep the
 * pointer); the returned table must stay valid for the life of the process.
 * Context: loop thread. Errors: NULL. */
KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(const struct kctrld_host_api *host);

typedef const struct kctrld_plugin *(*kctrld_plugin_entry_fn)(const struct kctrld_host_api *host);

#ifdef __cplusplus
}
#endif

#endif
