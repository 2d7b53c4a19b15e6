/* SPDX-License-Identifier: Apache-2.0 */
/* kname: see kname.h. The predicates follow k8s.io/apimachinery's
 * pkg/util/validation regexes byte by byte; the messages are its texts. */
#include "kube/kname.h"

#include <string.h>

#include "base/buf.h"

/* ---- character classes and the two regexes ---- */

static bool alnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] */
static bool qname(const char *s, size_t n) {
  if (n == 0 || !alnum((unsigned char)s[0]) || !alnum((unsigned char)s[n - 1])) return false;
  for (size_t i = 1; i + 1 < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

static bool lower_alnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)* */
static bool dns1123_subdomain(const char *s, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || s[i] == '.') {
      size_t l = i - start;
      if (l == 0) return false;
      if (!lower_alnum((unsigned char)s[start]) || !lower_alnum((unsigned char)s[i - 1]))
        return false;
      for (size_t j = start + 1; j + 1 < i; j++)
        if (!lower_alnum((unsigned char)s[j]) && s[j] != '-') return false;
      start = i + 1;
    }
  }
  return true;
}

bool kc_name_is_dns_label(const char *s, size_t n) {
  return n <= 63 && !memchr(s, '.', n) && dns1123_subdomain(s, n);
}

bool kc_name_is_dns_subdomain(const char *s, size_t n) {
  return n <= 253 && dns1123_subdomain(s, n);
}

bool kc_name_is_qualified(const char *s, size_t n) {
  const char *slash = memchr(s, '/', n);
  if (!slash) return n <= 63 && qname(s, n);
  size_t pl = (size_t)(slash - s), nl = n - pl - 1;
  return pl > 0 && kc_name_is_dns_subdomain(s, pl) && nl <= 63 && qname(slash + 1, nl);
}

bool kc_name_is_label_value(const char *s, size_t n) { return n == 0 || (n <= 63 && qname(s, n)); }

const char *kc_name_path_segment_problem(const char *s, size_t n) {
  if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return "may not be";
  if (memchr(s, '/', n)) return "may not contain '/':";
  if (memchr(s, '%', n)) return "may not contain '%':";
  if (memchr(s, '\0', n)) return "may not contain NUL:";
  return NULL;
}

/* "[prefix/]rest": an optional non-empty prefix and one '/', then a
 * non-empty rest without '/'. The shape of an apiVersion and of a key. */
static bool split_prefixed(const char *s, size_t n, kc_str *prefix, kc_str *rest) {
  const char *slash = n ? memchr(s, '/', n) : NULL;
  size_t pl = slash ? (size_t)(slash - s) : 0;
  const char *r = slash ? slash + 1 : s;
  size_t rl = n - (size_t)(r - s);
  if (rl == 0 || (slash && pl == 0) || memchr(r, '/', rl)) {
    *prefix = *rest = (kc_str){"", 0};
    return false;
  }
  *prefix = (kc_str){pl ? s : "", pl};
  *rest = (kc_str){r, rl};
  return true;
}

bool kc_name_split_api_version(const char *s, size_t n, kc_str *group, kc_str *version) {
  return split_prefixed(s, n, group, version);
}

bool kc_name_split_key(const char *s, size_t n, kc_str *ns, kc_str *name) {
  return split_prefixed(s, n, ns, name);
}

/* ---- messages (k8s.io/apimachinery/pkg/util/validation) ---- */


#define QNAME_MSG                                                                       \
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end " \
  "with an alphanumeric character"
#define QNAME_FMT "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
#define QNAME_EXAMPLES "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '" QNAME_FMT "')"
#define DNS_MSG                                                                        \
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, " \
  "'-' or '.', and must start and end with an alphanumeric character"
#define DNS_FMT "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
#define VALUE_MSG                                                                      \
  "a valid label must be an empty string or consist of alphanumeric characters, '-', " \
  "'_' or '.', and must start and end with an alphanumeric character"
#define VALUE_FMT "(" QNAME_FMT ")?"

/* Appends the "; "-joined IsQualifiedName errors; returns how many. */
int kc_name_qualified_errors(kc_buf *b, const char *k, size_t n) {
  int nerr = 0;
  size_t slash = n, nslash = 0;
  for (size_t i = 0; i < n; i++)
    if (k[i] == '/') {
      if (!nslash) slash = i;
      nslash++;
    }
#define SEP() (nerr++ ? kc_buf_puts(b, "; ") : (void)0)
  if (nslash > 1) {
    SEP();
    kc_buf_puts(b, "a qualified name " QNAME_MSG " " QNAME_EXAMPLES
               " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
    return nerr;
  }
  const char *name = k;
  size_t nlen = n;
  if (nslash == 1) {
    name = k + slash + 1;
    nlen = n - slash - 1;
    if (slash == 0) {
      SEP();
      kc_buf_puts(b, "prefix part must be non-empty");
    } else {
      if (slash > 253) {
        SEP();
        kc_buf_puts(b, "prefix part must be no more than 253 characters");
      }
      if (!dns1123_subdomain(k, slash)) {
        SEP();
        kc_buf_puts(b, "prefix part " DNS_MSG " (e.g. 'example.com', regex used for validation is '" DNS_FMT "')");
      }
    }
  }
  if (nlen == 0) {
    SEP();
    kc_buf_puts(b, "name part must be non-empty");
  } else if (nlen > 63) {
    SEP();
    kc_buf_puts(b, "name part must be no more than 63 characters");
  }
  if (!qname(name, nlen)) {
    SEP();
    kc_buf_puts(b, "name part " QNAME_MSG " " QNAME_EXAMPLES);
  }
  return nerr;
}

int kc_name_label_value_errors(kc_buf *b, const char *v, size_t n) {
  int nerr = 0;
  if (n > 63) {
    SEP();
    kc_buf_puts(b, "must be no more than 63 characters");
  }
  if (n > 0 && !qname(v, n)) {
    SEP();
    kc_buf_puts(b, VALUE_MSG " (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '" VALUE_FMT "')");
  }
#undef SEP
  return nerr;
}

