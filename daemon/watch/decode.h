/* SPDX-License-Identifier: Apache-2.0 */
/* decode: streaming decoder for Kubernetes LIST and WATCH response bodies.
 *
 * One jsonlex handle (jsonlex.h: yajl 2.1's rules, resumable) per HTTP
 * response (docs/api-contract.md 16.5). Feed it the body bytes as they
 * arrive, split anywhere (inside a token, a string escape or a UTF-8
 * sequence); it never buffers a whole list or event. The cost is linear in
 * the bytes whatever the chunking: every piece goes to the lexer at once,
 * which never reads a byte twice (a token spanning pieces is assembled once,
 * only when its value is needed). Envelope members nobody reads are only
 * validated (the lexer's skip).
 * Each object is built directly while parsing (kbuild.h builder in raw mode:
 * the object's bytes are copied from the input as received, dropped members
 * are cut out, identity fields and labels are located on the way, and so are
 * the values of the transform's field capture, kbuild.h; one malloc per
 * finished object) and handed over as soon as it closes:
 *   LIST:  every element of `items` -> callbacks.item, then the list's
 *          metadata (resourceVersion, continue, ...) -> callbacks.list_end;
 *          callbacks.list_meta as soon as the metadata object closed.
 *          Items get kind and apiVersion (kbuild.h "Object type"): from the
 *          transform's kind/api_version when given (the reflector passes
 *          them: the list's own fields may come after the items), else
 *          from the list's kind minus "List" and its apiVersion when those
 *          come before "items".
 *   WATCH: every event -> callbacks.event, whatever the key order inside the
 *          event ("object" before "type" is fine). The transform's type
 *          applies too (metadata-only objects report the real kind).
 * Numbers stay text (no rounding), UTF-8 is validated, comments, trailing
 * garbage and partial values are rejected. Limits: KC_OBJ_MAX_DEPTH nesting,
 * and per event / list item KC_OBJ_MAX_BYTES (16 MiB, client-go's cap) of
 * built text and of input bytes spanning feeds.
 *
 * Threads: a decoder is used by one thread at a time (a decode pool thread,
 * decodepool.h, or the loop thread); callbacks run on it, inside
 * kc_decoder_feed/finish. kc_obj_parse and kc_obj_parse_status: any thread.
 *
 * Errors: 0 or a negative errno: -EBADMSG malformed JSON or not the expected
 * shape, -E2BIG a limit was hit, -ENOMEM, or the negative value a callback
 * returned. The first error is final: later feeds return it again, and
 * kc_decoder_error() tells what happened with context ("offset 1234,
 * event 7: ..."). Nothing is retried: the reflector resumes the watch.
 *
 * Ownership: objects passed to callbacks are BORROWED for the duration of the
 * call; take kc_obj_ref() to keep one. Strings in kc_list_meta and
 * kc_watch_event belong to the decoder.
 */
#ifndef KC_DECODE_H
#define KC_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/kbuild.h"

enum kc_decode_mode {
  KC_DECODE_LIST = 1,
  KC_DECODE_WATCH = 2,
};

enum kc_watch_type {
  KC_WATCH_UNKNOWN = 0, /* a type this daemon does not know: log and ignore */
  KC_WATCH_ADDED,
  KC_WATCH_MODIFIED,
  KC_WATCH_DELETED,
  KC_WATCH_BOOKMARK,
  KC_WATCH_ERROR,
};

typedef struct kc_watch_event {
  enum kc_watch_type type;
  const char *type_name;   /* as received, NUL-terminated (cut at 63 bytes) */
  uint64_t index;          /* 1-based number of this event in the response */
  kc_obj *obj;             /* borrowed; NULL only for KC_WATCH_UNKNOWN without object */
  const kc_status *status; /* KC_WATCH_ERROR: code/reason/message; NULL otherwise */
  bool initial_events_end; /* BOOKMARK carrying k8s.io/initial-events-end: "true" */
} kc_watch_event;

/* The resourceVersion of any event (bookmarks included) is
 * ev->obj->resource_version. */

typedef struct kc_list_meta {
  const char *kind;             /* "" when absent; strings valid until kc_decoder_free */
  const char *api_version;
  const char *resource_version; /* metadata.resourceVersion */
  const char *continue_token;   /* metadata.continue; "" = last page */
  bool has_remaining;           /* metadata.remainingItemCount present */
  int64_t remaining_item_count;
  bool has_shard_info;          /* metadata.shardInfo present (KEP-5866: the server
                                   filtered by the request's shardSelector) */
  const char *shard_selector;   /* metadata.shardInfo.selector; "" when absent */
  uint64_t nitems;              /* items delivered */
} kc_list_meta;

/* Rejected objects: a LIST item, or the object of an ADDED / MODIFIED /
 * DELETED event, whose shape the API server never sends (kbuild.h
 * kc_obj_builder_shape_error: labels not an object, a label value or the
 * resourceVersion not a string, a name or namespace that is no valid name,
 * e.g. with '/') is not
 * delivered: callbacks.reject runs instead of item/event (when set) and
 * decoding goes on with the next item or event. Such an event is counted
 * in kc_decoder_count and numbered (index), such an item is not counted in
 * nitems/kc_decoder_count; kc_decoder_rejected counts both. */
typedef struct kc_decode_reject {
  const kc_obj *obj;      /* borrowed; its namespace_/name are as sent */
  const char *reason;     /* e.g. "metadata.labels is an array, not an object" */
  uint64_t index;         /* 1-based item (LIST) or event (WATCH) number */
  uint64_t offset;        /* byte offset in the body where the object ended */
  const char *event_type; /* WATCH: "ADDED", "MODIFIED", "DELETED"; NULL for a LIST item */
} kc_decode_reject;

typedef struct kc_decoder_callbacks {
  /* Return 0 to go on, a negative errno to stop decoding with that error. */
  int (*item)(void *ud, kc_obj *obj);                     /* LIST */
  int (*list_end)(void *ud, const kc_list_meta *meta);    /* LIST, once */
  int (*event)(void *ud, const kc_watch_event *ev);       /* WATCH */
  int (*reject)(void *ud, const kc_decode_reject *rj);    /* both; strings borrowed */
  /* LIST: the list's metadata object closed (resourceVersion, continue, ...
   * are known; kind/apiVersion only if they came before it), in body order:
   * before the items after it. The API server sends metadata before items,
   * so a continue token is known early (the reflector requests the next
   * page then, reflector.h "Pipelined pages"). */
  int (*list_meta)(void *ud, const kc_list_meta *meta);
} kc_decoder_callbacks;

typedef struct kc_decoder kc_decoder;

/* `t` (may be NULL) is copied. `cbs` is copied; unused members may be NULL.
 * Returns NULL with errno set (ENOMEM, EINVAL bad mode or transform). */
kc_decoder *kc_decoder_new(enum kc_decode_mode mode, const kc_transform *t,
                           const kc_decoder_callbacks *cbs, void *ud);
/* Feeds the next len bytes of the body. */
int kc_decoder_feed(kc_decoder *d, const char *buf, size_t len);
/* End of body. WATCH: an event cut off by the end is an error (-EBADMSG,
 * already delivered events stand); an empty body is fine. LIST: the list
 * must be complete. */
int kc_decoder_finish(kc_decoder *d);
void kc_decoder_free(kc_decoder *d);
/* 0, or the first error (final). */
int kc_decoder_result(const kc_decoder *d);
/* "" while there was no error. */
const char *kc_decoder_error(const kc_decoder *d);
/* LIST metadata seen so far (complete once list_end has run). */
const kc_list_meta *kc_decoder_list_meta(const kc_decoder *d);

/* Builds an object from one complete JSON object text (any whitespace).
 * `t` may be NULL. Returns a new object with refs == 1, or NULL with a
 * message in err (e.g. "offset 17: invalid JSON: ...", "not a JSON object").
 * Context: any thread (it touches no shared state). */
kc_obj *kc_obj_parse(const char *json, size_t len, const kc_transform *t, char *err,
                     size_t errlen);

/* kc_obj_parse that also fills *st (may be NULL) with the Status members
 * the builder read (kbuild.h kc_obj_builder_status). */
kc_obj *kc_obj_parse_status(const char *json, size_t len, const kc_transform *t, kc_status *st,
                            char *err, size_t errlen);

/* "ADDED" -> KC_WATCH_ADDED, ...; anything else KC_WATCH_UNKNOWN. */
enum kc_watch_type kc_watch_type_parse(const char *s, size_t len);
const char *kc_watch_type_name(enum kc_watch_type t);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Lowers the per-event/per-item byte limit; 0 restores the default. */
void kc_decoder_set_max_bytes(kc_decoder *d, size_t max_bytes);
/* Changes the size from which managedFields[].fieldsV1 values are shared
 * (kbuild.h "Shared values"; 0 turns sharing off): for tests and fuzz
 * targets that compare objects built both ways. */
void kc_decoder_set_share_min(kc_decoder *d, size_t min_bytes);
/* Events (WATCH) or items (LIST) delivered so far. */
uint64_t kc_decoder_count(const kc_decoder *d);
/* Objects rejected so far (see "Rejected objects"). */
uint64_t kc_decoder_rejected(const kc_decoder *d);
/* Total bytes fed. */
uint64_t kc_decoder_offset(const kc_decoder *d);
/* Bytes handed to the lexer so far. The lexer reads each byte once, so this
 * equals the bytes fed whatever the chunking (tests check it). */
uint64_t kc_decoder_lexed_bytes(const kc_decoder *d);

#endif
