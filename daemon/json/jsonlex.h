/* SPDX-License-Identifier: Apache-2.0 */
/* jsonlex: a resumable, strict JSON push lexer and parser with callbacks of
 * yajl's shape, and the ability to skip a value without callbacks; and the
 * same rules as in-place scanners over a whole text (kc_json_scan_*).
 *
 * Owns: the grammar and lexical rules of JSON as yajl 2.1 applies them with
 * the options the streaming decoder uses (decode.h): UTF-8 validated,
 * comments refused, optionally several top-level values back to back
 * (KC_JSONLEX_MULTIPLE, watch bodies), else trailing garbage refused; a
 * value cut off by the end is refused at kc_jsonlex_finish. The daemon's
 * other readers of JSON text build on it: kc_obj_parse (decode.h) and the
 * streaming decoder feed its callbacks to the object builder, the path
 * lookups (jsonpath.h) walk a text with the scanners below; only yajl's
 * tree (jsontree.h) parses on its own, behind this lexer's check.
 *
 * Why not yajl here (docs/dependencies.md): yajl 2.1 lexes an unfinished
 * token again from its first byte on every yajl_parse call, and it cannot
 * skip a value: every token of every byte becomes a callback. This lexer
 * is fed arbitrary pieces (1 byte ... MBs, cut anywhere: inside a token, an
 * escape or a UTF-8 sequence) and never reads a byte of an earlier feed
 * again: a token spanning feeds is assembled once, in an internal buffer,
 * and only when its value is delivered. Cost O(bytes) whatever the chunking.
 *
 * The rules (yajl 2.1's, src/yajl_lex.c, src/yajl_parser.c and
 * src/yajl_encode.c of lloyd/yajl):
 *   - white space between tokens: space, \t, \n, \r, and also \v and \f;
 *   - strings: bytes below 0x20 are refused; escapes \" \\ \/ \b \f \n \r
 *     \t and \u with exactly 4 hex digits; UTF-8 is checked the way yajl
 *     checks it: a lead byte 110xxxxx takes 1 continuation byte (10xxxxxx),
 *     1110xxxx 2, 11110xxx 3; any other byte >= 0x80 as a lead is refused.
 *     (So overlong forms, surrogates and code points above U+10FFFF encoded
 *     directly are accepted, as yajl accepts them.)
 *   - unescaping (the text handed to string / map_key): as yajl_string_decode:
 *     \u0000 gives one NUL byte; a high surrogate \uD800-\uDBFF followed by
 *     \uXXXX is combined with it (the second one is not checked to be a low
 *     surrogate); a high surrogate not followed by "\u" gives "?"; a lone
 *     low surrogate is encoded as 3 bytes.
 *   - numbers: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and a number
 *     ends at the first byte that cannot continue it (so "01" is two values,
 *     0 and 1, which only multiple-values mode accepts at the top level);
 *     the text is delivered as is (no conversion, no range check);
 *   - literals true, false, null, byte by byte;
 *   - after a complete top-level value, a string cut off by the end of the
 *     text is ignored (yajl 2.1 accepts "{} \"abc"), whereas a complete one
 *     is trailing garbage (or the next value, KC_JSONLEX_MULTIPLE).
 * Deliberate differences from yajl :
 *   - nesting depth is limited (yajl has no limit): KC_JSONLEX_MAX_DEPTH,
 *     or lower with kc_jsonlex_set_max_depth; deeper input fails -E2BIG;
 *   - a token whose value is delivered (not skipped) and which spans feeds
 *     is limited to kc_jsonlex_set_max_token bytes (-E2BIG);
 *   - error messages are yajl's texts, but a token in the wrong place is
 *     refused at its first byte with the parse error (yajl lexes it first,
 *     so a malformed token there gets its lexical error instead), and the
 *     error offset may differ by the length of that token.
 *
 * Skipping: start_map, start_array and map_key may return KC_JSONLEX_SKIP:
 *   - from start_map / start_array: the contents of that container are
 *     validated without any callback; when it closes, its end_map /
 *     end_array IS delivered (the caller's depth bookkeeping stays simple);
 *   - from map_key: the value of that key is validated without any
 *     callback at all (no start/end for a container value, nothing for a
 *     scalar); the next callback is the next key or the end of the map.
 *   Any other callback returning KC_JSONLEX_SKIP means KC_JSONLEX_GO.
 *   Skipped content costs a few instructions per byte (strings: 16 bytes
 *   per step under __SSE2__, a byte-class table otherwise).
 *
 * Callbacks return KC_JSONLEX_GO (1) to go on, KC_JSONLEX_STOP (0) to stop
 * with the consumer's error (feed/finish return -ECANCELED and nothing more
 * is delivered), or KC_JSONLEX_SKIP (2) as above. Strings and numbers are
 * borrowed for the call (they point into the feed or an internal buffer).
 * NULL members are skipped as if they returned GO.
 *
 * Position: during a callback, kc_jsonlex_pos() is the offset in the
 * current feed's buffer just past the token being delivered (0 for a
 * number that ended at the feed's first byte; at kc_jsonlex_finish there is
 * no feed: 0), what yajl_get_bytes_consumed() gives inside a yajl callback.
 * After an error it is the offset in the last feed where the error was
 * found (0 at finish).
 *
 * Threads: one thread at a time per handle; no global state.
 * Errors: 0, -EBADMSG (not JSON, kc_jsonlex_error() says why, in yajl's
 * words: "lexical error: invalid char in json text.", "parse error:
 * premature EOF", ...), -E2BIG (a limit above), -ENOMEM, -ECANCELED (a
 * callback returned STOP). The first error is final: later feeds and
 * finish return it again.
 * Ownership: the handle copies the callbacks; it owns its buffers.
 */
#ifndef KC_JSONLEX_H
#define KC_JSONLEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Nesting limit every JSON reader of the daemon applies: arrays and objects
 * open at once inside one document, the root included. kbuild's objects,
 * the streaming decoder and jsontree all use it, so they agree on "too deep". */
#define KC_JSON_MAX_DEPTH 256

enum { KC_JSONLEX_STOP = 0, KC_JSONLEX_GO = 1, KC_JSONLEX_SKIP = 2 };

#define KC_JSONLEX_MULTIPLE 1u /* several top-level values back to back (yajl_allow_multiple_values) */

#define KC_JSONLEX_MAX_DEPTH 1024         /* open containers, at most (and the default) */
#define KC_JSONLEX_MAX_TOKEN (64u << 20)  /* default bytes of a delivered token spanning feeds */

typedef struct kc_jsonlex_callbacks {
  int (*null)(void *ud);
  int (*boolean)(void *ud, int value);
  int (*number)(void *ud, const char *s, size_t len);
  int (*string)(void *ud, const char *s, size_t len);
  int (*map_key)(void *ud, const char *s, size_t len);
  int (*start_map)(void *ud);
  int (*end_map)(void *ud);
  int (*start_array)(void *ud);
  int (*end_array)(void *ud);
} kc_jsonlex_callbacks;

typedef struct kc_jsonlex kc_jsonlex;

/* flags: 0 or KC_JSONLEX_MULTIPLE. NULL with errno ENOMEM. */
kc_jsonlex *kc_jsonlex_new(const kc_jsonlex_callbacks *cbs, void *ud, unsigned flags);
void kc_jsonlex_free(kc_jsonlex *lx);
/* 1..KC_JSONLEX_MAX_DEPTH (others: the maximum); applies to containers
 * opened from now on. */
void kc_jsonlex_set_max_depth(kc_jsonlex *lx, unsigned depth);
/* 0 restores KC_JSONLEX_MAX_TOKEN. */
void kc_jsonlex_set_max_token(kc_jsonlex *lx, size_t bytes);
/* The next piece of the text. */
int kc_jsonlex_feed(kc_jsonlex *lx, const char *buf, size_t len);
/* End of the text: a number at the end is delivered, anything unfinished
 * is refused ("parse error: premature EOF"). */
int kc_jsonlex_finish(kc_jsonlex *lx);
size_t kc_jsonlex_pos(const kc_jsonlex *lx);
/* 0 or the first error. */
int kc_jsonlex_result(const kc_jsonlex *lx);
/* "" while there was no error. */
const char *kc_jsonlex_error(const kc_jsonlex *lx);

/* --- Scanning a text in place ---
 * For readers that walk a complete text held in memory and look at part of
 * it (jsonpath.h's lookups): the rules above, token by token, without a
 * handle, allocation or callbacks. p points at the first byte of a token,
 * end just past the text; a scanner returns the first byte after what it
 * scanned, or NULL when the text there is not JSON by these rules
 * (malformed, or cut off by end). Threads: any. */

/* JSON white space as yajl accepts it (it also takes \v and \f). */
static inline bool kc_json_is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
}
/* The first byte at or after p that is not white space (end at most). */
const char *kc_json_skip_ws(const char *p, const char *end);
/* A string, p at its opening quote. */
const char *kc_json_scan_string(const char *p, const char *end);
/* One whole value: a string, a number (it ends at the first byte that
 * cannot continue it, or at end), a literal, or an array or object with
 * all it holds (grammar checked, at most KC_JSONLEX_MAX_DEPTH levels).
 * hole >= 0: that byte, where a value may stand, is taken for a whole
 * value (the place holder of jsonpath.h's kc_json_doc); -1: no such byte. */
const char *kc_json_scan_value(const char *p, const char *end, int hole);
/* Decodes a scanned string's body (the n bytes between its quotes) into
 * out[0..cap) as the lexer delivers strings ("unescaping" above; no NUL
 * added). Returns 0 and *outlen (at most n), -ENOSPC when cap is too
 * small, -EINVAL for a malformed escape (not a scanned string's body). */
int kc_json_unescape(const char *body, size_t n, char *out, size_t cap, size_t *outlen);
/* True when a string body (as above) decodes to exactly b[0..blen). */
bool kc_json_unescaped_eq(const char *body, size_t n, const char *b, size_t blen);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Containers open right now (the innermost one's depth; 0 between values). */
unsigned kc_jsonlex_depth(const kc_jsonlex *lx);
/* Total bytes fed so far. */
uint64_t kc_jsonlex_offset(const kc_jsonlex *lx);

#endif
