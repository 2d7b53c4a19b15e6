/* SPDX-License-Identifier: Apache-2.0 */
/* events: the Event recorder behind the plugin host function `event`.
 *
 * Owns: a bounded queue of copied event records (worker threads -> loop), the
 * correlator (client-go's EventCorrelator rules, three bounded LRU caches)
 * and the one asynchronous write in flight to the API server.
 *
 * Flow: kc_events_record (any thread) copies the record into one allocation
 * and appends it to a ring of `queue_capacity` pointers under a mutex, then
 * wakes the loop with uv_async_send. It never blocks on I/O; a full queue
 * drops the record (counted). With a fence (fence_capture) a record made on
 * a fenced thread carries its token: refused at once (counted as skipped)
 * when the fence does not admit writes at record time, and at send time its
 * token, not may_write, decides. On the loop the records are taken in order:
 * skipped (counted) while may_write (or the record's fence) is false, then
 * correlated:
 *  1. aggregation: events of one object with the same type and reason but
 *     different messages: the 10th distinct message within 10 minutes (the
 *     window slides with each similar event) and every further one become
 *     one Event with message "(combined from similar events): <message>";
 *  2. dedup: an event seen before (same object, type, reason, message; or
 *     the same aggregate) PATCHes the existing Event with count+1,
 *     lastTimestamp and message; a 404 on that PATCH POSTs it again;
 *  3. spam filter: a token bucket per involved object, burst 25, refill one
 *     token per 5 minutes; over budget the event is dropped (counted; the
 *     dedup count still advances, as in client-go).
 * Writes are core/v1 Events in the object's namespace ("default" when
 * cluster-scoped) named "<object name>.<hex>"; source.component and
 * reportingComponent name the controller that recorded the event,
 * "kctrld.io/<controller>" (the way kube-controller-manager's controllers
 * each report under their own name; "kctrld" when no controller is named),
 * and are part of the correlator's keys as client-go's source is. One write is in flight at a time (client-go
 * also writes from one goroutine), so a PATCH never overtakes its POST.
 * Transport errors, 429 and 5xx are retried (max_tries in all, delay
 * retry_delay_ms or Retry-After); other failures drop the event. The first
 * failure after a success is logged at warn with the HTTP status and Status
 * reason, further ones at debug until a write succeeds again.
 *
 * Threads: kc_events_record and kc_events_get_stats from any thread; every
 * other function on the loop thread. The correlator functions are plain
 * data-structure calls (one thread at a time).
 * Errors: 0 or a negative errno.
 * Ownership: strings are borrowed and copied; the kc_api is borrowed and
 * must outlive the recorder (close the recorder first).
 */
#ifndef KC_EVENTS_H
#define KC_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "client/apiclient.h"
#include "kube/kobj.h"

#define KC_EVENTS_QUEUE_DEFAULT 1000
#define KC_EVENTS_CACHE_DEFAULT 4096 /* LRU entries per cache, as client-go */
#define KC_EVENTS_SPAM_BURST 25
#define KC_EVENTS_SPAM_REFILL_NS (300ull * 1000000000ull) /* one token per 5 minutes */
#define KC_EVENTS_AGG_MAX 10
#define KC_EVENTS_AGG_WINDOW_NS (600ull * 1000000000ull)
#define KC_EVENTS_MESSAGE_MAX 1024 /* longer messages are cut (UTF-8 safe) */
#define KC_EVENTS_COMBINED_PREFIX "(combined from similar events): "
/* source.component / reportingComponent: at most the API server's 128. */
#define KC_EVENTS_COMPONENT_MAX 128

enum { KC_EVENT_TYPE_NORMAL = 0, KC_EVENT_TYPE_WARNING = 1 };

/* ---- correlator ---- */

typedef struct kc_event_correlator kc_event_correlator;

/* What the correlator looks at (borrowed). */
typedef struct kc_event_in {
  kc_str api_version, kind, namespace_, name, uid;
  int type; /* KC_EVENT_TYPE_* */
  kc_str reason, message;
  kc_str component; /* the reporting controller (client-go's source.component) */
} kc_event_in;

typedef enum kc_event_action {
  KC_EVENT_DROP = 0, /* spam filter */
  KC_EVENT_CREATE,   /* POST a new Event */
  KC_EVENT_PATCH,    /* PATCH the existing Event (POST it if it is gone) */
} kc_event_action;

typedef struct kc_event_out {
  kc_event_action action;
  bool combined;        /* message gets KC_EVENTS_COMBINED_PREFIX */
  int32_t count;        /* the Event's count after this occurrence */
  uint64_t name_suffix; /* Event name = "<object name>.<name_suffix in hex>" */
  int64_t first_ns;     /* firstTimestamp (wall clock, ns since the epoch) */
} kc_event_out;

/* entries: LRU bound of each of the three caches (0 = 4096).
 * Returns 0 or -ENOMEM. */
int kc_event_correlator_new(size_t entries, kc_event_correlator **out);
void kc_event_correlator_free(kc_event_correlator *c);
/* Correlates one occurrence. mono_ns: a monotonic clock (spam filter and
 * aggregation window); wall_ns: the occurrence's wall-clock time (timestamps
 * and the name of a new Event). Always fills *out and returns out->action. */
kc_event_action kc_event_correlate(kc_event_correlator *c, const kc_event_in *ev, uint64_t mono_ns,
                                   int64_t wall_ns, kc_event_out *out);

/* ---- recorder ---- */

typedef struct kc_events kc_events;

typedef struct kc_events_options {
  kc_api *api;                /* the loop's API client (kc_api_request); required */
  bool (*may_write)(void *ud); /* NULL = always; called on the loop */
  void *ud;
  /* Optional per-record write fence (daemon: a sharded reconcile's key
   * range). fence_capture(ud, &refused) runs on the recording thread: it
   * returns a token (NULL: no fence there, may_write decides when sending)
   * or sets refused (the record is dropped, counted as skipped).
   * fence_ok(token) on the loop replaces may_write for that record each
   * time it is about to be written; fence_free(token) on any thread. All
   * three or none (-EINVAL). */
  void *(*fence_capture)(void *ud, bool *refused);
  bool (*fence_ok)(void *token);
  void (*fence_free)(void *token);
  size_t queue_capacity;      /* 0 = KC_EVENTS_QUEUE_DEFAULT */
  size_t cache_entries;       /* 0 = KC_EVENTS_CACHE_DEFAULT */
  int max_tries;              /* per write, 0 = 3 */
  uint64_t retry_delay_ms;    /* 0 = 1000 */
  uint64_t timeout_ms;        /* per request, 0 = 10000 */
} kc_events_options;

typedef struct kc_events_stats {
  uint64_t created;       /* Events POSTed */
  uint64_t patched;       /* Events PATCHed (count+1) */
  uint64_t dropped_queue; /* queue full or recorder closed */
  uint64_t dropped_spam;  /* spam filter */
  uint64_t skipped;       /* may_write or the record's fence false */
  uint64_t failed;        /* writes given up */
  uint64_t queued;        /* records waiting now */
} kc_events_stats;

/* Loop thread. Returns 0, -EINVAL (no api), -ENOMEM, or a libuv error. */
int kc_events_new(uv_loop_t *loop, const kc_events_options *opts, kc_events **out);

/* Records an event about `o` (its apiVersion, kind, namespace, name, uid and
 * resourceVersion are copied) reported by `controller` (NULL or "": the
 * daemon itself). Any thread; never blocks on I/O.
 * Returns 0 (also when the record is dropped), -EINVAL (no name or empty
 * reason), -ENOMEM. */
int kc_events_record(kc_events *ev, const char *controller, const kc_obj *o, int type,
                     const char *reason, const char *message);

/* Calls done(ud) on the loop once the queue is empty and no write is in
 * flight, or after timeout_ms, whichever comes first (never synchronously).
 * Loop thread; one flush at a time (a second replaces the first callback). */
void kc_events_flush(kc_events *ev, uint64_t timeout_ms, void (*done)(void *ud), void *ud);

/* Stops: cancels the write in flight, drops queued records (counted), and
 * frees the recorder once its handles closed (run the loop). Records
 * arriving afterwards must not happen: detach the recorder from every
 * producer first. NULL is a no-op. Loop thread. */
void kc_events_close(kc_events *ev);

/* Counters so far. Any thread. */
void kc_events_get_stats(kc_events *ev, kc_events_stats *out);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Entries held by the spam, aggregation and dedup caches. */
void kc_event_correlator_sizes(const kc_event_correlator *c, size_t *spam, size_t *agg,
                               size_t *dedup);

#endif
