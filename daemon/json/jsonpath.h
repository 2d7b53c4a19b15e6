/* SPDX-License-Identifier: Apache-2.0 */
/* jsonpath: the daemon's one path grammar and the allocation-free lookups
 * that follow such paths through a JSON text.
 *
 * Owns: the path syntax (kc_path_next / kc_path_parse / kc_path_problem),
 * used by object lookups (kc_obj_get, kobj.h), transform drop paths and
 * field capture (kbuild.h), config validation (config.c: indexes, drop
 * paths, watch mappings) and plugin settings (hostapi.c); and the lookups
 * (kc_json_get & co) with the rendering of the values they find. The
 * lookups tokenize nothing themselves: they walk the text with jsonlex's
 * in-place scanners (jsonlex.h), so strings, numbers and escapes are read
 * by the same rules as everywhere else in the daemon.
 *
 * Path syntax:
 *   spec.nodeName                       dot-separated object keys
 *   metadata.annotations["a.b/c"]       bracketed key: any bytes but '"' (no escapes)
 *   spec.containers[0].image            array index (decimal)
 *   metadata.ownerReferences[].uid      [] every element (only where allowed)
 *   ["a.b"].x, [0]                      a path may start with a bracket
 * A bare key is a non-empty run of bytes other than '.', '[', ']', '"' and
 * NUL; a '.' is followed by a bare key; after ']' comes '.', '[' or the end.
 *
 * The lookups work on any bytes without reading past the end. The parts of
 * the text they walk over (the keys and the values before the one found)
 * must be JSON by jsonlex's rules, else the answer is "absent" rather than
 * a failure; the value found is whole JSON, else absent too. With a
 * duplicated key the first occurrence is found. Threads: any (no state).
 * Errors: 0 or a negative errno (-EINVAL malformed path or value, -ENOSPC,
 * -ERANGE). Ownership: values point into the caller's text. */
#ifndef KC_JSONPATH_H
#define KC_JSONPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/kstr.h"
#include "json/jsonlex.h"

enum kc_path_seg_type { KC_PATH_KEY, KC_PATH_INDEX, KC_PATH_EACH };

typedef struct kc_path_seg {
  enum kc_path_seg_type type;
  const char *key; /* KC_PATH_KEY: points into the path, not NUL-terminated */
  size_t len;
  size_t index;    /* KC_PATH_INDEX */
} kc_path_seg;

/* Parses the segment at *pp; `first` for the path's first segment. Returns
 * 1 (and advances *pp), 0 at the end of the path, -EINVAL when malformed
 * (then *why, when why is not NULL, says why, e.g. "empty path segment"). */
int kc_path_next(const char **pp, kc_path_seg *s, bool first, const char **why);

/* Parses a whole path into segs[0..max). Returns the segment count, or
 * -EINVAL (malformed; "[]" without allow_each) or -E2BIG (more than max). */
int kc_path_parse(const char *path, kc_path_seg *segs, size_t max, bool allow_each);

/* NULL when path is valid (with "[]" only when allow_each), else the reason. */
const char *kc_path_problem(const char *path, bool allow_each);

enum kc_json_type {
  KC_JSON_ABSENT = 0,
  KC_JSON_NULL,
  KC_JSON_BOOL,
  KC_JSON_NUMBER,
  KC_JSON_STRING,
  KC_JSON_OBJECT,
  KC_JSON_ARRAY,
};

/* One JSON value inside a text: `raw` is the exact JSON text of the value
 * (strings include their quotes and escapes). */
typedef struct kc_json_value {
  enum kc_json_type type;
  kc_str raw;
} kc_json_value;

/* Looks up path (no "[]") in a JSON value's text. Returns 0 and fills *out
 * (type KC_JSON_ABSENT when the path does not exist), or -EINVAL for a
 * malformed path. No allocation. */
int kc_json_get(kc_str json, const char *path, kc_json_value *out);

/* A text with holes: where a value is the byte KC_JSON_HOLE, its text is
 * elsewhere and `hole` returns it (kobj.h "Shared pieces": a cached
 * object's text keeps one byte in place of a value it shares). Skipping
 * over a hole costs nothing; a lookup that reaches one continues in the
 * text `hole` returns (which has no holes). ud is passed through. */
#define KC_JSON_HOLE '\x01'
typedef struct kc_json_doc {
  kc_str text;
  kc_str (*hole)(const void *ud, const char *at); /* NULL: the text has no holes */
  const void *ud;
} kc_json_doc;
int kc_json_doc_get(const kc_json_doc *d, const char *path, kc_json_value *out);
/* Like kc_json_doc_get for paths with "[]" (every element of an array), e.g.
 * "metadata.ownerReferences[].uid". Calls cb for every value found (absent
 * values are skipped); cb returns false to stop. Returns the number of
 * values visited, or -EINVAL. */
int kc_json_doc_get_each(const kc_json_doc *d, const char *path,
                         bool (*cb)(const kc_json_value *v, void *ud), void *ud);

/* Unescapes a KC_JSON_STRING value into buf (NUL-terminated), as jsonlex
 * delivers strings (kc_json_unescape). Returns the decoded length, -ENOSPC
 * if it does not fit, -EINVAL if not a string. */
int kc_json_string(const kc_json_value *v, char *buf, size_t cap);

/* Parses a KC_JSON_NUMBER that is an integer. Returns 0 or -EINVAL/-ERANGE. */
int kc_json_int64(const kc_json_value *v, int64_t *out);

/* The decimal integer s[0..len) ("-"? digits) into *out; false when it is
 * not one or does not fit an int64_t. */
bool kc_json_parse_i64(const char *s, size_t len, int64_t *out);

/* True for KC_JSON_BOOL true. */
bool kc_json_true(const kc_json_value *v);

/* Renders a field value the way Kubernetes field selectors compare it:
 * strings unescaped, numbers and booleans as their text, absent/null as "".
 * Returns the length, or -ENOSPC / -EINVAL (objects, arrays). */
int kc_json_scalar_text(const kc_json_value *v, char *buf, size_t cap);

#endif
