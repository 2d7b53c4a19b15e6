/* SPDX-License-Identifier: Apache-2.0 */
/* snapwriter: see snapwriter.h. */
#include "cache/snapwriter.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

typedef struct job {
  kc_store *store; /* owned until written; NULL once freed */
  char *name, *what;
  char rv[64];
  kc_snapfile_header h;
  /* results, written by the pool thread */
  int rc;
  size_t objects;
  uint64_t bytes;
  double ms;
  char why[600];
} job;

struct kc_snapwriter {
  char *dir;
  job *jobs;
  size_t njobs;
  uv_work_t work; /* work.data = this */
  bool started;
  atomic_bool cancel;
  void (*done)(void *ud, const kc_snapwriter_result *res);
  void *ud;
  void (*gate)(void *ud, size_t file);
  void *gate_ud;
  double thread_ms;
};

int kc_snapwriter_new(const char *dir, kc_snapwriter **out) {
  kc_snapwriter *w = calloc(1, sizeof *w);
  if (!w || !(w->dir = strdup(dir))) {
    free(w);
    return -ENOMEM;
  }
  atomic_init(&w->cancel, false);
  w->work.data = w;
  *out = w;
  return 0;
}

int kc_snapwriter_add(kc_snapwriter *w, kc_store *store, const char *name, const char *rv,
                      const kc_snapfile_header *h, const char *what) {
  if (w->started) {
    kc_store_free(store);
    return -EALREADY;
  }
  job *nj = realloc(w->jobs, (w->njobs + 1) * sizeof *nj);
  if (!nj) {
    kc_store_free(store);
    return -ENOMEM;
  }
  w->jobs = nj;
  job *j = &nj[w->njobs];
  memset(j, 0, sizeof *j);
  j->store = store;
  j->name = strdup(name);
  j->what = strdup(what ? what : name);
  if (!j->name || !j->what || strlen(rv) >= sizeof j->rv) {
    free(j->name), free(j->what);
    kc_store_free(store);
    return !j->name || !j->what ? -ENOMEM : -EINVAL;
  }
  snprintf(j->rv, sizeof j->rv, "%s", rv);
  memcpy(j->h.kctrld_version, h->kctrld_version, sizeof j->h.kctrld_version);
  memcpy(j->h.cluster, h->cluster, sizeof j->h.cluster);
  memcpy(j->h.cluster_uid, h->cluster_uid, sizeof j->h.cluster_uid);
  memcpy(j->h.identity, h->identity, sizeof j->h.identity);
  j->h.identity_hash = h->identity_hash;
  j->rc = -ECANCELED; /* until the pool thread says otherwise */
  w->njobs++;
  return 0;
}

size_t kc_snapwriter_files(const kc_snapwriter *w) { return w->njobs; }

void kc_snapwriter_cancel(kc_snapwriter *w) {
  if (w) atomic_store(&w->cancel, true);
}

void kc_snapwriter_set_gate(kc_snapwriter *w, void (*gate)(void *ud, size_t file), void *ud) {
  w->gate = gate;
  w->gate_ud = ud;
}

/* Pool thread: one file. */
static void write_one(kc_snapwriter *w, job *j, size_t index) {
  kc_obj_vec all = {0};
  kc_snapfile_writer *f = NULL;
  int rc = kc_store_list(j->store, (kc_str){0}, NULL, &all);
  if (rc >= 0) rc = kc_snapfile_create(w->dir, j->name, j->rv, &f, j->why, sizeof j->why);
  if (rc >= 0 && w->gate) w->gate(w->gate_ud, index);
  for (size_t i = 0; rc >= 0 && i < all.n; i++) {
    if (atomic_load_explicit(&w->cancel, memory_order_relaxed)) {
      rc = -ECANCELED;
      break;
    }
    rc = kc_snapfile_add(f, all.v[i]);
  }
  if (rc >= 0) {
    rc = kc_snapfile_commit(f, &j->h, &j->bytes, j->why, sizeof j->why);
  } else {
    kc_snapfile_abort(f); /* the temporary file goes; an older DIR/NAME stays */
  }
  j->objects = all.n;
  j->rc = rc < 0 ? rc : 0;
  kc_obj_vec_release(&all);
}

static void work_main(uv_work_t *req) {
  kc_snapwriter *w = req->data;
  uint64_t t_all = uv_hrtime();
  for (size_t i = 0; i < w->njobs; i++) {
    job *j = &w->jobs[i];
    if (atomic_load(&w->cancel)) break; /* the rest keep rc -ECANCELED */
    uint64_t t0 = uv_hrtime();
    write_one(w, j, i);
    j->ms = (double)(uv_hrtime() - t0) / 1e6;
    /* Nothing else refers to the store (snapwriter.h): its objects go here,
     * not on the loop. */
    kc_store_free(j->store);
    j->store = NULL;
  }
  w->thread_ms = (double)(uv_hrtime() - t_all) / 1e6;
}

static void work_done(uv_work_t *req, int status) {
  kc_snapwriter *w = req->data;
  kc_snapwriter_result res = {.cancelled = atomic_load(&w->cancel) || status == UV_ECANCELED,
                              .thread_ms = w->thread_ms};
  for (size_t i = 0; i < w->njobs; i++) {
    job *j = &w->jobs[i];
    if (j->rc == 0) {
      res.written++;
      kc_info("informer", "%s: snapshot %s/%s: %zu objects at resourceVersion %s, %" PRIu64
              " bytes, written in %.1f ms off the loop thread", j->what, w->dir, j->name, j->objects,
              j->rv, j->bytes, j->ms);
    } else if (j->rc == -ECANCELED) {
      res.failed++;
      kc_warn("informer", "%s: snapshot %s/%s not written: cancelled (an older file of that name "
              "stays as it was)", j->what, w->dir, j->name);
    } else {
      res.failed++;
      kc_error("informer", "%s: cannot write its snapshot in %s: %s", j->what, w->dir,
               j->why[0] ? j->why : strerror(-j->rc));
    }
  }
  w->done(w->ud, &res);
}

int kc_snapwriter_start(kc_snapwriter *w, uv_loop_t *loop,
                        void (*done)(void *ud, const kc_snapwriter_result *res), void *ud) {
  if (w->started) return -EALREADY;
  w->done = done;
  w->ud = ud;
  int rc = uv_queue_work(loop, &w->work, work_main, work_done);
  if (rc == 0) w->started = true;
  return rc;
}

void kc_snapwriter_free(kc_snapwriter *w) {
  if (!w) return;
  for (size_t i = 0; i < w->njobs; i++) {
    kc_store_free(w->jobs[i].store);
    free(w->jobs[i].name), free(w->jobs[i].what);
  }
  free(w->jobs);
  free(w->dir);
  free(w);
}
