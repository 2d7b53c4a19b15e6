/* SPDX-License-Identifier: Apache-2.0 */
/* ttl: deletes objects whose annotation kctrld.io/ttl (a Go duration such as
 * 90s, 10m, 2h, 1h30m) has passed since metadata.creationTimestamp. See
 * README.md.
 *
 * Settings: `kinds:` a list of {apiVersion, kind} (required; usually just the
 * controller's `for` kind: a reconcile key does not say its kind, so the
 * plugin looks the key up in every listed kind), optional `annotation:`
 * (default kctrld.io/ttl).
 *
 * Reconcile: for each listed kind holding the key, parse the TTL; expired:
 * DELETE with a uid precondition (a re-created object of the same name is
 * never deleted by mistake); not yet: requeue after exactly the remaining
 * time (never polling). An invalid TTL gets a Warning Event and no requeue
 * (only the next change of the object brings the key back: no storm).
 * Instance state: the settings, immutable after init.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kctrld/plugin_util.h"
#include "kctrld/plugin.h"

#define TTL_MAX_KINDS 16

static const struct kctrld_host_api *H;

struct ttl_kind {
  char api_version[128];
  char kind[64];
};

struct ttl_instance {
  struct ttl_kind kinds[TTL_MAX_KINDS];
  size_t nkinds;
  char annotation[254];
  char annotation_path[320]; /* metadata.annotations["kctrld.io/ttl"] */
};

/* ---- pure logic (unit-tested) ---- */

/* Parses a Go duration ("90s", "10m", "2h", "1h30m", "1.5h", "500ms", "0")
 * into milliseconds, rounding sub-millisecond parts up. No sign (a TTL is
 * never negative). Returns 0, -EINVAL (syntax, unknown unit, bare number
 * other than 0) or -ERANGE. */
static int ttl_parse_duration_ms(const char *s, int64_t *out_ms) {
  static const struct {
    const char *unit;
    uint64_t ns;
  } units[] = {{"ns", 1},          {"us", 1000},           {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000},
               {"ms", 1000000},    {"s", 1000000000ull},   {"m", 60000000000ull},
               {"h", 3600000000000ull}};
  if (!s || !*s) return -EINVAL;
  if (strcmp(s, "0") == 0) {
    *out_ms = 0;
    return 0;
  }
  const uint64_t max_ns = (uint64_t)INT64_MAX;
  uint64_t total = 0;
  const char *p = s;
  while (*p) {
    uint64_t whole = 0, frac = 0, scale = 1;
    bool digits = false;
    while (*p >= '0' && *p <= '9') {
      if (whole > (max_ns - 9) / 10) return -ERANGE;
      whole = whole * 10 + (uint64_t)(*p - '0');
      digits = true;
      p++;
    }
    if (*p == '.') {
      p++;
      while (*p >= '0' && *p <= '9') {
        if (scale < 1000000000000000000ull) { /* further digits cannot matter */
          frac = frac * 10 + (uint64_t)(*p - '0');
          scale *= 10;
        }
        digits = true;
        p++;
      }
    }
    if (!digits) return -EINVAL;
    size_t best = 0, best_len = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
      size_t l = strlen(units[i].unit);
      if (l > best_len && strncmp(p, units[i].unit, l) == 0) {
        best = i;
        best_len = l;
      }
    }
    if (!best_len) return -EINVAL; /* missing or unknown unit */
    p += best_len;
    uint64_t u = units[best].ns;
    if (whole > max_ns / u) return -ERANGE;
    uint64_t v = whole * u;
    /* frac/scale of a unit, rounded up to a nanosecond. */
    long double f = (long double)frac * (long double)u / (long double)scale;
    uint64_t fns = (uint64_t)f;
    if ((long double)fns < f) fns++;
    if (v > max_ns - fns || total > max_ns - v - fns) return -ERANGE;
    total += v + fns;
  }
  *out_ms = (int64_t)((total + 999999) / 1000000);
  return 0;
}

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char *p, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -1;
    v = v * 10 + (p[i] - '0');
  }
  *out = v;
  return 0;
}

/* Parses an RFC 3339 time ("2024-05-01T10:00:00Z", fractions and numeric
 * offsets accepted) into milliseconds since the epoch. Returns 0 or -EINVAL. */
static int ttl_parse_time_ms(kctrld_str t, int64_t *out_ms) {
  char s[64];
  if (!pu_copy(t, s, sizeof s) || t.len < 20) return -EINVAL;
  int Y, M, D, h, m, sec;
  if (digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' || digits(s + 8, 2, &D) ||
      (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || digits(s + 11, 2, &h) || s[13] != ':' ||
      digits(s + 14, 2, &m) || s[16] != ':' || digits(s + 17, 2, &sec))
    return -EINVAL;
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return -EINVAL;
  const char *p = s + 19;
  int64_t ms = 0;
  if (*p == '.') {
    int n = 0;
    for (p++; *p >= '0' && *p <= '9'; p++, n++)
      if (n < 3) ms = ms * 10 + (*p - '0');
    if (n == 0) return -EINVAL;
    for (; n < 3; n++) ms *= 10;
  }
  int64_t off = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh, om;
    if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om)) return -EINVAL;
    off = (oh * 60 + om) * 60 * (*p == '+' ? 1 : -1);
    p += 6;
  } else {
    return -EINVAL;
  }
  if (*p) return -EINVAL;
  int64_t days = days_from_civil(Y, (unsigned)M, (unsigned)D);
  *out_ms = ((days * 86400 + h * 3600 + m * 60 + sec) - off) * 1000 + ms;
  return 0;
}

/* What to do with one object: < 0 delete now, else wait that many ms. */
static int64_t ttl_remaining_ms(int64_t created_ms, int64_t ttl_ms, int64_t now_ms) {
  if (ttl_ms > INT64_MAX - created_ms) return INT64_MAX;
  int64_t expire = created_ms + ttl_ms;
  return now_ms >= expire ? -1 : expire - now_ms;
}

/* ---- reconcile ---- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum { OUT_DONE, OUT_WAIT, OUT_REQUEUE, OUT_ERROR };

static int handle(struct ttl_instance *in, kctrld_ctx *ctx, const struct ttl_kind *k, const char *key,
                  const char *ns, const char *name, int64_t *wait_ms) {
  kctrld_ref ref = {k->api_version, k->kind, ns[0] ? ns : NULL, name};
  const kctrld_object *obj = NULL;
  int rc = H->cache_get(ctx, &ref, &obj);
  if (rc == -ENOENT) return OUT_DONE;
  if (rc < 0) {
    H->log(KCTRLD_LOG_ERROR, "kind %s %s is not cached (%d): add it to the controller's for/watches",
           k->api_version, k->kind, rc);
    return OUT_ERROR;
  }
  int out = OUT_DONE;
  char ttl[128];
  rc = H->object_string(obj, in->annotation_path, ttl, sizeof ttl);
  if (rc == -ENOENT || H->object_deleting(obj)) goto done;
  int64_t ttl_ms = 0, created = 0;
  if (rc < 0 || ttl_parse_duration_ms(ttl, &ttl_ms) < 0) {
    if (rc < 0) snprintf(ttl, sizeof ttl, "(not a short string)");
    H->log(KCTRLD_LOG_WARN, "invalid ttl object=%s kind=%s value=\"%s\"", key, k->kind, ttl);
    H->event(ctx, obj, KCTRLD_EVENT_WARNING, "InvalidTTL",
             "annotation %s: %s is not a duration such as 90s, 10m, 2h or 1h30m; the object is kept",
             in->annotation, ttl);
    goto done; /* no requeue: a fix is an update, which enqueues the key */
  }
  if (ttl_parse_time_ms(H->object_creation_timestamp(obj), &created) < 0) {
    H->log(KCTRLD_LOG_WARN, "no valid creationTimestamp object=%s kind=%s", key, k->kind);
    goto done;
  }
  int64_t left = ttl_remaining_ms(created, ttl_ms, now_ms());
  if (left >= 0) {
    *wait_ms = left;
    out = OUT_WAIT;
    goto done;
  }
  char uid[128];
  if (!pu_copy(H->object_uid(obj), uid, sizeof uid)) goto done;
  kctrld_delete_opts o = {.struct_size = sizeof o,
                          .precondition_uid = uid,
                          .propagation = KCTRLD_PROPAGATION_BACKGROUND,
                          .grace_period_seconds = -1};
  rc = H->api_delete(ctx, &ref, &o);
  if (rc == 0) {
    H->log(KCTRLD_LOG_INFO, "deleted object=%s kind=%s ttl=%s uid=%s", key, k->kind, ttl, uid);
  } else if (rc == -ENOENT || rc == -ESTALE) {
    /* Gone, or re-created under the same name: the new one gets its own turn. */
    H->log(KCTRLD_LOG_DEBUG, "already gone object=%s kind=%s", key, k->kind);
    out = rc == -ESTALE ? OUT_REQUEUE : OUT_DONE;
  } else {
    H->log(KCTRLD_LOG_WARN, "delete failed object=%s kind=%s error=\"%s\"", key, k->kind,
           H->ctx_api_error(ctx));
    out = OUT_REQUEUE;
  }
done:
  H->object_release(obj);
  return out;
}

static int ttl_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  struct ttl_instance *in = instance;
  char ns[256], name[256];
  if (pu_split_key(key, ns, sizeof ns, name, sizeof name) < 0) return H->result_error(ctx, "bad key %s", key);
  int64_t wait = -1;
  bool requeue = false, error = false;
  for (size_t i = 0; i < in->nkinds; i++) {
    int64_t w = -1;
    switch (handle(in, ctx, &in->kinds[i], key, ns, name, &w)) {
    case OUT_WAIT:
      if (wait < 0 || w < wait) wait = w;
      break;
    case OUT_REQUEUE:
      requeue = true;
      break;
    case OUT_ERROR:
      error = true;
      break;
    default:
      break;
    }
  }
  if (error) return H->result_error(ctx, "%s: a configured kind is not cached", key);
  if (requeue) return KCTRLD_RESULT_REQUEUE;
  if (wait >= 0) return H->result_requeue_after(ctx, (uint64_t)wait + 1); /* +1: past the instant */
  return KCTRLD_RESULT_DONE;
}

static int ttl_init(kctrld_ctx *ctx, const kctrld_settings *settings, void **instance) {
  struct ttl_instance *in = calloc(1, sizeof *in);
  if (!in) return -ENOMEM;
  const char *ann = "kctrld.io/ttl";
  int rc = H->settings_string(settings, "annotation", &ann);
  if ((rc < 0 && rc != -ENOENT) || strchr(ann, '"') || strlen(ann) > 253) {
    H->log(KCTRLD_LOG_ERROR, "settings.annotation must be an annotation key");
    free(in);
    return -EINVAL;
  }
  strcpy(in->annotation, ann);
  snprintf(in->annotation_path, sizeof in->annotation_path, "metadata.annotations[\"%s\"]", ann);
  size_t n = 0;
  rc = H->settings_len(settings, "kinds", &n);
  if (rc < 0 || n == 0 || n > TTL_MAX_KINDS) {
    H->log(KCTRLD_LOG_ERROR,
           "settings.kinds is required: a list of 1..%d {apiVersion, kind}, e.g. the controller's for kind",
           TTL_MAX_KINDS);
    free(in);
    return -EINVAL;
  }
  for (size_t i = 0; i < n; i++) {
    char pa[64], pk[64];
    const char *av, *kind;
    snprintf(pa, sizeof pa, "kinds[%zu].apiVersion", i);
    snprintf(pk, sizeof pk, "kinds[%zu].kind", i);
    if (H->settings_string(settings, pa, &av) < 0 || H->settings_string(settings, pk, &kind) < 0 ||
        strlen(av) >= sizeof in->kinds[i].api_version || strlen(kind) >= sizeof in->kinds[i].kind) {
      H->log(KCTRLD_LOG_ERROR, "settings.kinds[%zu] needs apiVersion and kind", i);
      free(in);
      return -EINVAL;
    }
    strcpy(in->kinds[i].api_version, av);
    strcpy(in->kinds[i].kind, kind);
  }
  in->nkinds = n;
  H->log(KCTRLD_LOG_INFO, "ttl controller=%s kinds=%zu annotation=%s", H->ctx_controller(ctx), n, ann);
  *instance = in;
  return 0;
}

static void ttl_fini(void *instance) { free(instance); }

/* What reconcile writes (kctrld rbac): deletes of the `for` kind (grant any
 * other settings.kinds entry by hand: docs/deploy.md) and InvalidTTL Events. */
static const kctrld_permission ttl_permissions[] = {
    {"", KCTRLD_RESOURCE_FOR, "delete"},
    KCTRLD_PERMISSION_EVENTS,
    KCTRLD_PERMISSIONS_END,
};

KCTRLD_PLUGIN_DEFINE_PERMS(H, "ttl", "1.0.0", ttl_init, ttl_reconcile, ttl_fini, ttl_permissions);

