/* SPDX-License-Identifier: Apache-2.0 */
/* watch: list/watch filters (namespace + label + field + shard selectors) and the
 * watch stream: initial events, history replay from a resourceVersion,
 * selector transitions, bookmarks, timeouts, 410 ERROR events and the
 * stream faults (chunk splitting, stall, mid-stream reset).
 *
 * Threads: a watch is owned by the MHD connection thread that serves it;
 * sim_watch_read blocks on sim_cond. sim_watch_drop_all may be called from
 * any thread.
 * Errors: none reported; a stream simply ends.
 * Ownership: sim_watch_new takes the filter and the initial objects.
 */
#ifndef APISIM_WATCH_H
#define APISIM_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "select.h"
#include "shardsel.h"
#include "store.h"
#include "types.h"

struct sim_filter {
  char *ns; /* NULL = all namespaces */
  struct sim_lsel lsel;
  struct sim_fsel fsel;
  struct sim_shardsel ssel;    /* shardSelector (ShardedListAndWatch gate) */
  bool has_lsel, has_fsel, has_ssel;
};

bool sim_filter_match(void *filter, const struct sim_obj *o);
void sim_filter_free(struct sim_filter *f);

struct sim_watch_opts {
  struct sim_rtype *rt;
  struct sim_filter filter;     /* moved into the watch */
  bool bookmarks, meta_only;
  uint64_t from_rv;             /* events with rv > from_rv */
  struct sim_obj **initial;     /* synthetic ADDED events (moved in) */
  size_t ninitial;
  bool initial_end_bookmark;    /* sendInitialEvents */
  uint64_t timeout_ms;
  bool expired;                 /* send one 410 ERROR event and end */
  char *expired_msg;
  size_t chunk_split;           /* fault: at most this many bytes per chunk */
  bool stall;                   /* fault: send nothing */
  int reset_after;              /* fault: drop connection after N events (-1 off) */
  int table;                    /* 0, or events as Tables with this SIM_TABLE_* include */
  unsigned event_delay_ms;      /* each event goes out this long after it happened */
};

struct sim_watch;
struct sim_watch *sim_watch_new(struct sim_watch_opts *o, int fd);
/* Sets what the server knows only when it queues the stream: the socket
 * (to notice a vanished client) and the stream faults. */
void sim_watch_set_conn(struct sim_watch *w, int fd, bool stall, int reset_after,
                        size_t chunk_split);
/* MHD content reader callback and its free callback. */
ssize_t sim_watch_read(void *cls, uint64_t pos, char *buf, size_t max);
void sim_watch_free(void *cls);

/* Ends every open watch cleanly (no ERROR event). Returns how many. */
int sim_watch_drop_all(void);
/* With sim_mu held: ends every open watch, cleanly or (reset) by breaking
 * its connection; watches opened afterwards are not affected. */
void sim_watch_drop_all_locked(bool reset);
int sim_watch_count(void);
extern atomic_ullong sim_events_sent;
extern unsigned sim_bookmark_interval_ms;

/* Writes one event line: {"type":T,"object":...}\n for obj (rv_override
 * != 0 rewrites metadata.resourceVersion). */
void sim_write_event(struct sim_buf *b, const char *type, const struct sim_rtype *rt,
                     const struct sim_obj *o, uint64_t rv_override, bool meta_only);
/* Object JSON with kind/apiVersion (or PartialObjectMetadata). */
void sim_write_obj(struct sim_buf *b, const struct sim_rtype *rt, const struct sim_obj *o,
                   bool with_type, bool meta_only);

#endif
