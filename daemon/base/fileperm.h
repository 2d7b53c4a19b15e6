/* SPDX-License-Identifier: Apache-2.0 */
/* fileperm: the one permission check for files the daemon trusts (plugins,
 * the config file, kubeconfig files and the credentials they name).
 *
 * Rules (kc_fileperm_check): the file is a regular file, not writable by its
 * group or by other users, and its directory is not writable by them unless
 * it has the sticky bit (otherwise the file could be replaced); with
 * KC_FILEPERM_OWNER its owner must also be root or the daemon's uid. Files
 * holding credentials should not be readable by group/others either: that
 * only warns (kc_fileperm_warn_readable), as a service account token
 * mounted by the kubelet may well be 0644.
 *
 * Override: --allow-insecure-permissions (kc_fileperm_set_allow_insecure)
 * turns every -EPERM refusal into a warning naming the file; a file that is
 * not a regular file is refused regardless.
 *
 * Context: any thread. The override is set once at startup, before any
 * thread exists, and read atomically.
 * Errors: 0 or a negative errno; refusals write a one-line message naming
 * the file, its mode and the fix into err.
 */
#ifndef KC_FILEPERM_H
#define KC_FILEPERM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

enum {
  KC_FILEPERM_OWNER = 1, /* also require owner root or the daemon's euid */
};

/* Sets / reads the override (default false). */
void kc_fileperm_set_allow_insecure(bool allow);
bool kc_fileperm_allow_insecure(void);

/* Checks `path` whose status is *st (from fstat of the opened file, or stat).
 * `what` names the file in messages ("plugin", "config file", "kubeconfig");
 * `refusing` says what is refused ("load code others can change"). Returns
 * 0, -EINVAL (not a regular file), -EPERM (a rule above, unless overridden:
 * then a warning is logged and 0 returned) or -ENOMEM. */
int kc_fileperm_check(const char *what, const char *path, const struct stat *st,
                      const char *refusing, unsigned flags, char *err, size_t errlen);

/* stat(2) + kc_fileperm_check. A missing file is -ENOENT without a message,
 * other stat errors -errno with one. */
int kc_fileperm_check_path(const char *what, const char *path, const char *refusing,
                           unsigned flags, char *err, size_t errlen);

/* Logs a warning when *st (or, with st NULL, stat of path; errors ignored)
 * is readable by group or others; `what` says what the file holds, e.g.
 * "kubeconfig holding a bearer token". Returns true when it warned. */
bool kc_fileperm_warn_readable(const char *what, const char *path, const struct stat *st);

#endif
