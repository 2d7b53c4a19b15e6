/* SPDX-License-Identifier: Apache-2.0 */
/* informer: see informer.h. */
#include "cache/informer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/hash.h"
#include "cache/consistency.h"
#include "base/log.h"
#include "kube/kname.h"
#include "watch/snapfile.h"

typedef struct part {
  kc_informer *inf;
  kc_reflector *reflector;
  kc_store *store;
  kc_consistency *check; /* periodic comparison with the server (consistency.h) */
  char *namespace_; /* own copy (outlives a reloaded config); NULL: all / cluster-scoped */
  bool listed;      /* a complete list of this part was applied: later lists are relists */
  uint64_t observed_rv; /* kc_informer_observed_rv; 0: nothing observed yet */
  bool rv_opaque;       /* a resourceVersion that is no decimal number was seen */
  /* The shard selector the store's content follows (the one its last
   * complete list was made with; NULL: the whole scope), which the
   * snapshot's identity carries. content_unknown: it could not be copied. */
  char *content_selector;
  bool content_unknown;
} part;

typedef struct handler_slot {
  int id;
  kc_informer_handler h;
} handler_slot;

struct kc_informer {
  uv_loop_t *loop;
  kc_api *api;
  const kc_informer_spec *spec;
  char *api_path, *resource, *resource_name;
  bool namespaced;
  part *parts;
  size_t nparts;
  handler_slot *handlers;
  size_t nhandlers;
  int next_handler_id;
  uv_timer_t resync; /* resync.data = this */
  bool closing;
  void (*on_synced)(void *ud, kc_informer *inf);
  void *on_synced_ud;
  bool synced_told;
  char *shard_selector; /* kc_informer_set_shard_selector; NULL: none */
  enum kc_informer_cause cause; /* of the delivery under way (kc_informer_cause) */
  bool started;
  char *snap_dir, *snap_cluster; /* kc_informer_set_snapshots; NULL: off */
  kc_clusterid *clusterid;       /* kc_informer_set_cluster_identity; NULL: none */
  uint64_t snap_max_age_ms;
  bool opaque_rv_logged;
};

enum kc_informer_cause kc_informer_cause(const kc_informer *inf) { return inf->cause; }

/* Marks the delivery that follows; returns the cause to restore after it
 * (a handler may start another delivery, e.g. by adding a handler). */
static enum kc_informer_cause deliver_as(kc_informer *inf, enum kc_informer_cause cause) {
  enum kc_informer_cause previous = inf->cause;
  inf->cause = cause;
  return previous;
}

static void fan_add(kc_informer *inf, kc_obj *obj) {
  for (size_t i = 0; i < inf->nhandlers; i++)
    if (inf->handlers[i].h.on_add) inf->handlers[i].h.on_add(inf->handlers[i].h.ud, inf, obj);
}
static void fan_update(kc_informer *inf, kc_obj *old, kc_obj *obj) {
  for (size_t i = 0; i < inf->nhandlers; i++)
    if (inf->handlers[i].h.on_update)
      inf->handlers[i].h.on_update(inf->handlers[i].h.ud, inf, old, obj);
}
static void fan_delete(kc_informer *inf, kc_obj *obj) {
  for (size_t i = 0; i < inf->nhandlers; i++)
    if (inf->handlers[i].h.on_delete) inf->handlers[i].h.on_delete(inf->handlers[i].h.ud, inf, obj);
}

static void fan_progress(kc_informer *inf, bool relisted) {
  for (size_t i = 0; i < inf->nhandlers; i++)
    if (inf->handlers[i].h.on_progress)
      inf->handlers[i].h.on_progress(inf->handlers[i].h.ud, inf, relisted);
}

/* The part's reflector observed rv (reflector.h sink.progress). */
static void sink_progress(void *ud, kc_reflector *r, const char *rv, bool list) {
  part *p = ud;
  uint64_t v = kc_rv_number(kc_str_c(rv));
  if (v) {
    p->observed_rv = v;
  } else if (rv[0] && strcmp(rv, "0") != 0) { /* "0": an empty history, still numeric */
    p->rv_opaque = true;
    if (!p->inf->opaque_rv_logged) {
      p->inf->opaque_rv_logged = true;
      kc_warn("informer",
              "%s: resourceVersion \"%.40s\" is not a number: writes to this resource are not "
              "waited for before a reconcile (read your own writes)",
              kc_reflector_describe(r), rv);
    }
  }
  fan_progress(p->inf, list);
}

static void on_replace_change(void *ud, enum kc_store_event ev, kc_obj *old, kc_obj *new_) {
  kc_informer *inf = ud;
  switch (ev) {
  case KC_STORE_ADDED: fan_add(inf, new_); break;
  case KC_STORE_MODIFIED: fan_update(inf, old, new_); break;
  case KC_STORE_DELETED: fan_delete(inf, old); break;
  case KC_STORE_UNCHANGED: break;
  }
}

static void tell_synced(kc_informer *inf) {
  if (!inf->synced_told && inf->on_synced && kc_informer_synced(inf)) {
    inf->synced_told = true;
    inf->on_synced(inf->on_synced_ud, inf);
  }
}

/* A complete list was applied: the content now follows the reflector's
 * selector, or is the whole scope where the server does not filter. */
static void note_content_selector(part *p, kc_reflector *r) {
  const char *sel = kc_reflector_shard_support(r) == KC_SHARD_SUPPORT_NONE
                        ? NULL
                        : kc_reflector_shard_selector(r);
  free(p->content_selector);
  p->content_selector = sel ? strdup(sel) : NULL;
  p->content_unknown = sel && !p->content_selector;
}

static void sink_replace(void *ud, kc_reflector *r, kc_obj *const *objs, size_t n) {
  part *p = ud;
  note_content_selector(p, r);
  kc_consistency_note_relist(p->check);
  enum kc_informer_cause saved =
      deliver_as(p->inf, p->listed ? KC_INFORMER_RELIST : KC_INFORMER_LIST);
  int rc = kc_store_replace(p->store, objs, n, on_replace_change, p->inf);
  p->inf->cause = saved;
  p->listed = true;
  if (rc < 0)
    kc_error("informer", "%s: cannot apply list of %zu objects: %s", kc_reflector_describe(r), n,
             strerror(-rc));
  tell_synced(p->inf);
}

/* The first list of this part went to the store object by object. */
static void sink_synced(void *ud, kc_reflector *r) {
  part *p = ud;
  note_content_selector(p, r);
  p->listed = true;
  tell_synced(p->inf);
}

void kc_informer_on_synced(kc_informer *inf, void (*cb)(void *ud, kc_informer *inf), void *ud) {
  inf->on_synced = cb;
  inf->on_synced_ud = ud;
}

static void sink_upsert(void *ud, kc_reflector *r, kc_obj *obj) {
  part *p = ud;
  kc_obj *old = NULL;
  int rc = kc_store_upsert(p->store, obj, &old);
  if (rc < 0) {
    kc_error("informer", "%s: cannot store %.*s/%.*s: %s", kc_reflector_describe(r),
             (int)kc_obj_namespace(obj).len,
             kc_obj_namespace(obj).ptr ? kc_obj_namespace(obj).ptr : "", (int)kc_obj_name(obj).len,
             kc_obj_name(obj).ptr, strerror(-rc));
    return;
  }
  /* Before the part's first list is complete its objects come here one by
   * one (reflector.h sink.synced): they are the list, not news. */
  enum kc_informer_cause saved =
      deliver_as(p->inf, p->listed ? KC_INFORMER_EVENT : KC_INFORMER_LIST);
  if (old) {
    fan_update(p->inf, old, obj);
    kc_obj_unref(old);
  } else {
    fan_add(p->inf, obj);
  }
  p->inf->cause = saved;
}

static void sink_remove(void *ud, kc_reflector *r, kc_obj *obj) {
  part *p = ud;
  kc_obj *old = NULL;
  kc_consistency_note_delete(p->check, kc_obj_namespace(obj), kc_obj_name(obj));
  /* A DELETED for an object the store does not hold (e.g. already removed
   * by a relist) is not news: client-go's DeltaFIFO drops it too. */
  if (kc_store_delete(p->store, kc_obj_namespace(obj), kc_obj_name(obj), &old) < 0) return;
  /* Handlers get the state from the DELETED event (the newest we know). */
  enum kc_informer_cause saved = deliver_as(p->inf, KC_INFORMER_EVENT);
  fan_delete(p->inf, obj);
  p->inf->cause = saved;
  kc_obj_unref(old);
}

/* The reflector's history check compares the server's state with these. */
static size_t sink_count(void *ud, kc_reflector *r) { return kc_store_count(((part *)ud)->store); }

static kc_obj *sink_get(void *ud, kc_reflector *r, kc_str ns, kc_str name) {
  return kc_store_get(((part *)ud)->store, ns, name);
}

static void on_resync(uv_timer_t *t) {
  kc_informer *inf = t->data;
  kc_obj_vec all = {0};
  enum kc_informer_cause saved = deliver_as(inf, KC_INFORMER_RESYNC);
  for (size_t i = 0; i < inf->nparts; i++) {
    kc_obj_vec_clear(&all);
    if (kc_store_list(inf->parts[i].store, (kc_str){0}, NULL, &all) < 0) continue;
    for (size_t j = 0; j < all.n; j++) fan_update(inf, all.v[j], all.v[j]);
  }
  inf->cause = saved;
  kc_obj_vec_release(&all);
}

int kc_informer_new(uv_loop_t *loop, kc_api *api, struct kc_decode_pool *pool,
                    const kc_informer_spec *spec, const kc_resource_ref *res, kc_informer **out) {
  kc_informer *inf = calloc(1, sizeof *inf);
  if (!inf) return -ENOMEM;
  inf->loop = loop;
  inf->api = api;
  inf->spec = spec;
  inf->namespaced = res->namespaced;
  inf->next_handler_id = 1;
  inf->api_path = strdup(res->api_path);
  inf->resource = strdup(res->resource);
  /* "deployments.apps" style name: resource + "." + group (core: plain). */
  kc_str group, version;
  kc_name_split_api_version(spec->api_version, strlen(spec->api_version), &group, &version);
  inf->resource_name = malloc(strlen(res->resource) + group.len + 2);
  if (inf->resource_name) {
    if (group.len)
      sprintf(inf->resource_name, "%s.%.*s", res->resource, (int)group.len, group.ptr);
    else
      strcpy(inf->resource_name, res->resource);
  }
  size_t nparts = (res->namespaced && spec->nnamespaces) ? spec->nnamespaces : 1;
  inf->parts = calloc(nparts, sizeof *inf->parts);
  int rc = (!inf->api_path || !inf->resource || !inf->resource_name || !inf->parts) ? -ENOMEM : 0;
  if (rc == 0) rc = uv_timer_init(loop, &inf->resync) ? -ENOMEM : 0;
  if (rc < 0) {
    free(inf->api_path), free(inf->resource), free(inf->resource_name), free(inf->parts);
    free(inf);
    return rc;
  }
  inf->resync.data = inf;
  kc_store_index_spec idx[64];
  size_t nidx = spec->nindexes < 64 ? spec->nindexes : 64;
  _Static_assert(KC_CONFIG_MAX_INDEX_PATHS <= KC_STORE_MAX_INDEX_PATHS, "index paths");
  for (size_t i = 0; i < nidx; i++)
    idx[i] = (kc_store_index_spec){.name = spec->indexes[i].name, .path = spec->indexes[i].path,
                                   .paths = spec->indexes[i].paths, .npaths = spec->indexes[i].npaths};
  for (size_t i = 0; i < nparts && rc == 0; i++) {
    part *p = &inf->parts[i];
    p->inf = inf;
    inf->nparts = i + 1; /* from here the close path frees this part */
    if (res->namespaced && spec->nnamespaces && !(p->namespace_ = strdup(spec->namespaces[i]))) {
      rc = -ENOMEM;
      break;
    }
    p->store = kc_store_new(idx, nidx);
    if (!p->store) {
      rc = -ENOMEM;
      break;
    }
    kc_reflector_spec rs = {
        .api_path = res->api_path,
        .resource = res->resource,
        .namespace_ = p->namespace_,
        .label_selector = spec->label_selector,
        .field_selector = spec->field_selector,
        .transform = {.drop = spec->drop, .ndrop = spec->ndrop, .metadata_only = spec->metadata_only,
                      .kind = spec->kind, .api_version = spec->api_version,
                      /* objects carry their index values: no rescan in the store */
                      .capture = kc_store_capture(p->store)},
        /* config pageSize 0 = one unpaginated list; watchTimeout is the
         * base of the jittered timeoutSeconds; watchInactivityTimeout 0 =
         * never restart a quiet watch. */
        .page_size = spec->page_size > 0 ? (uint32_t)spec->page_size : 500,
        .no_limit = spec->page_size == 0,
        .watch_timeout_s = spec->watch_timeout_ms >= 1000 ? (uint32_t)(spec->watch_timeout_ms / 1000) : 0,
        .idle_timeout_ms = spec->watch_inactivity_ms > 0 ? (uint64_t)spec->watch_inactivity_ms
                                                         : KC_REFLECTOR_NO_IDLE_TIMEOUT,
        .decode_pool = pool,
        .streaming = spec->streaming_list == KC_STREAMING_ON    ? KC_REFLECTOR_STREAM_ON
                     : spec->streaming_list == KC_STREAMING_OFF ? KC_REFLECTOR_STREAM_OFF
                                                                : KC_REFLECTOR_STREAM_AUTO,
    };
    kc_reflector_sink sink = {sink_replace, sink_upsert, sink_remove, p, sink_synced,
                              sink_count, sink_get, sink_progress};
    rc = kc_reflector_new(loop, api, &rs, &sink, &p->reflector);
    if (rc == 0)
      rc = kc_consistency_new(loop, api, pool, p->reflector, p->store, 0, &p->check);
  }
  if (rc < 0) {
    kc_informer_close(inf);
    return rc;
  }
  *out = inf;
  return 0;
}

int kc_informer_set_snapshots(kc_informer *inf, const kc_informer_snapshots *s) {
  char *dir = s->dir && *s->dir ? strdup(s->dir) : NULL;
  char *cluster = strdup(s->cluster ? s->cluster : "");
  if ((s->dir && *s->dir && !dir) || !cluster) {
    free(dir), free(cluster);
    return -ENOMEM;
  }
  free(inf->snap_dir), free(inf->snap_cluster);
  inf->snap_dir = dir;
  inf->snap_cluster = cluster;
  inf->snap_max_age_ms = s->max_age_ms;
  return 0;
}

/* A part's identity (its readable form): the informer's, the part's
 * namespace and, when its content follows one, the shard selector. The
 * hash of the identity without the selector names the file, so that a
 * part keeps one file whatever ranges it holds. */
static int part_identity(const part *p, const char *shard_selector, kc_buf *b) {
  kc_buf_puts(b, p->inf->spec->identity ? p->inf->spec->identity : "");
  kc_buf_puts(b, ";part=");
  kc_buf_puts(b, p->namespace_ ? p->namespace_ : "");
  if (shard_selector) {
    kc_buf_puts(b, ";shardSelector=");
    kc_buf_puts(b, shard_selector);
  }
  kc_buf_add(b, "", 1);
  return b->err ? -ENOMEM : 0;
}

static int part_snapshot_name(const part *p, char *name, size_t cap) {
  kc_buf id = {0};
  int rc = part_identity(p, NULL, &id);
  if (rc == 0 &&
      snprintf(name, cap, "%016" PRIx64 ".snapshot", kc_hash_str(id.p)) >= (int)cap)
    rc = -ENOSPC;
  kc_buf_free(&id);
  return rc;
}

static int64_t unix_ms_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The shard selector a header's readable identity names after the part's
 * own identity `base` ("" for none), or NULL when the identity is not
 * base's (another informer). */
static const char *snapshot_selector(const char *identity, const char *base) {
  size_t n = strlen(base);
  if (strncmp(identity, base, n) != 0) return NULL;
  if (!identity[n]) return "";
  static const char tag[] = ";shardSelector=";
  return strncmp(identity + n, tag, sizeof tag - 1) == 0 ? identity + n + sizeof tag - 1 : NULL;
}

/* Starts a part from its snapshot when one fits, else with a list. The
 * snapshot's identity must name the shard selector the informer starts
 * with (none: none). */
static int part_start(part *p) {
  kc_informer *inf = p->inf;
  if (!inf->snap_dir || inf->started) return kc_reflector_start(p->reflector);
  kc_buf id = {0}, base = {0};
  char name[64], path[4200];
  if (part_identity(p, inf->shard_selector, &id) < 0 || part_identity(p, NULL, &base) < 0 ||
      part_snapshot_name(p, name, sizeof name) < 0 ||
      snprintf(path, sizeof path, "%s/%s", inf->snap_dir, name) >= (int)sizeof path) {
    kc_buf_free(&id), kc_buf_free(&base);
    return kc_reflector_start(p->reflector);
  }
  uint64_t id_hash = kc_hash_str(id.p);
  kc_buf_free(&id);
  kc_snapfile_header *h = malloc(sizeof *h);
  if (!h) {
    kc_buf_free(&base);
    return kc_reflector_start(p->reflector);
  }
  const char *what = kc_reflector_describe(p->reflector);
  char why[700];
  int fd = -1;
  int rc = kc_snapfile_open(path, h, &fd, why, sizeof why);
  int64_t age = rc == 0 ? unix_ms_now() - h->written_unix_ms : 0;
  const char *written_sel = rc == 0 ? snapshot_selector(h->identity, base.p) : NULL;
  if (rc == -ENOENT) {
    kc_info("informer", "%s: no snapshot %s; listing", what, path);
  } else if (rc < 0) {
    kc_warn("informer", "%s: snapshot %s ignored: %s; listing", what, path, why);
  } else if (h->identity_hash != id_hash && written_sel) {
    /* The same scope cut to other shard ranges: expected when the ranges
     * held moved, so not a warning. */
    kc_info("informer", "%s: snapshot %s not used: written for shard selector %.400s, the informer "
            "starts with %.400s; listing", what, path, written_sel[0] ? written_sel : "(none)",
            inf->shard_selector ? inf->shard_selector : "(none)");
    rc = -ESTALE;
  } else if (h->identity_hash != id_hash) {
    kc_warn("informer", "%s: snapshot %s ignored: written for another informer (%.300s); listing",
            what, path, h->identity);
    rc = -EINVAL;
  } else if (strcmp(h->cluster, inf->snap_cluster) != 0) {
    kc_warn("informer", "%s: snapshot %s ignored: of another cluster (%.200s, now %.200s); listing",
            what, path, h->cluster, inf->snap_cluster);
    rc = -EINVAL;
  } else if (inf->snap_max_age_ms && (age < -60000 || (uint64_t)(age > 0 ? age : 0) > inf->snap_max_age_ms)) {
    kc_info("informer", "%s: snapshot %s not used: written %" PRId64 " s ago, past snapshotMaxAge "
            "(%" PRIu64 " s); listing", what, path, age / 1000, inf->snap_max_age_ms / 1000);
    rc = -ESTALE;
  }
  kc_buf_free(&base);
  if (rc < 0) {
    if (fd >= 0) close(fd);
    free(h);
    return kc_reflector_start(p->reflector);
  }
  kc_info("informer", "%s: warm start from snapshot %s (%" PRIu64 " objects at resourceVersion %s, "
          "written %" PRId64 " s ago by kctrld %s)", what, path, h->objects, h->resource_version,
          age / 1000, h->kctrld_version);
  kc_reflector_restore src = {.fd = fd, .path = path, .body_bytes = h->body_bytes,
                              .objects = h->objects, .body_crc32c = h->body_crc32c,
                              .resource_version = h->resource_version,
                              .cluster_uid = h->cluster_uid};
  rc = kc_reflector_start_restored(p->reflector, &src); /* owns fd now */
  free(h);
  if (rc == -ENOMEM || rc == -EINVAL) return kc_reflector_start(p->reflector);
  return rc;
}

/* Hands part p's store to w as its snapshot file; 1 when handed (the part
 * has no store from then on), 0 when there is nothing to write, or an
 * error (logged; the part keeps its store). */
static int part_hand_snapshot(part *p, kc_snapwriter *w) {
  kc_informer *inf = p->inf;
  const char *what = kc_reflector_describe(p->reflector);
  const char *rv = kc_reflector_snapshot_point(p->reflector);
  if (!rv) {
    kc_info("informer", "%s: no snapshot written: not synced", what);
    return 0;
  }
  if (p->content_unknown) {
    kc_info("informer", "%s: no snapshot written: its shard selector is not known", what);
    return 0;
  }
  kc_buf id = {0};
  char name[64];
  kc_snapfile_header *h = calloc(1, sizeof *h);
  int rc = !h ? -ENOMEM : part_identity(p, p->content_selector, &id);
  if (rc == 0) rc = part_snapshot_name(p, name, sizeof name);
  if (rc == 0) {
    snprintf(h->kctrld_version, sizeof h->kctrld_version, "%s", KCTRLD_VERSION);
    snprintf(h->cluster, sizeof h->cluster, "%s", inf->snap_cluster);
    if (inf->clusterid) {
      kc_clusterid_stats cs;
      kc_clusterid_stats_get(inf->clusterid, &cs);
      snprintf(h->cluster_uid, sizeof h->cluster_uid, "%s", cs.uid);
    }
    h->identity_hash = kc_hash_str(id.p);
    snprintf(h->identity, sizeof h->identity, "%s", id.p);
    for (char *c = h->identity; *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?'; /* readable form only */
    rc = kc_snapwriter_add(w, p->store, name, rv, h, what);
    p->store = NULL; /* the writer's now, also on error */
  }
  if (rc < 0)
    kc_error("informer", "%s: cannot write its snapshot in %s: %s", what, inf->snap_dir,
             strerror(-rc));
  kc_buf_free(&id);
  free(h);
  return rc < 0 ? rc : 1;
}

int kc_informer_close_saving(kc_informer *inf, kc_snapwriter *w) {
  if (!inf || inf->closing) return 0;
  int handed = 0, first_err = 0;
  for (size_t i = 0; w && inf->snap_dir && i < inf->nparts; i++) {
    int rc = part_hand_snapshot(&inf->parts[i], w);
    if (rc > 0) handed++;
    else if (rc < 0 && !first_err) first_err = rc;
  }
  kc_informer_close(inf);
  return first_err ? first_err : handed;
}

int kc_informer_start(kc_informer *inf) {
  for (size_t i = 0; i < inf->nparts; i++) {
    int rc = part_start(&inf->parts[i]);
    if (rc < 0 && rc != -EALREADY) return rc;
  }
  inf->started = true;
  if (inf->spec->resync_ms > 0)
    uv_timer_start(&inf->resync, on_resync, (uint64_t)inf->spec->resync_ms,
                   (uint64_t)inf->spec->resync_ms);
  for (size_t i = 0; i < inf->nparts; i++)
    kc_consistency_set_period(inf->parts[i].check, inf->spec->consistency_check_ms > 0
                                                       ? (uint64_t)inf->spec->consistency_check_ms
                                                       : 0);
  return 0;
}

static void on_resync_closed(uv_handle_t *h) {
  kc_informer *inf = h->data;
  /* Reflector memory is released by their own close callbacks; nothing of
   * ours is referenced from them once closed, so we can free now. */
  for (size_t i = 0; i < inf->nparts; i++) {
    kc_store_free(inf->parts[i].store);
    free(inf->parts[i].namespace_);
    free(inf->parts[i].content_selector);
  }
  free(inf->parts);
  free(inf->handlers);
  free(inf->api_path), free(inf->resource), free(inf->resource_name);
  free(inf->shard_selector);
  free(inf->snap_dir), free(inf->snap_cluster);
  free(inf);
}

void kc_informer_close(kc_informer *inf) {
  if (!inf || inf->closing) return;
  inf->closing = true;
  for (size_t i = 0; i < inf->nparts; i++) {
    kc_consistency_close(inf->parts[i].check);
    kc_reflector_close(inf->parts[i].reflector);
  }
  uv_timer_stop(&inf->resync);
  uv_close((uv_handle_t *)&inf->resync, on_resync_closed);
}

int kc_informer_add_handler(kc_informer *inf, const kc_informer_handler *h) {
  handler_slot *nh = realloc(inf->handlers, (inf->nhandlers + 1) * sizeof *nh);
  if (!nh) return -ENOMEM;
  inf->handlers = nh;
  int id = inf->next_handler_id++;
  nh[inf->nhandlers++] = (handler_slot){id, *h};
  /* A late subscriber sees the cache as it is now. */
  if (h->on_add) {
    kc_obj_vec all = {0};
    enum kc_informer_cause saved = deliver_as(inf, KC_INFORMER_LIST);
    for (size_t i = 0; i < inf->nparts; i++) {
      kc_obj_vec_clear(&all);
      if (kc_store_list(inf->parts[i].store, (kc_str){0}, NULL, &all) < 0) continue;
      for (size_t j = 0; j < all.n; j++) h->on_add(h->ud, inf, all.v[j]);
    }
    inf->cause = saved;
    kc_obj_vec_release(&all);
  }
  return id;
}

void kc_informer_remove_handler(kc_informer *inf, int id) {
  for (size_t i = 0; i < inf->nhandlers; i++) {
    if (inf->handlers[i].id == id) {
      memmove(&inf->handlers[i], &inf->handlers[i + 1],
              (inf->nhandlers - i - 1) * sizeof *inf->handlers);
      inf->nhandlers--;
      return;
    }
  }
}

void kc_informer_rebind(kc_informer *inf, const kc_informer_spec *spec) {
  bool resync_changed = spec->resync_ms != inf->spec->resync_ms;
  inf->spec = spec;
  for (size_t i = 0; i < inf->nparts; i++)
    kc_consistency_set_period(inf->parts[i].check, spec->consistency_check_ms > 0
                                                       ? (uint64_t)spec->consistency_check_ms
                                                       : 0);
  if (!resync_changed) return;
  uv_timer_stop(&inf->resync);
  if (spec->resync_ms > 0)
    uv_timer_start(&inf->resync, on_resync, (uint64_t)spec->resync_ms, (uint64_t)spec->resync_ms);
}

int kc_informer_set_cluster_identity(kc_informer *inf, kc_clusterid *id) {
  inf->clusterid = id;
  for (size_t i = 0; i < inf->nparts; i++) {
    int rc = kc_reflector_set_cluster_identity(inf->parts[i].reflector, id);
    if (rc < 0) return rc;
  }
  return 0;
}

int kc_informer_set_shard_selector(kc_informer *inf, const char *selector) {
  if (!inf || inf->closing) return -EINVAL;
  if (selector && !*selector) selector = NULL;
  char *copy = NULL;
  if (selector && !(copy = strdup(selector))) return -ENOMEM;
  int rc = 0;
  for (size_t i = 0; i < inf->nparts; i++) {
    int r = kc_reflector_set_shard_selector(inf->parts[i].reflector, copy);
    if (r < 0 && rc == 0) rc = r;
  }
  if (rc < 0) {
    free(copy);
    return rc;
  }
  free(inf->shard_selector);
  inf->shard_selector = copy;
  return 0;
}

const char *kc_informer_shard_selector(const kc_informer *inf) { return inf->shard_selector; }

enum kc_shard_support kc_informer_shard_support(const kc_informer *inf) {
  size_t server = 0;
  for (size_t i = 0; i < inf->nparts; i++) {
    enum kc_shard_support s = kc_reflector_shard_support(inf->parts[i].reflector);
    if (s == KC_SHARD_SUPPORT_NONE) return KC_SHARD_SUPPORT_NONE;
    if (s == KC_SHARD_SUPPORT_SERVER) server++;
  }
  return inf->nparts && server == inf->nparts ? KC_SHARD_SUPPORT_SERVER : KC_SHARD_SUPPORT_UNKNOWN;
}

const char *kc_informer_config_error(const kc_informer *inf) {
  for (size_t i = 0; i < inf->nparts; i++) {
    const char *e = kc_reflector_config_error(inf->parts[i].reflector);
    if (e) return e;
  }
  return NULL;
}

bool kc_informer_synced(const kc_informer *inf) {
  for (size_t i = 0; i < inf->nparts; i++)
    if (!kc_reflector_stats_get(inf->parts[i].reflector)->synced) return false;
  return true;
}

const kc_informer_spec *kc_informer_spec_get(const kc_informer *inf) { return inf->spec; }
const char *kc_informer_resource(const kc_informer *inf) { return inf->resource_name; }
bool kc_informer_namespaced(const kc_informer *inf) { return inf->namespaced; }

/* The part that holds namespace ns, or NULL when ns is absent (= all). */
static part *part_for(kc_informer *inf, kc_str ns, bool *all) {
  *all = false;
  if (inf->nparts == 1) return &inf->parts[0];
  if (!ns.ptr) {
    *all = true;
    return NULL;
  }
  for (size_t i = 0; i < inf->nparts; i++)
    if (kc_str_eq_c(ns, inf->parts[i].namespace_)) return &inf->parts[i];
  return NULL;
}

int kc_informer_observed_rv(kc_informer *inf, kc_str ns, uint64_t *rv) {
  bool all;
  part *p = part_for(inf, ns, &all);
  /* (the only part is returned whatever ns is: it must be ns's) */
  if (!p || (p->namespace_ && !kc_str_eq_c(ns, p->namespace_))) return -ENOENT;
  if (p->rv_opaque) return -ENOTSUP;
  *rv = p->observed_rv;
  return p->observed_rv ? 1 : 0;
}

void kc_informer_resource_ref(const kc_informer *inf, kc_resource_ref *out) {
  *out = (kc_resource_ref){inf->api_path, inf->resource, inf->namespaced};
}

kc_obj *kc_informer_get(kc_informer *inf, kc_str ns, kc_str name) {
  bool all;
  part *p = part_for(inf, ns, &all);
  return p ? kc_store_get(p->store, ns, name) : NULL;
}

int kc_informer_list(kc_informer *inf, kc_str ns, const kc_label_selector *sel, kc_obj_vec *out) {
  bool all;
  part *p = part_for(inf, ns, &all);
  if (p) return kc_store_list(p->store, ns, sel, out);
  if (!all) return 0;
  int total = 0;
  for (size_t i = 0; i < inf->nparts; i++) {
    int rc = kc_store_list(inf->parts[i].store, ns, sel, out);
    if (rc < 0) return rc;
    total += rc;
  }
  return total;
}

int kc_informer_by_index(kc_informer *inf, const char *index, kc_str value, kc_obj_vec *out) {
  int total = 0;
  for (size_t i = 0; i < inf->nparts; i++) {
    int rc = kc_store_by_index(inf->parts[i].store, index, value, out);
    if (rc < 0) return rc;
    total += rc;
  }
  return total;
}

int kc_informer_check_consistency(kc_informer *inf) {
  int rc = 0;
  for (size_t i = 0; i < inf->nparts; i++) {
    int r = kc_consistency_run(inf->parts[i].check);
    if (r < 0) rc = r;
  }
  return rc;
}

void kc_informer_credentials_changed(kc_informer *inf) {
  for (size_t i = 0; i < inf->nparts; i++)
    if (inf->parts[i].reflector) kc_reflector_credentials_changed(inf->parts[i].reflector);
}

void kc_informer_stats_get(kc_informer *inf, kc_informer_stats *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < inf->nparts; i++) {
    const kc_reflector_stats *rs = kc_reflector_stats_get(inf->parts[i].reflector);
    out->objects += kc_store_count(inf->parts[i].store);
    out->bytes += kc_store_bytes(inf->parts[i].store);
    out->lists += rs->lists;
    out->watches += rs->watches;
    out->relists += rs->relists;
    out->events += rs->events;
    out->errors += rs->errors;
    out->history_checks += rs->history_checks;
    out->history_changes += rs->history_changes;
    out->identity_checks += rs->identity_checks;
    out->identity_changes += rs->identity_changes;
    if (inf->parts[i].check) {
      const kc_consistency_stats *cs = kc_consistency_stats_get(inf->parts[i].check);
      out->consistency_checks += cs->checks;
      out->consistency_diffs += cs->diffs;
      out->consistency_skipped += cs->skipped;
    }
    out->streaming_lists += rs->streaming_lists;
    out->streaming_attempts += rs->streaming_attempts;
    out->streaming_fallbacks += rs->streaming_fallbacks;
    out->decode_pauses += rs->decode_pauses;
    out->rejected += rs->rejected;
    out->restores += rs->restores;
    out->restored += rs->restored;
    out->restore_failures += rs->restore_failures;
    if (i == 0) memcpy(out->resource_version, rs->resource_version, sizeof out->resource_version);
  }
}
