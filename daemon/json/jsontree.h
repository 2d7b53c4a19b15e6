/* SPDX-License-Identifier: Apache-2.0 */
/* jsontree: yajl_tree_parse behind a nesting limit, for the places that read
 * a whole document as a yajl tree and pick members from it by name
 * (discovery's APIResourceList, Status bodies in kstatus.h, exec
 * credential plugin output, hook responses). The daemon's other JSON
 * reader, for objects and the watch/list stream, is jsonlex (jsonlex.h).
 *
 * Why: yajl_tree_parse itself keeps its own stack, but yajl_tree_free (and
 * so any tree it built) recurses once per nesting level, so a document nested
 * a million levels deep (2 MB of "[") overflows the thread's stack. Before
 * yajl sees the text, a pre-scan counts the open arrays and objects outside
 * strings and rejects the document once more than KC_JSONTREE_MAX_DEPTH are
 * open, without recursing. The limit is the one every built object has
 * (KC_JSON_MAX_DEPTH, jsonlex.h), so the daemon's two JSON readers agree on what
 * is too deep: 256 open containers, the root included, are fine, 257 are not.
 * Strings are skipped with jsonlex's scanner (kc_json_scan_string); one it
 * refuses, or that the end cuts off, is where yajl stops too, so the scan
 * ends there (but for a NUL byte after it, refused as below).
 *
 * The pre-scan also rejects what yajl_tree_parse would read differently from
 * it: NUL bytes (yajl_tree_parse stops at the first one) and '/' outside
 * strings (yajl_tree_parse accepts comments, and a '"' inside a comment
 * would otherwise make the scan lose track of strings). No API server sends
 * either, neither is JSON.
 *
 * Threads: any (no shared state). Errors: 0 or a negative errno; where a
 * function takes (err, errlen) it writes one NUL-terminated line there on
 * failure ("offset N: ..."); err may be NULL.
 * Ownership: the tree returned belongs to the caller (yajl_tree_free); the
 * input is only read.
 */
#ifndef KC_JSONTREE_H
#define KC_JSONTREE_H

#include <stddef.h>
#include <yajl/yajl_tree.h>

#include "json/jsonlex.h"

#define KC_JSONTREE_MAX_DEPTH KC_JSON_MAX_DEPTH

/* The pre-scan alone: 0 when `json` never has more than max_depth arrays and
 * objects open, and holds no NUL byte nor '/' outside strings; else -E2BIG
 * (too deep) or -EBADMSG, with the offset of the offending byte in err.
 * Does not validate the JSON otherwise; the scan ends at a string jsonlex
 * refuses (yajl stops there). */
int kc_jsontree_check(const char *json, size_t len, unsigned max_depth, char *err, size_t errlen);

/* Checks `json` (len bytes, need not be NUL-terminated) with
 * KC_JSONTREE_MAX_DEPTH, then parses it with yajl_tree_parse. Returns 0 and
 * *out, -E2BIG (too deep), -EBADMSG (NUL, comment, invalid JSON: "invalid
 * JSON: <yajl's message>") or -ENOMEM. *out is NULL on failure. */
int kc_jsontree_parse(const char *json, size_t len, yajl_val *out, char *err, size_t errlen);

#endif
