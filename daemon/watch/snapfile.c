/* SPDX-License-Identifier: Apache-2.0 */
/* snapfile: see snapfile.h. */
#include "watch/snapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/crc32c.h"
#include "base/durablefile.h"

#define WHY(...) (why && cap ? (void)snprintf(why, cap, __VA_ARGS__) : (void)0)

/* ---- header ---------------------------------------------------------------- */

static bool clean_value(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) return false;
  return true;
}

int kc_snapfile_render_header(const kc_snapfile_header *h, char *buf, char *why, size_t cap) {
  const char *vals[] = {h->kctrld_version, h->cluster, h->cluster_uid, h->identity,
                        h->resource_version};
  const char *names[] = {"kctrld-version", "cluster", "cluster-uid", "identity", "resource-version"};
  for (size_t i = 0; i < 5; i++)
    if (!clean_value(vals[i])) {
      WHY("the %s holds a control character", names[i]);
      return -EINVAL;
    }
  int n = snprintf(buf, KC_SNAPFILE_HEADER_BYTES,
                   KC_SNAPFILE_MAGIC "%" PRIu32 "\n"
                   "kctrld-version: %s\ncluster: %s\ncluster-uid: %s\nidentity-hash: %016" PRIx64 "\n"
                   "identity: %s\nresource-version: %s\nwritten-unix-ms: %" PRId64 "\n"
                   "objects: %" PRIu64 "\nbody-bytes: %" PRIu64 "\nbody-crc32c: %08" PRIx32 "\n",
                   h->format, h->kctrld_version, h->cluster, h->cluster_uid, h->identity_hash, h->identity,
                   h->resource_version, h->written_unix_ms, h->objects, h->body_bytes,
                   h->body_crc32c);
  /* header-crc32c line (29 bytes), the empty line and at least the final newline */
  if (n < 0 || (size_t)n + 29 + 2 > KC_SNAPFILE_HEADER_BYTES) {
    WHY("the header does not fit in %d bytes", KC_SNAPFILE_HEADER_BYTES);
    return -EINVAL;
  }
  uint32_t hc = kc_crc32c(0, buf, (size_t)n);
  n += snprintf(buf + n, KC_SNAPFILE_HEADER_BYTES - (size_t)n, "header-crc32c: %08" PRIx32 "\n\n", hc);
  memset(buf + n, ' ', KC_SNAPFILE_HEADER_BYTES - (size_t)n - 1);
  buf[KC_SNAPFILE_HEADER_BYTES - 1] = '\n';
  return 0;
}

/* Copies a value into dst[cap]; false when it does not fit. */
static bool take_str(const char *v, size_t n, char *dst, size_t cap) {
  if (n >= cap) return false;
  memcpy(dst, v, n);
  dst[n] = '\0';
  return true;
}

static bool take_u64(const char *v, size_t n, int base, uint64_t *out) {
  if (n == 0 || n > 20) return false;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned d;
    char c = v[i];
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (base == 16 && c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else return false;
    if (x > (UINT64_MAX - d) / (uint64_t)base) return false;
    x = x * (uint64_t)base + d;
  }
  *out = x;
  return true;
}

enum { K_VERSION, K_CLUSTER, K_CLUSTER_UID, K_IDHASH, K_IDENTITY, K_RV, K_WRITTEN, K_OBJECTS, K_BYTES, K_BODYCRC,
       K_HEADERCRC, K_N };
static const char *const key_names[K_N] = {
    "kctrld-version", "cluster", "cluster-uid", "identity-hash", "identity", "resource-version",
    "written-unix-ms", "objects", "body-bytes", "body-crc32c", "header-crc32c"};

int kc_snapfile_parse_header(const char *buf, size_t len, kc_snapfile_header *h, char *why,
                             size_t cap) {
  memset(h, 0, sizeof *h);
  if (len > KC_SNAPFILE_HEADER_BYTES) len = KC_SNAPFILE_HEADER_BYTES;
  size_t ml = strlen(KC_SNAPFILE_MAGIC);
  if (len < ml || memcmp(buf, KC_SNAPFILE_MAGIC, ml) != 0) {
    WHY("not a kctrld snapshot (no \"%s\" line)", "kctrld-snapshot");
    return -EINVAL;
  }
  const char *end = buf + len;
  const char *nl = memchr(buf, '\n', len);
  uint64_t fmt;
  if (!nl || !take_u64(buf + ml, (size_t)(nl - buf) - ml, 10, &fmt) || fmt > UINT32_MAX) {
    WHY("malformed first line");
    return -EINVAL;
  }
  h->format = (uint32_t)fmt;
  if (fmt != KC_SNAPFILE_FORMAT) {
    WHY("format version %" PRIu64 ", this kctrld reads version %d", fmt, KC_SNAPFILE_FORMAT);
    return -EPROTONOSUPPORT;
  }
  /* Fixed order: each line is the next key, so a duplicate or missing one
   * is malformed. */
  const char *p = nl + 1;
  for (int k = 0; k < K_N; k++) {
    const char *line = p;
    nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) {
      WHY("header cut off before %s", key_names[k]);
      return -EINVAL;
    }
    size_t kl = strlen(key_names[k]);
    if ((size_t)(nl - p) < kl + 2 || memcmp(p, key_names[k], kl) != 0 || p[kl] != ':' ||
        p[kl + 1] != ' ') {
      WHY("expected the header line %s", key_names[k]);
      return -EINVAL;
    }
    const char *v = p + kl + 2;
    size_t n = (size_t)(nl - v);
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
        WHY("control character in the header line %s", key_names[k]);
        return -EINVAL;
      }
    uint64_t x = 0;
    bool ok = true;
    switch (k) {
    case K_VERSION: ok = take_str(v, n, h->kctrld_version, sizeof h->kctrld_version); break;
    case K_CLUSTER: ok = take_str(v, n, h->cluster, sizeof h->cluster); break;
    case K_CLUSTER_UID: ok = take_str(v, n, h->cluster_uid, sizeof h->cluster_uid); break;
    case K_IDHASH: ok = n == 16 && take_u64(v, n, 16, &h->identity_hash); break;
    case K_IDENTITY: ok = take_str(v, n, h->identity, sizeof h->identity); break;
    case K_RV: ok = n > 0 && take_str(v, n, h->resource_version, sizeof h->resource_version); break;
    case K_WRITTEN:
      ok = take_u64(v, n, 10, &x) && x <= INT64_MAX;
      h->written_unix_ms = (int64_t)x;
      break;
    case K_OBJECTS: ok = take_u64(v, n, 10, &h->objects); break;
    case K_BYTES: ok = take_u64(v, n, 10, &h->body_bytes); break;
    case K_BODYCRC:
    case K_HEADERCRC:
      ok = n == 8 && take_u64(v, n, 16, &x);
      if (k == K_BODYCRC) h->body_crc32c = (uint32_t)x;
      else if (ok && kc_crc32c(0, buf, (size_t)(line - buf)) != (uint32_t)x) {
        WHY("header checksum mismatch");
        return -EINVAL;
      }
      break;
    }
    if (!ok) {
      WHY("malformed header line %s", key_names[k]);
      return -EINVAL;
    }
    p = nl + 1;
  }
  if (p >= end || *p != '\n') {
    WHY("no empty line after the header");
    return -EINVAL;
  }
  if (strchr(h->resource_version, '"') || strchr(h->resource_version, '\\')) {
    WHY("malformed resource-version");
    return -EINVAL;
  }
  return 0;
}

/* ---- writing ---------------------------------------------------------------- */

#define FLUSH_AT (1u << 20)

struct kc_snapfile_writer {
  kc_durable_file file;
  char rv[64];
  kc_buf out; /* pending body bytes */
  uint64_t body_bytes, objects;
  uint32_t crc;
  int err;
};

static int flush_out(kc_snapfile_writer *w) {
  if (w->err) return w->err;
  if (w->out.err) return w->err = -ENOMEM;
  if (!w->out.len) return 0;
  w->crc = kc_crc32c(w->crc, w->out.p, w->out.len);
  w->body_bytes += w->out.len;
  int rc = kc_durable_write(&w->file, w->out.p, w->out.len, NULL, 0);
  w->out.len = 0;
  return rc < 0 ? (w->err = rc) : 0;
}

void kc_snapfile_abort(kc_snapfile_writer *w) {
  if (!w) return;
  kc_durable_abort(&w->file);
  kc_buf_free(&w->out);
  free(w);
}

int kc_snapfile_create(const char *dir, const char *name, const char *resource_version,
                       kc_snapfile_writer **out, char *why, size_t cap) {
  *out = NULL;
  if (!clean_value(resource_version) || strchr(resource_version, '"') ||
      strchr(resource_version, '\\') || strlen(resource_version) >= 64 || !*resource_version) {
    WHY("unusable resourceVersion");
    return -EINVAL;
  }
  kc_snapfile_writer *w = calloc(1, sizeof *w);
  if (!w) return -ENOMEM;
  snprintf(w->rv, sizeof w->rv, "%s", resource_version);
  int rc = kc_durable_create(&w->file, dir, name, 0600, why, cap);
  if (rc < 0) {
    free(w);
    return rc;
  }
  /* room for the header, written last */
  if (lseek(w->file.fd, KC_SNAPFILE_HEADER_BYTES, SEEK_SET) < 0) {
    int e = -errno;
    WHY("seek: %s", strerror(errno));
    kc_snapfile_abort(w);
    return e;
  }
  kc_buf_printf(&w->out, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{\"resourceVersion\":\"%s\"},\"items\":[", w->rv);
  *out = w;
  return 0;
}

static int add_span(void *ud, const char *p, size_t n) {
  kc_snapfile_writer *w = ud;
  kc_buf_add(&w->out, p, n);
  return w->out.err ? -ENOMEM : 0;
}

int kc_snapfile_add(kc_snapfile_writer *w, const kc_obj *obj) {
  if (w->err) return w->err;
  kc_buf_puts(&w->out, w->objects ? ",\n" : "\n");
  int rc = kc_obj_text_each(obj, add_span, w);
  if (rc < 0) return w->err = rc;
  w->objects++;
  if (w->out.len >= FLUSH_AT) return flush_out(w);
  return w->out.err ? (w->err = -ENOMEM) : 0;
}

int kc_snapfile_commit(kc_snapfile_writer *w, kc_snapfile_header *h, uint64_t *file_bytes,
                       char *why, size_t cap) {
  kc_buf_puts(&w->out, "\n]}\n");
  int rc = flush_out(w);
  if (rc < 0) {
    WHY("write: %s", strerror(-rc));
    kc_snapfile_abort(w);
    return rc;
  }
  h->format = KC_SNAPFILE_FORMAT;
  h->objects = w->objects;
  h->body_bytes = w->body_bytes;
  h->body_crc32c = w->crc;
  snprintf(h->resource_version, sizeof h->resource_version, "%s", w->rv);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h->written_unix_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  char block[KC_SNAPFILE_HEADER_BYTES];
  if ((rc = kc_snapfile_render_header(h, block, why, cap)) < 0) {
    kc_snapfile_abort(w);
    return rc;
  }
  if (pwrite(w->file.fd, block, sizeof block, 0) != (ssize_t)sizeof block) {
    rc = errno ? -errno : -EIO;
    WHY("write: %s", strerror(-rc));
    kc_snapfile_abort(w);
    return rc;
  }
  uint64_t body = w->body_bytes;
  rc = kc_durable_commit(&w->file, why, cap);
  if (rc == 0 && file_bytes) *file_bytes = KC_SNAPFILE_HEADER_BYTES + body;
  kc_buf_free(&w->out);
  free(w);
  return rc;
}

/* ---- opening ----------------------------------------------------------------- */

int kc_snapfile_open(const char *path, kc_snapfile_header *h, int *fd_out, char *why, size_t cap) {
  *fd_out = -1;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = -errno;
    if (e != -ENOENT) WHY("cannot open: %s", strerror(errno));
    return e;
  }
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) < 0) {
    rc = -errno;
    WHY("stat: %s", strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    rc = -EINVAL;
    WHY("not a regular file");
  } else if (st.st_uid != geteuid() || (st.st_mode & 022)) {
    rc = -EPERM;
    WHY("owned by another user or writable by others (mode %04o): not trusted",
        (unsigned)(st.st_mode & 07777));
  }
  char block[KC_SNAPFILE_HEADER_BYTES];
  ssize_t n = 0;
  if (rc == 0) {
    size_t got = 0;
    while (got < sizeof block && (n = read(fd, block + got, sizeof block - got)) > 0) got += (size_t)n;
    if (n < 0) {
      rc = -errno;
      WHY("read: %s", strerror(errno));
    } else {
      rc = kc_snapfile_parse_header(block, got, h, why, cap);
      if (rc == 0 && got < sizeof block) {
        rc = -EINVAL;
        WHY("cut off in its header");
      }
    }
  }
  if (rc == 0 && (uint64_t)st.st_size != KC_SNAPFILE_HEADER_BYTES + h->body_bytes) {
    rc = -EINVAL;
    WHY("%lld bytes where its header says %" PRIu64, (long long)st.st_size,
        KC_SNAPFILE_HEADER_BYTES + h->body_bytes);
  }
  if (rc < 0) {
    close(fd);
    return rc;
  }
  *fd_out = fd;
  return 0;
}
