/* SPDX-License-Identifier: Apache-2.0 */
/* buf: the daemon's one growable text buffer and its writers (JSON string,
 * URL component, printf).
 *
 * Owns: kc_buf, a byte buffer that grows by doubling and keeps its text
 * NUL-terminated, with a sticky error: the first failure (-ENOMEM, -E2BIG
 * past `max`, -ENOSPC in a fixed buffer, -EINVAL from a bad format) is
 * kept in `err`, every later append is a no-op, so a writer appends freely
 * and checks once at the end. Also the one JSON string escaper
 * (kc_buf_json) and the one URL percent-encoder (kc_buf_url) of the daemon.
 * And KC_ARRAY_ROOM / KC_ARRAY_RESERVE, the one grow-by-doubling step of
 * the daemon's arrays.
 *
 * JSON strings (kc_buf_json / kc_buf_json_body) are written as RFC 8259
 * and Go's encoding/json write them, so that every JSON parser (yajl
 * included, which validates UTF-8) reads back the input:
 *   - '"' and '\\' as \" and \\; \b \f \n \r \t as those short escapes;
 *     other bytes below 0x20 as \u00XX (lowercase hex); everything else,
 *     valid multi-byte UTF-8 included, as is;
 *   - invalid UTF-8 (a stray continuation byte, a truncated or overlong
 *     sequence, a UTF-16 surrogate, a code point above U+10FFFF, bytes
 *     0xC0, 0xC1, 0xF5-0xFF) is replaced, one U+FFFD per offending byte
 *     (as Go's json.Marshal does), written as its UTF-8 bytes EF BF BD.
 *     So parse(kc_buf_json(s)) == s for valid UTF-8, and == s with each
 *     invalid byte replaced by U+FFFD otherwise; and the output is a fixed
 *     point: writing the string it parses to gives the same text again
 *     (tests/fuzz/fuzz_json_escape.c).
 * URL components (kc_buf_url): every byte but RFC 3986's unreserved
 * characters [A-Za-z0-9-._~] is percent-encoded (%XX, uppercase), which is
 * right both for a path segment and for a query value.
 *
 * Threads: a kc_buf is used by one thread at a time; the functions keep no
 * global state. Errors: kc_buf_reserve returns 0 or the sticky error; the
 * appenders return nothing (read `err`). Ownership: a growable buffer owns
 * `p` (kc_buf_free, or kc_buf_take to keep it); a fixed one (kc_buf_fixed)
 * writes into memory the caller owns and never allocates.
 */
#ifndef KC_BUF_H
#define KC_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct kc_buf {
  char *p;     /* the text, NUL-terminated once anything was reserved (NULL before) */
  size_t len;  /* bytes of text, without the NUL */
  size_t cap;  /* bytes at p */
  size_t max;  /* 0: no limit; else len never exceeds max (-E2BIG); kc_buf_set_max */
  size_t room; /* private: min(cap, max + 1), or len after an error */
  int err;     /* 0 or the first error, sticky until kc_buf_reset */
  bool fixed;  /* private: memory of the caller (kc_buf_fixed) */
} kc_buf;

/* A zeroed kc_buf ({0}) is an empty growable buffer without a limit. */

/* A buffer over the caller's mem[cap] (cap >= 1): never grows; an append
 * that does not fit writes what fits (the text stays NUL-terminated, cut)
 * and sets err to -ENOSPC. */
kc_buf kc_buf_fixed(char *mem, size_t cap);

/* Sets the limit on len (0: none). Text already longer stays; the next
 * append then fails with -E2BIG. */
void kc_buf_set_max(kc_buf *b, size_t max);

/* Slow path of kc_buf_reserve. */
int kc_buf_grow_(kc_buf *b, size_t more);

/* Makes room for `more` bytes after len (plus the NUL): a caller may then
 * write p[len .. len+more) and add to len itself (keeping p[len] = '\0' is
 * then its own business). Returns 0 or the sticky error. */
static inline int kc_buf_reserve(kc_buf *b, size_t more) {
  if (b->room - b->len > more) return 0;
  return kc_buf_grow_(b, more);
}

void kc_buf_add(kc_buf *b, const char *s, size_t n);
void kc_buf_puts(kc_buf *b, const char *s);
void kc_buf_putc(kc_buf *b, char c);
void kc_buf_printf(kc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Replaces the text with s[0..n). */
void kc_buf_set(kc_buf *b, const char *s, size_t n);

/* s[0..n) as a JSON string literal, quotes included (see the header comment). */
void kc_buf_json(kc_buf *b, const char *s, size_t n);
/* The same for a NUL-terminated s (NULL is written as ""). */
void kc_buf_json_c(kc_buf *b, const char *s);
/* The same without the quotes. */
void kc_buf_json_body(kc_buf *b, const char *s, size_t n);
/* s[0..n) percent-encoded as a URL path segment or query value. */
void kc_buf_url(kc_buf *b, const char *s, size_t n);

/* Length of the valid UTF-8 sequence at s (n >= 1 bytes left), 0 when the
 * bytes there are not one (the rules above). */
size_t kc_utf8_len(const unsigned char *s, size_t n);

/* Formats into a caller's fixed error buffer err[errlen] (cut to fit);
 * err NULL or errlen 0: nothing. */
void kc_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Empties the text and clears err, keeping the memory (and the limit). */
void kc_buf_reset(kc_buf *b);
/* Frees a growable buffer's memory; leaves an empty buffer (limit kept). */
void kc_buf_free(kc_buf *b);
/* Hands the text to the caller (free() it; NULL when nothing was ever
 * reserved, or after an error, which it keeps) and leaves the buffer empty. */
char *kc_buf_take(kc_buf *b);

/* Room for `need` elements in a malloc'ed array arr of cap elements (cap a
 * size_t lvalue): when cap is smaller, it doubles (from `first`, or from 1)
 * until it is not, by one realloc. KC_ARRAY_ROOM: room for element n.
 * Return 0, or -ENOMEM with arr and cap unchanged. */
#define KC_ARRAY_RESERVE(arr, cap, need, first) \
  kc_array_reserve(&(arr), &(cap), (need), sizeof *(arr), (first))
#define KC_ARRAY_ROOM(arr, cap, n, first) KC_ARRAY_RESERVE(arr, cap, (size_t)(n) + 1, first)
int kc_array_reserve(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

#endif
