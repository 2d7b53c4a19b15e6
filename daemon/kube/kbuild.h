/* SPDX-License-Identifier: Apache-2.0 */
/* kbuild: builds kc_obj objects (kobj.h) from the JSON events of one object,
 * with the informer's transform (drop paths, metadata-only, the object type
 * to stamp) and field capture applied on the way.
 *
 * Owns: kc_transform and kc_capture_spec (what to change and record while
 * building), the builder (event-driven, or in raw mode copying the text as
 * received for the streaming decoder, decode.h), the capture record stored
 * in an object and its reader, the shape checks of the fields it recognizes
 * (names: kname.h), and the Status members (kstatus.h) and the
 * initial-events-end annotation it picks up on the way (so decode.c needs
 * no second pass).
 *
 * Threads: a builder is used by one thread at a time (the decoder's: a
 * decode pool thread, decodepool.h, or the loop); kc_capture_tag and the
 * capture reader: any thread. Errors: 0 or a negative errno (see each
 * function). Ownership: transforms and specs are copied by the builder;
 * finished objects belong to the caller (refs == 1).
 */
#ifndef KC_KBUILD_H
#define KC_KBUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json/jsonlex.h"
#include "kube/kobj.h"
#include "kube/kstatus.h"

/* Which paths to leave out when building objects (informer `transform:`).
 * Paths use the syntax of kc_obj_get, e.g. "metadata.managedFields".
 *
 * Object type: LIST items of built-in types come without kind/apiVersion
 * (docs/api-contract.md 3.5) while WATCH objects have them. With `kind` and
 * `api_version` set (both or neither; printable ASCII without '"' and '\',
 * at most KC_OBJ_MAX_TYPE bytes each), every object built gets them:
 *   - absent "kind" / "apiVersion" members are inserted at the start of the
 *     object's text ({"kind":"K","apiVersion":"V",...}), so kc_obj.kind,
 *     kc_obj.api_version and kc_obj_get(o, "kind") all see them;
 *   - a metadata-only view (kind "PartialObjectMetadata", apiVersion
 *     "meta.k8s.io/v1" or absent) reports the real type instead: the two
 *     values are replaced. References built from such an object (Events'
 *     involvedObject, ownerReferences) then name the real object, which is
 *     what they must name; the "metadata only" fact is the informer's
 *     config (metadataOnly), not something a consumer of one object needs.
 *   - any other kind present (a Status in a watch ERROR event, a custom
 *     resource's own kind) is left as sent.
 * The streaming decoder (decode.h) also derives the type of LIST items from
 * the list's own kind/apiVersion when no type is given and those arrive
 * before the items. */
typedef struct kc_capture_spec kc_capture_spec;
typedef struct kc_transform {
  const char *const *drop; /* borrowed for the transform's lifetime */
  size_t ndrop;
  bool metadata_only;      /* keep only kind, apiVersion and metadata */
  const char *kind;        /* NULL: no type to stamp; copied by the builder */
  const char *api_version;
  const kc_capture_spec *capture; /* NULL: none; see "Field capture"; copied by the builder */
} kc_transform;

/* Field capture: values recorded while an object is built, so that the
 * store's field indexes (store.h) need not scan the object's text again.
 * Each path (kc_obj_get_each syntax, "[]" allowed) belongs to a group (one
 * store index); the object keeps, per group, the values found at its paths,
 * rendered as kc_json_scalar_text renders them (strings unescaped, numbers
 * and booleans as their text; null, objects and arrays are not recorded).
 * They are exactly the values kc_obj_get_each finds on the built object's
 * text: dropped members are not seen, the first of duplicated keys counts,
 * an escaped quote inside a string is never taken for structure (e.g. a
 * path's text inside metadata.managedFields strings). The order inside a
 * group is document order; consumers sort. Cost: one small record per
 * object (16 bytes + 4 per group + 4 per value + the value bytes).
 * A spec is capturable (kc_capture_tag != 0) when it has 1..64 paths of at
 * most 16 segments, none starting with "kind" or "apiVersion" (the type
 * stamping may rewrite those), and groups 0, 0.., 1, ... without gaps;
 * otherwise builders ignore it and consumers scan the text as before. */
struct kc_capture_spec {
  const char *const *paths;
  const uint32_t *groups; /* group of paths[i]: groups[0] == 0, each +0 or +1 */
  size_t npaths;
};
#define KC_CAPTURE_MAX_PATHS 64

/* Identity of a spec's content (paths and groups), never 0; 0 when the spec
 * is NULL or not capturable. Objects carry the tag of the spec they were
 * captured with, so a consumer only trusts values captured for its own. */
uint64_t kc_capture_tag(const kc_capture_spec *c);

/* Reads the values an object captured. Usage:
 *   kc_capture_cursor c;
 *   if (kc_obj_capture_open(o, tag, &c))
 *     for each group g in order: n = kc_capture_next_group(&c);
 *       n times: kc_str v = kc_capture_next_value(&c);
 * Values point into the object (not NUL-terminated). */
typedef struct kc_capture_cursor {
  const unsigned char *p, *end;
  uint32_t left; /* values left in the current group */
} kc_capture_cursor;
/* False when obj was not captured with a spec of this tag. */
bool kc_obj_capture_open(const kc_obj *obj, uint64_t tag, kc_capture_cursor *c);
uint32_t kc_capture_next_group(kc_capture_cursor *c);
kc_str kc_capture_next_value(kc_capture_cursor *c);

#define KC_OBJ_MAX_TYPE 320 /* bytes of kind and of apiVersion in a kc_transform */

/* --- Building objects (used by kc_obj_parse and the streaming decoder) ---
 *
 * Limits that apply to every object built: */
#define KC_OBJ_MAX_BYTES (16u << 20) /* minified JSON per object (client-go: 16 MiB/event) */
#define KC_OBJ_MAX_DEPTH KC_JSON_MAX_DEPTH /* nesting of arrays/objects inside one object */
#define KC_OBJ_MAX_DROP 64           /* paths in one kc_transform */

/* The builder reads the Status members (kstatus.h: code, status, reason,
 * message, details.retryAfterSeconds) found at the top level of every
 * object it builds, even when the transform drops them (metadata_only), so
 * that a watch ERROR event is always readable. */

/* Event-driven builder: feed it the JSON events of ONE object (the shape of
 * yajl's callbacks), get one kc_obj with a single allocation. It re-emits the
 * object as minified JSON into a reusable buffer, records the identity
 * fields and labels on the way and leaves out dropped subtrees. Reusable:
 * kc_obj_builder_reset() before each object. One thread at a time.
 * Event functions return 0 or a negative errno (-EBADMSG not an object,
 * -E2BIG size/depth limit, -ENOMEM); kc_obj_builder_error() says why. */
typedef struct kc_obj_builder kc_obj_builder;

/* NULL when path may be a kc_transform drop path, else why not: the
 * jsonpath.h grammar, at most 16 segments, no [N], not ending with [].
 * Config validation (config.c) and kc_obj_builder_new apply this rule. */
const char *kc_transform_drop_problem(const char *path);

/* `t` may be NULL; it is copied (paths and type included). NULL with errno
 * set (EINVAL malformed drop path or type, E2BIG too many paths, ENOMEM).
 * max_bytes 0 means KC_OBJ_MAX_BYTES. */
kc_obj_builder *kc_obj_builder_new(const kc_transform *t, size_t max_bytes);
/* Sets the type stamped on the objects finished from now on (kc_transform
 * "Object type"); an empty kind clears it. Returns 0, -EINVAL (one of the
 * two empty, too long, or a byte outside printable ASCII / '"' / '\'), or
 * -ENOMEM (the previous type stays). */
int kc_obj_builder_set_type(kc_obj_builder *b, kc_str kind, kc_str api_version);
void kc_obj_builder_free(kc_obj_builder *b);
/* Changes the size limit (0 = KC_OBJ_MAX_BYTES); takes effect at once. */
void kc_obj_builder_set_max_bytes(kc_obj_builder *b, size_t max_bytes);
void kc_obj_builder_reset(kc_obj_builder *b);
int kc_obj_builder_null(kc_obj_builder *b);
int kc_obj_builder_bool(kc_obj_builder *b, bool v);
int kc_obj_builder_number(kc_obj_builder *b, const char *s, size_t len);
int kc_obj_builder_string(kc_obj_builder *b, const char *s, size_t len);
int kc_obj_builder_key(kc_obj_builder *b, const char *s, size_t len);
int kc_obj_builder_start_map(kc_obj_builder *b);
int kc_obj_builder_end_map(kc_obj_builder *b);
int kc_obj_builder_start_array(kc_obj_builder *b);
int kc_obj_builder_end_array(kc_obj_builder *b);
/* Raw mode, for the streaming decoder: instead of re-emitting tokens, the
 * builder copies the object's text from the input as received (the API
 * server sends compact JSON), cutting dropped members out. Call before
 * kc_jsonlex_feed() with the lexer whose callbacks feed this builder and
 * the chunk being fed (its position, kc_jsonlex_pos, says where each token
 * ends), and kc_obj_builder_input_end() after it returned 0.
 * The first call switches the builder to raw mode for good. In raw mode the
 * identity/label slices are the text as sent (escapes included). */
struct kc_jsonlex;
void kc_obj_builder_input(kc_obj_builder *b, struct kc_jsonlex *lx, const char *chunk,
                          size_t len);
int kc_obj_builder_input_end(kc_obj_builder *b);
/* Raw mode: true when nothing inside the container the last start_map /
 * start_array opened can matter (no identity field, label, Status field,
 * drop or capture path inside; or a dropped subtree with none of those):
 * the decoder then answers KC_JSONLEX_SKIP, the lexer only validates the
 * contents, and the container's end call still comes (the text is copied
 * from the input all the same). Most of an object's bytes (spec, status,
 * metadata.managedFields) are in such containers. */
bool kc_obj_builder_skip_inside(const kc_obj_builder *b);
/* Raw mode: true when the value of the key just given (kc_obj_builder_key)
 * cannot matter at all (no role, not dropped, no capture path): the decoder
 * answers KC_JSONLEX_SKIP from map_key and the builder is told nothing of
 * that value, scalar or container (its text is copied all the same). */
bool kc_obj_builder_skip_value(const kc_obj_builder *b);
/* Shared values (raw mode): the value of every
 * metadata.managedFields[].fieldsV1 object of at least min_bytes bytes
 * that no drop or capture path reaches is kept once in the pool
 * (sharedtext.h) and the object holds a reference instead of the bytes
 * (kobj.h "Shared pieces"). Every Pod of one ReplicaSet, DaemonSet or Job
 * carries the same fieldsV1 from its controller, and these are a third to
 * a half of such an object's bytes. Default KC_OBJ_SHARE_MIN; 0 turns it
 * off. Below that size the table entry would cost more than it saves. */
#define KC_OBJ_SHARE_MIN 128
/* True once the root object has closed. */
bool kc_obj_builder_done(const kc_obj_builder *b);
/* The finished object (refs == 1), or NULL (ENOMEM, or not done: EINVAL). */
kc_obj *kc_obj_builder_finish(kc_obj_builder *b);
const char *kc_obj_builder_error(const kc_obj_builder *b);
/* Why the last object has a shape the API server never sends, or NULL when
 * it has none of these problems: metadata.labels that is not an object (or
 * null), a label value that is not a string, metadata.resourceVersion that
 * is not a string (or null), metadata.name or
 * metadata.namespace that is not a string (or null) or not a valid path
 * segment name ("." or "..", or containing '/', '%' or NUL: apimachinery's
 * ValidatePathSegmentName, the rule every resource's names obey). Members
 * dropped by the transform are not checked. The object still builds; the
 * streaming decoder skips such objects (decode.h "Rejected objects"),
 * kc_obj_parse does not look. Valid until the next reset. */
const char *kc_obj_builder_shape_error(const kc_obj_builder *b);
/* Status members of the last object (kc_status_clear's values when absent). */
const kc_status *kc_obj_builder_status(const kc_obj_builder *b);
/* metadata.annotations["k8s.io/initial-events-end"] == "true" in the last object. */
bool kc_obj_builder_initial_events_end(const kc_obj_builder *b);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Changes min_bytes of "Shared values" above (0: sharing off). */
void kc_obj_builder_set_share_min(kc_obj_builder *b, size_t min_bytes);

#endif
