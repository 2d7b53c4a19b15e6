/* SPDX-License-Identifier: Apache-2.0 */
/* reflector_restore: a reflector's first content read from a snapshot file
 * (reflector.h "Warm start"): the body fed to a list decode stream slice by
 * slice, its checksum computed on the way, the objects applied only once
 * everything matched. Shares the reflector's state through
 * reflector_int.h. Loop thread.
 */
#include "watch/reflector.h"
#include "watch/reflector_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/log.h"
#include "base/memtrim.h"

/* Bytes read and fed per loop turn. */
#define RESTORE_SLICE (256u << 10)
/* Objects handed to the sink per loop turn once the snapshot checked out
 * (about 3 ms of store and handler work). */
#define APPLY_SLICE 1024

void refl_restore_stop(kc_reflector *r) {
  kc_next_turn_stop(&r->turn);
  if (r->restore.fd >= 0) close(r->restore.fd);
  r->restore.fd = -1;
  free(r->restore.chunk);
  free(r->restore.path);
  r->restore.chunk = NULL;
  r->restore.path = NULL;
  r->restore.chunk_len = 0;
  r->restore.waiting = false;
  r->restore.checked = false;
}

/* The snapshot cannot be used: said once, then an ordinary first list. */
static void restore_fail(kc_reflector *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void restore_fail(kc_reflector *r, const char *fmt, ...) {
  char why[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  kc_warn("reflector", "%s: snapshot %s ignored: %s; listing instead", r->describe,
          r->restore.path ? r->restore.path : "?", why);
  r->stats.restore_failures++;
  kc_timer_stop(&r->timer);
  kc_clusterid_cancel(r->cluster);
  refl_reset_response(r);
  refl_clear_pending(r);
  refl_restore_stop(r);
  kc_mem_list_end(&r->listing);
  r->phase = PHASE_IDLE;
  refl_start_list(r, LIST_INITIAL);
}

static void restore_step(kc_next_turn *t);

/* One slice of the checked objects to the sink; the last one completes the
 * first list at the snapshot's resourceVersion and resumes the watch. */
static void restore_apply(kc_next_turn *t) {
  kc_reflector *r = t->data;
  if (r->phase != PHASE_RESTORE || !r->incremental) return;
  size_t end = r->napplied + APPLY_SLICE < r->npending ? r->napplied + APPLY_SLICE : r->npending;
  while (r->napplied < end) {
    kc_obj *o = r->pending[r->napplied];
    kc_history_note(&r->history, o, &r->rng);
    r->sink.upsert(r->sink.ud, r, o);
    /* The store holds it now: the pending reference goes with its slice,
     * not all at once at the end (12 ms at 1M objects). */
    r->pending[r->napplied++] = NULL;
    kc_obj_unref(o);
    if (r->phase != PHASE_RESTORE) return; /* closed by a handler */
  }
  if (r->napplied < r->npending) {
    kc_next_turn_start(&r->turn, restore_apply);
    return;
  }
  char rv[64];
  snprintf(rv, sizeof rv, "%s", r->restore.rv);
  refl_restore_stop(r);
  refl_deliver_list(r, rv, "restored"); /* synced(), then the pending references go */
  if (r->phase == PHASE_CLOSED) return;
  /* As after a lost connection: the cluster identity and history checks,
   * then the watch from the snapshot's resourceVersion. */
  r->verify_history = true;
  refl_resume_watch(r);
}

static void restore_resume(void *ud) {
  kc_reflector *r = ud;
  if (r->phase != PHASE_RESTORE || !r->restore.waiting) return;
  r->restore.waiting = false;
  kc_next_turn_start(&r->turn, restore_step);
}

/* Applied as an incremental first list is: a relist or close half-way
 * leaves partial_applied set, so the next list replaces. */
static void begin_apply(kc_reflector *r) {
  kc_history_forget(&r->history);
  r->incremental = true;
  r->napplied = 0;
  kc_next_turn_start(&r->turn, restore_apply);
}

/* The cluster identity check's answer for a checked snapshot. */
static void restore_identity(void *ud, enum kc_clusterid_verdict v, const char *why) {
  kc_reflector *r = ud;
  if (r->phase != PHASE_RESTORE || r->incremental) return;
  if (v == KC_CLUSTERID_RETRY || v == KC_CLUSTERID_AUTH) {
    restore_fail(r, "the cluster identity cannot be confirmed now (%s)", why ? why : "");
    return;
  }
  if (v == KC_CLUSTERID_SAME) {
    kc_clusterid_stats st;
    kc_clusterid_stats_get(r->cluster_id, &st);
    if (st.uid[0] && strcmp(st.uid, r->restore.cluster_uid) != 0) {
      restore_fail(r, "of another cluster (kube-system uid %s, the server's is %s)",
                   r->restore.cluster_uid, st.uid);
      return;
    }
  }
  begin_apply(r); /* the same cluster, or a server that does not tell */
}

static void restore_done(void *ud, int rc) {
  kc_reflector *r = ud;
  if (r->phase != PHASE_RESTORE) return;
  if (rc < 0 || !r->restore.checked) {
    restore_fail(r, "its body does not decode: %s",
                 r->stream && kc_dstream_error(r->stream)[0] ? kc_dstream_error(r->stream)
                                                             : strerror(rc < 0 ? -rc : EINVAL));
    return;
  }
  const kc_list_meta *m = kc_dstream_list_meta(r->stream);
  if (!m->resource_version || strcmp(m->resource_version, r->restore.rv) != 0) {
    restore_fail(r, "its list says resourceVersion %.64s where its header says %s",
                 m->resource_version ? m->resource_version : "(none)", r->restore.rv);
    return;
  }
  if (r->npending != r->restore.objects || r->stats.rejected) {
    restore_fail(r, "%zu usable objects where its header says %llu", r->npending,
                 (unsigned long long)r->restore.objects);
    return;
  }
  kc_info("reflector", "%s: snapshot %s checked: %zu objects at resourceVersion %s", r->describe,
          r->restore.path, r->npending, r->restore.rv);
  refl_reset_response(r);
  if (r->restore.fd >= 0) close(r->restore.fd);
  r->restore.fd = -1;
  r->stats.restores++;
  r->stats.restored += r->npending;
  if (!r->sink.synced) {
    /* A sink without incremental delivery takes it in one replace(). */
    char rv[64];
    snprintf(rv, sizeof rv, "%s", r->restore.rv);
    refl_restore_stop(r);
    refl_deliver_list(r, rv, "restored");
    if (r->phase != PHASE_CLOSED) {
      r->verify_history = true; /* as in restore_apply */
      refl_resume_watch(r);
    }
    return;
  }
  if (r->cluster && r->restore.cluster_uid[0]) {
    /* Nothing is applied before the server is known to be the snapshot's
     * cluster (restore_identity). */
    if (kc_clusterid_check(r->cluster, restore_identity) < 0)
      restore_fail(r, "the cluster identity cannot be asked for");
    return;
  }
  begin_apply(r);
}

static void restore_step(kc_next_turn *t) {
  kc_reflector *r = t->data;
  if (r->phase != PHASE_RESTORE || !r->stream || r->restore.waiting) return;
  size_t fed = 0;
  while (fed < RESTORE_SLICE) {
    if (!r->restore.chunk_len) {
      if (!r->restore.left) break;
      size_t want = r->restore.left < RESTORE_SLICE ? (size_t)r->restore.left : RESTORE_SLICE;
      ssize_t n;
      do n = read(r->restore.fd, r->restore.chunk, want);
      while (n < 0 && errno == EINTR);
      if (n <= 0) {
        restore_fail(r, "%s", n < 0 ? strerror(errno) : "cut off");
        return;
      }
      r->restore.crc = kc_crc32c(r->restore.crc, r->restore.chunk, (size_t)n);
      r->restore.left -= (uint64_t)n;
      r->restore.chunk_len = (size_t)n;
    }
    int rc = kc_dstream_feed(r->stream, r->restore.chunk, r->restore.chunk_len);
    if (r->phase != PHASE_RESTORE) return; /* an inline decode failed: done() dropped it */
    if (rc == KC_DSTREAM_FULL) {
      r->restore.waiting = true; /* restore_resume feeds the same piece again */
      return;
    }
    if (rc < 0) {
      /* Inline decoding reports the error here; done() may not follow. */
      restore_fail(r, "its body does not decode: %s",
                   kc_dstream_error(r->stream)[0] ? kc_dstream_error(r->stream) : strerror(-rc));
      return;
    }
    fed += r->restore.chunk_len;
    r->restore.chunk_len = 0;
  }
  if (r->restore.left) {
    kc_next_turn_start(&r->turn, restore_step); /* the next slice in the next loop turn */
    return;
  }
  if (r->restore.crc != r->restore.want_crc) {
    restore_fail(r, "body checksum mismatch (crc32c %08x, header says %08x)", r->restore.crc,
                 r->restore.want_crc);
    return;
  }
  r->restore.checked = true;
  kc_dstream_finish(r->stream, true); /* restore_done follows */
}

int kc_reflector_start_restored(kc_reflector *r, const kc_reflector_restore *src) {
  if (r->phase != PHASE_IDLE) {
    close(src->fd);
    return -EALREADY;
  }
  if (!src->resource_version || !*src->resource_version ||
      strlen(src->resource_version) >= sizeof r->restore.rv) {
    close(src->fd);
    return -EINVAL;
  }
  r->restore.fd = src->fd;
  r->restore.path = strdup(src->path ? src->path : "");
  r->restore.chunk = malloc(RESTORE_SLICE);
  if (!r->restore.path || !r->restore.chunk) {
    refl_restore_stop(r);
    return -ENOMEM;
  }
  snprintf(r->restore.rv, sizeof r->restore.rv, "%s", src->resource_version);
  snprintf(r->restore.cluster_uid, sizeof r->restore.cluster_uid, "%s",
           src->cluster_uid ? src->cluster_uid : "");
  r->restore.left = src->body_bytes;
  r->restore.objects = src->objects;
  r->restore.want_crc = src->body_crc32c;
  r->restore.crc = 0;
  kc_dstream_callbacks cbs = {.item = refl_list_item, .reject = refl_reject_object,
                              .resume = restore_resume, .done = restore_done};
  r->stream = kc_dstream_new(r->pool, KC_DECODE_LIST, &r->transform, &cbs, r, r->decode_budget);
  if (!r->stream) {
    refl_restore_stop(r);
    return -ENOMEM;
  }
  kc_dstream_set_bulk(r->stream);
  r->decode_rc = 0;
  r->http_done = false;
  refl_begin_list(r);
  r->incremental = false; /* nothing reaches the sink before the checksum matched */
  kc_mem_list_begin(&r->listing);
  r->phase = PHASE_RESTORE;
  kc_next_turn_start(&r->turn, restore_step);
  return 0;
}

const char *kc_reflector_snapshot_point(const kc_reflector *r) {
  if (r->phase == PHASE_CLOSED || r->phase == PHASE_RESTORE || !r->synced || !r->rv[0]) return NULL;
  return r->rv;
}
