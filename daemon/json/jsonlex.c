/* SPDX-License-Identifier: Apache-2.0 */
/* jsonlex: see jsonlex.h. One state machine over the bytes of each feed:
 * the parser state of the innermost container (cur, the parents' states
 * saved on a byte stack) and, between feeds, the state of the one token in
 * progress (string: escape / \u digits / UTF-8 bytes still expected; number:
 * its grammar state; literal: bytes matched). */
#include "json/jsonlex.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/buf.h"

/* Parser states: where the next token is. */
enum {
  TOP_START = 0, /* before the (first) top-level value */
  TOP_DONE,      /* after a top-level value */
  M_FIRST,       /* after '{': a key or '}' */
  M_KEY,         /* after ',' in a map: a key */
  M_COLON,       /* after a key: ':' */
  M_VALUE,       /* after ':': a value */
  M_NEXT,        /* after a member: ',' or '}' */
  A_FIRST,       /* after '[': a value or ']' */
  A_VALUE,       /* after ',' in an array: a value */
  A_NEXT,        /* after an element: ',' or ']' */
  NSTATES
};

/* The state after a value that started in state s. */
static const uint8_t got_state[NSTATES] = {
    [TOP_START] = TOP_DONE, [TOP_DONE] = TOP_DONE, [M_VALUE] = M_NEXT,
    [A_FIRST] = A_NEXT,     [A_VALUE] = A_NEXT,
};

enum { TK_NONE = 0, TK_STR, TK_NUM, TK_LIT };

/* Number grammar states. */
enum { N_MINUS = 1, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

struct kc_jsonlex {
  kc_jsonlex_callbacks cb;
  void *ud;
  uint8_t valpos[NSTATES]; /* a value may start in this state */
  unsigned max_depth;

  const unsigned char *in; /* the current feed (NULL outside feeds) */
  size_t pos;              /* kc_jsonlex_pos */
  uint64_t fed;

  uint8_t cur;
  bool finished;
  unsigned depth;
  unsigned skip_depth; /* != 0: inside the skipped container opened at this depth */
  bool skip_noend;     /* that container is a skipped key's value: no end callback */
  bool skip_val;       /* the next value is a skipped key's value */

  /* The token in progress at the end of the last feed. */
  uint8_t tok;
  bool key;     /* TK_STR: a map key */
  bool has_esc; /* TK_STR: has escapes (decode before delivering) */
  bool collect; /* its bytes are assembled in tb (it will be delivered) */
  uint8_t esc;  /* TK_STR: 1 = after a backslash */
  uint8_t hex;  /* TK_STR: \u digits still expected */
  uint8_t utf8; /* TK_STR: UTF-8 continuation bytes still expected */
  uint8_t num;  /* TK_NUM: N_* */
  uint8_t lit, lit_i; /* TK_LIT: which literal, bytes matched */
  kc_buf tb;          /* the assembled token (max: the token limit) */
  kc_buf db;          /* a string unescaped */

  int err;
  char msg[160];
  uint8_t saved[KC_JSONLEX_MAX_DEPTH]; /* the state to return to when the container closes */
};

static const char *const lit_text[3] = {"null", "true", "false"};

/* Bytes that end the plain run of a string: '"', '\\', below 0x20, >= 0x80. */
static const uint8_t str_stop[256] = {
    [0 ... 0x1f] = 1, ['"'] = 1, ['\\'] = 1, [0x80 ... 0xff] = 1,
};
static const uint8_t esc_ok[256] = {
    ['"'] = 1, ['\\'] = 1, ['/'] = 1, ['b'] = 1, ['f'] = 1, ['n'] = 1, ['r'] = 1, ['t'] = 1,
};
/* A hex digit's value plus 1; 0 for other bytes. */
static const uint8_t hex1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,
    ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14,
    ['e'] = 15, ['f'] = 16, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15,
    ['F'] = 16,
};

static int failv(kc_jsonlex *lx, int err, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int failv(kc_jsonlex *lx, int err, size_t at, const char *fmt, ...) {
  lx->err = err;
  lx->pos = at;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lx->msg, sizeof lx->msg, fmt, ap);
  va_end(ap);
  return err;
}

#define LEX_ERR(at, m) failv(lx, -EBADMSG, (at), "lexical error: %s", (m))
#define PARSE_ERR(at, m) failv(lx, -EBADMSG, (at), "parse error: %s", (m))

static int cancelled(kc_jsonlex *lx) {
  return failv(lx, -ECANCELED, lx->pos, "client cancelled parse via callback return value");
}

kc_jsonlex *kc_jsonlex_new(const kc_jsonlex_callbacks *cbs, void *ud, unsigned flags) {
  kc_jsonlex *lx = calloc(1, sizeof *lx);
  if (!lx) {
    errno = ENOMEM;
    return NULL;
  }
  if (cbs) lx->cb = *cbs;
  lx->ud = ud;
  lx->max_depth = KC_JSONLEX_MAX_DEPTH;
  lx->valpos[TOP_START] = lx->valpos[M_VALUE] = lx->valpos[A_FIRST] = lx->valpos[A_VALUE] = 1;
  lx->valpos[TOP_DONE] = (flags & KC_JSONLEX_MULTIPLE) != 0;
  kc_buf_set_max(&lx->tb, KC_JSONLEX_MAX_TOKEN);
  return lx;
}

void kc_jsonlex_free(kc_jsonlex *lx) {
  if (!lx) return;
  kc_buf_free(&lx->tb);
  kc_buf_free(&lx->db);
  free(lx);
}

void kc_jsonlex_set_max_depth(kc_jsonlex *lx, unsigned depth) {
  lx->max_depth = depth >= 1 && depth <= KC_JSONLEX_MAX_DEPTH ? depth : KC_JSONLEX_MAX_DEPTH;
}

void kc_jsonlex_set_max_token(kc_jsonlex *lx, size_t bytes) {
  kc_buf_set_max(&lx->tb, bytes ? bytes : KC_JSONLEX_MAX_TOKEN);
}

size_t kc_jsonlex_pos(const kc_jsonlex *lx) { return lx->pos; }
uint64_t kc_jsonlex_offset(const kc_jsonlex *lx) { return lx->fed; }
int kc_jsonlex_result(const kc_jsonlex *lx) { return lx->err; }
const char *kc_jsonlex_error(const kc_jsonlex *lx) { return lx->err ? lx->msg : ""; }
unsigned kc_jsonlex_depth(const kc_jsonlex *lx) { return lx->depth; }

static inline bool quiet(const kc_jsonlex *lx) { return lx->skip_depth || lx->skip_val; }

/* A scalar value ended. */
static inline void value_end(kc_jsonlex *lx) {
  lx->cur = got_state[lx->cur];
  lx->skip_val = false;
}

/* The message for a token that may not come in the current state. */
static int unexpected(kc_jsonlex *lx, size_t at) {
  const char *m;
  switch (lx->cur) {
  case TOP_DONE:
    m = lx->valpos[TOP_DONE] ? "unallowed token at this point in JSON text" : "trailing garbage";
    break;
  case M_FIRST:
  case M_KEY: m = "invalid object key (must be a string)"; break;
  case M_COLON: m = "object key and value must be separated by a colon (':')"; break;
  case M_NEXT: m = "after key and value, inside map, I expect ',' or '}'"; break;
  case A_NEXT: m = "after array element, I expect ',' or ']'"; break;
  default: m = "unallowed token at this point in JSON text"; break;
  }
  return PARSE_ERR(at, m);
}

/* Appends a piece of the token in progress to tb. */
static int collect(kc_jsonlex *lx, const unsigned char *s, size_t n, size_t at) {
  kc_buf_add(&lx->tb, (const char *)s, n);
  if (!lx->tb.err) return 0;
  if (lx->tb.err == -E2BIG)
    return failv(lx, -E2BIG, at, "token larger than the limit of %zu bytes", lx->tb.max);
  return failv(lx, -ENOMEM, at, "out of memory");
}

/* Gives tb's memory back after a large token. */
static void tb_done(kc_jsonlex *lx) {
  if (lx->tb.cap > (64u << 10)) kc_buf_free(&lx->tb);
  else kc_buf_reset(&lx->tb);
}

/* --- Strings --------------------------------------------------------------- */

/* The offset of the first byte at or after i that ends a plain run. */
static inline size_t str_scan(const unsigned char *p, size_t i, size_t n) {
#ifdef __SSE2__
  const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(0x20);
  while (i + 16 <= n) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
    /* signed compare: bytes >= 0x80 are negative, so "< 0x20" takes both
     * the control bytes and the UTF-8 bytes */
    __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, bs)),
                             _mm_cmplt_epi8(x, sp));
    unsigned mask = (unsigned)_mm_movemask_epi8(m);
    if (mask) return i + (size_t)__builtin_ctz(mask);
    i += 16;
  }
#endif
  while (i < n && !str_stop[p[i]]) i++;
  return i;
}

/* Continuation bytes a UTF-8 lead byte takes (yajl's rule), 0 = invalid. */
static inline unsigned utf8_more(unsigned char c) {
  if ((c >> 5) == 0x6) return 1;
  if ((c >> 4) == 0xe) return 2;
  if ((c >> 3) == 0x1e) return 3;
  return 0;
}

static unsigned hex4(const unsigned char *s) {
  unsigned v = 0;
  for (int k = 0; k < 4; k++) v = (v << 4) | (unsigned)(hex1[s[k]] - 1);
  return v;
}

static bool is_hex4(const unsigned char *s, size_t left) {
  if (left < 4) return false;
  for (int k = 0; k < 4; k++)
    if (!hex1[s[k]]) return false;
  return true;
}

static size_t put_utf8(unsigned char *w, unsigned cp) {
  if (cp < 0x80) {
    w[0] = (unsigned char)cp; /* \u0000 gives one NUL byte */
    return 1;
  }
  if (cp < 0x800) {
    w[0] = (unsigned char)(0xc0 | (cp >> 6));
    w[1] = (unsigned char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    w[0] = (unsigned char)(0xe0 | (cp >> 12));
    w[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    w[2] = (unsigned char)(0x80 | (cp & 0x3f));
    return 3;
  }
  if (cp < 0x200000) {
    w[0] = (unsigned char)(0xf0 | (cp >> 18));
    w[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    w[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    w[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
  }
  w[0] = '?';
  return 1;
}

/* Unescapes a lexed string body s[0..n) into db (jsonlex.h "unescaping").
 * The output is never longer than the input. */
static int unescape(kc_jsonlex *lx, const unsigned char *s, size_t n) {
  kc_buf_reset(&lx->db);
  if (kc_buf_reserve(&lx->db, n + 1)) return failv(lx, -ENOMEM, lx->pos, "out of memory");
  unsigned char *w0 = (unsigned char *)lx->db.p, *w = w0;
  size_t i = 0;
  while (i < n) {
    const unsigned char *bs = memchr(s + i, '\\', n - i);
    size_t j = bs ? (size_t)(bs - s) : n;
    memcpy(w, s + i, j - i);
    w += j - i;
    if (j >= n) break;
    i = j + 1;
    if (i >= n) break; /* cannot happen on lexed text */
    unsigned char c = s[i++];
    switch (c) {
    case 'r': *w++ = '\r'; break;
    case 'n': *w++ = '\n'; break;
    case 'f': *w++ = '\f'; break;
    case 'b': *w++ = '\b'; break;
    case 't': *w++ = '\t'; break;
    case '\\':
    case '/':
    case '"': *w++ = c; break;
    case 'u': {
      if (!is_hex4(s + i, n - i)) { /* cannot happen on lexed text */
        *w++ = '?';
        break;
      }
      unsigned cp = hex4(s + i);
      i += 4;
      if ((cp & 0xfc00) == 0xd800) {
        if (i + 1 < n && s[i] == '\\' && s[i + 1] == 'u' && is_hex4(s + i + 2, n - i - 2)) {
          unsigned lo = hex4(s + i + 2);
          cp = ((cp & 0x3f) << 10) | ((((cp >> 6) & 0xf) + 1) << 16) | (lo & 0x3ff);
          i += 6;
        } else {
          *w++ = '?'; /* a lone high surrogate */
          break;
        }
      }
      w += put_utf8(w, cp);
      break;
    }
    default: *w++ = '?'; break; /* cannot happen on lexed text */
    }
  }
  lx->db.len = (size_t)(w - w0);
  return 0;
}

/* A string token ended just before s[n] (its closing quote at feed offset
 * pos - 1): deliver it and move on. */
static int string_end(kc_jsonlex *lx, const unsigned char *s, size_t n, size_t pos) {
  bool key = lx->key;
  if (lx->cur == TOP_DONE && !lx->valpos[TOP_DONE]) return PARSE_ERR(pos, "trailing garbage");
  int r = KC_JSONLEX_GO;
  if (lx->collect) {
    lx->pos = pos;
    if (lx->has_esc) {
      if (unescape(lx, s, n)) return lx->err;
      s = (const unsigned char *)lx->db.p;
      n = lx->db.len;
    }
    r = key ? lx->cb.map_key(lx->ud, (const char *)s, n) : lx->cb.string(lx->ud, (const char *)s, n);
  }
  if (lx->tok) {
    lx->tok = TK_NONE;
    tb_done(lx);
  }
  if (key) {
    lx->cur = M_COLON;
    if (r == KC_JSONLEX_SKIP) lx->skip_val = true;
  } else {
    value_end(lx);
  }
  if (r == KC_JSONLEX_STOP) return cancelled(lx);
  return 0;
}

/* Escape letter at p[*ip] (the backslash before it already read). 1: the
 * feed ended inside (state saved), 0: done, < 0 error. */
static int str_escape(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t *ip) {
  size_t i = *ip;
  unsigned hex = lx->hex;
  if (!hex) {
    if (i >= n) {
      lx->esc = 1;
      return 1;
    }
    unsigned char c = p[i];
    if (c != 'u') {
      if (!esc_ok[c])
        return LEX_ERR(i, "inside a string, '\\' occurs before a character which it may not.");
      *ip = i + 1;
      return 0;
    }
    i++;
    hex = 4;
  }
  while (hex) {
    if (i >= n) {
      lx->hex = (uint8_t)hex;
      *ip = i;
      return 1;
    }
    if (!hex1[p[i]])
      return LEX_ERR(i, "invalid (non-hex) character occurs after '\\u' inside string.");
    i++;
    hex--;
  }
  lx->hex = 0;
  *ip = i;
  return 0;
}

/* UTF-8 continuation bytes still expected (lx->utf8) from p[*ip]. */
static int str_utf8(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t *ip) {
  size_t i = *ip;
  unsigned k = lx->utf8;
  while (k) {
    if (i >= n) {
      lx->utf8 = (uint8_t)k;
      *ip = i;
      return 1;
    }
    if ((p[i] & 0xc0) != 0x80) return LEX_ERR(i, "invalid bytes in UTF8 string.");
    i++;
    k--;
  }
  lx->utf8 = 0;
  *ip = i;
  return 0;
}

/* Lexes string content from p[i]; the content began at p[start] of this
 * feed (0 when resumed). *ip: where the main loop goes on. */
static int str_body(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t start, size_t i,
                    size_t *ip) {
  int r;
  for (;;) {
    i = str_scan(p, i, n);
    if (i >= n) break;
    unsigned char c = p[i];
    if (c == '"') {
      *ip = i + 1;
      if (!lx->tok) return string_end(lx, p + start, i - start, i + 1);
      if (lx->collect && collect(lx, p + start, i - start, i)) return lx->err;
      return string_end(lx, (const unsigned char *)lx->tb.p, lx->tb.len, i + 1);
    }
    if (c == '\\') {
      lx->has_esc = true;
      i++;
      r = str_escape(lx, p, n, &i);
    } else if (c < 0x20) {
      return LEX_ERR(i, "invalid character inside string.");
    } else {
      lx->utf8 = (uint8_t)utf8_more(c);
      if (!lx->utf8) return LEX_ERR(i, "invalid bytes in UTF8 string.");
      i++;
      r = str_utf8(lx, p, n, &i);
    }
    if (r < 0) return r;
    if (r > 0) break;
  }
  /* The feed ended inside the string. */
  if (!lx->tok) {
    lx->tok = TK_STR;
    if (lx->collect) kc_buf_reset(&lx->tb);
  }
  if (lx->collect && collect(lx, p + start, n - start, n)) return lx->err;
  *ip = n;
  return 0;
}

/* A string starts at p[i] ('"'). */
static inline int string_start(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t i,
                               bool key, size_t *ip) {
  lx->key = key;
  lx->has_esc = false;
  lx->esc = lx->hex = lx->utf8 = 0;
  lx->collect = !quiet(lx) && (key ? lx->cb.map_key : lx->cb.string) != NULL &&
                (lx->cur != TOP_DONE || lx->valpos[TOP_DONE]);
  return str_body(lx, p, n, i + 1, i + 1, ip);
}

/* --- Numbers and literals -------------------------------------------------- */

static int number_end(kc_jsonlex *lx, const unsigned char *s, size_t n, size_t pos) {
  int r = KC_JSONLEX_GO;
  if (lx->collect) {
    lx->pos = pos;
    r = lx->cb.number(lx->ud, (const char *)s, n);
  }
  if (lx->tok) {
    lx->tok = TK_NONE;
    tb_done(lx);
  }
  value_end(lx);
  if (r == KC_JSONLEX_STOP) return cancelled(lx);
  return 0;
}

/* The number cannot continue with this byte: an error, or 0 (it ended). */
static int number_stop(kc_jsonlex *lx, size_t at) {
  switch (lx->num) {
  case N_MINUS: return LEX_ERR(at, "malformed number, a digit is required after the minus sign.");
  case N_DOT: return LEX_ERR(at, "malformed number, a digit is required after the decimal point.");
  case N_E:
  case N_ESIGN: return LEX_ERR(at, "malformed number, a digit is required after the exponent.");
  default: return 0;
  }
}

static inline bool is_digit(unsigned char c) { return (unsigned)(c - '0') < 10; }

/* Lexes number bytes from p[i] (state lx->num); the number began at
 * p[start] of this feed (0 when resumed). */
static int num_body(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t start, size_t i,
                    size_t *ip) {
  unsigned st = lx->num;
  for (; i < n; i++) {
    unsigned char c = p[i];
    switch (st) {
    case N_MINUS:
      if (c == '0') st = N_ZERO;
      else if (is_digit(c)) st = N_INT;
      else goto stop;
      continue;
    case N_INT:
      while (is_digit(c) && ++i < n) c = p[i];
      if (i >= n) goto more;
      __attribute__((fallthrough));
    case N_ZERO:
      if (c == '.') st = N_DOT;
      else if (c == 'e' || c == 'E') st = N_E;
      else goto stop;
      continue;
    case N_DOT:
      if (!is_digit(c)) goto stop;
      st = N_FRAC;
      continue;
    case N_FRAC:
      while (is_digit(c) && ++i < n) c = p[i];
      if (i >= n) goto more;
      if (c == 'e' || c == 'E') st = N_E;
      else goto stop;
      continue;
    case N_E:
      if (c == '+' || c == '-') st = N_ESIGN;
      else if (is_digit(c)) st = N_EXP;
      else goto stop;
      continue;
    case N_ESIGN:
      if (!is_digit(c)) goto stop;
      st = N_EXP;
      continue;
    default: /* N_EXP */
      while (is_digit(c) && ++i < n) c = p[i];
      if (i >= n) goto more;
      goto stop;
    }
  }
more:
  lx->num = (uint8_t)st;
  if (!lx->tok) {
    lx->tok = TK_NUM;
    if (lx->collect) kc_buf_reset(&lx->tb);
  }
  if (lx->collect && collect(lx, p + start, n - start, n)) return lx->err;
  *ip = n;
  return 0;
stop:
  lx->num = (uint8_t)st;
  if (number_stop(lx, i)) return lx->err;
  *ip = i; /* the byte that ended it is the next token's */
  if (!lx->tok) return number_end(lx, p + start, i - start, i);
  if (lx->collect && collect(lx, p + start, i - start, i)) return lx->err;
  return number_end(lx, (const unsigned char *)lx->tb.p, lx->tb.len, i);
}

static int literal_end(kc_jsonlex *lx, size_t pos) {
  int r = KC_JSONLEX_GO;
  lx->tok = TK_NONE;
  if (!quiet(lx)) {
    lx->pos = pos;
    if (lx->lit == 0) {
      if (lx->cb.null) r = lx->cb.null(lx->ud);
    } else if (lx->cb.boolean) {
      r = lx->cb.boolean(lx->ud, lx->lit == 1);
    }
  }
  value_end(lx);
  if (r == KC_JSONLEX_STOP) return cancelled(lx);
  return 0;
}

/* Matches literal bytes from p[i] (lx->lit, lx->lit_i matched so far). */
static int lit_body(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t i, size_t *ip) {
  const char *want = lit_text[lx->lit];
  unsigned k = lx->lit_i;
  while (want[k]) {
    if (i >= n) {
      lx->lit_i = (uint8_t)k;
      lx->tok = TK_LIT;
      *ip = n;
      return 0;
    }
    if (p[i] != (unsigned char)want[k]) return LEX_ERR(i, "invalid string in json text.");
    i++;
    k++;
  }
  *ip = i;
  return literal_end(lx, i);
}

/* --- Containers ------------------------------------------------------------ */

static inline int open_container(kc_jsonlex *lx, bool array, size_t pos) {
  if (lx->depth >= lx->max_depth)
    return failv(lx, -E2BIG, pos - 1, "nesting deeper than %u levels", lx->max_depth);
  lx->saved[lx->depth++] = got_state[lx->cur];
  lx->cur = array ? A_FIRST : M_FIRST;
  if (lx->skip_depth) return 0;
  if (lx->skip_val) {
    lx->skip_val = false;
    lx->skip_depth = lx->depth;
    lx->skip_noend = true;
    return 0;
  }
  int (*f)(void *) = array ? lx->cb.start_array : lx->cb.start_map;
  if (!f) return 0;
  lx->pos = pos;
  int r = f(lx->ud);
  if (r == KC_JSONLEX_STOP) return cancelled(lx);
  if (r == KC_JSONLEX_SKIP) {
    lx->skip_depth = lx->depth;
    lx->skip_noend = false;
  }
  return 0;
}

static inline int close_container(kc_jsonlex *lx, bool array, size_t pos) {
  unsigned d = lx->depth--;
  lx->cur = lx->saved[lx->depth];
  if (lx->skip_depth) {
    if (d != lx->skip_depth) return 0;
    lx->skip_depth = 0;
    if (lx->skip_noend) {
      lx->skip_noend = false;
      return 0;
    }
  }
  int (*f)(void *) = array ? lx->cb.end_array : lx->cb.end_map;
  if (!f) return 0;
  lx->pos = pos;
  if (f(lx->ud) == KC_JSONLEX_STOP) return cancelled(lx);
  return 0;
}

/* --- The main loop --------------------------------------------------------- */

/* Finishes the token left unfinished by the previous feed. */
static int resume(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t *ip) {
  size_t i = 0;
  int r;
  switch (lx->tok) {
  case TK_STR:
    if (lx->esc || lx->hex) {
      lx->esc = 0;
      r = str_escape(lx, p, n, &i);
    } else if (lx->utf8) {
      r = str_utf8(lx, p, n, &i);
    } else {
      r = 0;
    }
    if (r < 0) return r;
    if (r > 0) { /* still inside: the whole feed belongs to the string */
      if (lx->collect && collect(lx, p, n, n)) return lx->err;
      *ip = n;
      return 0;
    }
    return str_body(lx, p, n, 0, i, ip);
  case TK_NUM: return num_body(lx, p, n, 0, 0, ip);
  default: return lit_body(lx, p, n, 0, ip);
  }
}

static int run(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t i) {
  int r = 0;
  while (i < n) {
    unsigned char c = p[i];
    switch (c) {
    case ' ':
    case '\t':
    case '\n':
    case '\r':
    case '\v':
    case '\f': i++; continue;
    case '"':
    string_token: {
      bool key = lx->cur == M_FIRST || lx->cur == M_KEY;
      if (key || lx->valpos[lx->cur]) {
        /* The common case inline: a string without escapes or UTF-8,
         * whole in this feed. */
        size_t j = str_scan(p, i + 1, n);
        if (j < n && p[j] == '"') {
          const char *sv = (const char *)p + i + 1;
          size_t sn = j - i - 1;
          i = j + 1;
          int rr = KC_JSONLEX_GO;
          if (key) {
            lx->cur = M_COLON;
            if (!quiet(lx) && lx->cb.map_key) {
              lx->pos = i;
              rr = lx->cb.map_key(lx->ud, sv, sn);
              if (rr == KC_JSONLEX_SKIP) lx->skip_val = true;
            }
            if (rr == KC_JSONLEX_STOP) return cancelled(lx);
            /* Compact JSON: the colon right after, often a string value
             * after it. Taken here, not through the switch: its indirect
             * jump, mispredicted a token at a time, was a fifth of the
             * lexer's time on a Pod list. */
            if (i < n && p[i] == ':') {
              lx->cur = M_VALUE;
              i++;
              if (i < n && p[i] == '"') goto string_token;
            }
            continue;
          }
          if (!quiet(lx) && lx->cb.string) {
            lx->pos = i;
            rr = lx->cb.string(lx->ud, sv, sn);
          }
          value_end(lx);
          if (rr == KC_JSONLEX_STOP) return cancelled(lx);
        after_value:
          /* The same after a value: a comma and the next key (or string
           * element). */
          if (i + 1 < n && p[i] == ',' && p[i + 1] == '"' && (lx->cur == M_NEXT || lx->cur == A_NEXT)) {
            lx->cur = lx->cur == M_NEXT ? M_KEY : A_VALUE;
            i++;
            goto string_token;
          }
          continue;
        }
        r = string_start(lx, p, n, i, key, &i);
      } else if (lx->cur == TOP_DONE) {
        r = string_start(lx, p, n, i, false, &i); /* garbage, see finish */
      } else {
        return unexpected(lx, i);
      }
      break;
    }
    case ':':
      if (lx->cur != M_COLON) return unexpected(lx, i);
      lx->cur = M_VALUE;
      i++;
      continue;
    case ',':
      if (lx->cur == M_NEXT) lx->cur = M_KEY;
      else if (lx->cur == A_NEXT) lx->cur = A_VALUE;
      else return unexpected(lx, i);
      i++;
      continue;
    case '{':
    case '[':
      if (!lx->valpos[lx->cur]) return unexpected(lx, i);
      i++;
      r = open_container(lx, c == '[', i);
      if (r) return r;
      if (i < n && p[i] == '"') goto string_token; /* '{"': the first key */
      continue;
    case '}':
      if (lx->cur != M_FIRST && lx->cur != M_NEXT) return unexpected(lx, i);
      i++;
      r = close_container(lx, false, i);
      if (r) return r;
      goto after_value;
    case ']':
      if (lx->cur != A_FIRST && lx->cur != A_NEXT) return unexpected(lx, i);
      i++;
      r = close_container(lx, true, i);
      if (r) return r;
      goto after_value;
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
      if (!lx->valpos[lx->cur]) return unexpected(lx, i);
      lx->num = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
      lx->collect = !quiet(lx) && lx->cb.number;
      r = num_body(lx, p, n, i, i + 1, &i);
      break;
    case 't':
    case 'f':
    case 'n':
      if (!lx->valpos[lx->cur]) return unexpected(lx, i);
      lx->lit = c == 'n' ? 0 : c == 't' ? 1 : 2;
      lx->lit_i = 1;
      r = lit_body(lx, p, n, i + 1, &i);
      break;
    case '/':
      if (lx->cur == TOP_DONE) return unexpected(lx, i);
      return LEX_ERR(i, "probable comment found in input text, comments are not enabled.");
    default:
      if (lx->cur == TOP_DONE && !lx->valpos[TOP_DONE]) return unexpected(lx, i);
      return LEX_ERR(i, "invalid char in json text.");
    }
    if (r) return r;
  }
  return 0;
}

int kc_jsonlex_feed(kc_jsonlex *lx, const char *buf, size_t len) {
  if (lx->err) return lx->err;
  if (lx->finished) return PARSE_ERR(0, "data after the end of the text");
  if (len == 0) return 0;
  const unsigned char *p = (const unsigned char *)buf;
  lx->in = p;
  size_t i = 0;
  int r = 0;
  if (lx->tok) r = resume(lx, p, len, &i);
  if (!r) r = run(lx, p, len, i);
  lx->in = NULL;
  lx->fed += len;
  return r;
}

/* The end of the text works as yajl's: one more byte, a space, ends a
 * number (and fails a literal, an escape, a UTF-8 sequence); then the text
 * is complete only after a top-level value. A string still open there is
 * ignored (jsonlex.h). */
int kc_jsonlex_finish(kc_jsonlex *lx) {
  if (lx->err) return lx->err;
  if (lx->finished) return 0;
  static const unsigned char space[1] = {' '};
  lx->in = space;
  size_t i = 0;
  int r = 0;
  if (lx->tok) r = resume(lx, space, 1, &i);
  if (!r) r = run(lx, space, 1, i);
  lx->in = NULL;
  lx->finished = true;
  if (r) return r;
  lx->pos = 0;
  if (lx->cur != TOP_DONE) return PARSE_ERR(0, "premature EOF");
  lx->tok = TK_NONE;
  return 0;
}
