/* SPDX-License-Identifier: Apache-2.0 */
/* reflector: keeps one watched scope (resource + namespace + selectors) in
 * sync with the API server: paginated LIST, then WATCH from the list's
 * resourceVersion with bookmarks; resume from the last seen resourceVersion
 * after a clean end or an idle stream; relist on 410 (HTTP or ERROR event);
 * exponential backoff with jitter on errors (docs/api-contract.md 4.8 is
 * the behaviour mirrored).
 *
 * Backoff: a Retry-After is the next wait (bounded by backoff_max_ms) and
 * does not grow the exponential step; the step restarts from the initial
 * value once a watch delivers an event or bookmark, or a LIST succeeds
 * after failed LISTs (a list that works between failing watches does not
 * reset it), and after 2 min without failure.
 *
 * Cluster identity (client/clusterid.h): with kc_reflector_set_cluster_identity
 * the reflector asks, before every watch it resumes at a resourceVersion
 * (after a clean end, an idle restart, a connection failure, a 429), whether
 * the server is still the cluster the caches were built from (the uid of
 * the kube-system Namespace; one GET shared by every reflector that asks at
 * the same time). A watch started right after a complete list needs no
 * check: the list is of the server it talks to. A changed identity relists
 * (kc_reflector_relist) every reflector of the component, whatever it was
 * doing; a server that does not tell (403, 404) is taken as the same one;
 * 429/5xx/transport errors wait (backoff) and ask again.
 *
 * History check: after a connection failure of a watch (transport error,
 * refused, reset; not a clean end, not an idle restart: those check the
 * cluster identity only), the watch is not resumed blindly at the last
 * resourceVersion R: an RV is only
 * meaningful in the history that issued it, and a server restored from an
 * etcd backup (without --bump-revision --mark-compacted; its kube-system
 * uid is the restored one), a simulator restarted with a fresh store, or a
 * cluster behind the same address without a readable identity would accept
 * it and stream from there, silently skipping everything it holds at or
 * below it. The cache is exactly the scope's state at R, so the check asks
 * the server for that state: a metadata-only LIST of the scope (same
 * selectors, pages of page_size) at resourceVersion=R with
 * resourceVersionMatch=Exact, compared key by key with the cache (uid and
 * resourceVersion; sink.count and sink.get). Equal: the server's history
 * holds this very state at R, so its events after R are the right ones and
 * the watch resumes. Any difference, a 410 (R compacted: the watch would
 * get 410 too), or any other refusal relists at resourceVersion "" with a
 * warning; 429/5xx/transport errors back off and check again. This cannot
 * pass by chance: it passes only when the two states are equal. Caches of
 * more than KC_HISTORY_LIST_MAX objects, and sinks without count/get, read
 * witnesses instead (watch/history.h): metadata-only GETs of the cached
 * object with the highest resourceVersion and a uniform sample of the
 * others, each of which must be on the server either unchanged (same uid,
 * same RV) or changed after R (RV > R); with a fraction f of the scope
 * differing at or below R, that passes with probability at most
 * (1-f)^(witnesses-1) (docs/reliability.md). The requests and the verdicts
 * are in reflector_verify.c.
 *
 * Shard selector (KEP-5866, docs/api-contract.md 5.4):
 * kc_reflector_set_shard_selector makes every LIST, streaming-list WATCH and
 * resumed WATCH carry `shardSelector`, so that a server with the feature
 * sends only the objects of those hash ranges. Whether it does is learnt
 * from LIST answers: metadata.shardInfo in the answer -> SERVER; a list
 * answered without it (a server without the feature ignores the parameter
 * and sends everything) -> NONE; a 400/422 to a request that carried it ->
 * NONE and the same request again at once without it (not a 422 naming
 * sendInitialEvents: that is a server without WatchList, see streaming). NONE is sticky: from
 * then on nothing carries the selector and the scope is listed and watched
 * whole (logged once, with the reason). A streaming list's answer has no
 * list metadata, so while the support is UNKNOWN the reflector lists with
 * LIST (streaming lists resume once SERVER is known). A change of the
 * selector while running relists at once (at the last resourceVersion,
 * replace() as for any relist); under NONE it is only remembered.
 *
 * Configuration errors: a 400 (BadRequest) to a LIST is the server
 * refusing the request as configured, in practice a label or field selector
 * it does not accept ("field label not supported: metadata.nmae"); no
 * retry at the usual pace can fix it. It is logged once at error level with
 * the server's message (again only when the message changes), kept for
 * kc_reflector_config_error (readiness shows it), and the LIST is retried
 * slowly: the wait starts at backoff_max_ms and doubles up to
 * KC_REFLECTOR_CONFIG_RETRY_MAX_MS (+ up to 10 % jitter), logged at debug
 * (the server may learn the field later: a CRD's selectableFields). The
 * first LIST answered with 2xx clears it (logged at info).
 *
 * The reflector does not own a store: it hands decoded objects to a sink
 * (the informer), which writes its store before notifying anybody.
 *
 * Bodies are decoded by a kc_dstream (decodepool.h), on a pool thread when
 * the spec names a pool: the loop only routes bytes, and objects come back
 * to the loop in stream order, so sink callbacks still run on the loop. A
 * response's end is handled once its stream has delivered everything.
 *
 * Pipelined pages: with a decode pool of at least one thread, the request
 * for page k+1 of a paginated LIST goes out as soon as page k's
 * metadata.continue has been decoded (decodepool.h list_continue, delivered
 * on the loop in stream order), not after page k ended. Rules:
 *   - at most one page ahead: two LIST requests in flight per reflector;
 *   - page k+1's stream is held (decodepool.h): its bytes are queued and
 *     budgeted but nothing is decoded or delivered until page k's stream
 *     finished successfully; it then becomes the current response, so items
 *     reach the sink in list order (incremental first list and relist
 *     replace alike);
 *   - while both are in flight each stream has half of decode_budget (the
 *     held page's transfer pauses when its half is full), so the budget
 *     covers both;
 *   - page k fails (HTTP error, decode error, connection drop): the early
 *     request is cancelled, then the failure handling of a failing page
 *     runs unchanged; page k+1 fails (410 expired continue, 5xx, ...): its
 *     outcome is handled after page k was applied, as for any page;
 *   - stats.lists counts a page when it is taken up (one per page; an early
 *     request cancelled with its predecessor counts none);
 *   - not pipelined: inline decoding, a metadata without continue (last
 *     page), the page that probes shardSelector support (its answer decides
 *     whether the next page carries the selector), streaming lists. When
 *     the metadata comes after the items the token is known at the end of
 *     the page only, and the next page is requested then, as before.
 *
 * Warm start (kc_reflector_start_restored): the first content comes from a
 * snapshot file (snapfile.h) instead of a LIST. Its body is read in slices
 * of 256 KiB, one per loop turn (and not while the decode stream is full),
 * and decoded like a list response (on a pool thread when the spec names a
 * pool); the objects are collected, never applied, until the last byte was
 * read and the body's checksum, the object count and the list's
 * resourceVersion match the header, and, when the reflector is a member of
 * the cluster identity check and the snapshot names its cluster's identity,
 * the server's identity is that one (another: dropped; the server does not
 * tell: used; the check cannot be made now: dropped, the list that follows
 * waits out the trouble as any list does). Then they go to the sink, 1024
 * per loop turn, as an incremental first list does (every object an add),
 * the reflector is synced at the snapshot's resourceVersion, and it resumes
 * as after a connection failure: the history check first, then a WATCH from
 * that resourceVersion (no LIST of the content, no initial-events watch). A 410 to that
 * watch relists once, as any expired watch does. A snapshot that fails any
 * check is dropped with a warning naming the file and the reason, and the
 * reflector lists as kc_reflector_start does.
 *
 * Context: loop thread only. Errors: 0 or a negative errno.
 * Ownership: the spec's strings are copied. Objects handed to the sink are
 * borrowed for the call (the sink takes kc_obj_ref to keep one); the array
 * given to replace() is borrowed too.
 */
#ifndef KC_REFLECTOR_H
#define KC_REFLECTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "client/apiclient.h"
#include "client/clusterid.h"
#include "kube/kbuild.h"

typedef struct kc_reflector kc_reflector;

/* Does the API server filter by shardSelector? (see "Shard selector") */
enum kc_shard_support { KC_SHARD_SUPPORT_UNKNOWN = 0, KC_SHARD_SUPPORT_SERVER, KC_SHARD_SUPPORT_NONE };

typedef struct kc_reflector_sink {
  /* A complete (re)list: the full content of the scope. */
  void (*replace)(void *ud, kc_reflector *r, kc_obj *const *objs, size_t n);
  void (*upsert)(void *ud, kc_reflector *r, kc_obj *obj);
  /* `obj` is the last state as sent in the DELETED event. */
  void (*remove)(void *ud, kc_reflector *r, kc_obj *obj);
  void *ud;
  /* Optional. When set, the FIRST complete list is not handed over in one
   * replace() at its end (which would hold the loop for all N objects at
   * once): its objects go to upsert() as they arrive and synced() runs when
   * the list is complete. Only while nothing was cached yet, and only until a
   * first attempt failed half-way (its objects may be stale: the next
   * attempt replaces). Later relists always use replace(). */
  void (*synced)(void *ud, kc_reflector *r);
  /* Optional (the history check's comparison, see "History check"): the
   * number of objects cached for this reflector, and one of them (a
   * reference the caller drops) or NULL. Without them the check reads
   * witnesses. */
  size_t (*count)(void *ud, kc_reflector *r);
  kc_obj *(*get)(void *ud, kc_reflector *r, kc_str ns, kc_str name);
  /* Optional. The resourceVersion this reflector has observed advanced to
   * rv (borrowed for the call): after each watch event and bookmark (once
   * upsert/remove ran) and after each complete list (list true, once
   * replace/synced ran; a relist or a first list). */
  void (*progress)(void *ud, kc_reflector *r, const char *rv, bool list);
} kc_reflector_sink;

#define KC_REFLECTOR_NO_IDLE_TIMEOUT UINT64_MAX
/* The longest wait between LISTs refused as a configuration error. */
#define KC_REFLECTOR_CONFIG_RETRY_MAX_MS (5 * 60 * 1000)

typedef struct kc_reflector_spec {
  const char *api_path;       /* "/api/v1" or "/apis/GROUP/VERSION" */
  const char *resource;       /* plural, e.g. "pods" */
  const char *namespace_;     /* NULL or "": all namespaces / cluster-scoped */
  const char *label_selector; /* NULL or "": none */
  const char *field_selector;
  kc_transform transform;     /* drop paths and kind/api_version (the type stamped
                               * on objects, kbuild.h "Object type") are copied;
                               * capture (kbuild.h "Field capture") is borrowed and
                               * must outlive the reflector (the informer passes
                               * its store's, kc_store_capture) */
  uint32_t page_size;         /* 0: 500 */
  bool no_limit;              /* never send limit: lists in one response (config pageSize 0) */
  uint32_t watch_timeout_s;   /* timeoutSeconds is random in [t, 2t); 0: 300 (client-go) */
  uint64_t idle_timeout_ms;   /* no byte on a watch for this long: restart it; 0: 5 min;
                                 KC_REFLECTOR_NO_IDLE_TIMEOUT: never */
  uint64_t backoff_initial_ms;/* 0: 800 ms (client-go) */
  uint64_t backoff_max_ms;    /* 0: 30 s */
  /* Streaming list (WATCH with sendInitialEvents, docs/api-contract.md 4.7) instead of
   * LIST: OFF (default), AUTO (use it, fall back to LIST+WATCH for good when
   * the server rejects it or never ends the initial events), ON (require it). */
  enum { KC_REFLECTOR_STREAM_OFF = 0, KC_REFLECTOR_STREAM_AUTO, KC_REFLECTOR_STREAM_ON } streaming;
  uint64_t initial_events_timeout_ms; /* no end bookmark after this long: 0 = 60 s */
  /* Where response bodies are decoded (decodepool.h; borrowed, must outlive
   * the reflector). NULL: inline, on the loop thread. */
  struct kc_decode_pool *decode_pool;
  size_t decode_budget;       /* bytes in flight per response; 0: 8 MiB */
} kc_reflector_spec;

typedef struct kc_reflector_stats {
  uint64_t lists;        /* LIST requests sent (pages count one each; a page requested
                            early counts when it is taken up, see "Pipelined pages") */
  uint64_t watches;      /* WATCH requests sent */
  uint64_t relists;      /* complete lists after the first */
  uint64_t events;       /* ADDED/MODIFIED/DELETED applied */
  uint64_t bookmarks;
  uint64_t errors;       /* failed requests and broken streams */
  uint64_t streaming_lists; /* complete initial-event streams (sendInitialEvents);
                               each also counts as a watch */
  uint64_t streaming_attempts; /* WATCH requests with sendInitialEvents sent (counted
                                  neither as lists nor as watches) */
  uint64_t streaming_fallbacks; /* AUTO gave up the streaming list for LIST+WATCH */
  uint64_t decode_pauses; /* the transfer was paused: the decode budget was full */
  uint64_t rejected;     /* objects of an impossible shape skipped (decode.h) */
  bool streaming;        /* false once AUTO fell back to LIST+WATCH */
  bool synced;           /* the first complete list has been delivered */
  char resource_version[64]; /* last seen */
  char last_error[256];
  uint64_t history_checks;  /* history checks done after connection failures */
  uint64_t history_changes; /* ... that found another history (and relisted) */
  uint64_t identity_checks; /* cluster identity checks before a resumed watch */
  uint64_t identity_changes; /* relists because the cluster identity changed */
  uint64_t retry_after_waits; /* waits that were a server's Retry-After */
  uint64_t backoff_ms;      /* current exponential step; 0 after a reset */
  uint64_t last_wait_ms;    /* the latest wait chosen (Retry-After or backoff) */
  uint64_t restores;        /* snapshots applied (see "Warm start") */
  uint64_t restored;        /* objects they held */
  uint64_t restore_failures; /* snapshots dropped: corrupt, cut off, unreadable */
} kc_reflector_stats;

int kc_reflector_new(uv_loop_t *loop, kc_api *api,
                     const kc_reflector_spec *spec, const kc_reflector_sink *sink,
                     kc_reflector **out);
/* Starts listing (at once). */
int kc_reflector_start(kc_reflector *r);
/* Warm start (see "Warm start"): instead of kc_reflector_start. */
typedef struct kc_reflector_restore {
  int fd;                       /* positioned at the body; owned by the reflector from
                                   the call on (closed also on error) */
  const char *path;             /* for messages; copied */
  uint64_t body_bytes;
  uint64_t objects;
  uint32_t body_crc32c;
  const char *resource_version; /* the snapshot's; copied */
  const char *cluster_uid;      /* the cluster identity it was written in; NULL or "":
                                   unknown (copied) */
} kc_reflector_restore;
/* 0: reading (a failure later falls back to a LIST by itself); -EALREADY
 * when started; -ENOMEM, -EINVAL: nothing started, the caller calls
 * kc_reflector_start. */
int kc_reflector_start_restored(kc_reflector *r, const kc_reflector_restore *src);
/* The resourceVersion the content handed to the sink is complete at: the
 * point a snapshot of the sink's store may be taken at. NULL before the
 * first complete list (or restore) and after close. Borrowed until the
 * loop runs again. */
const char *kc_reflector_snapshot_point(const kc_reflector *r);

/* Cancels any request and timer; the memory is freed once the loop has run
 * the close callback. No sink callback runs after this returns. */
void kc_reflector_close(kc_reflector *r);

/* Makes the reflector a member of the cluster identity check (see "Cluster
 * identity"); `id` is borrowed and must outlive the reflector. Before start
 * only: 0, -EALREADY once started, -ENOMEM. */
int kc_reflector_set_cluster_identity(kc_reflector *r, kc_clusterid *id);

/* Drops whatever is under way (watch, list, wait) and lists again at
 * resourceVersion "" (consistent read), e.g. after the consistency check
 * found the cache different from the server. -EAGAIN before start,
 * -EINVAL when closed. `why` is logged. */
int kc_reflector_relist(kc_reflector *r, const char *why);

/* A report, valid until the next call: the counters, and synced, streaming,
 * resource_version, backoff_ms copied from the reflector's own control
 * state now (which it never reads back from here). */
const kc_reflector_stats *kc_reflector_stats_get(kc_reflector *r);
/* A new credential is in use (apiclient.h kc_api_on_credentials): a
 * reflector waiting out its backoff after a 401/403 retries at once, with
 * its backoff reset. Others are left alone. Loop thread. */
void kc_reflector_credentials_changed(kc_reflector *r);
const char *kc_reflector_describe(const kc_reflector *r); /* "pods[ns=default]" */
/* The configuration error the server answered the last LIST with ("HTTP
 * 400 BadRequest: field label not supported: ..."), or NULL when there is
 * none (see "Configuration errors"). Borrowed until the reflector's next
 * answer. */
const char *kc_reflector_config_error(const kc_reflector *r);

/* Sets the shardSelector (NULL or "": none; copied) that lists and watches
 * carry (see "Shard selector"). Before start, or under NONE, or when it is
 * the same: remembered only. Running: relists now. 0, -ENOMEM, -EINVAL when
 * closed. */
int kc_reflector_set_shard_selector(kc_reflector *r, const char *selector);
enum kc_shard_support kc_reflector_shard_support(const kc_reflector *r);
const char *kc_shard_support_name(enum kc_shard_support s); /* "unknown" "server" "none" */

/* Exposed for tests: builds the query for a list or watch into buf (with
 * shardSelector when one is set and the support is not NONE). */
int kc_reflector_url(const kc_reflector *r, bool watch, const char *rv, const char *continue_token,
                     bool with_limit, uint32_t timeout_s, char *buf, size_t cap);

/* A LIST URL of the scope (selectors, shard selector as for lists): at rv
 * (NULL or "": a consistent read) with resourceVersionMatch `match` (NULL:
 * none), or continuing at `cont` (then without either); `limit` = the page
 * size when with_limit. Length or -ENOSPC. */
int kc_reflector_list_url(const kc_reflector *r, const char *rv, const char *match,
                          const char *cont, bool with_limit, char *buf, size_t cap);

/* --- Test seam: for tests only, not called by the daemon --- */
const char *kc_reflector_shard_selector(const kc_reflector *r); /* NULL: none */

#endif
