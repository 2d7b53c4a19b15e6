/* SPDX-License-Identifier: Apache-2.0 */
/* store: objects, collections (ordered by storage key), the global
 * resourceVersion counter and the watch-event history ring.
 *
 * Everything here is guarded by one global mutex, sim_mu; functions whose
 * name ends in _locked must be called with it held (any thread). Watchers
 * sleep on sim_cond, which is broadcast after every event.
 * Objects (struct sim_obj) are immutable once created and reference
 * counted (atomic), so a request may keep a reference and serialize the
 * object after dropping the lock.
 * Errors: 0 or negative errno; lookups return NULL when absent.
 */
#ifndef APISIM_STORE_H
#define APISIM_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "json.h"

struct sim_obj {
  atomic_int ref;
  jv *dom;      /* kind/apiVersion removed; owned */
  char *body;   /* jv_write of dom, starts with '{' */
  size_t blen;
  uint64_t rv;
  char *key;    /* "ns/name" or "name" */
  const char *ns, *name; /* borrowed from dom ("" when cluster-scoped) */
};

/* Takes ownership of dom; sets metadata.resourceVersion to rv first. */
struct sim_obj *sim_obj_new(jv *dom, uint64_t rv);
struct sim_obj *sim_obj_ref(struct sim_obj *o);
void sim_obj_unref(struct sim_obj *o);

struct sim_tnode;
struct sim_coll {
  struct sim_tnode *root;
  size_t count;
};

struct sim_obj *sim_coll_get_locked(struct sim_coll *c, const char *key);
/* Inserts or replaces (takes the reference passed in). */
void sim_coll_put_locked(struct sim_coll *c, struct sim_obj *o);
void sim_coll_del_locked(struct sim_coll *c, const char *key);
/* First object whose key is > key (or >= when inclusive); NULL key = first. */
struct sim_obj *sim_coll_next_locked(struct sim_coll *c, const char *key, bool inclusive);
void sim_coll_clear_locked(struct sim_coll *c);

enum sim_ev_type { SIM_ADDED, SIM_MODIFIED, SIM_DELETED };

struct sim_event {
  uint64_t rv;
  enum sim_ev_type type;
  struct sim_coll *coll;
  struct sim_obj *obj; /* new state (for DELETED: last state with deletion RV) */
  struct sim_obj *old; /* previous state or NULL */
  uint64_t at_ms;       /* sim_now_ms when it happened (watch event latency) */
};

extern pthread_mutex_t sim_mu;
extern pthread_cond_t sim_cond;
extern uint64_t sim_rv;          /* last assigned resourceVersion */
extern uint64_t sim_hist_floor;  /* watches need RV >= floor */
extern uint64_t sim_event_seq;   /* events appended so far (monotonic) */

void sim_store_init(size_t history);
/* Appends an event (takes the references); broadcasts sim_cond. */
void sim_emit_locked(enum sim_ev_type t, struct sim_coll *c, struct sim_obj *obj,
                     struct sim_obj *old);
/* Copies into *out the event with sequence number seq (first is 0); returns
 * false when it is no longer (or not yet) in the ring. Borrowed pointers. */
bool sim_event_at_locked(uint64_t seq, struct sim_event *out);
/* Sequence number of the first event whose rv > rv (may equal sim_event_seq). */
uint64_t sim_event_seq_after_locked(uint64_t rv);
uint64_t sim_event_oldest_seq_locked(void);
/* Drops all history: every RV below the current one becomes too old. */
void sim_compact_locked(void);

/* Lists collection c as it was at resourceVersion rv (needs rv >=
 * sim_hist_floor, or rv == sim_rv): objects in key order, key > after_key
 * (NULL = from the start), in namespace ns (NULL = all), accepted by match
 * (NULL = all). Stops after limit matches (0 = no limit); *more tells
 * whether further matches exist and *remaining counts the objects after the
 * page (matching or not). Returns referenced objects; caller unrefs/frees. */
typedef bool (*sim_match_fn)(void *arg, const struct sim_obj *o);
struct sim_obj **sim_snapshot_locked(struct sim_coll *c, uint64_t rv, const char *ns,
                                     const char *after_key, sim_match_fn match, void *arg,
                                     size_t limit, size_t *n, bool *more, size_t *remaining);

#endif
