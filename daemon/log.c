/* SPDX-License-Identifier: Apache-2.0 */
/* log: see log.h. */
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Atomic int log_level = KC_LOG_INFO;
static _Thread_local const char *log_context;
static _Atomic int log_tty = -1; /* -1 unknown, 0 no, 1 yes */

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

void kc_log_set_context(const char *ctx) { log_context = ctx; }
const char *kc_log_get_context(void) { return log_context; }

static const char *level_name(enum kc_log_level level) {
  switch (level) {
  case KC_LOG_ERROR: return "error";
  case KC_LOG_WARN: return "warn";
  case KC_LOG_INFO: return "info";
  case KC_LOG_DEBUG: return "debug";
  }
  return "?";
}

/* Appends formatted text at line[n]; returns the bytes added (truncating). */
__attribute__((format(printf, 4, 5))) static size_t fmt_append(char *line, size_t cap, size_t n,
                                                              const char *fmt, ...) {
  if (n + 1 >= cap) return 0;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(line + n, cap - n, fmt, ap);
  va_end(ap);
  if (w < 0) return 0;
  return (size_t)w < cap - n ? (size_t)w : cap - n - 1;
}

void kc_logv(enum kc_log_level level, const char *component, const char *fmt, va_list ap) {
  if ((int)level > atomic_load(&log_level)) return;
  int tty = atomic_load(&log_tty);
  if (tty < 0) {
    tty = isatty(STDERR_FILENO) ? 1 : 0;
    atomic_store(&log_tty, tty);
  }
  char line[4096];
  size_t n = 0;
  if (!tty) n += fmt_append(line, sizeof line, n, "<%d>", (int)level);
  n += fmt_append(line, sizeof line, n, "%s %s", level_name(level), component ? component : "-");
  if (log_context) n += fmt_append(line, sizeof line, n, "[%s]", log_context);
  n += fmt_append(line, sizeof line, n, "%s", ": ");
  va_list copy;
  va_copy(copy, ap);
  int w = vsnprintf(line + n, sizeof line - n, fmt, copy);
  va_end(copy);
  if (w > 0) n += (size_t)w < sizeof line - n ? (size_t)w : sizeof line - n - 1;
  /* One line, no embedded newlines: journald treats each line as an entry. */
  for (size_t i = 0; i < n; i++)
    if (line[i] == '\n') line[i] = ' ';
  if (n >= sizeof line - 1) n = sizeof line - 2;
  line[n++] = '\n';
  ssize_t r;
  do {
    r = write(STDERR_FILENO, line, n);
  } while (r < 0 && errno == EINTR);
}

void kc_log(enum kc_log_level level, const char *component, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kc_logv(level, component, fmt, ap);
  va_end(ap);
}
