/* SPDX-License-Identifier: Apache-2.0 */
/* kbuild: see kbuild.h. The event-driven builder (one malloc per finished
 * object), its raw mode for the streaming decoder, and field capture; the
 * finished object's layout is kbuild_finish.c's, the builder's state
 * kbuild_int.h's. */
#include "kube/kbuild.h"
#include "kube/kbuild_int.h"

#include "base/buf.h"
#include "json/jsonlex.h"
#include "kube/kname.h"
#include "base/sharedtext.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline bool key_is(const char *s, size_t len, const char *lit, size_t litlen) {
  return len == litlen && memcmp(s, lit, len) == 0;
}
#define KEY_IS(s, len, lit) key_is(s, len, lit, sizeof(lit) - 1)

enum role {
  R_NONE = 0,
  R_ROOT,
  R_KIND,
  R_APIVERSION,
  R_METADATA,
  R_NAME,
  R_NAMESPACE,
  R_UID,
  R_RV,
  R_CTS,
  R_GENERATION,
  R_DELTS,
  R_LABELS,
  R_LABEL_VALUE,
  R_ANNOTATIONS,
  R_IEE,
  R_ST_CODE,
  R_ST_STATUS,
  R_ST_REASON,
  R_ST_MESSAGE,
  R_DETAILS,
  R_RETRY_AFTER,
  R_MANAGED,   /* metadata.managedFields (raw mode, sharing on) */
  R_MF_ENTRY,  /* one of its entries */
  R_FIELDSV1,  /* an entry's fieldsV1: a shared value (kbuild.h "Shared values") */
};

static int fail(kc_obj_builder *b, int rc, const char *msg) {
  if (!b->err[0]) {
    snprintf(b->err, sizeof b->err, "%s", msg);
    b->rc = rc;
  }
  return b->rc;
}

/* Records the first reason why the object is not one the API server would
 * send (kc_obj_builder_shape_error); building goes on. */
static void bad_shape(kc_obj_builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad_shape(kc_obj_builder *b, const char *fmt, ...) {
  if (b->shape[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->shape, sizeof b->shape, fmt, ap);
  va_end(ap);
}

static const char *const value_word[] = {"a string", "a number", "a boolean", "null",
                                         "an object", "an array"};
enum { VW_STRING, VW_NUMBER, VW_BOOL, VW_NULL, VW_OBJECT, VW_ARRAY };

/* Shape rules for a value of `role` of type `vw` (kbuild.h
 * kc_obj_builder_shape_error); strings are checked by check_name. */
static void check_value(kc_obj_builder *b, uint8_t role, uint8_t skip, int vw) {
  if (skip) return;
  switch (role) {
  case R_LABELS:
    if (vw != VW_OBJECT && vw != VW_NULL)
      bad_shape(b, "metadata.labels is %s, not an object", value_word[vw]);
    break;
  case R_LABEL_VALUE:
    if (vw != VW_STRING)
      bad_shape(b, "label \"%.*s\" has %s value, not a string",
                (int)(b->v_klen > 63 ? 63 : b->v_klen), b->out.p + b->v_koff, value_word[vw]);
    break;
  case R_NAME:
  case R_NAMESPACE:
    if (vw != VW_STRING && vw != VW_NULL)
      bad_shape(b, "metadata.%s is %s, not a string", role == R_NAME ? "name" : "namespace",
                value_word[vw]);
    break;
  case R_RV:
    /* An opaque string in the API (a number would compare and resume
     * differently); null decodes as absent, as in Go. */
    if (vw != VW_STRING && vw != VW_NULL)
      bad_shape(b, "metadata.resourceVersion is %s, not a string", value_word[vw]);
    break;
  default: break;
  }
}

/* metadata.name / metadata.namespace (decoded text): every resource's names
 * must be valid path segments (kname.h); a '/' would also make the store key
 * ambiguous. */
static void check_name(kc_obj_builder *b, uint8_t role, const char *s, size_t n) {
  const char *bad = kc_name_path_segment_problem(s, n);
  if (bad)
    bad_shape(b, "metadata.%s %s \"%.*s\"", role == R_NAME ? "name" : "namespace", bad,
              (int)(n > 63 ? 63 : n), s);
}

static bool type_ok(kc_str s) {
  if (!s.len || s.len > KC_OBJ_MAX_TYPE) return false;
  for (size_t i = 0; i < s.len; i++)
    if (s.ptr[i] < 0x21 || s.ptr[i] > 0x7e || s.ptr[i] == '"' || s.ptr[i] == '\\') return false;
  return true;
}

int kc_obj_builder_set_type(kc_obj_builder *b, kc_str kind, kc_str api_version) {
  if (!kind.len && !api_version.len) {
    free(b->type);
    b->type = NULL;
    b->type_len = b->kind_len = b->apiv_len = 0;
    return 0;
  }
  if (!type_ok(kind) || !type_ok(api_version)) return -EINVAL;
  size_t n = KIND_PRE_LEN + kind.len + 2 + APIV_PRE_LEN + api_version.len + 2;
  char *t = malloc(n + 1);
  if (!t) return -ENOMEM;
  int w = snprintf(t, n + 1, KIND_PRE "%.*s\"," APIV_PRE "%.*s\",", (int)kind.len, kind.ptr,
                   (int)api_version.len, api_version.ptr);
  if (w < 0 || (size_t)w != n) {
    free(t);
    return -EINVAL;
  }
  free(b->type);
  b->type = t;
  b->type_len = (uint32_t)n;
  b->kind_len = (uint32_t)kind.len;
  b->apiv_len = (uint32_t)api_version.len;
  return 0;
}

void kc_obj_builder_set_max_bytes(kc_obj_builder *b, size_t max_bytes) {
  b->max_bytes = max_bytes ? max_bytes : KC_OBJ_MAX_BYTES;
  if (b->max_bytes > UINT32_MAX - 16) b->max_bytes = UINT32_MAX - 16;
  kc_buf_set_max(&b->out, b->max_bytes + 8); /* slack: reservations round up a little */
}

/* Parses a capture path into dp (segments point into `path`). False when
 * malformed, longer than MAX_SEGS, or starting with kind/apiVersion. */
static bool capture_parse(const char *path, dpath *dp) {
  dp->nseg = 0;
  kc_path_seg sg;
  int rc;
  while ((rc = kc_path_next(&path, &sg, dp->nseg == 0, NULL)) == 1) {
    if (dp->nseg == MAX_SEGS) return false;
    dp->segs[dp->nseg++] = sg;
  }
  if (rc < 0) return false;
  const kc_path_seg *f = &dp->segs[0];
  return !(f->type == KC_PATH_KEY && (key_is(f->key, f->len, "kind", 4) ||
                                  key_is(f->key, f->len, "apiVersion", 10)));
}

uint64_t kc_capture_tag(const kc_capture_spec *c) {
  if (!c || !c->paths || !c->groups || c->npaths == 0 || c->npaths > KC_CAPTURE_MAX_PATHS)
    return 0;
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over (group, path, NUL)... */
  for (size_t i = 0; i < c->npaths; i++) {
    uint32_t g = c->groups[i];
    if (i == 0 ? g != 0 : (g != c->groups[i - 1] && g != c->groups[i - 1] + 1)) return 0;
    dpath dp;
    if (!c->paths[i] || !capture_parse(c->paths[i], &dp)) return 0;
    for (int k = 0; k < 4; k++) h = (h ^ ((g >> (8 * k)) & 0xff)) * 0x100000001b3ULL;
    for (const char *q = c->paths[i];; q++) {
      h = (h ^ (uint8_t)*q) * 0x100000001b3ULL;
      if (!*q) break;
    }
  }
  return h ? h : 1;
}

/* Copies and compiles t->capture; a spec that is not capturable is ignored. */
static int capture_setup(kc_obj_builder *b, const kc_capture_spec *c) {
  uint64_t tag = kc_capture_tag(c);
  if (!tag) return 0;
  size_t total = 0;
  for (size_t i = 0; i < c->npaths; i++) total += strlen(c->paths[i]) + 1;
  b->cpaths = calloc(c->npaths, sizeof *b->cpaths);
  b->cpathbuf = malloc(total);
  if (!b->cpaths || !b->cpathbuf) return -ENOMEM;
  char *w = b->cpathbuf;
  for (size_t i = 0; i < c->npaths; i++) {
    size_t n = strlen(c->paths[i]) + 1;
    memcpy(w, c->paths[i], n);
    if (!capture_parse(w, &b->cpaths[i])) return -EINVAL; /* cannot happen: tag checked */
    w += n;
    b->cgroup[i] = c->groups[i];
    b->cnseg[i] = (uint8_t)b->cpaths[i].nseg;
  }
  b->ncap = (uint32_t)c->npaths;
  b->ngroups = c->groups[c->npaths - 1] + 1;
  b->ctag = tag;
  return 0;
}

const char *kc_transform_drop_problem(const char *path) {
  const char *why = kc_path_problem(path, true);
  if (why) return why;
  kc_path_seg sg[MAX_SEGS];
  int n = kc_path_parse(path, sg, MAX_SEGS, true);
  if (n < 0) return "more than 16 segments";
  if (n == 0) return "empty path"; /* kc_path_problem refuses it first */
  for (int i = 0; i < n; i++)
    if (sg[i].type == KC_PATH_INDEX) return "[N] (one element) cannot be dropped: use []";
  if (sg[n - 1].type == KC_PATH_EACH) return "a drop path cannot end with []";
  return NULL;
}

kc_obj_builder *kc_obj_builder_new(const kc_transform *t, size_t max_bytes) {
  kc_obj_builder *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->share_min = KC_OBJ_SHARE_MIN;
  kc_obj_builder_set_max_bytes(b, max_bytes);
  kc_buf_set_max(&b->cvals, UINT32_MAX);
  if (t) {
    b->metadata_only = t->metadata_only;
    if (t->ndrop > KC_OBJ_MAX_DROP) {
      free(b);
      errno = E2BIG;
      return NULL;
    }
    size_t total = 0;
    for (size_t i = 0; i < t->ndrop; i++) {
      if (!t->drop[i]) goto inval;
      total += strlen(t->drop[i]) + 1;
    }
    if (t->ndrop) {
      b->paths = calloc(t->ndrop, sizeof *b->paths);
      b->pathbuf = malloc(total);
      if (!b->paths || !b->pathbuf) {
        kc_obj_builder_free(b);
        errno = ENOMEM;
        return NULL;
      }
    }
    char *w = b->pathbuf;
    for (size_t i = 0; i < t->ndrop; i++) {
      size_t n = strlen(t->drop[i]) + 1;
      memcpy(w, t->drop[i], n);
      const char *p = w;
      w += n;
      dpath *dp = &b->paths[i];
      if (kc_transform_drop_problem(p)) goto inval;
      int rc = kc_path_parse(p, dp->segs, MAX_SEGS, true);
      if (rc < 0) goto inval; /* cannot happen: checked */
      dp->nseg = (uint32_t)rc;
    }
    b->npaths = (uint32_t)t->ndrop;
    int crc = capture_setup(b, t->capture);
    if (crc == -ENOMEM) {
      kc_obj_builder_free(b);
      errno = ENOMEM;
      return NULL;
    }
    if (crc < 0) goto inval;
    if (t->kind || t->api_version) {
      int rc = kc_obj_builder_set_type(b, kc_str_c(t->kind), kc_str_c(t->api_version));
      if (rc == -ENOMEM) {
        kc_obj_builder_free(b);
        errno = ENOMEM;
        return NULL;
      }
      if (rc < 0 || !b->type) goto inval; /* one of the two missing or empty */
    }
  }
  kc_obj_builder_reset(b);
  return b;
inval:
  kc_obj_builder_free(b);
  errno = EINVAL;
  return NULL;
}

static void release_pending(kc_obj_builder *b) {
  for (size_t i = 0; i < b->npend; i++) kc_shared_text_put(b->pend[i].text);
  b->npend = 0;
}

void kc_obj_builder_set_share_min(kc_obj_builder *b, size_t min_bytes) {
  b->share_min = min_bytes;
}

void kc_obj_builder_free(kc_obj_builder *b) {
  if (!b) return;
  release_pending(b);
  free(b->pend);
  free(b->paths);
  free(b->pathbuf);
  free(b->cpaths);
  free(b->cpathbuf);
  kc_buf_free(&b->cvals);
  free(b->cents);
  kc_buf_free(&b->out);
  free(b->labels);
  free(b->type);
  free(b);
}

void kc_obj_builder_reset(kc_obj_builder *b) {
  release_pending(b);
  kc_buf_reset(&b->out);
  kc_buf_set_max(&b->out, b->max_bytes + 8); /* shared values lowered it */
  b->depth = 0;
  b->done = false;
  for (int i = 0; i < F_COUNT; i++) b->f[i].off = NO_OFF;
  b->generation = 0;
  b->deleting = false;
  b->nlabels = 0;
  kc_status_clear(&b->status);
  b->iee = false;
  b->err[0] = '\0';
  b->shape[0] = '\0';
  b->rc = 0;
  b->in_drop = false;
  b->strip_comma = false;
  kc_buf_reset(&b->cvals);
  b->ncent = 0;
}

bool kc_obj_builder_done(const kc_obj_builder *b) { return b->done; }
const char *kc_obj_builder_error(const kc_obj_builder *b) { return b->err; }
const char *kc_obj_builder_shape_error(const kc_obj_builder *b) {
  return b->shape[0] ? b->shape : NULL;
}
const kc_status *kc_obj_builder_status(const kc_obj_builder *b) { return &b->status; }
bool kc_obj_builder_initial_events_end(const kc_obj_builder *b) { return b->iee; }

/* The output buffer failed (kc_buf's sticky error): the size limit or memory. */
static int out_failed(kc_obj_builder *b) {
  if (b->out.err != -E2BIG) return fail(b, -ENOMEM, "out of memory");
  if (!b->err[0]) {
    snprintf(b->err, sizeof b->err, "object larger than the limit of %zu bytes", b->max_bytes);
    b->rc = -E2BIG;
  }
  return b->rc;
}

/* Makes room for n more bytes (the limit is the buffer's max, so the fast
 * path also enforces it). */
static inline int reserve(kc_obj_builder *b, size_t n) {
  return kc_buf_reserve(&b->out, n) == 0 ? 0 : out_failed(b);
}

/* Appends s as a JSON string body (no quotes): buf.h's escaper. */
static int put_escaped(kc_obj_builder *b, const char *s, size_t len) {
  kc_buf_json_body(&b->out, s, len);
  return b->out.err ? out_failed(b) : 0;
}

static inline int put_ch(kc_obj_builder *b, char c) {
  if (reserve(b, 1)) return b->rc;
  b->out.p[b->out.len++] = c;
  return 0;
}

/* Raw mode: copies input up to `upto` (an offset in the current chunk). */
static int flush(kc_obj_builder *b, size_t upto) {
  if (!b->in || upto > b->in_len) upto = b->in_len;
  size_t from = b->copy_from;
  if (from >= upto) return 0;
  if (b->strip_comma) {
    while (from < upto && kc_json_is_ws(b->in[from])) from++;
    if (from < upto) {
      if (b->in[from] == ',') from++;
      b->strip_comma = false;
    }
  }
  if (from < upto) {
    if (reserve(b, upto - from)) return b->rc;
    memcpy(b->out.p + b->out.len, b->in + from, upto - from);
    b->out.len += upto - from;
  }
  b->copy_from = upto;
  return 0;
}

static size_t pos(const kc_obj_builder *b) { return kc_jsonlex_pos(b->lx); }

/* Raw mode: the output ends with a string token; finds its opening quote. */
static size_t open_quote(const kc_obj_builder *b) {
  size_t i = b->out.len - 1; /* the closing quote */
  for (;;) {
    const char *q = i ? memrchr(b->out.p, '"', i) : NULL;
    if (!q) return 0; /* cannot happen on text the lexer accepted */
    size_t j = (size_t)(q - b->out.p), bs = 0;
    while (j > bs && b->out.p[j - 1 - bs] == '\\') bs++;
    if (bs % 2 == 0) return j;
    i = j;
  }
}

/* Raw mode: records the string token just copied as a slice (no quotes). */
static int raw_string(kc_obj_builder *b, uint32_t *off, uint32_t *len) {
  if (flush(b, pos(b))) return b->rc;
  if (b->out.len < 2 || b->out.p[b->out.len - 1] != '"') return fail(b, -EBADMSG, "raw text out of step");
  size_t q = open_quote(b);
  *off = (uint32_t)(q + 1);
  *len = (uint32_t)(b->out.len - 1 - (q + 1));
  return 0;
}

/* Raw mode: a member is dropped at its key. Cuts the key (and the comma or
 * whitespace before it) from the output; the value is skipped until it ends. */
static int raw_drop_key(kc_obj_builder *b) {
  if (flush(b, pos(b))) return b->rc;
  if (b->out.len < 2 || b->out.p[b->out.len - 1] != '"') return fail(b, -EBADMSG, "raw text out of step");
  size_t w = open_quote(b);
  while (w > 0 && kc_json_is_ws(b->out.p[w - 1])) w--;
  if (w > 0 && b->out.p[w - 1] == ',') {
    b->out.len = w - 1;
  } else {
    b->out.len = w; /* first member: the next one's comma must go */
    b->strip_comma = true;
  }
  b->in_drop = true;
  b->drop_depth = b->depth;
  return 0;
}

/* Raw mode: the dropped value ended with the token just read. */
static void raw_drop_end(kc_obj_builder *b) {
  b->in_drop = false;
  b->copy_from = pos(b);
}

void kc_obj_builder_input(kc_obj_builder *b, struct kc_jsonlex *lx, const char *chunk,
                          size_t len) {
  b->raw = true;
  b->lx = lx;
  b->in = chunk;
  b->in_len = len;
  b->copy_from = 0;
}

int kc_obj_builder_input_end(kc_obj_builder *b) {
  int rc = 0;
  if (b->raw && b->depth > 0 && !b->done && !b->in_drop) rc = flush(b, b->in_len);
  b->in = NULL;
  b->in_len = 0;
  b->copy_from = 0;
  return rc;
}

bool kc_obj_builder_skip_inside(const kc_obj_builder *b) {
  const level *l = &b->st[b->depth];
  return b->raw && b->depth > 1 &&
         (l->fast || (l->skip && l->role == R_NONE) || l->role == R_FIELDSV1);
}

bool kc_obj_builder_skip_value(const kc_obj_builder *b) {
  return b->raw && b->depth >= 1 && !b->st[b->depth].is_array && b->v_role == R_NONE &&
         !b->v_skip && !b->v_drop && !b->v_cap;
}

static uint8_t role_for_key(uint8_t parent, const char *k, size_t n) {
  switch (parent) {
  case R_ROOT:
    if (KEY_IS(k, n, "kind")) return R_KIND;
    if (KEY_IS(k, n, "apiVersion")) return R_APIVERSION;
    if (KEY_IS(k, n, "metadata")) return R_METADATA;
    if (KEY_IS(k, n, "code")) return R_ST_CODE;
    if (KEY_IS(k, n, "status")) return R_ST_STATUS;
    if (KEY_IS(k, n, "reason")) return R_ST_REASON;
    if (KEY_IS(k, n, "message")) return R_ST_MESSAGE;
    if (KEY_IS(k, n, "details")) return R_DETAILS;
    return R_NONE;
  case R_METADATA:
    switch (n) {
    case 3: return KEY_IS(k, n, "uid") ? R_UID : R_NONE;
    case 4: return KEY_IS(k, n, "name") ? R_NAME : R_NONE;
    case 6: return KEY_IS(k, n, "labels") ? R_LABELS : R_NONE;
    case 9: return KEY_IS(k, n, "namespace") ? R_NAMESPACE : R_NONE;
    case 10: return KEY_IS(k, n, "generation") ? R_GENERATION : R_NONE;
    case 11: return KEY_IS(k, n, "annotations") ? R_ANNOTATIONS : R_NONE;
    case 13: return KEY_IS(k, n, "managedFields") ? R_MANAGED : R_NONE;
    case 15: return KEY_IS(k, n, "resourceVersion") ? R_RV : R_NONE;
    case 17:
      if (KEY_IS(k, n, "creationTimestamp")) return R_CTS;
      return KEY_IS(k, n, "deletionTimestamp") ? R_DELTS : R_NONE;
    default: return R_NONE;
    }
  case R_LABELS: return R_LABEL_VALUE;
  case R_ANNOTATIONS: return KEY_IS(k, n, "k8s.io/initial-events-end") ? R_IEE : R_NONE;
  case R_DETAILS: return KEY_IS(k, n, "retryAfterSeconds") ? R_RETRY_AFTER : R_NONE;
  case R_MF_ENTRY: return KEY_IS(k, n, "fieldsV1") ? R_FIELDSV1 : R_NONE;
  default: return R_NONE;
  }
}

static inline uint64_t low_bits(uint32_t n) {
  return n >= 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1;
}

/* Context of the value about to start: from the key (maps) or computed
 * (array elements, root). Emits the comma an array element needs. *cap:
 * the capture paths that reach this value (none inside skipped values). */
static int begin_value(kc_obj_builder *b, uint8_t *role, uint8_t *skip, uint64_t *drop,
                       uint64_t *cap) {
  if (b->done) return fail(b, -EBADMSG, "data after the end of the object");
  if (b->depth == 0) {
    *role = R_ROOT;
    *skip = 0;
    *drop = low_bits(b->npaths);
    *cap = low_bits(b->ncap);
    return 0;
  }
  level *pl = &b->st[b->depth];
  if (!pl->is_array) {
    *role = b->v_role;
    *skip = b->v_skip;
    *drop = b->v_drop;
    *cap = b->v_cap;
    return 0;
  }
  *role = pl->role == R_MANAGED ? R_MF_ENTRY : R_NONE;
  *skip = pl->skip;
  *drop = 0;
  *cap = 0;
  unsigned segi = b->depth - 1;
  for (uint64_t m = pl->drop; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctzll(m);
    const dpath *dp = &b->paths[i];
    if (segi < dp->nseg && dp->segs[segi].type == KC_PATH_EACH) {
      if (dp->nseg == segi + 1) *skip = 1;
      else *drop |= (uint64_t)1 << i;
    }
  }
  if (pl->cap) {
    uint32_t idx = pl->nelem++;
    for (uint64_t m = pl->cap; m; m &= m - 1) {
      unsigned i = (unsigned)__builtin_ctzll(m);
      const kc_path_seg *sg = &b->cpaths[i].segs[segi];
      if (sg->type == KC_PATH_EACH || (sg->type == KC_PATH_INDEX && sg->index == idx))
        *cap |= (uint64_t)1 << i;
    }
    if (*skip) *cap = 0;
  }
  if (!*skip && !b->raw) {
    if (pl->has_elems && put_ch(b, ',')) return b->rc;
    pl->has_elems = 1;
  }
  return 0;
}

int kc_obj_builder_key(kc_obj_builder *b, const char *k, size_t n) {
  level *pl = &b->st[b->depth];
  if (pl->fast == FAST_MAP) return 0; /* st[0] is never fast */
  if (b->depth == 0 || pl->is_array) return fail(b, -EBADMSG, "key outside an object");
  if (b->raw && pl->role == R_NONE && (pl->drop | pl->cap) == 0 && b->depth > 1) {
    /* Hot path: a key nobody looks at (most keys of an object). */
    b->v_role = R_NONE;
    b->v_skip = pl->skip;
    b->v_drop = 0;
    b->v_cap = 0;
    return 0;
  }
  if (pl->role == R_MF_ENTRY && (pl->drop | pl->cap | pl->skip) == 0) {
    /* A managedFields entry's keys: only fieldsV1 matters (shared). */
    b->v_role = KEY_IS(k, n, "fieldsV1") ? R_FIELDSV1 : R_NONE;
    b->v_skip = 0;
    b->v_drop = 0;
    b->v_cap = 0;
    return 0;
  }
  uint8_t skip = pl->skip;
  uint64_t drop = 0;
  unsigned segi = b->depth - 1;
  for (uint64_t m = pl->drop; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctzll(m);
    const dpath *dp = &b->paths[i];
    if (segi < dp->nseg && dp->segs[segi].type == KC_PATH_KEY && dp->segs[segi].len == n &&
        memcmp(dp->segs[segi].key, k, n) == 0) {
      if (dp->nseg == segi + 1) skip = 1;
      else drop |= (uint64_t)1 << i;
    }
  }
  uint8_t role = role_for_key(pl->role, k, n);
  if (b->metadata_only && b->depth == 1 && role != R_KIND && role != R_APIVERSION &&
      role != R_METADATA)
    skip = 1;
  /* Sharing: raw mode only, never a dropped member; a fieldsV1 with a drop
   * or capture path inside is kept in the text where those work. */
  if (role == R_MANAGED && (!b->raw || !b->share_min || skip)) role = R_NONE;
  /* Capture paths take the first member of this name that is kept (the
   * stored text's first occurrence, which is what kc_obj_get finds). */
  uint64_t cap = 0;
  if (pl->cap && !skip) {
    for (uint64_t m = pl->cap & ~pl->cap_seen; m; m &= m - 1) {
      unsigned i = (unsigned)__builtin_ctzll(m);
      const kc_path_seg *sg = &b->cpaths[i].segs[segi];
      if (sg->type == KC_PATH_KEY && sg->len == n && memcmp(sg->key, k, n) == 0)
        cap |= (uint64_t)1 << i;
    }
    pl->cap_seen |= cap;
  }
  if (role == R_FIELDSV1 && (skip || drop || cap)) role = R_NONE;
  b->v_role = role;
  b->v_skip = skip;
  b->v_drop = drop;
  b->v_cap = cap;
  if (b->raw) {
    if (skip && !pl->skip) return raw_drop_key(b);
    if (!skip && role == R_LABEL_VALUE) return raw_string(b, &b->v_koff, &b->v_klen);
    return 0;
  }
  if (!skip) {
    if (reserve(b, n + 4)) return b->rc;
    if (pl->has_elems) b->out.p[b->out.len++] = ',';
    pl->has_elems = 1;
    b->out.p[b->out.len++] = '"';
    b->v_koff = (uint32_t)b->out.len;
    if (put_escaped(b, k, n)) return b->rc;
    b->v_klen = (uint32_t)(b->out.len - b->v_koff);
    if (reserve(b, 2)) return b->rc;
    b->out.p[b->out.len++] = '"';
    b->out.p[b->out.len++] = ':';
  }
  return 0;
}

/* The capture paths of `cap` that end at a value of the current depth. */
static inline uint64_t cap_ends(const kc_obj_builder *b, uint64_t cap) {
  uint64_t e = 0;
  for (uint64_t m = cap; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctzll(m);
    if (b->cnseg[i] == b->depth) e |= (uint64_t)1 << i;
  }
  return e;
}

static int cbuf_reserve(kc_obj_builder *b, size_t n) {
  if (kc_buf_reserve(&b->cvals, n) == 0) return 0;
  if (b->cvals.err == -E2BIG) return fail(b, -E2BIG, "captured values too large");
  return fail(b, -ENOMEM, "out of memory");
}

/* Records the value just rendered at cbuf[clen..clen+len) for every path
 * of `ends` (one copy of the bytes, one entry per path). */
static int cap_record(kc_obj_builder *b, uint64_t ends, size_t len) {
  uint32_t off = (uint32_t)b->cvals.len;
  b->cvals.len += len;
  for (uint64_t m = ends; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctzll(m);
    if (KC_ARRAY_ROOM(b->cents, b->capcent, b->ncent, 16) < 0)
      return fail(b, -ENOMEM, "out of memory");
    b->cents[b->ncent++] = (cent){b->cgroup[i], off, (uint32_t)len};
  }
  return 0;
}

/* A number or boolean: its text is the value. */
static int cap_text(kc_obj_builder *b, uint64_t cap, const char *s, size_t n) {
  uint64_t e = cap_ends(b, cap);
  if (!e) return 0;
  if (cbuf_reserve(b, n)) return b->rc;
  memcpy(b->cvals.p + b->cvals.len, s, n);
  return cap_record(b, e, n);
}

/* A string. Non-raw: yajl's unescaped bytes, which is what decoding the
 * re-escaped text gives back. Raw: the stored text is the input as sent,
 * so it is decoded the way kc_obj_get_each's consumers decode it
 * (kc_json_scalar_text): the same bytes whatever the escapes. */
static int cap_string(kc_obj_builder *b, uint64_t cap, const char *s, size_t n, uint32_t off,
                      uint32_t len) {
  uint64_t e = cap_ends(b, cap);
  if (!e) return 0;
  if (!b->raw) return cap_text(b, e, s, n);
  if (cbuf_reserve(b, (size_t)len + 1)) return b->rc;
  kc_json_value v = {KC_JSON_STRING, {b->out.p + off - 1, (size_t)len + 2}};
  int r = kc_json_scalar_text(&v, b->cvals.p + b->cvals.len, b->cvals.cap - b->cvals.len);
  if (r < 0) return 0; /* undecodable: consumers skip it too */
  return cap_record(b, e, (size_t)r);
}

static void set_field(kc_obj_builder *b, enum field f, uint32_t off, uint32_t len) {
  b->f[f].off = off;
  b->f[f].len = len;
}

/* Roles whose string value is kept as a slice of the text. */
static bool needs_slice(uint8_t role) {
  switch (role) {
  case R_KIND: case R_APIVERSION: case R_NAME: case R_NAMESPACE: case R_UID: case R_RV:
  case R_CTS: case R_LABEL_VALUE: return true;
  default: return false;
  }
}

int kc_obj_builder_string(kc_obj_builder *b, const char *s, size_t n) {
  if (b->st[b->depth].fast) return 0;
  uint8_t role, skip;
  uint64_t drop, cap;
  if (begin_value(b, &role, &skip, &drop, &cap)) return b->rc;
  if (role == R_ROOT) return fail(b, -EBADMSG, "not a JSON object");
  uint32_t off = 0, len = 0;
  if (b->raw) {
    if (skip) {
      if (b->in_drop && b->depth == b->drop_depth) raw_drop_end(b);
    } else if (needs_slice(role) || (cap && cap_ends(b, cap))) {
      if (raw_string(b, &off, &len)) return b->rc;
    }
  } else if (!skip) {
    if (put_ch(b, '"')) return b->rc;
    off = (uint32_t)b->out.len;
    if (put_escaped(b, s, n)) return b->rc;
    len = (uint32_t)(b->out.len - off);
    if (put_ch(b, '"')) return b->rc;
  }
  if (cap && cap_string(b, cap, s, n, off, len)) return b->rc;
  check_value(b, role, skip, VW_STRING);
  if ((role == R_NAME || role == R_NAMESPACE) && !skip) check_name(b, role, s, n);
  switch (role) {
  case R_NONE: break;
  case R_KIND: if (!skip) set_field(b, F_KIND, off, len); break;
  case R_APIVERSION: if (!skip) set_field(b, F_APIVERSION, off, len); break;
  case R_NAME: if (!skip) set_field(b, F_NAME, off, len); break;
  case R_NAMESPACE: if (!skip) set_field(b, F_NAMESPACE, off, len); break;
  case R_UID: if (!skip) set_field(b, F_UID, off, len); break;
  case R_RV: if (!skip) set_field(b, F_RV, off, len); break;
  case R_CTS: if (!skip) set_field(b, F_CTS, off, len); break;
  case R_DELTS: b->deleting = true; break;
  case R_LABEL_VALUE:
    if (!skip) {
      if (KC_ARRAY_ROOM(b->labels, b->caplabels, b->nlabels, 16) < 0)
        return fail(b, -ENOMEM, "out of memory");
      b->labels[b->nlabels++] = (lab){b->v_koff, b->v_klen, off, len};
    }
    break;
  case R_IEE: b->iee = KEY_IS(s, n, "true"); break;
  case R_ST_STATUS: kc_status_set_string(&b->status, KC_STATUS_STATUS, s, n); break;
  case R_ST_REASON: kc_status_set_string(&b->status, KC_STATUS_REASON, s, n); break;
  case R_ST_MESSAGE: kc_status_set_string(&b->status, KC_STATUS_MESSAGE, s, n); break;
  default: break;
  }
  return 0;
}

int kc_obj_builder_number(kc_obj_builder *b, const char *s, size_t n) {
  if (b->st[b->depth].fast) return 0;
  uint8_t role, skip;
  uint64_t drop, cap;
  if (begin_value(b, &role, &skip, &drop, &cap)) return b->rc;
  if (role == R_ROOT) return fail(b, -EBADMSG, "not a JSON object");
  if (cap && cap_text(b, cap, s, n)) return b->rc;
  check_value(b, role, skip, VW_NUMBER);
  if (b->raw) {
    if (skip && b->in_drop && b->depth == b->drop_depth) raw_drop_end(b);
  } else if (!skip) {
    if (reserve(b, n)) return b->rc;
    memcpy(b->out.p + b->out.len, s, n);
    b->out.len += n;
  }
  int64_t v;
  switch (role) {
  case R_GENERATION:
    if (kc_json_parse_i64(s, n, &v)) b->generation = v;
    break;
  case R_ST_CODE: kc_status_set_number(&b->status, KC_STATUS_CODE, s, n); break;
  case R_RETRY_AFTER: kc_status_set_number(&b->status, KC_STATUS_RETRY_AFTER, s, n); break;
  default: break;
  }
  return 0;
}

/* null, true, false; `value`: the literal is a field value (not null). */
static int put_literal(kc_obj_builder *b, const char *lit, size_t n, bool value) {
  if (b->st[b->depth].fast) return 0;
  uint8_t role, skip;
  uint64_t drop, cap;
  if (begin_value(b, &role, &skip, &drop, &cap)) return b->rc;
  if (role == R_ROOT) return fail(b, -EBADMSG, "not a JSON object");
  if (cap && value && cap_text(b, cap, lit, n)) return b->rc;
  check_value(b, role, skip, value ? VW_BOOL : VW_NULL);
  if (b->raw) {
    if (skip && b->in_drop && b->depth == b->drop_depth) raw_drop_end(b);
    return 0;
  }
  if (skip) return 0;
  if (reserve(b, n)) return b->rc;
  memcpy(b->out.p + b->out.len, lit, n);
  b->out.len += n;
  return 0;
}

int kc_obj_builder_null(kc_obj_builder *b) { return put_literal(b, "null", 4, false); }
int kc_obj_builder_bool(kc_obj_builder *b, bool v) {
  return v ? put_literal(b, "true", 4, true) : put_literal(b, "false", 5, true);
}

static int start_container(kc_obj_builder *b, bool is_array) {
  if (b->st[b->depth].fast) {
    if (b->depth >= KC_OBJ_MAX_DEPTH)
      return fail(b, -E2BIG, "nesting deeper than KC_OBJ_MAX_DEPTH (256) levels");
    level *l = &b->st[++b->depth];
    l->fast = is_array ? FAST_ARRAY : FAST_MAP;
    l->is_array = is_array;
    return 0;
  }
  uint8_t role, skip;
  uint64_t drop, cap;
  if (begin_value(b, &role, &skip, &drop, &cap)) return b->rc;
  if (role == R_ROOT && is_array) return fail(b, -EBADMSG, "not a JSON object");
  if (b->depth >= KC_OBJ_MAX_DEPTH)
    return fail(b, -E2BIG, "nesting deeper than KC_OBJ_MAX_DEPTH (256) levels");
  if (role != R_ROOT) check_value(b, role, skip, is_array ? VW_ARRAY : VW_OBJECT);
  if (b->raw) {
    if (role == R_ROOT) {
      size_t p = pos(b);
      b->copy_from = p ? p - 1 : 0; /* the '{' just read */
    }
  } else if (!skip && put_ch(b, is_array ? '[' : '{')) return b->rc;
  if (is_array ? role != R_MANAGED
               : (role != R_ROOT && role != R_METADATA && role != R_LABELS &&
                  role != R_ANNOTATIONS && role != R_DETAILS && role != R_MF_ENTRY &&
                  role != R_FIELDSV1))
    role = R_NONE;
  if (role == R_FIELDSV1) {
    /* The value's text starts at the '{' just read (copied by the flush). */
    if (flush(b, pos(b))) return b->rc;
    if (b->out.len && b->out.p[b->out.len - 1] == '{') b->share_start = b->out.len - 1;
    else role = R_NONE;
  }
  if (role == R_LABELS && !skip) b->nlabels = 0; /* a repeated labels map replaces */
  /* Paths ending at a container record nothing (not a scalar). */
  if (cap) cap &= ~cap_ends(b, cap);
  level *l = &b->st[++b->depth];
  l->drop = drop;
  l->cap = cap;
  l->cap_seen = 0;
  l->nelem = 0;
  l->is_array = is_array;
  l->has_elems = 0;
  l->role = role;
  l->skip = skip;
  l->fast = b->raw && role == R_NONE && !skip && !drop && !cap && b->depth > 1
                ? (is_array ? FAST_ARRAY : FAST_MAP)
                : FAST_NO;
  return 0;
}

/* A fieldsV1 value just closed (raw mode): its text, out[share_start..],
 * goes to the pool and one KC_JSON_HOLE byte takes its place. When the
 * pool or the table cannot take it the value simply stays in the text. */
static int share_value(kc_obj_builder *b) {
  if (flush(b, pos(b))) return b->rc;
  size_t n = b->out.len - b->share_start;
  if (n < b->share_min || n < 2 || b->out.p[b->out.len - 1] != '}' || b->npend >= UINT16_MAX)
    return 0;
  if (KC_ARRAY_ROOM(b->pend, b->cappend, b->npend, 4) < 0) return 0;
  kc_shared_text *t = kc_shared_text_get(b->out.p + b->share_start, n);
  if (!t) return 0;
  b->pend[b->npend++] = (kc_obj_shared){t, (uint32_t)b->share_start, 0};
  b->out.len = b->share_start;
  /* The size limit is the whole text's: what went to the pool counts. */
  kc_buf_set_max(&b->out, b->out.max - (n - 1));
  return put_ch(b, KC_JSON_HOLE);
}

static int end_container(kc_obj_builder *b, bool is_array) {
  level *fl = &b->st[b->depth];
  if (fl->fast && fl->is_array == is_array) {
    /* depth > 1 and not inside a dropped member: nothing to flush */
    b->depth--;
    return 0;
  }
  if (b->depth == 0 || b->st[b->depth].is_array != is_array)
    return fail(b, -EBADMSG, "unbalanced container");
  level *l = &b->st[b->depth--];
  if (l->role == R_FIELDSV1 && share_value(b)) return b->rc;
  if (b->raw) {
    if (b->in_drop && b->depth == b->drop_depth) raw_drop_end(b);
    else if (b->depth == 0 && flush(b, pos(b))) return b->rc;
  } else if (!l->skip && put_ch(b, is_array ? ']' : '}')) {
    return b->rc;
  }
  if (b->depth == 0) b->done = true;
  return 0;
}

int kc_obj_builder_start_map(kc_obj_builder *b) { return start_container(b, false); }
int kc_obj_builder_end_map(kc_obj_builder *b) { return end_container(b, false); }
int kc_obj_builder_start_array(kc_obj_builder *b) { return start_container(b, true); }
int kc_obj_builder_end_array(kc_obj_builder *b) { return end_container(b, true); }
