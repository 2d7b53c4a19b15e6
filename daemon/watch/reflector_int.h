/* SPDX-License-Identifier: Apache-2.0 */
/* reflector_int: the state of one reflector (struct kc_reflector) and the
 * steps its files call in one another: reflector.c (lifetime, URLs,
 * WATCH and streaming list, backoff), reflector_list.c (LIST: pages,
 * pipelined next pages, the incremental first list, delivering a complete
 * list), reflector_verify.c (the cluster identity and history checks
 * before a resumed watch) and reflector_restore.c (the first content read
 * from a snapshot file). Included only by those four; reflector.h is the
 * interface.
 *
 * Threads: everything here runs on the reflector's loop thread (decoded
 * objects come back to it from the decode pool in stream order).
 */
#ifndef KC_REFLECTOR_INT_H
#define KC_REFLECTOR_INT_H

#include "watch/reflector.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/nextturn.h"
#include "client/clusterid.h"
#include "watch/decodepool.h"
#include "watch/history.h"
#include "watch/metalist.h"

enum list_mode {
  LIST_INITIAL,    /* resourceVersion=0 with limit: any snapshot, served from cache */
  LIST_AT_RV,      /* after a watch 410: not older than the last seen RV */
  LIST_CONSISTENT, /* after that failed too: resourceVersion="" (quorum read) */
};

/* PHASE_VERIFY: the cluster identity or history check (see reflector.h)
 * before resuming a watch. PHASE_RESTORE: the first content is read from a
 * snapshot file. */
enum phase { PHASE_IDLE, PHASE_LIST, PHASE_WATCH, PHASE_BACKOFF, PHASE_VERIFY, PHASE_RESTORE,
             PHASE_CLOSED };

struct kc_reflector {
  uv_loop_t *loop;
  kc_timer timer; /* backoff; timer.uv.data = this */
  kc_next_turn turn; /* the snapshot restore's slices; turn.data = this */
  int open_handles;  /* timer and turn: freed when both closed */
  kc_api *api;
  kc_reflector_sink sink;
  char *api_path, *resource, *namespace_, *label_selector, *field_selector;
  char **drop_paths;
  char *type_kind, *type_api_version; /* transform.kind/api_version, copied */
  kc_transform transform;
  uint32_t page_size;
  bool no_limit;
  uint32_t watch_timeout_s;
  uint64_t rng; /* jitter (xorshift64), seeded per reflector so replicas spread out */
  uint64_t idle_timeout_ms, backoff_initial_ms, backoff_max_ms;
  char describe[256];

  enum phase phase;
  kc_api_call *req;
  /* The response body's decoding (off the loop when a pool is given). Its
   * done() runs after the HTTP result: that result waits in `result`. */
  kc_decode_pool *pool;
  size_t decode_budget;
  kc_dstream *stream;
  int decode_rc;          /* the stream's result: 0 or its first error */
  bool http_done;         /* `result` holds the response's outcome */
  kc_api_result result;

  /* listing */
  enum list_mode list_mode;
  bool paginated_before; /* an earlier list came back in pages: keep using limit */
  bool page_continue;    /* current request continues a paginated list */
  int force_limit;       /* next list: 1 with limit, -1 without, 0 by mode */
  bool force_no_limit;   /* next list: one full list without limit (expired continue) */
  bool last_list_limit;  /* whether the list last sent (first page) carried limit */
  bool rv_unavailable;   /* a list at the last RV got 410/too large: list at "" until one works */
  bool synced;           /* the first complete list has been delivered */
  bool listing;          /* a list is in progress: kc_mem_list_begin (memtrim.h) */
  char rv[64];           /* last seen resourceVersion: where a watch resumes, a relist starts */
  char continue_token[1024];
  char list_rv[64];      /* RV the current list was requested at ("" = consistent) */
  /* Pipelined pages (reflector.h): the request for the next page, sent as
   * soon as the current page's metadata.continue was decoded. Its stream is
   * held until the current page finished; then it becomes the current
   * response (refl_promote_ahead). */
  struct {
    bool active;          /* sent, not yet taken up or cancelled */
    kc_api_call *req;     /* NULL once its response ended */
    kc_dstream *stream;   /* held; NULL until the response's headers came */
    bool http_done;       /* `result` holds the response's outcome */
    kc_api_result result;
    bool shard_sent;
    char cont[1024];      /* the continue token it carries */
  } ahead;
  kc_obj **pending;
  size_t npending, cap_pending;
  bool incremental;      /* this first list goes to sink.upsert as it arrives */
  bool partial_applied;  /* an incremental attempt failed half-way: replace from now on */
  size_t napplied;       /* objects the incremental attempt handed over */

  /* watching */
  uint64_t watch_started_ms;
  uint64_t watch_events;
  bool watch_error_event;
  bool initial_phase;    /* streaming list: initial events until the end bookmark */
  int streaming;         /* KC_REFLECTOR_STREAM_* */
  uint64_t initial_timeout_ms;
  kc_status watch_status;

  /* shard selector (reflector.h "Shard selector") */
  char *shard_selector;  /* NULL: none */
  enum kc_shard_support shard_support;
  bool shard_sent;       /* the request under way carries shardSelector */

  /* backoff (client-go: 800 ms doubling to 30 s, jitter 1.0, reset after 2 min) */
  uint64_t backoff_ms;
  uint64_t last_backoff_at_ms;
  bool backoff_after_watch; /* the last failure was a watch's (or the history check's) */
  enum { NEXT_LIST, NEXT_WATCH } after_backoff;

  /* cluster identity (clusterid.h); NULL: not checked */
  kc_clusterid_member *cluster;
  kc_clusterid *cluster_id;  /* what `cluster` is a member of (its known uid) */

  /* history check (reflector_verify.c) */
  bool verify_history;   /* a connection failed: check before resuming the watch */
  bool auth_rejected;    /* the last response was a 401/403: a new credential ends the wait */
  /* The LIST comparison: the scope's state at rv, page by page. */
  struct {
    kc_metalist list;
    size_t cached;       /* objects in the cache when the check began */
    size_t matched;      /* listed objects the cache holds as listed */
    bool differs;        /* decided: another history (why says where) */
    char why[1200];
  } verify;
  /* Witnesses: [0] the cached object with the highest RV, the others a
   * uniform sample of the cached objects (reservoir over what the lists and
   * events delivered since the last list began), so that a history
   * re-seeded to end on the same RV is caught too. */
  kc_history history;
  kc_buf verify_body;    /* the check's response (at most 4 MiB: one object's metadata) */

  /* Warm start (reflector.h "Warm start"): the snapshot being read. */
  struct {
    int fd;               /* -1 when none */
    char *path;
    uint64_t left;        /* body bytes not read yet */
    uint64_t objects;     /* the count its header promises */
    uint32_t crc, want_crc;
    char rv[64];
    char cluster_uid[64]; /* the snapshot's cluster identity; "": unknown */
    char *chunk;          /* a read piece the full stream refused: fed again on resume */
    size_t chunk_len;
    bool waiting;         /* the stream is full: wait for its resume */
    bool checked;         /* every byte read and the checksum matched */
  } restore;

  /* The API server refuses the scope's LIST with 400 (a selector it does
   * not accept: reflector.h "Configuration errors"); "" when not. */
  char config_error[512];

  /* Reporting only, never read to decide: the counters, and the fields
   * kc_reflector_stats_get copies from the control state above. */
  kc_reflector_stats stats;
};

/* ---- reflector.c ----------------------------------------------------------- */

/* The last seen resourceVersion; one that does not fit is ignored. */
void refl_set_rv(kc_reflector *r, const char *rv, size_t len);
/* Ends the current list attempt's collection (success, failure or a new
 * attempt). */
void refl_clear_pending(kc_reflector *r);
/* A new list attempt: is it the first, applied as it arrives? */
void refl_begin_list(kc_reflector *r);
/* Records and logs the reflector's last error. */
void refl_set_error(kc_reflector *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The decode budget of a list response's stream. */
size_t refl_list_budget(const kc_reflector *r);
/* Drops the early request for the next page (the page before failed, or
 * the list is abandoned); the current stream gets its whole budget back. */
void refl_cancel_ahead(kc_reflector *r);
/* Closes the current response's stream and forgets its outcome. */
void refl_reset_response(kc_reflector *r);
/* "HTTP code reason: message" for logs and last_error. */
void refl_describe_status(const kc_status *st, char *buf, size_t cap);
bool refl_is_2xx(const kc_status *st);
/* The status's Retry-After in ms; 0: none. */
uint64_t refl_retry_after_ms(const kc_status *st);
/* Whether the next request carries shardSelector. */
bool refl_sends_shard_selector(const kc_reflector *r);
/* A list answer to a request that carried the selector. */
void refl_note_list_shard_info(kc_reflector *r, const kc_list_meta *m);
/* A 400/422 to a request that carried the selector: the server refuses the
 * parameter (or this value of it). Returns true when that was the case: the
 * caller then repeats the request without it. A 422 that names
 * sendInitialEvents is a server without WatchList refusing the streaming
 * list, not the selector (stream_fallback handles that). */
bool refl_shard_selector_refused(kc_reflector *r, const kc_status *st);
/* A decoded watch event (the decoder's callback, ud = the reflector). */
int refl_watch_event(void *ud, const kc_watch_event *ev);
/* A watch (or streaming list) response ended with res. */
void refl_watch_finished(kc_reflector *r, const kc_api_result *res);
/* Resumes the watch at the last seen resourceVersion. */
void refl_start_watch(kc_reflector *r);
/* A streaming list (WATCH with sendInitialEvents) in place of a LIST. */
void refl_start_stream(kc_reflector *r, enum list_mode mode);
/* The failure streak is over: the next failure waits the initial delay
 * again (reflector.c says when). */
void refl_backoff_reset(kc_reflector *r);
/* A 400 to a LIST: records st as the reflector's configuration error
 * (logged at error level when it is new) and waits the slow retry. */
void refl_config_error(kc_reflector *r, const kc_status *st);
/* A LIST was answered: any configuration error is over. */
void refl_config_error_clear(kc_reflector *r);
/* Waits before `next` (NEXT_LIST or NEXT_WATCH); retry_after: a
 * Retry-After in ms, 0 = none. */
void refl_backoff_then(kc_reflector *r, int next, uint64_t retry_after);

/* ---- reflector_verify.c ---------------------------------------------------- */

/* Resumes the watch at the last resourceVersion once the checks it needs
 * passed: the cluster identity (when a member), then the history check
 * (when verify_history). */
void refl_resume_watch(kc_reflector *r);
/* clusterid's on_change: relists. */
void refl_identity_changed(void *ud, const char *old_uid, const char *new_uid);
/* Stops the history check's LIST, if any. */
void refl_verify_reset(kc_reflector *r);

/* ---- reflector_list.c ------------------------------------------------------ */

/* A decoded list item (the decoder's callback, ud = the reflector). */
int refl_list_item(void *ud, kc_obj *obj);
/* Gives the current response a stream decoding in mode; 0 or -errno. */
int refl_start_stream_decode(kc_reflector *r, enum kc_decode_mode mode);
/* Body bytes of a list or watch response go to that response's stream. A
 * full stream pauses the transfer until it has drained. */
int refl_on_body_data(kc_api_call *call, const char *buf, size_t len, void *ud);
/* The response ended. With a stream, what it still decodes is delivered
 * first; its done() then finishes the request. */
void refl_response_done(kc_reflector *r, const kc_api_result *res, bool list);
/* A complete list (LIST pages or a streaming list's initial events): the
 * pending objects replace the scope's content at resourceVersion rv. */
void refl_deliver_list(kc_reflector *r, const char *rv, const char *how);
/* Starts GET o->path (`what`: the log's name of the request); one that
 * cannot start is an error, then a wait before `next`. */
void refl_send_get(kc_reflector *r, const char *what, kc_api_request_opts *o, int next);
/* Starts a LIST in mode (first page). */
void refl_start_list(kc_reflector *r, enum list_mode mode);
/* An object the decoder did not deliver: counted and logged once. */
int refl_reject_object(void *ud, const kc_decode_reject *rj);

/* ---- reflector_restore.c --------------------------------------------------- */

/* Drops a snapshot being read (file, stream, collected objects). */
void refl_restore_stop(kc_reflector *r);

#endif
