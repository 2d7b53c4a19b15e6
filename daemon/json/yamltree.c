/* SPDX-License-Identifier: Apache-2.0 */
/* yamltree: see yamltree.h. */
#include "json/yamltree.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

/* ---- arena ------------------------------------------------------------ */

struct chunk {
  struct chunk *next;
  size_t size; /* bytes of data[] */
  size_t used;
  _Alignas(16) unsigned char data[];
};

struct kc_yaml_doc {
  struct chunk *chunks;
  const char *file;
  const kc_yaml_node *root;
};

#define CHUNK_MIN 4096u

static void *arena_alloc(kc_yaml_doc *doc, size_t n) {
  n = (n + 15u) & ~(size_t)15u;
  struct chunk *c = doc->chunks;
  if (!c || c->size - c->used < n) {
    size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
    /* Grow chunks with the document so big files need few mallocs. */
    if (c && c->size * 2 > size && c->size < (1u << 20)) size = c->size * 2;
    if (size > SIZE_MAX - sizeof *c) return NULL;
    struct chunk *nc = malloc(sizeof *nc + size);
    if (!nc) return NULL;
    nc->size = size;
    nc->used = 0;
    nc->next = c;
    doc->chunks = nc;
    c = nc;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

/* n zeroed elements of `size` bytes; NULL when n is 0 or out of memory. */
static void *arena_calloc(kc_yaml_doc *doc, size_t n, size_t size) {
  if (n == 0 || size > SIZE_MAX / n) return NULL;
  void *p = arena_alloc(doc, n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

static char *arena_strndup(kc_yaml_doc *doc, const char *s, size_t len) {
  if (len == SIZE_MAX) return NULL;
  char *p = arena_alloc(doc, len + 1);
  if (!p) return NULL;
  if (len) memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

void kc_yaml_free(kc_yaml_doc *doc) {
  if (!doc) return;
  struct chunk *c = doc->chunks;
  while (c) {
    struct chunk *next = c->next;
    explicit_bzero(c->data, c->used);
    free(c);
    c = next;
  }
  explicit_bzero(doc, sizeof *doc);
  free(doc);
}

const kc_yaml_node *kc_yaml_root(const kc_yaml_doc *doc) { return doc ? doc->root : NULL; }
const char *kc_yaml_file(const kc_yaml_doc *doc) { return doc ? doc->file : NULL; }

/* "scalar", "sequence", "mapping". */
static const char *kc_yaml_type_name(enum kc_yaml_type type) {
  switch (type) {
  case KC_YAML_SCALAR: return "scalar";
  case KC_YAML_SEQUENCE: return "sequence";
  case KC_YAML_MAPPING: return "mapping";
  }
  return "?";
}

/* ---- errors ------------------------------------------------------------ */

static int verror(char *err, size_t errlen, const char *file, uint32_t line, uint32_t col,
                  const char *fmt, va_list ap) {
  if (!err || errlen == 0) return -EINVAL;
  int n = 0;
  if (file) n = snprintf(err, errlen, "%s:%u:%u: ", file, line, col);
  if (n < 0) n = 0;
  if ((size_t)n < errlen) vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
  return -EINVAL;
}

__attribute__((format(printf, 6, 7))) static int pos_error(char *err, size_t errlen,
                                                          const char *file, uint32_t line,
                                                          uint32_t col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = verror(err, errlen, file, line, col, fmt, ap);
  va_end(ap);
  return rc;
}

int kc_yaml_error(char *err, size_t errlen, const kc_yaml_node *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = verror(err, errlen, at ? at->file : NULL, at ? at->line : 0, at ? at->column : 0,
                  fmt, ap);
  va_end(ap);
  return rc;
}

/* Renders a scalar for a message: quoted, at most ~40 bytes, with
 * non-printable bytes escaped. */
static const char *show(const kc_yaml_node *n, char *buf, size_t cap) {
  if (n->type != KC_YAML_SCALAR) {
    snprintf(buf, cap, "a %s", kc_yaml_type_name(n->type));
    return buf;
  }
  size_t o = 0;
  buf[o++] = '"';
  for (size_t i = 0; i < n->u.scalar.len && o + 8 < cap; i++) {
    unsigned char ch = (unsigned char)n->u.scalar.text[i];
    if (i >= 40) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    if (ch == '"' || ch == '\\') {
      buf[o++] = '\\';
      buf[o++] = (char)ch;
    } else if (ch < 0x20 || ch == 0x7f) {
      o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    } else {
      buf[o++] = (char)ch;
    }
  }
  buf[o++] = '"';
  buf[o] = '\0';
  return buf;
}

/* ---- loading ----------------------------------------------------------- */

struct builder {
  yaml_document_t *ydoc;
  kc_yaml_doc *doc;
  unsigned char *seen; /* per libyaml node index: already placed in the tree */
  int nnodes;
  char *err;
  size_t errlen;
};

static int key_cmp(const kc_yaml_node *a, const kc_yaml_node *b) {
  size_t n = a->u.scalar.len < b->u.scalar.len ? a->u.scalar.len : b->u.scalar.len;
  int c = memcmp(a->u.scalar.text, b->u.scalar.text, n);
  if (c) return c;
  return (a->u.scalar.len > b->u.scalar.len) - (a->u.scalar.len < b->u.scalar.len);
}

static _Thread_local const kc_yaml_pair *sort_pairs_base;
static int pair_idx_cmp(const void *a, const void *b) {
  const kc_yaml_pair *p = sort_pairs_base;
  size_t ia = *(const size_t *)a, ib = *(const size_t *)b;
  int c = key_cmp(&p[ia].key, &p[ib].key);
  if (c) return c;
  return (ia > ib) - (ia < ib);
}

/* Finds a repeated key; reports the later occurrence. Quadratic for small
 * mappings, sort-based for large ones so a hostile file stays O(n log n). */
static int check_duplicates(struct builder *b, const kc_yaml_pair *pairs, size_t n) {
  char vb[64];
  if (n <= 16) {
    for (size_t i = 1; i < n; i++)
      for (size_t j = 0; j < i; j++)
        if (key_cmp(&pairs[i].key, &pairs[j].key) == 0)
          return kc_yaml_error(b->err, b->errlen, &pairs[i].key,
                               "duplicate key %s (first at line %u)",
                               show(&pairs[i].key, vb, sizeof vb), pairs[j].key.line);
    return 0;
  }
  size_t *idx = malloc(n * sizeof *idx);
  if (!idx) return -ENOMEM;
  for (size_t i = 0; i < n; i++) idx[i] = i;
  /* qsort has no context argument in C11; documents may load on several
   * threads at once, hence the thread-local base pointer. */
  sort_pairs_base = pairs;
  qsort(idx, n, sizeof *idx, pair_idx_cmp);
  int rc = 0;
  for (size_t i = 1; i < n && rc == 0; i++) {
    if (key_cmp(&pairs[idx[i]].key, &pairs[idx[i - 1]].key) == 0)
      rc = kc_yaml_error(b->err, b->errlen, &pairs[idx[i]].key,
                         "duplicate key %s (first at line %u)",
                         show(&pairs[idx[i]].key, vb, sizeof vb), pairs[idx[i - 1]].key.line);
  }
  free(idx);
  return rc;
}

static int build(struct builder *b, int index, kc_yaml_node *dst, int depth) {
  yaml_node_t *yn = yaml_document_get_node(b->ydoc, index);
  if (!yn) return pos_error(b->err, b->errlen, b->doc->file, 0, 0, "internal: bad node index");
  dst->file = b->doc->file;
  dst->line = (uint32_t)yn->start_mark.line + 1;
  dst->column = (uint32_t)yn->start_mark.column + 1;
  if (b->seen[index - 1])
    return kc_yaml_error(b->err, b->errlen, dst,
                         "YAML anchors and aliases are not supported (this node is "
                         "referenced again by an alias)");
  b->seen[index - 1] = 1;
  if (depth > KC_YAML_MAX_DEPTH)
    return kc_yaml_error(b->err, b->errlen, dst, "nesting deeper than %d levels",
                         KC_YAML_MAX_DEPTH);

  switch (yn->type) {
  case YAML_SCALAR_NODE: {
    dst->type = KC_YAML_SCALAR;
    char *t = arena_strndup(b->doc, (const char *)yn->data.scalar.value, yn->data.scalar.length);
    if (!t) return -ENOMEM;
    dst->u.scalar.text = t;
    dst->u.scalar.len = yn->data.scalar.length;
    dst->u.scalar.plain = yn->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    return 0;
  }
  case YAML_SEQUENCE_NODE: {
    dst->type = KC_YAML_SEQUENCE;
    size_t n = (size_t)(yn->data.sequence.items.top - yn->data.sequence.items.start);
    kc_yaml_node *items = arena_calloc(b->doc, n, sizeof *items);
    if (n && !items) return -ENOMEM;
    dst->u.seq.items = items;
    dst->u.seq.len = n;
    for (size_t i = 0; i < n; i++) {
      int rc = build(b, yn->data.sequence.items.start[i], &items[i], depth + 1);
      if (rc) return rc;
    }
    return 0;
  }
  case YAML_MAPPING_NODE: {
    dst->type = KC_YAML_MAPPING;
    size_t n = (size_t)(yn->data.mapping.pairs.top - yn->data.mapping.pairs.start);
    kc_yaml_pair *pairs = arena_calloc(b->doc, n, sizeof *pairs);
    if (n && !pairs) return -ENOMEM;
    dst->u.map.pairs = pairs;
    dst->u.map.len = n;
    for (size_t i = 0; i < n; i++) {
      yaml_node_pair_t *yp = &yn->data.mapping.pairs.start[i];
      int rc = build(b, yp->key, &pairs[i].key, depth + 1);
      if (rc) return rc;
      if (pairs[i].key.type != KC_YAML_SCALAR)
        return kc_yaml_error(b->err, b->errlen, &pairs[i].key,
                             "mapping keys must be scalars, got a %s",
                             kc_yaml_type_name(pairs[i].key.type));
      rc = build(b, yp->value, &pairs[i].value, depth + 1);
      if (rc) return rc;
    }
    return check_duplicates(b, pairs, n);
  }
  case YAML_NO_NODE: break;
  }
  return kc_yaml_error(b->err, b->errlen, dst, "unsupported YAML node");
}

/* The byte that starts character `column` (0-based, counted in characters
 * as libyaml's marks are) of line `line` (0-based) of buf; 0 past the end. */
static char char_at(const char *buf, size_t len, size_t line, size_t column) {
  size_t i = 0;
  for (size_t l = 0; l < line && i < len; i++)
    if (buf[i] == '\n') l++;
  for (size_t col = 0; i < len && buf[i] != '\n'; i++) {
    if (((unsigned char)buf[i] & 0xc0) == 0x80) continue; /* UTF-8 continuation */
    if (col++ == column) return buf[i];
  }
  return 0;
}

static int parser_error(yaml_parser_t *p, const char *file, const char *buf, size_t len,
                        char *err, size_t errlen) {
  if (p->error == YAML_MEMORY_ERROR) return -ENOMEM;
  const char *problem = p->problem ? p->problem : "invalid YAML";
  if (p->error == YAML_READER_ERROR) {
    /* The reader reports a byte offset (bad encoding); turn it into a
     * position ourselves, counting columns in bytes. */
    uint32_t line = 1, col = 1;
    for (size_t i = 0; i < p->problem_offset && i < len; i++) {
      if (buf[i] == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    if (p->problem_value != -1)
      return pos_error(err, errlen, file, line, col, "%s (byte 0x%02x)", problem,
                       (unsigned)p->problem_value & 0xffu);
    return pos_error(err, errlen, file, line, col, "%s", problem);
  }
  /* A tab where indentation goes reads as one of two scanner errors. */
  if (p->error == YAML_SCANNER_ERROR &&
      (strstr(problem, "cannot start any token") || strstr(problem, "tab character")) &&
      char_at(buf, len, p->problem_mark.line, p->problem_mark.column) == '\t')
    return pos_error(err, errlen, file, (uint32_t)p->problem_mark.line + 1,
                     (uint32_t)p->problem_mark.column + 1,
                     "tabs are not allowed for indentation in YAML; use spaces");
  if (p->context)
    return pos_error(err, errlen, file, (uint32_t)p->problem_mark.line + 1,
                     (uint32_t)p->problem_mark.column + 1, "%s %s (from line %u column %u)",
                     problem, p->context, (uint32_t)p->context_mark.line + 1,
                     (uint32_t)p->context_mark.column + 1);
  return pos_error(err, errlen, file, (uint32_t)p->problem_mark.line + 1,
                   (uint32_t)p->problem_mark.column + 1, "%s", problem);
}

/* libyaml frees node scalars without clearing them; clear them first. */
static void scrub_document(yaml_document_t *d) {
  for (yaml_node_t *n = d->nodes.start; n && n < d->nodes.top; n++)
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.value)
      explicit_bzero(n->data.scalar.value, n->data.scalar.length);
}

static void scrub_parser(yaml_parser_t *p) {
  if (p->buffer.start && p->buffer.end > p->buffer.start)
    explicit_bzero(p->buffer.start, (size_t)(p->buffer.end - p->buffer.start));
  if (p->raw_buffer.start && p->raw_buffer.end > p->raw_buffer.start)
    explicit_bzero(p->raw_buffer.start, (size_t)(p->raw_buffer.end - p->raw_buffer.start));
}

int kc_yaml_load_buffer(const char *name, const char *buf, size_t len, kc_yaml_doc **out,
                        char *err, size_t errlen) {
  *out = NULL;
  if (err && errlen) err[0] = '\0';
  if (!name) name = "<inline>";
  if (len > KC_YAML_MAX_FILE)
    return pos_error(err, errlen, name, 0, 0, "larger than %u bytes", KC_YAML_MAX_FILE);
  kc_yaml_doc *doc = calloc(1, sizeof *doc);
  if (!doc) return -ENOMEM;
  doc->file = arena_strndup(doc, name, strlen(name));
  if (!doc->file) {
    kc_yaml_free(doc);
    return -ENOMEM;
  }
  /* The parser's messages name the file the nodes name (the arena copy). */
  name = doc->file;

  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) {
    kc_yaml_free(doc);
    return -ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);

  int rc = 0;
  yaml_document_t ydoc;
  if (!yaml_parser_load(&parser, &ydoc)) {
    rc = parser_error(&parser, name, buf, len, err, errlen);
    goto out_parser;
  }
  yaml_node_t *root = yaml_document_get_root_node(&ydoc);
  if (root) {
    struct builder b = {.ydoc = &ydoc, .doc = doc, .err = err, .errlen = errlen};
    b.nnodes = (int)(ydoc.nodes.top - ydoc.nodes.start);
    b.seen = calloc((size_t)b.nnodes + 1, 1);
    kc_yaml_node *r = arena_calloc(doc, 1, sizeof *r);
    if (!b.seen || !r) {
      rc = -ENOMEM;
    } else {
      rc = build(&b, 1, r, 0);
      doc->root = r;
    }
    free(b.seen);
    scrub_document(&ydoc);
    yaml_document_delete(&ydoc);
    if (rc) goto out_parser;

    /* Exactly one document: the next load must be the end of the stream. */
    yaml_document_t next;
    if (!yaml_parser_load(&parser, &next)) {
      rc = parser_error(&parser, name, buf, len, err, errlen);
      goto out_parser;
    }
    if (yaml_document_get_root_node(&next))
      rc = pos_error(err, errlen, name, (uint32_t)next.start_mark.line + 1,
                     (uint32_t)next.start_mark.column + 1,
                     "more than one YAML document (only one is allowed)");
    scrub_document(&next);
    yaml_document_delete(&next);
  } else {
    yaml_document_delete(&ydoc);
  }

out_parser:
  scrub_parser(&parser);
  yaml_parser_delete(&parser);
  if (rc) {
    kc_yaml_free(doc);
    return rc;
  }
  *out = doc;
  return 0;
}

int kc_yaml_load_file(const char *path, kc_yaml_doc **out, char *err, size_t errlen) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (err && errlen) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
    return -e;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    if (err && errlen) snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(e));
    close(fd);
    return -e;
  }
  if (!S_ISREG(st.st_mode)) {
    if (err && errlen) snprintf(err, errlen, "%s: not a regular file", path);
    close(fd);
    return -EINVAL;
  }
  if ((uint64_t)st.st_size > KC_YAML_MAX_FILE) {
    if (err && errlen)
      snprintf(err, errlen, "%s: larger than %u bytes", path, KC_YAML_MAX_FILE);
    close(fd);
    return -EFBIG;
  }
  size_t cap = (size_t)st.st_size + 1, len = 0;
  char *buf = malloc(cap);
  if (!buf) {
    close(fd);
    return -ENOMEM;
  }
  for (;;) {
    ssize_t r = read(fd, buf + len, cap - len);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      if (err && errlen) snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
      explicit_bzero(buf, len);
      free(buf);
      close(fd);
      return -e;
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len == cap) { /* file grew since fstat: refuse rather than chase it */
      if (err && errlen) snprintf(err, errlen, "%s: file changed while reading", path);
      explicit_bzero(buf, len);
      free(buf);
      close(fd);
      return -EAGAIN;
    }
  }
  close(fd);
  int rc = kc_yaml_load_buffer(path, buf, len, out, err, errlen);
  explicit_bzero(buf, len);
  free(buf);
  return rc;
}

/* ---- lookups ----------------------------------------------------------- */

bool kc_yaml_is_null(const kc_yaml_node *n) {
  if (!n) return true;
  if (n->type != KC_YAML_SCALAR || !n->u.scalar.plain) return false;
  const char *t = n->u.scalar.text;
  return n->u.scalar.len == 0 || strcmp(t, "~") == 0 || strcmp(t, "null") == 0 ||
         strcmp(t, "Null") == 0 || strcmp(t, "NULL") == 0;
}

const kc_yaml_pair *kc_yaml_map_pair(const kc_yaml_node *map, const char *key) {
  if (!map || map->type != KC_YAML_MAPPING) return NULL;
  size_t klen = strlen(key);
  for (size_t i = 0; i < map->u.map.len; i++) {
    const kc_yaml_node *k = &map->u.map.pairs[i].key;
    if (k->u.scalar.len == klen && memcmp(k->u.scalar.text, key, klen) == 0)
      return &map->u.map.pairs[i];
  }
  return NULL;
}

const kc_yaml_node *kc_yaml_map_get(const kc_yaml_node *map, const char *key) {
  const kc_yaml_pair *p = kc_yaml_map_pair(map, key);
  return p ? &p->value : NULL;
}

int kc_yaml_expect(const kc_yaml_node *n, enum kc_yaml_type type, const char *what, char *err,
                   size_t errlen) {
  if (n && n->type == type) return 0;
  if (!n) return kc_yaml_error(err, errlen, NULL, "%s: expected a %s", what, kc_yaml_type_name(type));
  if (kc_yaml_is_null(n))
    return kc_yaml_error(err, errlen, n, "%s: expected a %s, got null", what,
                         kc_yaml_type_name(type));
  return kc_yaml_error(err, errlen, n, "%s: expected a %s, got a %s", what,
                       kc_yaml_type_name(type), kc_yaml_type_name(n->type));
}

/* Edit distance with a small cap; enough for "did you mean". */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb) {
  if (la > 63 || lb > 63) return 99;
  size_t row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t cur = row[j];
      size_t sub = prev + (a[i - 1] != b[j - 1]);
      size_t del = row[j] + 1, ins = row[j - 1] + 1;
      row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
      prev = cur;
    }
  }
  return row[lb];
}

const char *kc_yaml_closest(const char *word, const char *const *candidates, size_t n) {
  const char *best = NULL;
  size_t bestd = 3, len = strlen(word);
  for (size_t j = 0; j < n; j++) {
    size_t d = edit_distance(word, len, candidates[j], strlen(candidates[j]));
    if (strcasecmp(word, candidates[j]) == 0) d = 0;
    if (d < bestd) {
      bestd = d;
      best = candidates[j];
    }
  }
  return best;
}

int kc_yaml_check_key(const kc_yaml_node *key, const char *const *allowed, size_t nallowed,
                      const char *what, char *err, size_t errlen) {
  if (!key || key->type != KC_YAML_SCALAR) return 0;
  for (size_t j = 0; j < nallowed; j++)
    if (strlen(allowed[j]) == key->u.scalar.len && strcmp(allowed[j], key->u.scalar.text) == 0)
      return 0;
  char vb[64];
  const char *best = kc_yaml_closest(key->u.scalar.text, allowed, nallowed);
  if (best)
    return kc_yaml_error(err, errlen, key, "unknown key %s in %s (did you mean \"%s\"?)",
                         show(key, vb, sizeof vb), what, best);
  char list[512];
  size_t o = 0;
  list[0] = '\0';
  for (size_t j = 0; j < nallowed && o + 2 < sizeof list; j++) {
    int w = snprintf(list + o, sizeof list - o, "%s%s", j ? ", " : "", allowed[j]);
    if (w < 0) break;
    o += (size_t)w;
  }
  if (o >= sizeof list) o = sizeof list - 1;
  return kc_yaml_error(err, errlen, key, "unknown key %s in %s (known keys: %s)",
                       show(key, vb, sizeof vb), what, list);
}

int kc_yaml_check_keys(const kc_yaml_node *map, const char *const *allowed, size_t nallowed,
                       const char *what, char *err, size_t errlen) {
  if (!map || map->type != KC_YAML_MAPPING) return 0;
  for (size_t i = 0; i < map->u.map.len; i++) {
    int rc = kc_yaml_check_key(&map->u.map.pairs[i].key, allowed, nallowed, what, err, errlen);
    if (rc) return rc;
  }
  return 0;
}

/* ---- typed getters ----------------------------------------------------- */

static int scalar_or_error(const kc_yaml_node *n, const char *what, const char *expected,
                           char *err, size_t errlen) {
  if (!n) return kc_yaml_error(err, errlen, NULL, "%s: missing", what);
  if (n->type != KC_YAML_SCALAR)
    return kc_yaml_error(err, errlen, n, "%s: expected %s, got a %s", what, expected,
                         kc_yaml_type_name(n->type));
  if (kc_yaml_is_null(n))
    return kc_yaml_error(err, errlen, n, "%s: expected %s, got null", what, expected);
  if (strlen(n->u.scalar.text) != n->u.scalar.len)
    return kc_yaml_error(err, errlen, n, "%s: contains a NUL byte", what);
  return 0;
}

int kc_yaml_get_string(const kc_yaml_node *n, const char *what, const char **out, char *err,
                       size_t errlen) {
  int rc = scalar_or_error(n, what, "a string", err, errlen);
  if (rc) return rc;
  *out = n->u.scalar.text;
  return 0;
}

int kc_yaml_get_bool(const kc_yaml_node *n, const char *what, bool *out, char *err,
                     size_t errlen) {
  int rc = scalar_or_error(n, what, "true or false", err, errlen);
  if (rc) return rc;
  char vb[64];
  const char *t = n->u.scalar.text;
  if (!n->u.scalar.plain)
    return kc_yaml_error(err, errlen, n, "%s: expected true or false, got the quoted string %s",
                         what, show(n, vb, sizeof vb));
  if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE")) {
    *out = true;
    return 0;
  }
  if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE")) {
    *out = false;
    return 0;
  }
  return kc_yaml_error(err, errlen, n, "%s: expected true or false, got %s", what,
                       show(n, vb, sizeof vb));
}

int kc_yaml_get_int(const kc_yaml_node *n, const char *what, int64_t min, int64_t max,
                    int64_t *out, char *err, size_t errlen) {
  int rc = scalar_or_error(n, what, "an integer", err, errlen);
  if (rc) return rc;
  char vb[64];
  const char *t = n->u.scalar.text;
  if (!n->u.scalar.plain)
    return kc_yaml_error(err, errlen, n, "%s: expected an integer, got the quoted string %s",
                         what, show(n, vb, sizeof vb));
  const char *p = t;
  if (*p == '+' || *p == '-') p++;
  bool digits = *p != '\0';
  for (; *p; p++) digits = digits && *p >= '0' && *p <= '9';
  if (!digits)
    return kc_yaml_error(err, errlen, n, "%s: expected an integer, got %s", what,
                         show(n, vb, sizeof vb));
  errno = 0;
  long long v = strtoll(t, NULL, 10);
  if (errno == ERANGE || v < min || v > max)
    return kc_yaml_error(err, errlen, n, "%s: must be between %lld and %lld, got %s", what,
                         (long long)min, (long long)max, show(n, vb, sizeof vb));
  *out = v;
  return 0;
}

int kc_yaml_get_double(const kc_yaml_node *n, const char *what, double min, double max,
                       double *out, char *err, size_t errlen) {
  int rc = scalar_or_error(n, what, "a number", err, errlen);
  if (rc) return rc;
  char vb[64];
  const char *t = n->u.scalar.text;
  bool ok = n->u.scalar.plain && *t;
  bool digit = false;
  for (const char *p = t; ok && *p; p++) {
    ok = (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '+' || *p == 'e' ||
         *p == 'E';
    digit = digit || (*p >= '0' && *p <= '9');
  }
  char *end = NULL;
  double v = 0;
  if (ok && digit) {
    errno = 0;
    v = strtod(t, &end);
    ok = end && *end == '\0' && errno != ERANGE && isfinite(v);
  } else {
    ok = false;
  }
  if (!ok)
    return kc_yaml_error(err, errlen, n, "%s: expected a number, got %s", what,
                         show(n, vb, sizeof vb));
  if (!(v >= min && v <= max))
    return kc_yaml_error(err, errlen, n, "%s: must be between %g and %g, got %s", what, min,
                         max, show(n, vb, sizeof vb));
  *out = v;
  return 0;
}

int kc_yaml_parse_duration(const char *s, int64_t *out_ns) {
  static const struct {
    const char *name;
    int64_t ns;
  } units[] = {
      {"ns", 1},           {"us", 1000},          {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000},
      {"ms", 1000000},     {"s", 1000000000},     {"m", 60000000000},  {"h", 3600000000000},
  };
  if (!s || !*s) return -EINVAL;
  if (strcmp(s, "0") == 0) {
    *out_ns = 0;
    return 0;
  }
  int64_t total = 0;
  const char *p = s;
  while (*p) {
    /* number: digits [. digits], at least one digit overall */
    int64_t whole = 0;
    bool any = false, overflow = false;
    while (*p >= '0' && *p <= '9') {
      if (whole > (INT64_MAX - 9) / 10) overflow = true;
      else whole = whole * 10 + (*p - '0');
      p++;
      any = true;
    }
    int64_t frac = 0, scale = 1;
    if (*p == '.') {
      p++;
      while (*p >= '0' && *p <= '9') {
        if (scale <= INT64_MAX / 100) { /* extra digits beyond ~1e-17 do not matter */
          frac = frac * 10 + (*p - '0');
          scale *= 10;
        }
        p++;
        any = true;
      }
    }
    if (!any) return -EINVAL;
    if (overflow) return -ERANGE;
    int64_t unit = 0;
    size_t ulen = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
      size_t l = strlen(units[i].name);
      /* longest match: "ms" before "m" */
      if (l > ulen && strncmp(p, units[i].name, l) == 0) {
        unit = units[i].ns;
        ulen = l;
      }
    }
    if (!unit) return -EINVAL; /* missing or unknown unit */
    p += ulen;
    if (whole > INT64_MAX / unit) return -ERANGE;
    int64_t v = whole * unit;
    /* fraction: frac/scale * unit, computed without overflow */
    if (frac) {
      long double f = (long double)frac * (long double)unit / (long double)scale;
      if (f > (long double)(INT64_MAX - v)) return -ERANGE;
      v += (int64_t)f;
    }
    if (v > INT64_MAX - total) return -ERANGE;
    total += v;
  }
  *out_ns = total;
  return 0;
}

int kc_yaml_get_duration_ms(const kc_yaml_node *n, const char *what, int64_t min_ms,
                            int64_t max_ms, int64_t *out, char *err, size_t errlen) {
  int rc = scalar_or_error(n, what, "a duration", err, errlen);
  if (rc) return rc;
  char vb[64];
  int64_t ns = 0;
  rc = kc_yaml_parse_duration(n->u.scalar.text, &ns);
  if (rc == -ERANGE)
    return kc_yaml_error(err, errlen, n, "%s: duration %s is too large", what,
                         show(n, vb, sizeof vb));
  if (rc) {
    const char *t = n->u.scalar.text;
    bool bare = *t != '\0';
    for (const char *p = t; *p; p++) bare = bare && ((*p >= '0' && *p <= '9') || *p == '.');
    if (bare)
      return kc_yaml_error(err, errlen, n,
                           "%s: duration %s has no unit (write e.g. \"%ss\" or \"%sms\")", what,
                           show(n, vb, sizeof vb), t, t);
    return kc_yaml_error(err, errlen, n,
                         "%s: invalid duration %s (use e.g. 500ms, 15s, 10m, 2h, 1h30m)", what,
                         show(n, vb, sizeof vb));
  }
  if (ns % 1000000 != 0)
    return kc_yaml_error(err, errlen, n, "%s: duration %s is not a whole number of milliseconds",
                         what, show(n, vb, sizeof vb));
  int64_t ms = ns / 1000000;
  if (ms < min_ms || ms > max_ms)
    return kc_yaml_error(err, errlen, n, "%s: must be between %lldms and %lldms, got %s", what,
                         (long long)min_ms, (long long)max_ms, show(n, vb, sizeof vb));
  *out = ms;
  return 0;
}

int kc_yaml_get_string_list(const kc_yaml_node *n, const char *what, const char ***out,
                            size_t *count, char *err, size_t errlen) {
  *out = NULL;
  *count = 0;
  int rc = kc_yaml_expect(n, KC_YAML_SEQUENCE, what, err, errlen);
  if (rc) return rc;
  if (n->u.seq.len == 0) return 0;
  const char **v = malloc(n->u.seq.len * sizeof *v);
  if (!v) return -ENOMEM;
  for (size_t i = 0; i < n->u.seq.len; i++) {
    char w[160];
    snprintf(w, sizeof w, "%s[%zu]", what, i);
    rc = kc_yaml_get_string(&n->u.seq.items[i], w, &v[i], err, errlen);
    if (rc) {
      free(v);
      return rc;
    }
  }
  *out = v;
  *count = n->u.seq.len;
  return 0;
}

bool kc_yaml_equal(const kc_yaml_node *a, const kc_yaml_node *b) {
  if (!a || !b) return a == b;
  if (a->type != b->type) return false;
  switch (a->type) {
  case KC_YAML_SCALAR:
    return a->u.scalar.plain == b->u.scalar.plain && a->u.scalar.len == b->u.scalar.len &&
           memcmp(a->u.scalar.text, b->u.scalar.text, a->u.scalar.len) == 0;
  case KC_YAML_SEQUENCE:
    if (a->u.seq.len != b->u.seq.len) return false;
    for (size_t i = 0; i < a->u.seq.len; i++)
      if (!kc_yaml_equal(&a->u.seq.items[i], &b->u.seq.items[i])) return false;
    return true;
  case KC_YAML_MAPPING:
    if (a->u.map.len != b->u.map.len) return false;
    for (size_t i = 0; i < a->u.map.len; i++)
      if (!kc_yaml_equal(&a->u.map.pairs[i].key, &b->u.map.pairs[i].key) ||
          !kc_yaml_equal(&a->u.map.pairs[i].value, &b->u.map.pairs[i].value))
        return false;
    return true;
  }
  return false;
}
