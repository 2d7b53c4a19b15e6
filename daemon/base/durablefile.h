/* SPDX-License-Identifier: Apache-2.0 */
/* durablefile: replaces a file so that a crash or power loss leaves either
 * the old content or the new one, whole, never a mix.
 *
 * The new content goes to a temporary file in the same directory
 * (".NAME.tmp.PID", created with O_EXCL and O_NOFOLLOW under the mode
 * given, so it is never readable wider than the final file), is fsync'd,
 * renamed over NAME, and the directory is fsync'd so the rename itself
 * survives. A temporary file of the same name left by a crashed process of
 * the same pid is removed first. Abort (or any failed step) removes the
 * temporary file.
 *
 * The snapshot writer (watch/snapfile) streams hundreds of MiB through it
 * (fd is exposed for its header's pwrite); small files (the paused
 * controllers) use kc_durable_write_file.
 *
 * Context: any thread; one kc_durable_file is used by one thread at a time.
 * Errors: 0 or a negative errno; why (may be NULL) gets the failed step
 * ("fsync: No space left on device").
 * Ownership: the caller owns the struct; create fills it, commit and abort
 * release what it holds (both are safe on a struct create failed on).
 */
#ifndef KC_DURABLEFILE_H
#define KC_DURABLEFILE_H

#include <stddef.h>
#include <sys/types.h>

typedef struct kc_durable_file {
  int fd; /* the temporary file, open for writing; -1 when none */
  char *dir, *name, *tmp;
} kc_durable_file;

int kc_durable_create(kc_durable_file *f, const char *dir, const char *name, mode_t mode,
                      char *why, size_t cap);
/* All of p, retrying short writes and EINTR. */
int kc_durable_write(kc_durable_file *f, const void *p, size_t n, char *why, size_t cap);
/* fsync, close, rename over dir/name, fsync of dir; releases f either way. */
int kc_durable_commit(kc_durable_file *f, char *why, size_t cap);
/* Closes and removes the temporary file; releases f. */
void kc_durable_abort(kc_durable_file *f);

/* create + write + commit of one buffer. */
int kc_durable_write_file(const char *dir, const char *name, mode_t mode, const void *p,
                          size_t n, char *why, size_t cap);
/* Removes dir/name (absent is fine) and fsyncs dir. */
int kc_durable_remove(const char *dir, const char *name, char *why, size_t cap);

#endif
