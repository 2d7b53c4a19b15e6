/* SPDX-License-Identifier: Apache-2.0 */
/* log: see log.h. */
#include "base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"

static _Atomic int log_level = KC_LOG_INFO;
static _Atomic int log_format = KC_LOG_FORMAT_TEXT;
static _Atomic int log_journald = -1; /* -1 unknown, 0 no, 1 yes */
static _Thread_local const char *log_context;
static _Thread_local const char *rec_controller, *rec_key, *rec_id;

void kc_log_set_level(enum kc_log_level level) { atomic_store(&log_level, (int)level); }
enum kc_log_level kc_log_get_level(void) { return (enum kc_log_level)atomic_load(&log_level); }

int kc_log_parse_level(const char *name, enum kc_log_level *out) {
  static const struct { const char *name; enum kc_log_level level; } names[] = {
      {"error", KC_LOG_ERROR}, {"warn", KC_LOG_WARN}, {"warning", KC_LOG_WARN},
      {"info", KC_LOG_INFO},   {"debug", KC_LOG_DEBUG}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcmp(name, names[i].name) == 0) {
      *out = names[i].level;
      return 0;
    }
  }
  return -EINVAL;
}

void kc_log_set_format(enum kc_log_format format) { atomic_store(&log_format, (int)format); }

int kc_log_parse_format(const char *name, enum kc_log_format *out) {
  if (strcmp(name, "text") == 0) *out = KC_LOG_FORMAT_TEXT;
  else if (strcmp(name, "json") == 0) *out = KC_LOG_FORMAT_JSON;
  else return -EINVAL;
  return 0;
}

/* systemd.exec(5): JOURNAL_STREAM is "device:inode" of the stream that
 * journald connected to stdout/stderr; a child that redirected stderr keeps
 * the variable, so the numbers are compared with fstat of fd 2. */
bool kc_log_detect_sink(void) {
  bool yes = false;
  const char *js = getenv("JOURNAL_STREAM");
  struct stat st;
  if (js && fstat(STDERR_FILENO, &st) == 0) {
    unsigned long long dev, ino;
    char tail;
    if (sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) == 2)
      yes = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
  }
  atomic_store(&log_journald, yes ? 1 : 0);
  return yes;
}

void kc_log_set_context(const char *ctx) { log_context = ctx; }
const char *kc_log_get_context(void) { return log_context; }

void kc_log_set_reconcile(const char *controller, const char *key, const char *reconcile_id) {
  rec_controller = controller;
  rec_key = key;
  rec_id = reconcile_id;
}

void kc_log_new_reconcile_id(char out[KC_LOG_RECONCILE_ID_SIZE]) {
  static _Thread_local uint64_t state;
  if (!state) {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)&state;
    }
    state = seed | 1;
  }
  unsigned char b[16];
  for (int half = 0; half < 2; half++) { /* splitmix64 */
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    for (int i = 0; i < 8; i++) b[half * 8 + i] = (unsigned char)(z >> (8 * i));
  }
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
    out[o++] = hex[b[i] >> 4];
    out[o++] = hex[b[i] & 15];
  }
  out[o] = '\0';
}

static const char *level_name(enum kc_log_level level) {
  switch (level) {
  case KC_LOG_ERROR: return "error";
  case KC_LOG_WARN: return "warn";
  case KC_LOG_INFO: return "info";
  case KC_LOG_DEBUG: return "debug";
  }
  return "?";
}

/* --- fields ----------------------------------------------------------------- */

static bool ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9') || c == '.'; }

/* Length of the "name" of a "name=" token at msg[i] (after a space or at the
 * start), or 0. */
static size_t field_name_at(const char *msg, size_t len, size_t i) {
  if (i > 0 && msg[i - 1] != ' ') return 0;
  if (i >= len || !ident_start(msg[i])) return 0;
  size_t j = i + 1;
  while (j < len && ident_char(msg[j])) j++;
  return j < len && msg[j] == '=' ? j - i : 0;
}

size_t kc_log_split_fields(const char *msg, size_t len, size_t *text_len, kc_log_field *out,
                           size_t max) {
  size_t n = 0, i = 0;
  *text_len = len;
  if (max == 0) return 0;
  for (; i < len; i++)
    if (field_name_at(msg, len, i)) break;
  *text_len = i;
  while (*text_len > 0 && msg[*text_len - 1] == ' ') (*text_len)--;
  while (i < len) {
    size_t nl = field_name_at(msg, len, i);
    kc_log_field *f = &out[n++];
    f->name = msg + i;
    f->name_len = nl;
    size_t v = i + nl + 1, end = v;
    bool quoted = false;
    if (v < len && msg[v] == '"') { /* "...": to a quote followed by the end or " name=" */
      for (end = v + 1; end < len; end++)
        if (msg[end] == '"' && (end + 1 == len || (msg[end + 1] == ' ' && n < max &&
                                                   field_name_at(msg, len, end + 2))))
          break;
      quoted = end < len;
      if (quoted) end++;
    }
    /* The value runs to the next " name=" (the last field takes the rest). */
    if (!quoted)
      for (end = v; end < len; end++)
        if (n < max && msg[end] == ' ' && field_name_at(msg, len, end + 1)) break;
    f->value = msg + v + quoted;
    f->value_len = end - v - 2 * quoted;
    i = end + 1;
  }
  return n;
}

/* --- rendering ---------------------------------------------------------------- */

#define MAX_FIELDS 32

static bool name_is(const kc_log_field *f, const char *s) {
  return strlen(s) == f->name_len && memcmp(f->name, s, f->name_len) == 0;
}

static void format_ts(long long unix_ms, char *ts, size_t cap) {
  time_t sec = (time_t)(unix_ms / 1000);
  int ms = (int)(unix_ms % 1000);
  if (ms < 0) {
    ms += 1000;
    sec--;
  }
  struct tm tm;
  size_t n = gmtime_r(&sec, &tm) ? strftime(ts, cap, "%Y-%m-%dT%H:%M:%S", &tm) : 0;
  snprintf(ts + n, cap - n, ".%03dZ", ms);
}

/* Whether v[0..n) is an integer in JSON's grammar (no leading zero, no
 * '+') of at most 16 characters: such a field value is written as a JSON
 * number, as zap writes the integers it is given. Decimals stay strings
 * (a version such as 1.10 is not the number 1.1), and so do longer digit
 * runs (resourceVersions, ids: a float64 reader would change them). */
static bool json_integer(const char *v, size_t n) {
  size_t i = v && n && v[0] == '-' ? 1 : 0;
  if (n == 0 || n > 16 || i == n) return false;
  if (v[i] == '0') return n == i + 1;
  for (; i < n; i++)
    if (v[i] < '0' || v[i] > '9') return false;
  return true;
}

/* A JSON string member, the value cut to lim bytes. */
static void json_member(kc_buf *b, const char *name, const char *v, size_t vlen, size_t lim) {
  kc_buf_putc(b, ',');
  kc_buf_json_c(b, name);
  kc_buf_putc(b, ':');
  kc_buf_json(b, v, vlen < lim ? vlen : lim);
}

/* Writes the JSON object; lim cuts every string (SIZE_MAX: none) and
 * with_fields false leaves the message's fields out. */
static void render_json(kc_buf *b, const kc_log_record *r, const char *ts, size_t text_len,
                        const kc_log_field *f, size_t nf, size_t lim, bool with_fields) {
  kc_buf_puts(b, "{\"ts\":");
  kc_buf_json_c(b, ts);
  json_member(b, "level", level_name(r->level), strlen(level_name(r->level)), lim);
  const char *comp = r->component ? r->component : "-";
  json_member(b, "logger", comp, strlen(comp), lim);
  if (r->context) json_member(b, "context", r->context, strlen(r->context), lim);
  json_member(b, "msg", r->msg, with_fields ? text_len : strlen(r->msg), lim);
  const char *const rec[3][2] = {{"controller", r->controller}, {"key", r->key},
                                 {"reconcileID", r->reconcile_id}};
  for (int k = 0; k < 3; k++)
    if (rec[k][1]) json_member(b, rec[k][0], rec[k][1], strlen(rec[k][1]), lim);
  for (size_t i = 0; with_fields && i < nf; i++) {
    static const char *const reserved[] = {"ts", "level", "logger", "context", "msg"};
    bool dup = false;
    for (size_t k = 0; k < 5 && !dup; k++) dup = name_is(&f[i], reserved[k]);
    for (int k = 0; k < 3 && !dup; k++) dup = rec[k][1] && name_is(&f[i], rec[k][0]);
    for (size_t k = 0; k < i && !dup; k++)
      dup = f[k].name_len == f[i].name_len && memcmp(f[k].name, f[i].name, f[i].name_len) == 0;
    if (dup) continue;
    kc_buf_putc(b, ',');
    kc_buf_json(b, f[i].name, f[i].name_len);
    kc_buf_putc(b, ':');
    if (json_integer(f[i].value, f[i].value_len)) kc_buf_add(b, f[i].value, f[i].value_len);
    else kc_buf_json(b, f[i].value, f[i].value_len < lim ? f[i].value_len : lim);
  }
  kc_buf_puts(b, "}\n");
}

/* --- logfmt ------------------------------------------------------------------- */

/* A logfmt value: bare when it has no byte a logfmt reader splits or stops
 * on (space and other control bytes, '=', '"', DEL, bytes that are not
 * UTF-8) and is not empty; else double-quoted with \" \\ \n \r \t and
 * \u00XX escapes (go-logfmt's rules), bytes that are not UTF-8 as U+FFFD.
 * Cut to lim bytes. */
static void logfmt_value(kc_buf *b, const char *v, size_t n, size_t lim) {
  if (n > lim) n = lim;
  bool quote = n == 0;
  for (size_t i = 0; i < n && !quote;) {
    unsigned char c = (unsigned char)v[i];
    if (c <= ' ' || c == '=' || c == '"' || c == 0x7f) quote = true;
    else if (c < 0x80) i++;
    else {
      size_t l = kc_utf8_len((const unsigned char *)v + i, n - i);
      if (!l) quote = true;
      i += l ? l : 1;
    }
  }
  if (!quote) {
    kc_buf_add(b, v, n);
    return;
  }
  kc_buf_putc(b, '"');
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)v[i];
    if (c == '"' || c == '\\') {
      kc_buf_putc(b, '\\');
      kc_buf_putc(b, (char)c);
    } else if (c == '\n') kc_buf_puts(b, "\\n");
    else if (c == '\r') kc_buf_puts(b, "\\r");
    else if (c == '\t') kc_buf_puts(b, "\\t");
    else if (c < ' ' || c == 0x7f) kc_buf_printf(b, "\\u%04x", c);
    else if (c < 0x80) kc_buf_putc(b, (char)c);
    else {
      size_t l = kc_utf8_len((const unsigned char *)v + i, n - i);
      if (l) kc_buf_add(b, v + i, l);
      else kc_buf_puts(b, "\xef\xbf\xbd");
      i += l ? l : 1;
      continue;
    }
    i++;
  }
  kc_buf_putc(b, '"');
}

/* " name=value" (no space before the line's first pair, at `first`). */
static void logfmt_pair(kc_buf *b, size_t first, const char *name, size_t name_len, const char *v,
                        size_t n, size_t lim) {
  if (b->len > first) kc_buf_putc(b, ' ');
  kc_buf_add(b, name, name_len);
  kc_buf_putc(b, '=');
  logfmt_value(b, v, n, lim);
}

/* One logfmt line: ts (not under journald), level, logger, context, msg,
 * the reconcile fields, then the message's own fields; lim cuts every value. */
static void render_logfmt(kc_buf *b, const kc_log_record *r, const char *ts, bool journald,
                          size_t text_len, const kc_log_field *f, size_t nf, size_t lim) {
  const char *lvl = level_name(r->level), *comp = r->component ? r->component : "-";
  size_t s0 = b->len;
  if (!journald) logfmt_pair(b, s0, "ts", 2, ts, strlen(ts), lim);
  logfmt_pair(b, s0, "level", 5, lvl, strlen(lvl), lim);
  logfmt_pair(b, s0, "logger", 6, comp, strlen(comp), lim);
  if (r->context) logfmt_pair(b, s0, "context", 7, r->context, strlen(r->context), lim);
  logfmt_pair(b, s0, "msg", 3, r->msg, text_len, lim);
  const char *const rec[3][2] = {{"controller", r->controller}, {"key", r->key},
                                 {"reconcileID", r->reconcile_id}};
  for (int k = 0; k < 3; k++) {
    bool dup = false;
    for (size_t i = 0; i < nf && !dup; i++) dup = name_is(&f[i], rec[k][0]);
    if (rec[k][1] && !dup)
      logfmt_pair(b, s0, rec[k][0], strlen(rec[k][0]), rec[k][1], strlen(rec[k][1]), lim);
  }
  static const char *const reserved[] = {"ts", "level", "logger", "context", "msg"};
  for (size_t i = 0; i < nf; i++) {
    bool dup = false;
    for (size_t k = 0; k < 5 && !dup; k++) dup = name_is(&f[i], reserved[k]);
    for (size_t k = 0; k < i && !dup; k++) /* the first of a name, as in json */
      dup = f[k].name_len == f[i].name_len && memcmp(f[k].name, f[i].name, f[i].name_len) == 0;
    if (!dup) logfmt_pair(b, s0, f[i].name, f[i].name_len, f[i].value, f[i].value_len, lim);
  }
  kc_buf_putc(b, '\n');
}

size_t kc_log_render(const kc_log_record *r, enum kc_log_format format, bool journald,
                     long long unix_ms, char *out, size_t cap) {
  char ts[48];
  format_ts(unix_ms, ts, sizeof ts);
  size_t mlen = strlen(r->msg), text_len;
  kc_log_field f[MAX_FIELDS];
  size_t nf = kc_log_split_fields(r->msg, mlen, &text_len, f, MAX_FIELDS);
  kc_buf b = kc_buf_fixed(out, cap);
  if (journald) kc_buf_printf(&b, "<%d>", (int)r->level);
  size_t start = b.len;
  if (format == KC_LOG_FORMAT_JSON) {
    render_json(&b, r, ts, text_len, f, nf, SIZE_MAX, true);
    if (b.err) { /* too long: every string cut so that the worst case (6 bytes per byte) fits */
      size_t lim = cap > 1024 ? (cap - 160 - start) / 48 : 16;
      b.len = start;
      b.err = 0;
      b.p[b.len] = '\0';
      render_json(&b, r, ts, text_len, f, nf, lim, false);
    }
    return b.len;
  }
  render_logfmt(&b, r, ts, journald, text_len, f, nf, SIZE_MAX);
  if (b.err) { /* too long: every value cut so that the worst case (6 bytes per byte) fits */
    size_t values = 8 + nf, room = cap > 160 + start ? cap - 160 - start : 0;
    size_t lim = room / (6 * values + 32);
    b.len = start;
    b.err = 0;
    b.p[b.len] = '\0';
    render_logfmt(&b, r, ts, journald, text_len, f, nf, lim);
    if (b.err) { /* a buffer too small even so: cut, one line all the same */
      b.len = cap - 2;
      out[b.len++] = '\n';
      out[b.len] = '\0';
    }
  }
  return b.len;
}

/* --- secrets -------------------------------------------------------------------- */
/* "Bearer X": X is a credential unless it is a short lowercase word (the
 * prose "bearer token" in a message). */

static const char redacted[] = "[REDACTED]";

/* Replaces msg[from..to) by "[REDACTED]" in place (msg has room: cap). */
static size_t splice_redacted(char *msg, size_t len, size_t cap, size_t from, size_t to) {
  size_t rl = sizeof redacted - 1;
  if (len - (to - from) + rl >= cap) { /* cannot grow: cut the line there */
    len = from + rl < cap ? from : cap - rl - 1;
    memcpy(msg + len, redacted, rl);
    msg[len + rl] = '\0';
    return len + rl;
  }
  memmove(msg + from + rl, msg + to, len - to + 1);
  memcpy(msg + from, redacted, rl);
  return len - (to - from) + rl;
}

static size_t redact(char *msg, size_t len, size_t cap) {
  for (size_t i = 0; i + 7 <= len; i++) {
    if (strncasecmp(msg + i, "bearer ", 7) != 0) continue;
    size_t v = i + 7, e = v;
    while (e < len && msg[e] != ' ' && msg[e] != '"' && msg[e] != '\'' && msg[e] != ',') e++;
    if (e == v || (e - v == sizeof redacted - 1 && memcmp(msg + v, redacted, e - v) == 0)) continue;
    size_t lower = 0; /* prose ("bearer token ..."): a short lowercase word */
    while (v + lower < e && msg[v + lower] >= 'a' && msg[v + lower] <= 'z') lower++;
    if (lower == e - v && lower < 12) continue;
    len = splice_redacted(msg, len, cap, v, e);
    i = v;
  }
  for (char *b = strstr(msg, "-----BEGIN "); b; b = strstr(b + 1, "-----BEGIN ")) {
    char *hdr_end = strstr(b + 11, "-----");
    if (!hdr_end) break;
    if (!memmem(b, (size_t)(hdr_end - b), "PRIVATE KEY", 11)) continue;
    char *end = strstr(hdr_end + 5, "-----END ");
    char *tail = end ? strstr(end + 9, "-----") : NULL;
    size_t from = (size_t)(b - msg), to = tail ? (size_t)(tail + 5 - msg) : len;
    len = splice_redacted(msg, len, cap, from, to);
    b = msg + from;
  }
  return len;
}

void kc_logv(enum kc_log_level level, const char *component, const char *fmt, va_list ap) {
  if ((int)level > atomic_load(&log_level)) return;
  int journald = atomic_load(&log_journald);
  if (journald < 0) journald = kc_log_detect_sink();
  char msg[4096];
  va_list copy;
  va_copy(copy, ap);
  int w = vsnprintf(msg, sizeof msg, fmt, copy);
  va_end(copy);
  size_t len = w < 0 ? 0 : (size_t)w < sizeof msg ? (size_t)w : sizeof msg - 1;
  msg[len] = '\0';
  redact(msg, len, sizeof msg);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  kc_log_record r = {level, component, log_context, rec_controller, rec_key, rec_id, msg};
  char line[16384];
  size_t n = kc_log_render(&r, (enum kc_log_format)atomic_load(&log_format), journald != 0,
                           (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000, line, sizeof line);
  ssize_t rc;
  do {
    rc = write(STDERR_FILENO, line, n);
  } while (rc < 0 && errno == EINTR);
}

void kc_log(enum kc_log_level level, const char *component, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kc_logv(level, component, fmt, ap);
  va_end(ap);
}
