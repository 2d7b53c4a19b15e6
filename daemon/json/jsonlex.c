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

/* Where the lexing of a string's content is (kept between feeds). */
typedef struct str_state {
  uint8_t esc;  /* 1 = after a backslash */
  uint8_t hex;  /* \u digits still expected */
  uint8_t utf8; /* UTF-8 continuation bytes still expected */
  bool has_esc; /* a backslash seen (decode before delivering) */
} str_state;

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
  bool collect; /* its bytes are assembled in tb (it will be delivered) */
  str_state ss; /* TK_STR */
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

/* --- The lexical rules ----------------------------------------------------
 * Pure functions over bytes: the streaming lexer below runs them on each
 * feed (their state carried across feeds), the in-place scanners
 * (kc_json_scan_*, at the end) on a whole text. */

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

enum { STR_END = 0, STR_MORE = 1, STR_BAD = -1 };

/* The rest of an escape from p[*ip] (the backslash already read). */
static int str_escape(str_state *s, const unsigned char *p, size_t n, size_t *ip,
                      const char **why) {
  size_t i = *ip;
  unsigned hex = s->hex;
  if (!hex) {
    if (i >= n) {
      s->esc = 1;
      *ip = i;
      return STR_MORE;
    }
    s->esc = 0;
    unsigned char c = p[i];
    if (c != 'u') {
      if (!esc_ok[c]) {
        *ip = i;
        *why = "inside a string, '\\' occurs before a character which it may not.";
        return STR_BAD;
      }
      *ip = i + 1;
      return STR_END;
    }
    i++;
    hex = 4;
  }
  while (hex) {
    if (i >= n) {
      s->hex = (uint8_t)hex;
      *ip = i;
      return STR_MORE;
    }
    if (!hex1[p[i]]) {
      *ip = i;
      *why = "invalid (non-hex) character occurs after '\\u' inside string.";
      return STR_BAD;
    }
    i++;
    hex--;
  }
  s->hex = 0;
  *ip = i;
  return STR_END;
}

/* UTF-8 continuation bytes still expected (s->utf8) from p[*ip]. */
static int str_utf8(str_state *s, const unsigned char *p, size_t n, size_t *ip, const char **why) {
  size_t i = *ip;
  unsigned k = s->utf8;
  while (k) {
    if (i >= n) {
      s->utf8 = (uint8_t)k;
      *ip = i;
      return STR_MORE;
    }
    if ((p[i] & 0xc0) != 0x80) {
      *ip = i;
      *why = "invalid bytes in UTF8 string.";
      return STR_BAD;
    }
    i++;
    k--;
  }
  s->utf8 = 0;
  *ip = i;
  return STR_END;
}

/* Lexes a string's content from p[*ip] (state *s: {0} at the first byte
 * after the opening quote) up to its closing quote. STR_END: *ip is the
 * closing quote's offset. STR_MORE: the bytes ended inside the string
 * (*ip = n, *s says where). STR_BAD: *ip is the offending byte, *why says
 * what is wrong, in yajl's words. */
/* Inlined in both its callers: the streaming lexer's strings would
 * otherwise pay a call each. */
static inline __attribute__((always_inline)) int str_lex(str_state *s, const unsigned char *p,
                                                         size_t n, size_t *ip, const char **why) {
  size_t i = *ip;
  int r = STR_END;
  if (s->esc || s->hex) r = str_escape(s, p, n, &i, why);
  else if (s->utf8) r = str_utf8(s, p, n, &i, why);
  while (r == STR_END) {
    i = str_scan(p, i, n);
    if (i >= n) {
      r = STR_MORE;
      break;
    }
    unsigned char c = p[i];
    if (c == '"') {
      *ip = i;
      return STR_END;
    }
    if (c == '\\') {
      s->has_esc = true;
      i++;
      r = str_escape(s, p, n, &i, why);
    } else if (c < 0x20) {
      *why = "invalid character inside string.";
      r = STR_BAD;
    } else {
      s->utf8 = (uint8_t)utf8_more(c);
      if (!s->utf8) {
        *why = "invalid bytes in UTF8 string.";
        r = STR_BAD;
      } else {
        i++;
        r = str_utf8(s, p, n, &i, why);
      }
    }
  }
  *ip = i;
  return r;
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

/* Decodes the escape whose letter is s[*ip] (the backslash before it) into
 * w (1 to 4 bytes; jsonlex.h "unescaping"). Returns the byte count, or 0
 * when the escape is malformed (never on lexed text). */
static size_t unescape_one(const unsigned char *s, size_t n, size_t *ip, unsigned char *w) {
  size_t i = *ip;
  if (i >= n) return 0;
  unsigned char c = s[i++];
  switch (c) {
  case 'r': *w = '\r'; break;
  case 'n': *w = '\n'; break;
  case 'f': *w = '\f'; break;
  case 'b': *w = '\b'; break;
  case 't': *w = '\t'; break;
  case '\\':
  case '/':
  case '"': *w = c; break;
  case 'u': {
    if (!is_hex4(s + i, n - i)) return 0;
    unsigned cp = hex4(s + i);
    i += 4;
    *ip = i;
    if ((cp & 0xfc00) == 0xd800) {
      if (i + 1 < n && s[i] == '\\' && s[i + 1] == 'u' && is_hex4(s + i + 2, n - i - 2)) {
        unsigned lo = hex4(s + i + 2);
        cp = ((cp & 0x3f) << 10) | ((((cp >> 6) & 0xf) + 1) << 16) | (lo & 0x3ff);
        *ip = i + 6;
      } else {
        *w = '?'; /* a lone high surrogate */
        return 1;
      }
    }
    return put_utf8(w, cp);
  }
  default: return 0;
  }
  *ip = i;
  return 1;
}

int kc_json_unescape(const char *body, size_t n, char *out, size_t cap, size_t *outlen) {
  const unsigned char *s = (const unsigned char *)body;
  size_t i = 0, w = 0;
  while (i < n) {
    const unsigned char *bs = memchr(s + i, '\\', n - i);
    size_t j = bs ? (size_t)(bs - s) : n;
    if (j - i > cap - w) return -ENOSPC;
    memcpy(out + w, s + i, j - i);
    w += j - i;
    if (j >= n) break;
    i = j + 1;
    unsigned char tmp[4];
    size_t k = unescape_one(s, n, &i, tmp);
    if (!k) return -EINVAL;
    if (k > cap - w) return -ENOSPC;
    memcpy(out + w, tmp, k);
    w += k;
  }
  *outlen = w;
  return 0;
}

bool kc_json_unescaped_eq(const char *body, size_t n, const char *b, size_t blen) {
  const unsigned char *s = (const unsigned char *)body;
  size_t i = 0, w = 0;
  while (i < n) {
    const unsigned char *bs = memchr(s + i, '\\', n - i);
    size_t j = bs ? (size_t)(bs - s) : n;
    if (j - i > blen - w || memcmp(b + w, s + i, j - i) != 0) return false;
    w += j - i;
    if (j >= n) break;
    i = j + 1;
    unsigned char tmp[4];
    size_t k = unescape_one(s, n, &i, tmp);
    if (!k || k > blen - w || memcmp(b + w, tmp, k) != 0) return false;
    w += k;
  }
  return w == blen;
}

static inline bool is_digit(unsigned char c) { return (unsigned)(c - '0') < 10; }

/* Runs the number grammar over p[i..n) from state *st (N_*: the number's
 * first byte already read). Returns the offset of the first byte that
 * cannot continue the number, n when the bytes ended (it may go on). */
static inline __attribute__((always_inline)) size_t num_lex(uint8_t *st, const unsigned char *p,
                                                            size_t i, size_t n) {
  unsigned s = *st;
  for (; i < n; i++) {
    unsigned char c = p[i];
    switch (s) {
    case N_MINUS:
      if (c == '0') s = N_ZERO;
      else if (is_digit(c)) s = N_INT;
      else goto out;
      continue;
    case N_INT:
      while (is_digit(c) && ++i < n) c = p[i];
      if (i >= n) goto out;
      __attribute__((fallthrough));
    case N_ZERO:
      if (c == '.') s = N_DOT;
      else if (c == 'e' || c == 'E') s = N_E;
      else goto out;
      continue;
    case N_DOT:
      if (!is_digit(c)) goto out;
      s = N_FRAC;
      continue;
    case N_FRAC:
      while (is_digit(c) && ++i < n) c = p[i];
      if (i >= n) goto out;
      if (c == 'e' || c == 'E') s = N_E;
      else goto out;
      continue;
    case N_E:
      if (c == '+' || c == '-') s = N_ESIGN;
      else if (is_digit(c)) s = N_EXP;
      else goto out;
      continue;
    case N_ESIGN:
      if (!is_digit(c)) goto out;
      s = N_EXP;
      continue;
    default: /* N_EXP */
      while (is_digit(c) && ++i < n) c = p[i];
      goto out;
    }
  }
out:
  *st = (uint8_t)s;
  return i;
}

/* NULL when a number in state st may end before the next byte, else why
 * it may not. */
static const char *num_bad(unsigned st) {
  switch (st) {
  case N_MINUS: return "malformed number, a digit is required after the minus sign.";
  case N_DOT: return "malformed number, a digit is required after the decimal point.";
  case N_E:
  case N_ESIGN: return "malformed number, a digit is required after the exponent.";
  default: return NULL;
  }
}

/* The number state after its first byte c ('-' or a digit). */
static inline uint8_t num_first(unsigned char c) {
  return c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
}

/* --- Strings --------------------------------------------------------------- */

/* Unescapes a lexed string body s[0..n) into db. The output is never
 * longer than the input. */
static int unescape(kc_jsonlex *lx, const unsigned char *s, size_t n) {
  kc_buf_reset(&lx->db);
  if (kc_buf_reserve(&lx->db, n + 1)) return failv(lx, -ENOMEM, lx->pos, "out of memory");
  size_t w = 0;
  /* Cannot fail on lexed text. */
  if (kc_json_unescape((const char *)s, n, lx->db.p, n, &w))
    return failv(lx, -EBADMSG, lx->pos, "lexical error: malformed escape");
  lx->db.len = w;
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
    if (lx->ss.has_esc) {
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

/* Lexes string content from p[i] (lx->ss: where it is); the content began
 * at p[start] of this feed (0 when resumed). *ip: where the main loop goes
 * on. */
static int str_body(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t start, size_t i,
                    size_t *ip) {
  const char *why = NULL;
  int r = str_lex(&lx->ss, p, n, &i, &why);
  if (r == STR_BAD) return LEX_ERR(i, why);
  if (r == STR_END) {
    *ip = i + 1;
    if (!lx->tok) return string_end(lx, p + start, i - start, i + 1);
    if (lx->collect && collect(lx, p + start, i - start, i)) return lx->err;
    return string_end(lx, (const unsigned char *)lx->tb.p, lx->tb.len, i + 1);
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
  lx->ss = (str_state){0};
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

/* Lexes number bytes from p[i] (state lx->num); the number began at
 * p[start] of this feed (0 when resumed). */
static int num_body(kc_jsonlex *lx, const unsigned char *p, size_t n, size_t start, size_t i,
                    size_t *ip) {
  i = num_lex(&lx->num, p, i, n);
  if (i >= n) {
    if (!lx->tok) {
      lx->tok = TK_NUM;
      if (lx->collect) kc_buf_reset(&lx->tb);
    }
    if (lx->collect && collect(lx, p + start, n - start, n)) return lx->err;
    *ip = n;
    return 0;
  }
  const char *why = num_bad(lx->num);
  if (why) return LEX_ERR(i, why);
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
  switch (lx->tok) {
  case TK_STR: return str_body(lx, p, n, 0, 0, ip);
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
      lx->num = num_first(c);
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

/* --- Scanning a text in place (jsonlex.h) ---------------------------------- */

/* White space (kc_json_is_ws) as a table: the scanners test it at every
 * token. */
static const uint8_t ws_byte[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1, ['\v'] = 1, ['\f'] = 1,
};

static inline size_t skip_ws(const unsigned char *b, size_t i, size_t n) {
  while (i < n && ws_byte[b[i]]) i++;
  return i;
}

const char *kc_json_skip_ws(const char *p, const char *end) {
  while (p < end && kc_json_is_ws(*p)) p++;
  return p;
}

/* The offset just past the string whose opening quote is b[i], or 0. */
static size_t scan_string_slow(const unsigned char *b, size_t i, size_t n) {
  str_state s = {0};
  const char *why;
  return str_lex(&s, b, n, &i, &why) == STR_END ? i + 1 : 0;
}

static inline size_t scan_string(const unsigned char *b, size_t i, size_t n) {
  /* Most strings have neither escapes nor UTF-8: one str_scan. */
  size_t j = str_scan(b, i + 1, n);
  if (j < n && b[j] == '"') return j + 1;
  return scan_string_slow(b, j, n);
}

const char *kc_json_scan_string(const char *p, const char *end) {
  if (p >= end || *p != '"') return NULL;
  size_t e = scan_string((const unsigned char *)p, 0, (size_t)(end - p));
  return e ? p + e : NULL;
}

/* White space where compact JSON has none: one test in the common case. */
#define WS(i)                                                                                    \
  do {                                                                                           \
    if ((i) < n && ws_byte[b[i]]) (i) = skip_ws(b, (i) + 1, n);                                  \
  } while (0)

const char *kc_json_scan_value(const char *text, const char *end, int hole) {
  const unsigned char *b = (const unsigned char *)text;
  size_t n = (size_t)(end - text), i = 0;
  /* is_array[d]: the container open at level d + 1 is an array. */
  uint8_t is_array[KC_JSONLEX_MAX_DEPTH];
  unsigned depth = 0;
  bool array = false; /* the innermost open container is an array */
  for (;;) {
    /* A value starts at b[i]. */
    if (i >= n) return NULL;
    unsigned char c = b[i];
    switch (c) {
    case '"':
      if (!(i = scan_string(b, i, n))) return NULL;
      break;
    case '{':
    case '[':
      if (depth >= KC_JSONLEX_MAX_DEPTH) return NULL;
      array = c == '[';
      is_array[depth++] = array;
      i++;
      WS(i);
      if (i < n && b[i] == (array ? ']' : '}')) {
        i++;
        goto closed;
      }
      if (array) continue;
      goto key;
    case 'n':
    case 't':
    case 'f': {
      const char *lit = lit_text[c == 'n' ? 0 : c == 't' ? 1 : 2];
      size_t len = c == 'f' ? 5 : 4;
      if (n - i < len || memcmp(b + i, lit, len) != 0) return NULL;
      i += len;
      break;
    }
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
    case '9': {
      uint8_t st = num_first(c);
      i = num_lex(&st, b, i + 1, n);
      if (num_bad(st)) return NULL;
      break;
    }
    default:
      if (hole < 0 || c != (unsigned char)hole) return NULL;
      i++;
      break;
    }
    /* After a value: the end, the next element or member, or a closing. */
    for (;;) {
      if (!depth) return text + i;
      WS(i);
      if (i >= n) return NULL;
      c = b[i++];
      if (c == ',') break;
      if (c != (array ? ']' : '}')) return NULL;
    closed:
      if (--depth) array = is_array[depth - 1];
    }
    WS(i);
    if (array) continue;
  key:
    if (i >= n || b[i] != '"' || !(i = scan_string(b, i, n))) return NULL;
    WS(i);
    if (i >= n || b[i] != ':') return NULL;
    i++;
    WS(i);
  }
}

#undef WS
