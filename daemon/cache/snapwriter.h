/* SPDX-License-Identifier: Apache-2.0 */
/* snapwriter: writes a set of cache snapshots (snapfile.h), one file per
 * store, on a libuv pool thread (uv_queue_work), so that the loop keeps
 * serving (probes, metrics) while hundreds of MiB are serialized, written
 * and fsync'd at a stop.
 *
 * Owns the stores handed to it (kc_snapwriter_add): whoever filled a store
 * gives it up whole (informer.h kc_informer_close_saving), so nothing on the
 * loop can write, read or free it while the pool thread lists it; the pool
 * thread frees each store once its file is written. Only the writer's own
 * fields cross threads: the loop fills them before uv_queue_work and reads
 * the results in the after-work callback (libuv's queue mutex orders both),
 * and the cancel flag is atomic.
 *
 * Cancel (a second SIGTERM): the pool thread stops at the next object (or
 * before the next file), removes the temporary file of the file being
 * written and writes no further one; files already renamed stay, complete.
 * An fsync or rename under way is not interrupted.
 *
 * Threads: new/add/start/free on the loop thread; cancel on any thread. The
 * done callback runs on the loop thread, after which the caller frees the
 * writer. Each file's outcome is logged from the loop (name, objects,
 * bytes, write time, that it ran off the loop).
 * Errors: 0 or a negative errno.
 */
#ifndef KC_SNAPWRITER_H
#define KC_SNAPWRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cache/store.h"
#include "watch/snapfile.h"

typedef struct kc_snapwriter kc_snapwriter;

typedef struct kc_snapwriter_result {
  size_t written;      /* files renamed into place */
  size_t failed;       /* files not written (error or cancel) */
  bool cancelled;      /* kc_snapwriter_cancel ran before the end */
  double thread_ms;    /* time on the pool thread, all files */
} kc_snapwriter_result;

/* Snapshots go to dir (copied). */
int kc_snapwriter_new(const char *dir, kc_snapwriter **out);
/* Queues one file: `store` (owned by the writer from now on, also on
 * error: it is then freed), written as file `name` of the directory with
 * the content's resourceVersion `rv`; `h`'s identity fields (kctrld
 * version, cluster, cluster uid, identity hash and text) are copied, the
 * rest is filled when written. `what` names the scope in the log. Before
 * kc_snapwriter_start only (-EALREADY after). */
int kc_snapwriter_add(kc_snapwriter *w, kc_store *store, const char *name, const char *rv,
                      const kc_snapfile_header *h, const char *what);
/* Files queued. */
size_t kc_snapwriter_files(const kc_snapwriter *w);
/* Starts writing on a pool thread; done(ud, result) runs on the loop once
 * every file was written or given up (never inside this call). A writer
 * with no file completes too. -EALREADY when started already, or uv's
 * error (then nothing runs: the caller frees the writer). */
int kc_snapwriter_start(kc_snapwriter *w, uv_loop_t *loop,
                        void (*done)(void *ud, const kc_snapwriter_result *res), void *ud);
/* Any thread. See "Cancel". Before start: start then writes nothing. */
void kc_snapwriter_cancel(kc_snapwriter *w);
/* Loop thread: not started, or after done ran. Frees the stores not
 * written. NULL is a no-op. */
void kc_snapwriter_free(kc_snapwriter *w);

/* --- Test seam: for tests only, not called by the daemon --- */
/* gate(ud, i) runs on the pool thread once file i's temporary file exists,
 * before its first object (it may block: the loop keeps running
 * meanwhile). Before start. */
void kc_snapwriter_set_gate(kc_snapwriter *w, void (*gate)(void *ud, size_t file), void *ud);

#endif
