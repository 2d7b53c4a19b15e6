/* SPDX-License-Identifier: Apache-2.0 */
/* log: one line per event on stderr, journald-friendly.
 *
 * Format: "<N>LEVEL component: message key=value ..." where <N> is the
 * syslog priority prefix that journald understands (sd-daemon(3)); when
 * stderr is a terminal the prefix is left out.
 * Context: any thread. Each line is written with a single write(2), so lines
 * from different threads never interleave.
 * The thread-local "context" (controller/plugin name) is prefixed
 * automatically, so plugin log lines name their plugin (collectd's
 * plugin_set_ctx idea).
 */
#ifndef KC_LOG_H
#define KC_LOG_H

#include <stdarg.h>

enum kc_log_level {
  KC_LOG_ERROR = 3,
  KC_LOG_WARN = 4,
  KC_LOG_INFO = 6,
  KC_LOG_DEBUG = 7,
};

/* Sets the most verbose level that is printed (default KC_LOG_INFO). */
void kc_log_set_level(enum kc_log_level level);
enum kc_log_level kc_log_get_level(void);
/* Parses "error|warn|info|debug"; returns 0 or -EINVAL. */
int kc_log_parse_level(const char *name, enum kc_log_level *out);

/* Sets the calling thread's context tag (borrowed; NULL clears it). */
void kc_log_set_context(const char *ctx);
const char *kc_log_get_context(void);

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
