/* SPDX-License-Identifier: Apache-2.0 */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <sys/random.h>

int sim_verbose;

static void oom(size_t n)
{
  fprintf(stderr, "kube-apisim: out of memory allocating %zu bytes\n", n);
  abort();
}

void *sim_xmalloc(size_t n)
{
  void *p = malloc(n ? n : 1);
  if (!p) oom(n);
  return p;
}

void *sim_xcalloc(size_t n, size_t sz)
{
  void *p = calloc(n ? n : 1, sz ? sz : 1);
  if (!p) oom(n * sz);
  return p;
}

void *sim_xrealloc(void *p, size_t n)
{
  void *q = realloc(p, n ? n : 1);
  if (!q) oom(n);
  return q;
}

char *sim_xstrdup(const char *s)
{
  return sim_xstrndup(s, strlen(s));
}

char *sim_xstrndup(const char *s, size_t n)
{
  char *p = sim_xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *sim_xasprintf(const char *fmt, ...)
{
  va_list ap;
  char *out = NULL;
  va_start(ap, fmt);
  int r = vasprintf(&out, fmt, ap);
  va_end(ap);
  if (r < 0) oom(0);
  return out;
}

void sim_buf_reserve(struct sim_buf *b, size_t extra)
{
  if (b->len + extra + 1 <= b->cap) return;
  size_t c = b->cap ? b->cap : 256;
  while (c < b->len + extra + 1) c *= 2;
  b->p = sim_xrealloc(b->p, c);
  b->cap = c;
}

void sim_buf_put(struct sim_buf *b, const void *s, size_t n)
{
  sim_buf_reserve(b, n);
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

void sim_buf_puts(struct sim_buf *b, const char *s)
{
  sim_buf_put(b, s, strlen(s));
}

void sim_buf_putc(struct sim_buf *b, char c)
{
  sim_buf_reserve(b, 1);
  b->p[b->len++] = c;
  b->p[b->len] = 0;
}

void sim_buf_printf(struct sim_buf *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  sim_buf_reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* Bytes that need escaping the way Go's encoder does it (control
 * characters, quote, backslash, <, >, &); 0xe2 starts U+2028/U+2029. */
static const unsigned char jesc[256] = {
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
  [0xe2] = 2,
};

void sim_buf_put_jstr(struct sim_buf *b, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  sim_buf_reserve(b, n + 2);
  b->p[b->len++] = '"';
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    unsigned char k = jesc[c];
    if (!k) {
      run++;
      continue;
    }
    if (k == 2 && !(i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
                    ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9))) {
      run++;
      continue;
    }
    if (run) sim_buf_put(b, s + i - run, run);
    run = 0;
    const char *esc;
    char u[7];
    switch (c) {
    case '"': esc = "\\\""; break;
    case '\\': esc = "\\\\"; break;
    case '\n': esc = "\\n"; break;
    case '\r': esc = "\\r"; break;
    case '\t': esc = "\\t"; break;
    case 0xe2:
      esc = (unsigned char)s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029";
      i += 2;
      break;
    default:
      u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0';
      u[4] = hex[c >> 4]; u[5] = hex[c & 15]; u[6] = 0;
      esc = u;
    }
    sim_buf_puts(b, esc);
  }
  /* Escapes may have used up the reservation made above: reserve again. */
  if (run) sim_buf_put(b, s + n - run, run);
  sim_buf_reserve(b, 1);
  b->p[b->len++] = '"';
  b->p[b->len] = 0;
}

char *sim_buf_steal(struct sim_buf *b, size_t *len)
{
  if (!b->p) sim_buf_reserve(b, 0), b->p[0] = 0;
  char *p = b->p;
  if (len) *len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return p;
}

void sim_buf_free(struct sim_buf *b)
{
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void sim_log(const char *fmt, ...)
{
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n > sizeof line - 2) n = sizeof line - 2;
  line[n++] = '\n';
  pthread_mutex_lock(&log_mu);
  fputs("kube-apisim: ", stderr);
  fwrite(line, 1, (size_t)n, stderr);
  pthread_mutex_unlock(&log_mu);
}

uint64_t sim_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sim_time_rfc3339(char *out, size_t n)
{
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void rnd(void *p, size_t n)
{
  unsigned char *c = p;
  while (n) {
    ssize_t r = getrandom(c, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      /* getrandom cannot fail on Linux >= 3.17 once seeded; fall back anyway. */
      for (size_t i = 0; i < n; i++) c[i] = (unsigned char)rand();
      return;
    }
    c += r;
    n -= (size_t)r;
  }
}

void sim_uuid(char *out)
{
  unsigned char u[16];
  rnd(u, sizeof u);
  u[6] = (u[6] & 0x0f) | 0x40;
  u[8] = (u[8] & 0x3f) | 0x80;
  snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
           u[13], u[14], u[15]);
}

void sim_rand_suffix(char *out, size_t n)
{
  /* Same alphabet as apimachinery's rand.String (no vowels, no 0/1/3). */
  static const char al[] = "bcdfghjklmnpqrstvwxz2456789";
  unsigned char r[64];
  if (n > sizeof r) n = sizeof r;
  rnd(r, n);
  for (size_t i = 0; i < n; i++) out[i] = al[r[i] % (sizeof al - 1)];
  out[n] = 0;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *sim_b64_encode(const void *data, size_t n)
{
  const unsigned char *d = data;
  char *o = sim_xmalloc((n + 2) / 3 * 4 + 1), *p = o;
  size_t i = 0;
  for (; i + 2 < n; i += 3) {
    unsigned v = (unsigned)d[i] << 16 | (unsigned)d[i + 1] << 8 | d[i + 2];
    *p++ = b64[v >> 18]; *p++ = b64[(v >> 12) & 63]; *p++ = b64[(v >> 6) & 63]; *p++ = b64[v & 63];
  }
  if (i < n) {
    unsigned v = (unsigned)d[i] << 16 | (i + 1 < n ? (unsigned)d[i + 1] << 8 : 0);
    *p++ = b64[v >> 18];
    *p++ = b64[(v >> 12) & 63];
    *p++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
    *p++ = '=';
  }
  *p = 0;
  return o;
}

char *sim_b64_decode(const char *s, size_t *outlen)
{
  size_t n = strlen(s);
  if (n % 4) return NULL;
  unsigned char *o = sim_xmalloc(n / 4 * 3 + 1);
  size_t k = 0;
  for (size_t i = 0; i < n; i += 4) {
    unsigned v = 0;
    int pad = 0;
    for (int j = 0; j < 4; j++) {
      const char *q = s[i + j] ? strchr(b64, s[i + j]) : NULL;
      if (s[i + j] == '=' && i + 4 == n && j >= 2) { pad++; v <<= 6; continue; }
      if (!q || pad) { free(o); return NULL; }
      v = v << 6 | (unsigned)(q - b64);
    }
    o[k++] = (unsigned char)(v >> 16);
    if (pad < 2) o[k++] = (unsigned char)(v >> 8);
    if (pad < 1) o[k++] = (unsigned char)v;
  }
  o[k] = 0;
  if (outlen) *outlen = k;
  return (char *)o;
}

char *sim_read_file(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  struct sim_buf b = {0};
  char tmp[65536];
  size_t r;
  while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) sim_buf_put(&b, tmp, r);
  int err = ferror(f);
  fclose(f);
  if (err) { sim_buf_free(&b); errno = EIO; return NULL; }
  return sim_buf_steal(&b, len);
}

char *sim_next_csv(const char **cursor)
{
  const char *p = *cursor;
  if (!*p) return NULL;
  const char *e = strchr(p, ',');
  size_t n = e ? (size_t)(e - p) : strlen(p);
  *cursor = e ? e + 1 : p + n;
  while (n && *p == ' ') p++, n--;
  return sim_xstrndup(p, n);
}
