/* SPDX-License-Identifier: Apache-2.0 */
/* util: growable byte buffers, checked allocation, logging, time, ids and
 * base64 for kube-apisim (the test API server simulator).
 *
 * Owns nothing global except the log verbosity flag.
 * Threads: every function may be called from any thread.
 * Errors: allocation failure is fatal (the simulator prints a message and
 * aborts: a test server that limps on after OOM would hide bugs); other
 * functions return 0 or a negative errno.
 * Ownership: a struct sim_buf owns its bytes; sim_buf_steal hands them over.
 */
#ifndef APISIM_UTIL_H
#define APISIM_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

void *sim_xmalloc(size_t n);
void *sim_xcalloc(size_t n, size_t sz);
void *sim_xrealloc(void *p, size_t n);
char *sim_xstrdup(const char *s);
char *sim_xstrndup(const char *s, size_t n);
/* The next element of a comma-separated header value at *cursor (an Accept
 * header's media ranges), leading blanks skipped, as a new string the caller
 * frees; *cursor moves past it. NULL at the end. */
char *sim_next_csv(const char **cursor);
char *sim_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct sim_buf {
  char *p;
  size_t len, cap;
};

void sim_buf_reserve(struct sim_buf *b, size_t extra);
void sim_buf_put(struct sim_buf *b, const void *s, size_t n);
void sim_buf_puts(struct sim_buf *b, const char *s);
void sim_buf_putc(struct sim_buf *b, char c);
void sim_buf_printf(struct sim_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes included), Go-style escaping. */
void sim_buf_put_jstr(struct sim_buf *b, const char *s, size_t n);
/* Returns the NUL-terminated bytes and resets b (caller frees). */
char *sim_buf_steal(struct sim_buf *b, size_t *len);
void sim_buf_free(struct sim_buf *b);

extern int sim_verbose;
void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define sim_debug(...) do { if (sim_verbose) sim_log(__VA_ARGS__); } while (0)

/* Monotonic milliseconds. */
uint64_t sim_now_ms(void);
/* RFC 3339 UTC, second precision ("2024-05-01T10:00:00Z"); out >= 21 bytes. */
void sim_time_rfc3339(char *out, size_t n);
/* Random RFC 4122 v4 UUID; out >= 37 bytes. */
void sim_uuid(char *out);
/* Random lowercase alnum suffix of n chars (generateName). */
void sim_rand_suffix(char *out, size_t n);

/* base64 (standard alphabet, padded). Decode returns a malloc'd buffer or
 * NULL on invalid input. */
char *sim_b64_encode(const void *data, size_t n);
char *sim_b64_decode(const char *s, size_t *outlen);

/* Reads a whole file; NULL on error (errno set). */
char *sim_read_file(const char *path, size_t *len);

#endif
