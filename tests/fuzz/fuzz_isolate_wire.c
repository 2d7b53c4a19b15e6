/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the parser of what a plugin child writes
 * (daemon/hooks/isolate_wire.c, kc_iso_parse and kc_iso_int): any line either
 * splits into fields that lie inside the line, each NUL-terminated and no
 * longer than what it was parsed from, or is refused with -EPROTO/-E2BIG;
 * a parsed message written back with kc_iso_put parses to the same fields.
 * Never a crash, a leak or a read past the end. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hooks/isolate_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *line = malloc(size + 1); /* +1: the parser may write the NUL after the line */
  if (!line) abort();
  memcpy(line, data, size);
  kc_iso_msg m = {0};
  int rc = kc_iso_parse(line, size, &m);
  if (rc != 0 && rc != -EPROTO && rc != -E2BIG && rc != -ENOMEM) abort();
  if (rc == 0) {
    kc_buf b = {0};
    kc_iso_begin(&b, m.f[0].ptr);
    for (size_t i = 0; i < m.n; i++) {
      const kc_str *f = &m.f[i];
      if (f->ptr < line || f->ptr + f->len > line + size || f->ptr[f->len] != '\0') abort();
      int64_t v;
      (void)kc_iso_int(&m, i, &v);
      if (i) kc_iso_put(&b, f->ptr, f->len);
    }
    kc_iso_end(&b);
    if (!b.err) { /* round trip */
      kc_iso_msg back = {0};
      if (strchr(m.f[0].ptr, '\t') || strchr(m.f[0].ptr, '\\') ||
          memchr(m.f[0].ptr, '\n', m.f[0].len)) {
        /* the name is written raw: only names without escapes round-trip */
      } else if (m.f[0].len == strlen(m.f[0].ptr)) {
        if (kc_iso_parse(b.p, b.len - 1, &back) != 0 || back.n != m.n) abort();
        for (size_t i = 1; i < m.n; i++)
          if (back.f[i].len != m.f[i].len || memcmp(back.f[i].ptr, m.f[i].ptr, m.f[i].len)) abort();
      }
      kc_iso_msg_free(&back);
    }
    kc_buf_free(&b);
  }
  kc_iso_msg_free(&m);
  free(line);
  return 0;
}
