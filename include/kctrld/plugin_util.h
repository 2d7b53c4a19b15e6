/* SPDX-License-Identifier: Apache-2.0 */
/* kctrld/plugin_util.h: the plugin SDK, header only, for C (C11) and C++
 * (C++17); installed next to kctrld/plugin.h and found through the
 * kctrld-plugin pkg-config file. Static inline functions, libc only (it
 * includes kctrld/plugin.h, no daemon header): nothing here crosses the ABI.
 *
 *  - pu_buf: a growable text buffer (libc malloc) with a sticky
 *    out-of-memory flag, so callers check once at the end;
 *  - JSON writing: pu_json_str escapes a string (see its comment for what
 *    it does with invalid UTF-8), pu_json_kv_str writes "key":"value";
 *    pu_owner_ref and pu_condition build an ownerReference and a status
 *    condition object;
 *  - JSON reading of raw text (what object_get returns): skipping a value,
 *    visiting an object's members, comparing literals;
 *  - key splitting ("namespace/name") and slice copies;
 *  - KCTRLD_PLUGIN_DEFINE: the plugin table and kctrld_plugin_entry.
 * Context: any thread; nothing here has shared state.
 * Errors: buffers remember an allocation failure (pu_buf.oom); parsers
 * return NULL / -EINVAL on malformed text.
 */
#ifndef KCTRLD_PLUGIN_UTIL_H
#define KCTRLD_PLUGIN_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kctrld/plugin.h"

typedef struct pu_buf {
  char *p;
  size_t n, cap;
  bool oom;
} pu_buf;

#ifdef __cplusplus
#define PU_CAST(KCTRLD_T, KCTRLD_x) static_cast<KCTRLD_T>(KCTRLD_x)
#else
#define PU_CAST(KCTRLD_T, KCTRLD_x) (KCTRLD_x)
#endif

#ifdef __cplusplus
#define PU_UCHARS(KCTRLD_s) reinterpret_cast<const unsigned char *>(KCTRLD_s)
#else
#define PU_UCHARS(KCTRLD_s) ((const unsigned char *)(KCTRLD_s))
#endif

static inline void pu_buf_init(pu_buf *b) { memset(b, 0, sizeof *b); }

static inline void pu_buf_free(pu_buf *b) {
  free(b->p);
  pu_buf_init(b);
}

/* Makes room for more bytes plus the NUL; false (and oom) when it cannot. */
static inline bool pu_reserve(pu_buf *b, size_t more) {
  if (b->oom) return false;
  if (b->n + more + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + more + 1) cap *= 2;
  char *p = PU_CAST(char *, realloc(b->p, cap));
  if (!p) {
    b->oom = true;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

static inline void pu_add(pu_buf *b, const char *s, size_t len) {
  if (!pu_reserve(b, len)) return;
  if (len) memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}

static inline void pu_str(pu_buf *b, const char *s) { pu_add(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static inline void pu_printf(pu_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->oom) return;
  if (n < 0) {
    b->oom = true;
    return;
  }
  if (!pu_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)n;
}

/* The length of the well-formed UTF-8 sequence at s[0..len) (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or 0 when s does
 * not start with one. len > 0. */
static inline size_t pu_utf8_seq(const unsigned char *s, size_t len) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;      /* overlong */
    else if (c == 0xED) hi = 0x9F; /* surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;      /* overlong */
    else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
  } else
    return 0;
  if (len < n || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return n;
}

/* Appends s[0..len) as a JSON string literal (quotes included). '"', '\\'
 * and the control characters below 0x20 are escaped (\n, \t, \r, \b, \f
 * or \u00XX; NUL is \u0000); well-formed UTF-8 is copied as it is. A byte
 * that does not start a well-formed UTF-8 sequence (pu_utf8_seq) is written
 * as U+FFFD, one per byte, as Go's encoding/json does: the output is always
 * valid JSON whose decoded value is s, with only those bytes replaced. */
static inline void pu_json_str(pu_buf *b, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *u = PU_UCHARS(s);
  pu_add(b, "\"", 1);
  size_t run = 0; /* bytes copied verbatim, pending */
  for (size_t i = 0; i < len;) {
    unsigned char c = u[i];
    const char *esc = NULL;
    char ctl[6];
    size_t n = 1;
    if (c == '"') esc = "\\\"";
    else if (c == '\\') esc = "\\\\";
    else if (c == '\n') esc = "\\n";
    else if (c == '\t') esc = "\\t";
    else if (c == '\r') esc = "\\r";
    else if (c == '\b') esc = "\\b";
    else if (c == '\f') esc = "\\f";
    else if (c < 0x20) {
      ctl[0] = '\\', ctl[1] = 'u', ctl[2] = '0', ctl[3] = '0', ctl[4] = hex[c >> 4], ctl[5] = hex[c & 15];
    } else if (c >= 0x80 && !(n = pu_utf8_seq(u + i, len - i))) {
      esc = "\xEF\xBF\xBD"; /* U+FFFD */
      n = 1;
    } else {
      run += n;
      i += n;
      continue;
    }
    pu_add(b, s + i - run, run);
    run = 0;
    if (esc) pu_add(b, esc, strlen(esc));
    else pu_add(b, ctl, sizeof ctl);
    i += n;
  }
  pu_add(b, s + len - run, run);
  pu_add(b, "\"", 1);
}

/* Appends "key":"value" (key written as it is: a literal the caller
 * knows needs no escapes); a NULL value writes null. */
static inline void pu_json_kv_str(pu_buf *b, const char *key, const char *value) {
  pu_add(b, "\"", 1);
  pu_str(b, key);
  pu_add(b, "\":", 2);
  if (value) pu_json_str(b, value, strlen(value));
  else pu_str(b, "null");
}

/* Appends one metadata.ownerReferences item naming the owner; controller
 * also sets blockOwnerDeletion (what ReplicaSets and Jobs write). */
static inline void pu_owner_ref(pu_buf *b, const char *api_version, const char *kind, const char *name,
                                const char *uid, bool controller) {
  pu_add(b, "{", 1);
  pu_json_kv_str(b, "apiVersion", api_version);
  pu_add(b, ",", 1);
  pu_json_kv_str(b, "kind", kind);
  pu_add(b, ",", 1);
  pu_json_kv_str(b, "name", name);
  pu_add(b, ",", 1);
  pu_json_kv_str(b, "uid", uid);
  if (controller) pu_str(b, ",\"controller\":true,\"blockOwnerDeletion\":true");
  pu_add(b, "}", 1);
}

/* Appends one status.conditions item (metav1.Condition): status is
 * "True", "False" or "Unknown"; last_transition_time RFC 3339 (NULL:
 * omitted); observed_generation < 0: omitted; message NULL: "". */
static inline void pu_condition(pu_buf *b, const char *type, const char *status, const char *reason,
                                const char *message, const char *last_transition_time,
                                int64_t observed_generation) {
  pu_add(b, "{", 1);
  pu_json_kv_str(b, "type", type);
  pu_add(b, ",", 1);
  pu_json_kv_str(b, "status", status);
  pu_add(b, ",", 1);
  pu_json_kv_str(b, "reason", reason);
  pu_add(b, ",", 1);
  pu_json_kv_str(b, "message", message ? message : "");
  if (last_transition_time) {
    pu_add(b, ",", 1);
    pu_json_kv_str(b, "lastTransitionTime", last_transition_time);
  }
  if (observed_generation >= 0) pu_printf(b, ",\"observedGeneration\":%lld", (long long)observed_generation);
  pu_add(b, "}", 1);
}

static inline const char *pu_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* Returns the end of the JSON value starting at p (after leading
 * whitespace), or NULL when malformed. Strings, numbers, literals, nested
 * objects and arrays; no full validation (the text comes from the daemon's
 * cache, already validated). */
static inline const char *pu_json_skip(const char *p, const char *end) {
  p = pu_ws(p, end);
  if (p >= end) return NULL;
  if (*p == '"') {
    for (p++; p < end; p++) {
      if (*p == '\\') {
        p++;
      } else if (*p == '"') {
        return p + 1;
      }
    }
    return NULL;
  }
  if (*p == '{' || *p == '[') {
    int depth = 0;
    for (; p < end; p++) {
      if (*p == '"') {
        p = pu_json_skip(p, end);
        if (!p) return NULL;
        p--;
      } else if (*p == '{' || *p == '[') {
        depth++;
      } else if (*p == '}' || *p == ']') {
        if (--depth == 0) return p + 1;
      }
    }
    return NULL;
  }
  const char *s = p;
  while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\t' &&
         *p != '\r')
    p++;
  return p > s ? p : NULL;
}

/* Calls cb(key, value) for every member of the JSON object text `obj`;
 * key is the raw key literal with its quotes, value the raw value text.
 * cb returns false to stop. Returns the number of members visited, or
 * -EINVAL when obj is not an object. */
static inline int pu_json_members(kctrld_str obj, bool (*cb)(kctrld_str key, kctrld_str value, void *ud),
                                  void *ud) {
  if (!obj.ptr) return -EINVAL;
  const char *p = obj.ptr, *end = obj.ptr + obj.len;
  p = pu_ws(p, end);
  if (p >= end || *p != '{') return -EINVAL;
  p = pu_ws(p + 1, end);
  int n = 0;
  if (p < end && *p == '}') return 0;
  while (p < end) {
    if (*p != '"') return -EINVAL;
    const char *k = p;
    p = pu_json_skip(p, end);
    if (!p) return -EINVAL;
    kctrld_str key = {k, (size_t)(p - k)};
    p = pu_ws(p, end);
    if (p >= end || *p != ':') return -EINVAL;
    const char *v = pu_ws(p + 1, end);
    p = pu_json_skip(v, end);
    if (!p) return -EINVAL;
    kctrld_str val = {v, (size_t)(p - v)};
    n++;
    if (!cb(key, val, ud)) return n;
    p = pu_ws(p, end);
    if (p < end && *p == ',') {
      p = pu_ws(p + 1, end);
      continue;
    }
    if (p < end && *p == '}') return n;
    return -EINVAL;
  }
  return -EINVAL;
}

/* True when the raw JSON string literal `lit` (with quotes) is exactly s.
 * Escaped literals never match (keys we compare need no escapes). */
static inline bool pu_lit_eq(kctrld_str lit, const char *s) {
  size_t n = strlen(s);
  return lit.len == n + 2 && lit.ptr[0] == '"' && memcmp(lit.ptr + 1, s, n) == 0;
}

static inline bool pu_str_eq(kctrld_str a, const char *s) {
  size_t n = strlen(s);
  return a.len == n && (n == 0 || memcmp(a.ptr, s, n) == 0);
}

/* Splits "namespace/name" (or "name") into buffers. Returns 0 or -EINVAL. */
static inline int pu_split_key(const char *key, char *ns, size_t nscap, char *name, size_t namecap) {
  const char *slash = strchr(key, '/');
  size_t nslen = slash ? (size_t)(slash - key) : 0;
  const char *nm = slash ? slash + 1 : key;
  if (nslen >= nscap || strlen(nm) >= namecap || !*nm || strchr(nm, '/')) return -EINVAL;
  memcpy(ns, key, nslen);
  ns[nslen] = '\0';
  memcpy(name, nm, strlen(nm) + 1);
  return 0;
}

/* Copies a slice into a C buffer; false when it does not fit. */
static inline bool pu_copy(kctrld_str s, char *buf, size_t cap) {
  if (s.len >= cap) return false;
  if (s.len) memcpy(buf, s.ptr, s.len);
  buf[s.len] = '\0';
  return true;
}

/* The plugin table and its entry point, for the plugins that need nothing
 * else from kctrld_plugin_entry. The arguments: the plugin's
 * `static const struct kctrld_host_api *` that the entry point sets (any
 * name: `host`, `H`, ...), the plugin's name and version, its init,
 * reconcile and fini (fini may be NULL). Use once, at file scope, after the
 * three functions. The entry point refuses a host of another ABI major
 * (returns NULL). KCTRLD_PLUGIN_DEFINE declares no permissions
 * (kctrld_plugin.permissions NULL); KCTRLD_PLUGIN_DEFINE_PERMS takes them
 * as one more argument, a static `const kctrld_permission[]` ending with
 * KCTRLD_PERMISSIONS_END.
 * Every name these macros declare (the entry point's parameter, the table)
 * starts with kctrld_, so none can capture or shadow one of the plugin's:
 * leave the kctrld_ and KCTRLD_ prefixes to the SDK. */
#define KCTRLD_PLUGIN_DEFINE(KCTRLD_host_var, KCTRLD_name, KCTRLD_version, KCTRLD_init,          \
                             KCTRLD_reconcile, KCTRLD_fini)                                      \
  KCTRLD_PLUGIN_DEFINE_PERMS(KCTRLD_host_var, KCTRLD_name, KCTRLD_version, KCTRLD_init,          \
                             KCTRLD_reconcile, KCTRLD_fini, NULL)
#define KCTRLD_PLUGIN_DEFINE_PERMS(KCTRLD_host_var, KCTRLD_name, KCTRLD_version, KCTRLD_init,    \
                                   KCTRLD_reconcile, KCTRLD_fini, KCTRLD_perms)                  \
  KCTRLD_EXPORT const struct kctrld_plugin *kctrld_plugin_entry(                                 \
      const struct kctrld_host_api *kctrld_entry_host) {                                         \
    static struct kctrld_plugin kctrld_entry_table;                                              \
    if (!kctrld_entry_host || kctrld_entry_host->abi_major != KCTRLD_ABI_MAJOR) return NULL;     \
    (KCTRLD_host_var) = kctrld_entry_host;                                                       \
    kctrld_entry_table.abi_major = KCTRLD_ABI_MAJOR;                                             \
    kctrld_entry_table.abi_minor = KCTRLD_ABI_MINOR;                                             \
    kctrld_entry_table.struct_size = sizeof(struct kctrld_plugin);                               \
    kctrld_entry_table.build_signature = KCTRLD_BUILD_SIGNATURE;                                 \
    kctrld_entry_table.name = (KCTRLD_name);                                                     \
    kctrld_entry_table.version = (KCTRLD_version);                                               \
    kctrld_entry_table.init = (KCTRLD_init);                                                     \
    kctrld_entry_table.reconcile = (KCTRLD_reconcile);                                           \
    kctrld_entry_table.fini = (KCTRLD_fini);                                                     \
    kctrld_entry_table.permissions = (KCTRLD_perms);                                             \
    return &kctrld_entry_table;                                                                  \
  }                                                                                              \
  extern int kctrld_plugin_define_used_once_ /* swallows the caller's semicolon */

#endif
