/* SPDX-License-Identifier: Apache-2.0 */
/* log: one line per event on stderr, for journald, a file or a container log.
 *
 * Formats (kc_log_set_format; --log-format, logFormat: in the config):
 *  - text: logfmt, "ts=2026-01-02T03:04:05.678Z level=info logger=component
 *    context=... msg="message text" key=value ..." (RFC 3339, UTC,
 *    milliseconds). A value is bare unless it is empty or has a space or
 *    other control byte, '=', '"', DEL or bytes that are not UTF-8; then it
 *    is double-quoted with \" \\ \n \r \t and \u00XX escapes (invalid
 *    bytes as U+FFFD): what go-logfmt and other logfmt readers parse;
 *  - json: one object per line with zap's field names, {"ts":..,"level":..,
 *    "logger":..,"context":..,"msg":..,<fields>}: ts an RFC 3339 string
 *    (controller-runtime's default time encoding), a field whose value is
 *    an integer of at most 16 characters written as a number, every other
 *    value a JSON string written by buf.h's escaper (kc_buf_json).
 * Under journald (stderr is the stream named by JOURNAL_STREAM, compared with
 * fstat as systemd.exec(5) documents) each line starts with the syslog
 * priority "<N>" (sd-daemon(3)), which journald strips and stores; text lines
 * then have no ts (journald stamps them). Elsewhere there is no
 * prefix. The sink is detected at the first line, and again by
 * kc_log_detect_sink.
 *
 * Fields: a message's trailing "key=value" pairs (kc_log_split_fields) are
 * its fields; a value runs to the next " key=" and loses one pair of
 * surrounding double quotes. They are pairs of the logfmt line and members
 * of the json object; the message text before them is "msg". A field named
 * like a line key (ts, level, logger, context, msg) is dropped. The calling thread's reconcile fields
 * (kc_log_set_reconcile: controller, key, reconcileID) are added to every
 * line of the thread, first, and a message field of the same name is then
 * dropped.
 * Secrets: whatever follows "Bearer " (to the next space, quote or comma;
 * unless it is a short lowercase word, as in "bearer token") and any
 * PEM "PRIVATE KEY" block are replaced by "[REDACTED]" before the line is
 * written, whatever the level.
 *
 * Context: any thread. Each line is written with a single write(2), so lines
 * from different threads never interleave.
 * The thread-local "context" (controller/plugin name) is prefixed
 * automatically, so plugin log lines name their plugin (collectd's
 * plugin_set_ctx idea).
 * Errors: the parsers return 0 or -EINVAL; logging itself never fails
 * visibly (a line that does not fit is cut).
 */
#ifndef KC_LOG_H
#define KC_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

enum kc_log_level {
  KC_LOG_ERROR = 3,
  KC_LOG_WARN = 4,
  KC_LOG_INFO = 6,
  KC_LOG_DEBUG = 7,
};

/* 0 is "not set" in options (the config file's value applies). */
enum kc_log_format {
  KC_LOG_FORMAT_TEXT = 1,
  KC_LOG_FORMAT_JSON = 2,
};

/* Sets the most verbose level that is printed (default KC_LOG_INFO). */
void kc_log_set_level(enum kc_log_level level);
enum kc_log_level kc_log_get_level(void);
/* Parses "error|warn|info|debug"; returns 0 or -EINVAL. */
int kc_log_parse_level(const char *name, enum kc_log_level *out);

/* Sets the format (default text). */
void kc_log_set_format(enum kc_log_format format);
/* Parses "text|json"; returns 0 or -EINVAL. */
int kc_log_parse_format(const char *name, enum kc_log_format *out);

/* Looks again at whether stderr is journald's stream (after fd 2 changed,
 * e.g. in tests); returns the answer. */
bool kc_log_detect_sink(void);

/* Sets the calling thread's context tag (borrowed; NULL clears it). */
void kc_log_set_context(const char *ctx);
const char *kc_log_get_context(void);

/* The calling thread's reconcile fields (borrowed until cleared; NULL
 * entries are left out). Workers set them around each reconcile. */
void kc_log_set_reconcile(const char *controller, const char *key, const char *reconcile_id);

/* A fresh reconcile ID: 32 random hex digits in the 8-4-4-4-12 form of a
 * UUID version 4, NUL-terminated in out[KC_LOG_RECONCILE_ID_SIZE]. Any
 * thread (a thread-local generator seeded from getrandom). */
#define KC_LOG_RECONCILE_ID_SIZE 37
void kc_log_new_reconcile_id(char out[KC_LOG_RECONCILE_ID_SIZE]);

/* --- formatting, for tests and the fuzzer ------------------------------------ */

typedef struct kc_log_field {
  const char *name, *value; /* into the message; not NUL-terminated */
  size_t name_len, value_len;
} kc_log_field;

/* Splits msg[0..len) into its text (length *text_len, trailing spaces
 * removed) and up to max trailing key=value fields (see "Fields");
 * returns how many were stored (later ones stay in the last value). */
size_t kc_log_split_fields(const char *msg, size_t len, size_t *text_len, kc_log_field *out,
                           size_t max);

typedef struct kc_log_record {
  enum kc_log_level level;
  const char *component, *context;            /* NULL: "-" / none */
  const char *controller, *key, *reconcile_id; /* NULL: left out */
  const char *msg;                            /* formatted, NUL-terminated */
} kc_log_record;

/* Renders one line, newline included, into out[cap] (cap >= 64; a line that
 * does not fit has its values cut, and stays one valid object or logfmt
 * line unless cap is too small even for that). journald: "<N>" prefix and,
 * for text, no ts; unix_ms is the time to print. Returns the length. */
size_t kc_log_render(const kc_log_record *r, enum kc_log_format format, bool journald,
                     long long unix_ms, char *out, size_t cap);

void kc_log(enum kc_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void kc_logv(enum kc_log_level level, const char *component, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#define kc_error(comp, ...) kc_log(KC_LOG_ERROR, comp, __VA_ARGS__)
#define kc_warn(comp, ...) kc_log(KC_LOG_WARN, comp, __VA_ARGS__)
#define kc_info(comp, ...) kc_log(KC_LOG_INFO, comp, __VA_ARGS__)
#define kc_debug(comp, ...)                                          \
  do {                                                               \
    if (kc_log_get_level() >= KC_LOG_DEBUG) kc_log(KC_LOG_DEBUG, comp, __VA_ARGS__); \
  } while (0)

#endif
