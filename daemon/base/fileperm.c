/* SPDX-License-Identifier: Apache-2.0 */
/* fileperm: see fileperm.h. */
#include "base/fileperm.h"

#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

#define COMPONENT "fileperm"

static atomic_bool allow_insecure;

void kc_fileperm_set_allow_insecure(bool allow) { atomic_store(&allow_insecure, allow); }
bool kc_fileperm_allow_insecure(void) { return atomic_load(&allow_insecure); }

__attribute__((format(printf, 3, 4))) static void put(char *err, size_t errlen, const char *fmt,
                                                      ...) {
  if (!errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* A -EPERM finding in err: refused, or only a warning under the override. */
static int refuse(char *err, size_t errlen) {
  if (!kc_fileperm_allow_insecure()) return -EPERM;
  kc_warn(COMPONENT, "%s (accepted: --allow-insecure-permissions)", errlen ? err : "");
  if (errlen) err[0] = '\0';
  return 0;
}

int kc_fileperm_check(const char *what, const char *path, const struct stat *st,
                      const char *refusing, unsigned flags, char *err, size_t errlen) {
  if (!S_ISREG(st->st_mode)) {
    put(err, errlen, "%s %s is not a regular file", what, path);
    return -EINVAL;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    put(err, errlen, "%s %s is writable by %s (mode %04o): refusing to %s; run chmod go-w on it",
        what, path, (st->st_mode & S_IWOTH) ? "other users" : "its group",
        (unsigned)(st->st_mode & 07777), refusing);
    int rc = refuse(err, errlen);
    if (rc) return rc;
  }
  if ((flags & KC_FILEPERM_OWNER) && st->st_uid != 0 && st->st_uid != geteuid()) {
    put(err, errlen, "%s %s is owned by uid %u, which is neither root nor the daemon's uid %u",
        what, path, (unsigned)st->st_uid, (unsigned)geteuid());
    int rc = refuse(err, errlen);
    if (rc) return rc;
  }
  char *copy = strdup(path);
  if (!copy) return -ENOMEM;
  struct stat dst;
  const char *dir = dirname(copy);
  int rc = 0;
  if (stat(dir, &dst) == 0 && (dst.st_mode & (S_IWGRP | S_IWOTH)) && !(dst.st_mode & S_ISVTX)) {
    put(err, errlen,
        "%s %s is in directory %s, which is writable by other users (mode %04o) without "
        "the sticky bit: the file could be replaced",
        what, path, dir, (unsigned)(dst.st_mode & 07777));
    rc = refuse(err, errlen);
  }
  free(copy);
  return rc;
}

int kc_fileperm_check_path(const char *what, const char *path, const char *refusing,
                           unsigned flags, char *err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) != 0) {
    int e = errno;
    if (e != ENOENT) put(err, errlen, "cannot stat %s %s: %s", what, path, strerror(e));
    return -e;
  }
  return kc_fileperm_check(what, path, &st, refusing, flags, err, errlen);
}

bool kc_fileperm_warn_readable(const char *what, const char *path, const struct stat *st) {
  struct stat own;
  if (!st) {
    if (stat(path, &own) != 0) return false;
    st = &own;
  }
  if (!(st->st_mode & (S_IRGRP | S_IROTH))) return false;
  kc_warn(COMPONENT, "%s %s is readable by %s (mode %04o); run chmod go-r on it", what, path,
          (st->st_mode & S_IROTH) ? "other users" : "its group", (unsigned)(st->st_mode & 07777));
  return true;
}
