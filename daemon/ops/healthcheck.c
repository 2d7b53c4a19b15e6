/* SPDX-License-Identifier: Apache-2.0 */
/* healthcheck: see healthcheck.h. */
#include "ops/healthcheck.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct health_check {
  char name[KC_HEALTH_NAME_MAX];
  kc_health_fn fn;
  void *ud;
} health_check;

struct kc_health {
  health_check *v;
  size_t n, cap;
};

/* --- results ------------------------------------------------------------------ */

static kc_health_result *new_result(kc_health_results *out) {
  if (KC_ARRAY_ROOM(out->v, out->cap, out->n, 8) < 0) {
    out->err = -ENOMEM;
    return NULL;
  }
  kc_health_result *r = &out->v[out->n++];
  memset(r, 0, sizeof *r);
  return r;
}

void kc_health_append(kc_health_results *out, const char *name, bool ok, const char *why) {
  kc_health_result *r = new_result(out);
  if (!r) return;
  snprintf(r->name, sizeof r->name, "%s", name);
  r->ok = ok;
  if (!ok) snprintf(r->why, sizeof r->why, "%s", why && *why ? why : "failed");
}

void kc_health_report(kc_health_results *out, const char *sub, bool ok, const char *fmt, ...) {
  kc_health_result *r = new_result(out);
  if (!r) return;
  const char *base = out->current ? out->current : "check";
  if (sub && *sub)
    snprintf(r->name, sizeof r->name, "%s/%s", base, sub);
  else
    snprintf(r->name, sizeof r->name, "%s", base);
  r->ok = ok;
  if (ok) return;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
  }
  if (!r->why[0]) snprintf(r->why, sizeof r->why, "failed");
}

void kc_health_results_reset(kc_health_results *r) {
  r->n = 0;
  r->err = 0;
  r->current = NULL;
}

void kc_health_results_free(kc_health_results *r) {
  free(r->v);
  memset(r, 0, sizeof *r);
}

int kc_health_results_copy(kc_health_results *dst, const kc_health_results *src) {
  kc_health_results_reset(dst);
  if (src->n && KC_ARRAY_RESERVE(dst->v, dst->cap, src->n, 8) < 0) return -ENOMEM;
  if (src->n) memcpy(dst->v, src->v, src->n * sizeof *src->v);
  dst->n = src->n;
  dst->err = src->err;
  return 0;
}

bool kc_health_results_ok(const kc_health_results *r) {
  for (size_t i = 0; i < r->n; i++)
    if (!r->v[i].ok) return false;
  return true;
}

/* --- registry ----------------------------------------------------------------- */

bool kc_health_name_ok(const char *name) {
  if (!name || !*name || strlen(name) >= KC_HEALTH_NAME_MAX) return false;
  char prev = '/';
  for (const char *p = name; *p; prev = *p++) {
    bool word = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
                *p == '.';
    if (!word && !(*p == '/' && prev != '/')) return false;
  }
  return prev != '/';
}

int kc_health_new(kc_health **out) {
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

void kc_health_free(kc_health *h) {
  if (!h) return;
  free(h->v);
  free(h);
}

static health_check *find(const kc_health *h, const char *name) {
  for (size_t i = 0; i < h->n; i++)
    if (strcmp(h->v[i].name, name) == 0) return &h->v[i];
  return NULL;
}

int kc_health_add(kc_health *h, const char *name, kc_health_fn fn, void *ud) {
  if (!kc_health_name_ok(name) || !fn) return -EINVAL;
  if (find(h, name)) return -EEXIST;
  if (KC_ARRAY_ROOM(h->v, h->cap, h->n, 8) < 0) return -ENOMEM;
  health_check *c = &h->v[h->n++];
  snprintf(c->name, sizeof c->name, "%s", name);
  c->fn = fn;
  c->ud = ud;
  return 0;
}

int kc_health_remove(kc_health *h, const char *name) {
  health_check *c = find(h, name);
  if (!c) return -ENOENT;
  size_t i = (size_t)(c - h->v);
  memmove(&h->v[i], &h->v[i + 1], (h->n - i - 1) * sizeof *h->v);
  h->n--;
  return 0;
}

int kc_health_run(const kc_health *h, kc_health_results *out) {
  for (size_t i = 0; i < h->n; i++) {
    out->current = h->v[i].name;
    h->v[i].fn(h->v[i].ud, out);
  }
  out->current = NULL;
  return out->err;
}

/* --- rendering ---------------------------------------------------------------- */

/* exclude=x matches x and x/... */
static bool matches(const char *pattern, const char *name) {
  size_t n = strlen(pattern);
  return strncmp(pattern, name, n) == 0 && (name[n] == '\0' || name[n] == '/');
}

static bool excluded(const kc_health_query *q, const char *name) {
  for (size_t i = 0; q && i < q->nexclude; i++)
    if (q->exclude[i] && matches(q->exclude[i], name)) return true;
  return false;
}

unsigned kc_health_render(const kc_health_results *r, const char *probe, const char *check,
                          const kc_health_query *q, unsigned fail_status, kc_buf *out) {
  kc_buf_reset(out);
  if (check) {
    for (size_t i = 0; i < r->n; i++) {
      if (strcmp(r->v[i].name, check) != 0) continue;
      if (r->v[i].ok) {
        kc_buf_puts(out, "ok\n");
        return 200;
      }
      kc_buf_printf(out, "%s failed: %s\n", r->v[i].name, r->v[i].why);
      return fail_status;
    }
    kc_buf_puts(out, "404 page not found\n");
    return 404;
  }
  bool ok = true;
  for (size_t i = 0; i < r->n; i++)
    if (!r->v[i].ok && !excluded(q, r->v[i].name)) ok = false;
  if (ok && !(q && q->verbose)) {
    kc_buf_puts(out, "ok\n");
    return 200;
  }
  for (size_t i = 0; i < r->n; i++) {
    const kc_health_result *x = &r->v[i];
    if (excluded(q, x->name))
      kc_buf_printf(out, "[+]%s excluded: ok\n", x->name);
    else if (x->ok)
      kc_buf_printf(out, "[+]%s ok\n", x->name);
    else
      kc_buf_printf(out, "[-]%s failed: %s\n", x->name, x->why);
  }
  bool first = true;
  for (size_t e = 0; q && e < q->nexclude; e++) {
    bool hit = false;
    for (size_t i = 0; i < r->n && !hit; i++) hit = matches(q->exclude[e], r->v[i].name);
    if (hit) continue;
    kc_buf_puts(out, first ? "warn: some health checks cannot be excluded: no matches for " : ",");
    kc_buf_printf(out, "\"%.100s\"", q->exclude[e]);
    first = false;
  }
  if (!first) kc_buf_putc(out, '\n');
  kc_buf_printf(out, "%s check %s\n", probe, ok ? "passed" : "failed");
  return ok ? 200 : fail_status;
}
