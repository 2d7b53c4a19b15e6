/* SPDX-License-Identifier: Apache-2.0 */
/* kurl: see kurl.h. */
#include "kube/kurl.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void segment(kc_buf *b, const char *s, size_t n) {
  kc_buf_putc(b, '/');
  kc_buf_url(b, s, n);
}

void kc_url_group_version(kc_buf *b, kc_str group, kc_str version) {
  if (group.len) {
    kc_buf_puts(b, "/apis");
    segment(b, group.ptr, group.len);
  } else {
    kc_buf_puts(b, "/api");
  }
  segment(b, version.ptr, version.len);
}

void kc_url_resource(kc_buf *b, const char *api_path, const char *resource, kc_str ns,
                     kc_str name, const char *subresource) {
  kc_buf_puts(b, api_path);
  if (ns.len) {
    kc_buf_puts(b, "/namespaces");
    segment(b, ns.ptr, ns.len);
  }
  segment(b, resource, strlen(resource));
  if (name.ptr) segment(b, name.ptr, name.len);
  if (subresource) segment(b, subresource, strlen(subresource));
}

void kc_url_param(kc_buf *b, char *sep, const char *name, const char *value) {
  kc_buf_putc(b, *sep);
  kc_buf_puts(b, name);
  kc_buf_putc(b, '=');
  kc_buf_url(b, value, strlen(value));
  *sep = '&';
}

void kc_url_param_uint(kc_buf *b, char *sep, const char *name, uint64_t value) {
  char num[24];
  snprintf(num, sizeof num, "%" PRIu64, value);
  kc_url_param(b, sep, name, num);
}
