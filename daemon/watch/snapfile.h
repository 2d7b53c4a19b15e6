/* SPDX-License-Identifier: Apache-2.0 */
/* snapfile: the file format of a cache snapshot (one watched scope's objects
 * and the resourceVersion they are complete at), its atomic writing and the
 * checks of its header on reading. What it is for: docs/design.md
 * "Snapshots and warm restarts".
 *
 * Layout: a header block of exactly KC_SNAPFILE_HEADER_BYTES, then the body.
 *   - The header is text, one "key: value" line each, in this order:
 *       kctrld-snapshot FORMAT   (first line; FORMAT = KC_SNAPFILE_FORMAT)
 *       kctrld-version, cluster, cluster-uid (the kube-system Namespace's
 *       uid, client/clusterid.h; empty when unknown), identity-hash (16 hex
 *       digits), identity,
 *       resource-version, written-unix-ms, objects, body-bytes,
 *       body-crc32c (8 hex digits), header-crc32c (8 hex digits, last: the
 *       CRC-32C of every header byte before its line)
 *     then an empty line; the rest of the block is padding (spaces, and a
 *     newline as its last byte). Values hold no control character.
 *   - The body is one JSON List document,
 *       {"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":RV},"items":[
 *       OBJECT,
 *       OBJECT
 *       ]}
 *     each OBJECT the object's JSON as the cache holds it (after the
 *     informer's transform), so that reading it back is an ordinary list
 *     decode (decodepool.h). body-bytes and body-crc32c cover it whole.
 * A reader trusts nothing before both checksums, the sizes and the object
 * count agree; the body's checksum can only be known at its end, so the
 * caller collects the objects and applies them once it matches.
 *
 * Writing: DIR/.NAME.tmp.PID is created with mode 0600 (O_EXCL, O_NOFOLLOW),
 * written, fsync'd, renamed over DIR/NAME, and DIR is fsync'd; any failure
 * removes the temporary file and leaves an older DIR/NAME as it was.
 *
 * Threads: any thread, one writer object per thread at a time.
 * Errors: 0 or a negative errno; `why` (when given) says what is wrong in a
 * sentence that names no path (callers add it).
 */
#ifndef KC_SNAPFILE_H
#define KC_SNAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "kube/kobj.h"

#define KC_SNAPFILE_FORMAT 1
#define KC_SNAPFILE_HEADER_BYTES 4096
#define KC_SNAPFILE_MAGIC "kctrld-snapshot "

typedef struct kc_snapfile_header {
  uint32_t format;            /* KC_SNAPFILE_FORMAT */
  char kctrld_version[64];
  char cluster[512];          /* the API server the objects came from */
  char cluster_uid[64];       /* the cluster identity (clusterid.h); "" when unknown */
  uint64_t identity_hash;     /* hash of the canonical identity of the scope */
  char identity[2048];        /* its readable form (informational) */
  char resource_version[64];
  int64_t written_unix_ms;
  uint64_t objects;
  uint64_t body_bytes;
  uint32_t body_crc32c;
} kc_snapfile_header;

/* Parses and checks a header block: buf[0..len) holds the file's first
 * bytes (at most KC_SNAPFILE_HEADER_BYTES are read). -EINVAL with `why` for
 * anything malformed, truncated or not matching its checksum;
 * -EPROTONOSUPPORT for another format version (h->format is set). */
int kc_snapfile_parse_header(const char *buf, size_t len, kc_snapfile_header *h, char *why,
                             size_t cap);
/* Renders a header block (KC_SNAPFILE_HEADER_BYTES into buf). -EINVAL when a
 * value holds a control character or the block would not hold it all
 * (`why` says which). */
int kc_snapfile_render_header(const kc_snapfile_header *h, char *buf, char *why, size_t cap);

typedef struct kc_snapfile_writer kc_snapfile_writer;
/* Starts DIR/NAME's temporary file; resource_version goes into the body's
 * list metadata (it must hold no '"', '\\' or control character). */
int kc_snapfile_create(const char *dir, const char *name, const char *resource_version,
                       kc_snapfile_writer **out, char *why, size_t cap);
/* Appends one object's JSON. */
int kc_snapfile_add(kc_snapfile_writer *w, const kc_obj *obj);
/* Ends the body, fills h's objects, body-bytes, body-crc32c,
 * written-unix-ms and resource-version, writes the header and makes the file
 * DIR/NAME (see "Writing"). *file_bytes: the file's size. Frees w, also on
 * failure. */
int kc_snapfile_commit(kc_snapfile_writer *w, kc_snapfile_header *h, uint64_t *file_bytes,
                       char *why, size_t cap);
/* Removes the temporary file and frees w. NULL is a no-op. */
void kc_snapfile_abort(kc_snapfile_writer *w);

/* Opens `path` for reading and checks what can be checked before the body
 * is read: a regular file of this user's, writable by nobody else, a header
 * that parses, and a size of header + body-bytes. On success *fd is
 * positioned at the body (the caller closes it). -ENOENT (no message) when
 * there is no file. */
int kc_snapfile_open(const char *path, kc_snapfile_header *h, int *fd, char *why, size_t cap);

#endif
