/* SPDX-License-Identifier: Apache-2.0 */
/* durablefile: see durablefile.h. */
#include "base/durablefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WHY(...) (why && cap ? (void)snprintf(why, cap, __VA_ARGS__) : (void)0)

static void release(kc_durable_file *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  free(f->dir), free(f->name), free(f->tmp);
  f->dir = f->name = f->tmp = NULL;
}

void kc_durable_abort(kc_durable_file *f) {
  if (!f) return;
  if (f->tmp) unlink(f->tmp);
  release(f);
}

static int fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = fsync(fd) < 0 ? -errno : 0;
  close(fd);
  return rc;
}

int kc_durable_create(kc_durable_file *f, const char *dir, const char *name, mode_t mode,
                      char *why, size_t cap) {
  *f = (kc_durable_file){.fd = -1};
  f->dir = strdup(dir);
  f->name = strdup(name);
  size_t tl = strlen(dir) + strlen(name) + 40;
  f->tmp = malloc(tl);
  if (!f->dir || !f->name || !f->tmp) {
    release(f);
    WHY("out of memory");
    return -ENOMEM;
  }
  snprintf(f->tmp, tl, "%s/.%s.tmp.%ld", dir, name, (long)getpid());
  unlink(f->tmp); /* one left by a crashed process of the same pid */
  f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (f->fd < 0) {
    int e = errno;
    WHY("cannot create the temporary file %s: %s", f->tmp, strerror(e));
    release(f);
    return -e;
  }
  return 0;
}

int kc_durable_write(kc_durable_file *f, const void *p, size_t n, char *why, size_t cap) {
  const char *c = p;
  while (n) {
    ssize_t w = write(f->fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      WHY("write: %s", strerror(e));
      return -e;
    }
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

int kc_durable_commit(kc_durable_file *f, char *why, size_t cap) {
  int rc = 0;
  if (fsync(f->fd) < 0) {
    rc = -errno;
    WHY("fsync: %s", strerror(-rc));
  }
  if (close(f->fd) < 0 && rc == 0) {
    rc = -errno;
    WHY("close: %s", strerror(-rc));
  }
  f->fd = -1;
  char *final = NULL;
  if (rc == 0) {
    size_t fl = strlen(f->dir) + strlen(f->name) + 2;
    if (!(final = malloc(fl))) {
      rc = -ENOMEM;
      WHY("out of memory");
    } else {
      snprintf(final, fl, "%s/%s", f->dir, f->name);
      if (rename(f->tmp, final) < 0) {
        rc = -errno;
        WHY("rename: %s", strerror(-rc));
      }
    }
  }
  free(final);
  if (rc < 0) {
    kc_durable_abort(f);
    return rc;
  }
  free(f->tmp);
  f->tmp = NULL;
  rc = fsync_dir(f->dir);
  if (rc < 0) WHY("fsync of the directory: %s", strerror(-rc));
  release(f);
  return rc;
}

int kc_durable_write_file(const char *dir, const char *name, mode_t mode, const void *p,
                          size_t n, char *why, size_t cap) {
  kc_durable_file f;
  int rc = kc_durable_create(&f, dir, name, mode, why, cap);
  if (rc < 0) return rc;
  if ((rc = kc_durable_write(&f, p, n, why, cap)) < 0) {
    kc_durable_abort(&f);
    return rc;
  }
  return kc_durable_commit(&f, why, cap);
}

int kc_durable_remove(const char *dir, const char *name, char *why, size_t cap) {
  size_t pl = strlen(dir) + strlen(name) + 2;
  char *path = malloc(pl);
  if (!path) {
    WHY("out of memory");
    return -ENOMEM;
  }
  snprintf(path, pl, "%s/%s", dir, name);
  int rc = unlink(path) < 0 && errno != ENOENT ? -errno : 0;
  free(path);
  if (rc < 0) {
    WHY("cannot remove it: %s", strerror(-rc));
    return rc;
  }
  rc = fsync_dir(dir);
  if (rc < 0) WHY("fsync of the directory: %s", strerror(-rc));
  return rc;
}
