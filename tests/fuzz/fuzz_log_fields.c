/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for log.c's field splitter and line renderer: whatever
 * the message bytes,
 *   - kc_log_split_fields returns fields that lie inside the message, in
 *     order, after the text;
 *   - a json line (also one cut to fit) is one JSON object that yajl
 *     (validating UTF-8) parses, followed by exactly one newline;
 *   - a text line ends in its only newline and is one logfmt record
 *     (logfmt_ok: pairs separated by one space, keys without space, '=' or
 *     '"', bare values without those or control bytes, quoted values with
 *     only the escapes \" \\ \n \r \t \uXXXX), cut to fit or not.
 * Input = the message (up to the first NUL); the first byte also picks the
 * output buffer size, so that cutting is exercised. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int logfmt_ok(const char *p) {
  if (!*p) return 0;
  for (;;) {
    const char *k = p;
    while (*p && *p != ' ' && *p != '=' && *p != '"') p++;
    if (p == k || *p != '=') return 0;
    p++;
    if (*p == '"') {
      for (p++; *p != '"'; p++) {
        unsigned char c = (unsigned char)*p;
        if (!c || c < ' ' || c == 0x7f) return 0;
        if (c != '\\') continue;
        p++;
        if (*p == 'u') {
          if (!hex(p[1]) || !hex(p[2]) || !hex(p[3]) || !hex(p[4])) return 0;
          p += 4;
        } else if (!strchr("\"\\nrt", *p) || !*p) {
          return 0;
        }
      }
      p++;
    } else {
      const char *v = p;
      while (*p && *p != ' ') {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ' || c == '=' || c == '"' || c == 0x7f) return 0;
        p++;
      }
      if (p == v) return 0;
    }
    if (!*p) return 1;
    if (*p != ' ' || !p[1]) return 0;
    p++;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  size_t cap = data[0] & 1 ? 1024 + (size_t)data[0] * 8 : 16384;
  char *msg = malloc(size);
  char *out = malloc(cap);
  if (!msg || !out) abort();
  memcpy(msg, data + 1, size - 1);
  msg[size - 1] = '\0';
  size_t len = strlen(msg), text;
  kc_log_field f[8];
  size_t nf = kc_log_split_fields(msg, len, &text, f, 8);
  const char *prev = msg + text;
  for (size_t i = 0; i < nf; i++) {
    if (f[i].name < prev || f[i].value < f[i].name + f[i].name_len ||
        f[i].value + f[i].value_len > msg + len)
      abort();
    prev = f[i].value + f[i].value_len;
  }
  kc_log_record r = {KC_LOG_WARN, "fuzz", "ctl/plugin", "ctl", "ns/name", "id", msg};
  size_t n = kc_log_render(&r, KC_LOG_FORMAT_JSON, data[0] & 2, 1700000000123LL, out, cap);
  if (n == 0 || n >= cap || out[n - 1] != '\n' || memchr(out, '\n', n - 1)) abort();
  out[n - 1] = '\0';
  const char *json = out[0] == '<' ? strchr(out, '>') + 1 : out;
  char err[128];
  yajl_val v = yajl_tree_parse(json, err, sizeof err);
  if (!v || !YAJL_IS_OBJECT(v)) abort();
  yajl_tree_free(v);
  n = kc_log_render(&r, KC_LOG_FORMAT_TEXT, data[0] & 2, 0, out, cap);
  if (n == 0 || n >= cap || out[n - 1] != '\n' || memchr(out, '\n', n - 1)) abort();
  out[n - 1] = '\0';
  if (!logfmt_ok(out[0] == '<' ? strchr(out, '>') + 1 : out)) abort();
  free(msg);
  free(out);
  return 0;
}
