/* SPDX-License-Identifier: Apache-2.0 */
/* leader: the client-go leader elector on a coordination.k8s.io/v1 Lease
 * (docs/api-contract.md section 9).
 *
 * Owns the election state of one Lease: the last Lease object read or
 * written (its resourceVersion and metadata are what the next PUT sends),
 * the observed record and the local time it was observed, the acquire /
 * renew timers, the renew deadline and at most one request in flight.
 *
 * Semantics (client-go tryAcquireOrRenew, docs/api-contract.md 9.2): fast path PUT with
 * the last known resourceVersion while we hold a valid record; on failure a
 * slow path GET then PUT with the fetched resourceVersion; 404 -> POST
 * create. Another holder's record expires when it has not changed for its
 * leaseDurationSeconds measured on OUR monotonic clock from when we first
 * saw its current content; remote timestamps are never compared with the
 * local clock. leaseTransitions / acquireTime are kept as client-go does.
 * Timestamps are written as MicroTime with exactly six fraction digits.
 *
 * Timing (docs/api-contract.md 9.3): acquire attempts every retryPeriod x (1 + rand x
 * 1.2); while leading, a renewal every retryPeriod, failed ones retried
 * every retryPeriod. Leadership ends at `start of the last successful
 * attempt + renewDeadline` if nothing succeeded since. That instant is
 * before anyone else can take the Lease (they wait leaseDuration >
 * renewDeadline from when they saw our last write, which happened after
 * that attempt started). Differences from client-go, both on the safe side:
 * client-go measures the deadline from the start of a renew cycle (one
 * retryPeriod later), and keeps polling until the deadline even when a GET
 * shows that another replica holds the Lease; we stop leading at once then.
 * Every request carries a timeout that ends at the current deadline, so a
 * stalled API server cannot extend leadership. leaseDurationSeconds is
 * written rounded UP to whole seconds (client-go truncates, which for a
 * sub-second remainder lets others take over before our renew deadline).
 *
 * Context: every function is loop thread only, except kc_leader_is_leader
 * and kc_leader_get_stats, which any thread may call (atomics; is_leader
 * also checks the deadline against the clock, so a worker that runs before
 * the loop noticed an expired deadline, e.g. right after SIGCONT, already
 * sees false).
 * Callbacks run on the loop thread, never from inside the kc_leader_*
 * call that caused them. They may call any kc_leader_* function, including
 * kc_leader_close (nothing touches the elector after that).
 * Errors: 0 or a negative errno. A function that fails never calls its
 * callback.
 * Ownership: the kc_leader belongs to the caller (free with kc_leader_close);
 * cfg, identity and callbacks are copied; strings passed to callbacks or
 * returned are borrowed until the next loop iteration.
 */
#ifndef KC_LEADER_H
#define KC_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "client/apiclient.h"
#include "base/buf.h"
#include "config/config.h"
#include "kube/kobj.h"

/* Path prefix of the Lease API (coordination.k8s.io/v1), kurl.h's API_PATH. */
#define KC_LEASE_API_PATH "/apis/coordination.k8s.io/v1"

typedef struct kc_leader kc_leader;

typedef struct kc_leader_callbacks {
  /* We acquired the Lease; is_leader() is true from now on. May be NULL. */
  void (*on_started_leading)(void *ud);
  /* Leadership ended (renew deadline passed, another holder seen, or
   * release). is_leader() already returns false. Not called by close. May be
   * NULL. */
  void (*on_stopped_leading)(void *ud);
  /* The observed holder changed ("" = nobody). May be NULL. */
  void (*on_new_leader)(const char *holder, void *ud);
  /* A write of our record succeeded: leadership is valid until
   * valid_until_ms (kc_clock_now_ms, base/clock.h). Runs before
   * on_started_leading on an acquisition. May be NULL. */
  void (*on_renewed)(uint64_t valid_until_ms, void *ud);
} kc_leader_callbacks;

typedef struct kc_leader_stats {
  int master_status;       /* leader_election_master_status: 1 leading, 0 not */
  uint64_t slowpath_total; /* leader_election_slowpath_total: renewals of our
                              own record that needed GET + PUT */
  uint64_t attempts;       /* tryAcquireOrRenew runs */
  uint64_t failed_attempts;
  uint64_t acquisitions;   /* times we started leading */
  uint64_t losses;         /* times leadership ended other than by release */
} kc_leader_stats;

/* Writes "hostname_<32 hex digits>" (128 random bits), as controller-runtime
 * does with a UUID. Returns the length, or -ENOSPC / -EIO. Any thread. */
int kc_leader_default_identity(char *buf, size_t cap);

/* Formats unix time in microseconds as a MicroTime:
 * "2024-05-01T10:03:12.123456Z" (27 characters). Returns the length or
 * -ENOSPC (cap must be >= 28). Any thread. */
int kc_leader_format_microtime(int64_t unix_us, char *buf, size_t cap);

/* The leader election record of a Lease as the elector reads it. */
typedef struct kc_lease_record {
  char holder[256];        /* spec.holderIdentity, unescaped; "" = none (or longer) */
  int64_t duration_s;      /* spec.leaseDurationSeconds; 0 when absent */
  char acquire[48];        /* spec.acquireTime MicroTime text; "" = null */
  char renew[48];          /* spec.renewTime */
  int64_t transitions;     /* spec.leaseTransitions */
} kc_lease_record;

/* The record of a Lease object already parsed (a LIST item), and in raw
 * (may be NULL) the exact JSON text of its spec fields, which changes on
 * every renewal. 0 or -ENOMEM. Any thread. */
int kc_leader_lease_record(const kc_obj *lease, kc_lease_record *out, kc_buf *raw);

/* Creates an elector for cfg->namespace_/cfg->name (timings as validated by
 * config.c: lease > renew deadline > 1.2 x retry period > 0). identity: NULL
 * uses cfg->identity, and when that is NULL too kc_leader_default_identity.
 * Nothing happens until kc_leader_start. Returns 0, -EINVAL (bad timing or
 * names), -ENOMEM, or a uv error. */
int kc_leader_new(uv_loop_t *loop, kc_api *api, const kc_leader_election *cfg,
                  const char *identity, const kc_leader_callbacks *cb, void *ud,
                  kc_leader **out);
/* Starts the acquire loop (first attempt at once). -EALREADY if started. */
int kc_leader_start(kc_leader *le);
/* Starts a released (or never started) elector again: the acquire loop
 * runs as after kc_leader_start. -EALREADY unless new or released. */
int kc_leader_restart(kc_leader *le);
/* Seeds the observation with a Lease read elsewhere (a LIST) whose record
 * content was first seen at observed_ms (kc_clock_now_ms, base/clock.h), so a
 * record that expired on our clock is taken at the next attempt instead of
 * after another leaseDuration. Only while not leading and idle: -EBUSY;
 * -ENOMEM. */
int kc_leader_observe(kc_leader *le, const kc_obj *lease, uint64_t observed_ms);
/* True while leading and the renew deadline has not passed. Any thread. */
bool kc_leader_is_leader(const kc_leader *le);
/* The holder we observed last ("" = none or unknown). Borrowed. */
const char *kc_leader_holder(const kc_leader *le);

/* ReleaseOnCancel: stops the election for good (no further attempts) and,
 * if the Lease holds our identity, GETs it and PUTs holderIdentity "",
 * leaseDurationSeconds 1, acquireTime = renewTime = now, leaseTransitions
 * unchanged, with the fetched resourceVersion (one retry on 409). When we
 * were leading, is_leader() is false on return and on_stopped_leading runs
 * first. done(err) runs once: 0 when released or nothing to release, else
 * the error (the request timeout is the renew deadline). Call only after all
 * guarded work stopped. -EALREADY if already released. */
int kc_leader_release(kc_leader *le, void (*done)(int err, void *ud), void *ud);

/* Stops everything without callbacks (in-flight requests are cancelled; the
 * Lease is not released) and frees the elector once its handles closed: run
 * the loop afterwards. NULL is a no-op. */
void kc_leader_close(kc_leader *le);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Reads a Lease body the way the elector reads every answer of the API
 * server: kc_obj_parse (so its limits: KC_OBJ_MAX_DEPTH nesting, without
 * recursion), then the record from spec. Returns 0, -EBADMSG (not a JSON
 * object, too deep, ...; why in err, may be NULL) or -ENOMEM. Any thread. */
int kc_leader_parse_lease(const char *json, size_t len, kc_lease_record *out, char *err,
                          size_t errlen);

/* Our identity. Borrowed for the elector's lifetime. */
const char *kc_leader_identity(const kc_leader *le);
void kc_leader_get_stats(const kc_leader *le, kc_leader_stats *out);

#endif
