/* SPDX-License-Identifier: Apache-2.0 */
/* kbuild_int: the object builder's state (struct kc_obj_builder), shared by
 * kbuild.c (the events that build an object's text) and kbuild_finish.c
 * (the finished object's layout). Included only by those two; kbuild.h is
 * the interface.
 *
 * Threads: a builder is used by one thread at a time (kbuild.h).
 */
#ifndef KC_KBUILD_INT_H
#define KC_KBUILD_INT_H

#include "kube/kbuild.h"

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "json/jsonlex.h"

#define KIND_PRE "\"kind\":\""             /* "kind":"   */
#define APIV_PRE "\"apiVersion\":\""       /* "apiVersion":"   */
#define KIND_PRE_LEN (sizeof KIND_PRE - 1)
#define APIV_PRE_LEN (sizeof APIV_PRE - 1)

/* Slices recorded as offsets into the output buffer (it may move). */
enum field { F_KIND, F_APIVERSION, F_NAMESPACE, F_NAME, F_UID, F_RV, F_CTS, F_COUNT };

#define NO_OFF UINT32_MAX
#define MAX_SEGS 16

typedef struct dpath {
  kc_path_seg segs[MAX_SEGS];
  uint32_t nseg;
} dpath;

/* A fast level (raw mode, nothing inside can matter: no role, no drop or
 * capture path, not skipped) lets keys, scalars and containers inside it
 * return at once; most of an object's text is in such levels. Only `fast`
 * and `is_array` are set in a fast level opened inside a fast level. */
enum { FAST_NO = 0, FAST_MAP, FAST_ARRAY };

typedef struct level {
  uint64_t drop;     /* drop paths whose segments matched down to here */
  uint64_t cap;      /* capture paths whose segments matched down to here */
  uint64_t cap_seen; /* capture paths that met their key here: later duplicates don't count */
  uint32_t nelem;    /* arrays with capture paths: elements begun so far */
  uint8_t is_array;
  uint8_t has_elems; /* an element was emitted: the next needs a comma */
  uint8_t role;
  uint8_t skip;      /* inside a dropped subtree: emit nothing */
  uint8_t fast;      /* FAST_*, see above */
} level;

typedef struct lab {
  uint32_t koff, klen, voff, vlen;
} lab;

/* A captured value: bytes [off, off+len) of cbuf, for group `group`. */
typedef struct cent {
  uint32_t group, off, len;
} cent;

struct kc_obj_builder {
  dpath *paths;
  uint32_t npaths;
  char *pathbuf;
  bool metadata_only;
  size_t max_bytes;

  /* Object type to stamp (kc_transform "Object type"): the members to
   * insert, preformatted as "kind":"K","apiVersion":"V", (type_len bytes,
   * trailing comma included); NULL when none. */
  char *type;
  uint32_t type_len;
  uint32_t kind_len, apiv_len; /* K and V */

  kc_buf out; /* the object's text; max: the size limit (+ slack) */

  unsigned depth; /* open containers; the root object is depth 1 */
  bool done;

  /* Raw mode (streaming decoder): the text is copied from the input as
   * received, span by span, instead of being re-emitted token by token;
   * the lexer's position, valid inside callbacks, says where a token ends. */
  bool raw;
  kc_jsonlex *lx;
  const char *in;      /* current input chunk */
  size_t in_len;
  size_t copy_from;    /* input bytes before this are copied or dropped */
  bool in_drop;        /* inside a dropped member: copy nothing */
  unsigned drop_depth; /* depth of the map holding the dropped member */
  bool strip_comma;    /* a dropped first member: eat the next leading ',' */
  level st[KC_OBJ_MAX_DEPTH + 1];

  /* Field capture (kbuild.h): compiled paths, their groups and lengths. */
  dpath *cpaths;
  char *cpathbuf;
  uint32_t ncap, ngroups;
  uint32_t cgroup[KC_CAPTURE_MAX_PATHS];
  uint8_t cnseg[KC_CAPTURE_MAX_PATHS];
  uint64_t ctag; /* 0: no capture */
  kc_buf cvals;  /* rendered values of the current object (max: UINT32_MAX) */
  cent *cents;
  size_t ncent, capcent;

  /* Context of the next value in a map, set by the key. */
  uint8_t v_role, v_skip;
  uint64_t v_drop, v_cap;
  uint32_t v_koff, v_klen;

  struct {
    uint32_t off, len;
  } f[F_COUNT];
  int64_t generation;
  bool deleting;
  lab *labels;
  size_t nlabels, caplabels;
  kc_status status;
  bool iee;

  /* Shared values (kbuild.h): values of at least share_min bytes (0: off)
   * go to the pool; pend holds this object's pieces until finish. */
  size_t share_min;
  size_t share_start; /* out offset of the fieldsV1 value being read */
  kc_obj_shared *pend;
  size_t npend, cappend;
  int rc; /* the first error's code */
  char err[200];
  char shape[200]; /* the first shape problem of this object ("" = none) */
};

#endif
