/* SPDX-License-Identifier: Apache-2.0 */
/* pausedset: the names of the controllers `kctrld ctl pause` paused, so
 * that a pause outlasts the controller object: a reload that re-creates
 * the controller and, with a state directory, a restart
 * (docs/operations.md "kctrld ctl"). The daemon applies it to each
 * controller it creates; the admin socket changes it.
 *
 * Owns the set and, when it has a directory, the file DIR/paused-controllers:
 * YAML read with json/yamltree.h,
 *     # comment lines
 *     paused:
 *       - "web"
 * each name 1-63 characters of [A-Za-z0-9._-] (a controller name). It is
 * written after every change: DIR/.paused-controllers.tmp.PID, mode 0600
 * (O_EXCL, O_NOFOLLOW), fsync'd, renamed over the file, DIR fsync'd; an
 * empty set removes the file. A file that cannot be read or parsed is
 * ignored (nothing is paused) with a warning naming it and what is wrong.
 *
 * Threads: loop thread only. Errors: 0 or a negative errno; `why` says
 * what is wrong in a sentence without the path (callers add it).
 */
#ifndef KC_PAUSEDSET_H
#define KC_PAUSEDSET_H

#include <stdbool.h>
#include <stddef.h>

#define KC_PAUSEDSET_FILE "paused-controllers"
#define KC_PAUSEDSET_MAX_BYTES 65536u /* a longer file is refused */

typedef struct kc_paused_set kc_paused_set;

/* dir: the state directory (copied), or NULL: in memory only. NULL on ENOMEM. */
kc_paused_set *kc_paused_set_new(const char *dir);
void kc_paused_set_free(kc_paused_set *p); /* NULL: no-op */

/* Reads DIR/paused-controllers into the set (replacing it). 0 also when
 * there is no file or no directory; a bad file: warning, empty set, and
 * its negative errno. */
int kc_paused_set_load(kc_paused_set *p);

/* Parses a file's text: *names (malloc'd array of malloc'd strings,
 * kc_paused_set_names_free) and *n. -EINVAL with why for anything else
 * than the format above (a bad name, a duplicate, another key). */
int kc_paused_set_parse(const char *buf, size_t len, char ***names, size_t *n, char *why,
                        size_t cap);
void kc_paused_set_names_free(char **names, size_t n);

bool kc_paused_set_has(const kc_paused_set *p, const char *name);
size_t kc_paused_set_count(const kc_paused_set *p);
const char *kc_paused_set_name(const kc_paused_set *p, size_t i);

/* Pauses (paused true) or resumes name and writes the file when there is a
 * directory. The set changes even when the write fails: -errno with why. */
int kc_paused_set_put(kc_paused_set *p, const char *name, bool paused, char *why, size_t cap);

/* Drops every name known(name, ud) says is not a controller any more, with
 * an info line each, and writes the file when one was dropped. */
void kc_paused_set_retain(kc_paused_set *p, bool (*known)(const char *name, void *ud), void *ud);

#endif
