/* SPDX-License-Identifier: Apache-2.0 */
/* yamltree: a YAML file loaded into an immutable tree of our own nodes that
 * remember where they came from (file, line, column), plus typed getters whose
 * errors read `file:line:col: message` (h2o's yoml_t idea, docs/api-contract.md
 * 16.6).
 *
 * Loading uses libyaml's document API only (yaml_parser_load). Rules:
 *   - One document per file. An empty file (or one holding only comments)
 *     loads with a NULL root; a second document is an error at its start.
 *   - Anchors and aliases are rejected ("aliases are not supported"), so the
 *     tree is a real tree and a hostile file cannot expand exponentially.
 *   - Mapping keys must be scalars, and a key may appear only once per
 *     mapping (libyaml itself accepts duplicates silently).
 *   - Tags are ignored: `!!str 5` is the scalar "5", plain or not as written.
 *   - Nesting deeper than KC_YAML_MAX_DEPTH and files larger than
 *     KC_YAML_MAX_FILE are errors.
 * Lines and columns are 1-based (libyaml's marks are 0-based); columns count
 * characters, as libyaml does.
 *
 * Memory: every node, string and array of a document lives in one arena owned
 * by the kc_yaml_doc. Node pointers stay valid until kc_yaml_free(doc). On
 * free every byte of the arena is zeroed first (configs and kubeconfigs carry
 * tokens and keys); the input buffer and libyaml's own copies of scalars are
 * zeroed too before they are released.
 *
 * Threads: loading and freeing touch no shared state, so any thread may load
 * its own document. A loaded tree is never modified, so any number of threads
 * may read it concurrently.
 *
 * Errors: functions return 0 or a negative errno (-EINVAL for bad content,
 * -ENOMEM, -errno of open/read). Where a function takes (err, errlen), it
 * writes one NUL-terminated line `file:line:col: message` there on -EINVAL
 * (and a message without position for I/O errors); err may be NULL.
 */
#ifndef KC_YAMLTREE_H
#define KC_YAMLTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KC_YAML_MAX_DEPTH 128
#define KC_YAML_MAX_FILE (16u << 20) /* 16 MiB */

enum kc_yaml_type {
  KC_YAML_SCALAR = 1,
  KC_YAML_SEQUENCE,
  KC_YAML_MAPPING,
};

typedef struct kc_yaml_node kc_yaml_node;
typedef struct kc_yaml_pair kc_yaml_pair;

struct kc_yaml_node {
  enum kc_yaml_type type;
  uint32_t line;    /* 1-based */
  uint32_t column;  /* 1-based */
  const char *file; /* the name given at load time; shared by all nodes */
  union {
    struct {
      const char *text; /* NUL-terminated; may contain NUL if len says so */
      size_t len;
      bool plain;       /* written without quotes or block style */
    } scalar;
    struct {
      const kc_yaml_node *items; /* items[0..len) */
      size_t len;
    } seq;
    struct {
      const kc_yaml_pair *pairs; /* pairs[0..len), in file order */
      size_t len;
    } map;
  } u;
};

struct kc_yaml_pair {
  kc_yaml_node key; /* always a scalar; its position is the key's */
  kc_yaml_node value;
};

typedef struct kc_yaml_doc kc_yaml_doc;

/* Loads the file at `path`; node positions name it as `path`.
 * Returns 0 and a document in *out (free with kc_yaml_free), -EINVAL with a
 * positioned message for bad YAML, or -errno of open/read/fstat.
 * Ownership: *out is the caller's. Context: any thread. */
int kc_yaml_load_file(const char *path, kc_yaml_doc **out, char *err, size_t errlen);

/* Loads YAML from memory; `name` is used as the file name in positions and
 * errors (e.g. "<inline>"). buf need not be NUL-terminated. Same returns as
 * kc_yaml_load_file. The buffer is only read (the caller zeroes it if it
 * holds secrets). */
int kc_yaml_load_buffer(const char *name, const char *buf, size_t len, kc_yaml_doc **out,
                        char *err, size_t errlen);

/* Root node, or NULL for an empty document. Borrowed from doc. */
const kc_yaml_node *kc_yaml_root(const kc_yaml_doc *doc);
/* The name given at load time. Borrowed from doc. */
const char *kc_yaml_file(const kc_yaml_doc *doc);
/* Zeroes and frees everything. kc_yaml_free(NULL) is a no-op. */
void kc_yaml_free(kc_yaml_doc *doc);

/* True for a plain scalar "", "~", "null", "Null" or "NULL" (YAML's null),
 * and for a NULL pointer (absent). */
bool kc_yaml_is_null(const kc_yaml_node *node);

/* Value of `key` in a mapping, or NULL if absent or node is not a mapping. */
const kc_yaml_node *kc_yaml_map_get(const kc_yaml_node *map, const char *key);
/* The pair holding `key` (to report at the key's position), or NULL. */
const kc_yaml_pair *kc_yaml_map_pair(const kc_yaml_node *map, const char *key);

/* Writes "file:line:col: <message>" to err (if not NULL) and returns -EINVAL.
 * `at` may be NULL (then no position is written). */
int kc_yaml_error(char *err, size_t errlen, const kc_yaml_node *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Checks that node has the given type; otherwise
 * "file:line:col: <what>: expected a mapping, got a sequence". */
int kc_yaml_expect(const kc_yaml_node *node, enum kc_yaml_type type, const char *what,
                   char *err, size_t errlen);

/* Every key of `map` must be one of allowed[0..nallowed). The first unknown
 * key is reported at its own position:
 * "file:line:col: unknown key "replica" in <what> (did you mean "replicas"?)"
 * or "... (known keys: a, b, c)". Returns 0 or -EINVAL. */
int kc_yaml_check_keys(const kc_yaml_node *map, const char *const *allowed, size_t nallowed,
                       const char *what, char *err, size_t errlen);
/* One key (a mapping's pairs[i].key) against allowed[0..nallowed), with
 * kc_yaml_check_keys's message; a caller that reports every unknown key of
 * a mapping calls it per key. Returns 0 or -EINVAL. */
int kc_yaml_check_key(const kc_yaml_node *key, const char *const *allowed, size_t nallowed,
                      const char *what, char *err, size_t errlen);

/* The candidate closest to word for a "did you mean": equal but for case,
 * else the smallest edit distance below 3 (the first of equals). NULL when
 * none is that close. Borrowed from candidates. Context: any thread. */
const char *kc_yaml_closest(const char *word, const char *const *candidates, size_t n);

/* Typed getters. `what` names the setting in messages (e.g. "leaderElection.
 * leaseDuration"). Each returns 0, or -EINVAL with a positioned message. */

/* Any scalar except a plain null and text with embedded NUL bytes.
 * *out is borrowed from the document. */
int kc_yaml_get_string(const kc_yaml_node *node, const char *what, const char **out,
                       char *err, size_t errlen);
/* Plain true/True/TRUE/false/False/FALSE only; "yes", "on", quoted "true"
 * are errors (they are strings in YAML 1.2). */
int kc_yaml_get_bool(const kc_yaml_node *node, const char *what, bool *out, char *err,
                     size_t errlen);
/* Plain decimal integer with optional sign, within [min, max]. */
int kc_yaml_get_int(const kc_yaml_node *node, const char *what, int64_t min, int64_t max,
                    int64_t *out, char *err, size_t errlen);
/* Plain decimal number (integer or fraction, no inf/nan) within [min, max]. */
int kc_yaml_get_double(const kc_yaml_node *node, const char *what, double min, double max,
                       double *out, char *err, size_t errlen);
/* Duration in Go syntax ("500ms", "15s", "10m", "2h", "1h30m", "1.5s", "0"),
 * converted to milliseconds and checked against [min_ms, max_ms]. A value
 * that is not a whole number of milliseconds is an error. */
int kc_yaml_get_duration_ms(const kc_yaml_node *node, const char *what, int64_t min_ms,
                            int64_t max_ms, int64_t *out, char *err, size_t errlen);
/* A sequence of strings (each as kc_yaml_get_string). On success *out is a
 * malloc'd array of *count pointers borrowed from the document (the caller
 * frees the array only; NULL when count is 0). */
int kc_yaml_get_string_list(const kc_yaml_node *node, const char *what, const char ***out,
                            size_t *count, char *err, size_t errlen);

/* Parses a Go-style duration (units ns, us, µs, ms, s, m, h; fractions
 * allowed; no sign) into nanoseconds. Returns 0, -EINVAL (syntax; a bare
 * number other than 0 has no unit) or -ERANGE (overflow). Context: any. */
int kc_yaml_parse_duration(const char *text, int64_t *out_ns);

/* Structural equality (types, scalar text and plainness, keys in order),
 * ignoring positions and file names. Both may be NULL. */
bool kc_yaml_equal(const kc_yaml_node *a, const kc_yaml_node *b);

#endif
