/* SPDX-License-Identifier: Apache-2.0 */
/* consistency: see consistency.h. States:
 *
 *   IDLE --period--> LIST (pages) --complete--> WAIT (reflector RV >= list RV)
 *     ^                 |                          |
 *     |              error/relist              COMPARE (slices) --> IDLE
 *     +-----------------+--------------------------+  (relist on differences)
 */
#include "cache/consistency.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/buf.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/nextturn.h"
#include "watch/metalist.h"

enum cstate { C_IDLE, C_LIST, C_WAIT, C_COMPARE_LISTED, C_COMPARE_CACHED, C_CLOSED };

#define WAIT_POLL_MS 250
#define WAIT_MAX_MS (2 * 60 * 1000)

struct kc_consistency {
  uv_loop_t *loop;
  uv_timer_t timer; /* period and wait polls; data = this */
  kc_next_turn turn; /* comparison slices, one per loop turn; turn.data = this */
  int open_handles;  /* timer and turn: freed when both closed */
  kc_api *api;
  kc_reflector *r;
  kc_store *store;
  uint64_t period_ms;
  uint64_t rng;
  enum cstate state;
  kc_decode_pool *pool; /* NULL: decode inline */
  kc_metalist list;
  char list_rv[64];
  uint64_t list_rvn;
  uint64_t wait_started_ms;
  bool warned_rv;
  /* the server's side: items (metadata, trimmed) and a set over them */
  kc_obj **items;
  size_t nitems, cap_items;
  uint32_t *set; /* open addressing: index + 1 into items, 0 = empty */
  size_t set_cap;
  /* keys deleted while the check runs ("ns/name" copies) */
  char **deleted;
  size_t ndeleted, cap_deleted;
  /* the cache's side and the comparison */
  kc_obj_vec cached;
  size_t pos;
  uint64_t ndiff;
  char examples[KC_CONSISTENCY_EXAMPLES][400];
  kc_consistency_stats stats;
};

static void schedule(kc_consistency *c);
static void on_timer(uv_timer_t *t);
static void on_turn(kc_next_turn *t);

static uint64_t key_hash(kc_str ns, kc_str name) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a, then mixed */
  for (size_t i = 0; i < ns.len; i++) h = (h ^ (unsigned char)ns.ptr[i]) * 1099511628211ULL;
  h = (h ^ '/') * 1099511628211ULL;
  for (size_t i = 0; i < name.len; i++) h = (h ^ (unsigned char)name.ptr[i]) * 1099511628211ULL;
  return kc_mix64(h);
}

static void reset_check(kc_consistency *c) {
  kc_metalist_cancel(&c->list);
  for (size_t i = 0; i < c->nitems; i++) kc_obj_unref(c->items[i]);
  c->nitems = 0;
  free(c->set);
  c->set = NULL;
  c->set_cap = 0;
  for (size_t i = 0; i < c->ndeleted; i++) free(c->deleted[i]);
  c->ndeleted = 0;
  kc_obj_vec_clear(&c->cached);
  c->pos = 0;
  c->ndiff = 0;
}

static void give_up(kc_consistency *c, const char *why) {
  kc_warn("consistency", "%s: consistency check skipped: %s", kc_reflector_describe(c->r), why);
  c->stats.skipped++;
  reset_check(c);
  c->state = C_IDLE;
  schedule(c);
}

/* --- the LIST --------------------------------------------------------------- */

static int on_item(void *ud, kc_obj *obj) {
  kc_consistency *c = ud;
  if (KC_ARRAY_ROOM(c->items, c->cap_items, c->nitems, 1024) < 0) return -ENOMEM;
  c->items[c->nitems++] = kc_obj_ref(obj);
  return 0;
}

static void start_compare(kc_consistency *c);

static void on_listed(void *ud, const kc_metalist_result *res) {
  kc_consistency *c = ud;
  char why[800];
  const kc_status *st = &res->api.status;
  switch (res->end) {
  case KC_METALIST_URL_TOO_LONG: give_up(c, "list: URL too long"); return;
  case KC_METALIST_NOT_SENT: give_up(c, "list: cannot start request"); return;
  case KC_METALIST_CONTINUE_TOO_LONG: give_up(c, "list: continue token too long"); return;
  case KC_METALIST_FAILED:
    if (res->decode_error[0])
      snprintf(why, sizeof why, "list: malformed response: %s", res->decode_error);
    else if (res->api.error)
      snprintf(why, sizeof why, "list: %s", st->message[0] ? st->message : strerror(-res->api.error));
    else
      snprintf(why, sizeof why, "list: HTTP %d %s: %s", st->code,
               st->reason[0] ? st->reason : "(no reason)", st->message);
    give_up(c, why);
    return;
  case KC_METALIST_COMPLETE: break;
  }
  snprintf(c->list_rv, sizeof c->list_rv, "%s", res->resource_version);
  c->list_rvn = kc_rv_number(kc_str_c(c->list_rv));
  if (!c->list_rvn) {
    if (!c->warned_rv) kc_warn("consistency", "%s: list resourceVersion \"%s\" is not a number",
                               kc_reflector_describe(c->r), c->list_rv);
    c->warned_rv = true;
    give_up(c, "resourceVersions are not numeric: cannot tell later changes from differences");
    return;
  }
  c->state = C_WAIT;
  c->wait_started_ms = kc_clock_now_ms();
  start_compare(c);
}

/* One paginated metadata-only LIST of the reflector's scope, no
 * resourceVersion: the server's current state (consistency.h). */
static void start_list(kc_consistency *c) {
  kc_metalist_opts o = {
      .api = c->api,
      .pool = c->pool,
      .scope = c->r,
      .with_limit = true,
      .log_tag = "consistency",
      .item = on_item,
      .done = on_listed,
      .ud = c,
  };
  kc_metalist_start(&c->list, &o);
}

/* --- the comparison ------------------------------------------------------------ */

static void example(kc_consistency *c, const char *fmt, kc_str ns, kc_str name, const kc_obj *a,
                    const kc_obj *b) {
  if (c->ndiff < KC_CONSISTENCY_EXAMPLES) {
    char key[300];
    snprintf(key, sizeof key, "%.*s%s%.*s", (int)ns.len, ns.ptr ? ns.ptr : "", ns.len ? "/" : "",
             (int)name.len, name.ptr ? name.ptr : "");
    char *e = c->examples[c->ndiff];
    size_t cap = sizeof c->examples[0];
    if (a && b)
      snprintf(e, cap,
               "%s: cache uid %.*s resourceVersion %.*s, server uid %.*s resourceVersion %.*s", key,
               (int)kc_obj_uid(a).len, kc_obj_uid(a).ptr ? kc_obj_uid(a).ptr : "",
               (int)kc_obj_resource_version(a).len,
               kc_obj_resource_version(a).ptr ? kc_obj_resource_version(a).ptr : "",
               (int)kc_obj_uid(b).len, kc_obj_uid(b).ptr ? kc_obj_uid(b).ptr : "",
               (int)kc_obj_resource_version(b).len,
               kc_obj_resource_version(b).ptr ? kc_obj_resource_version(b).ptr : "");
    else
      snprintf(e, cap, "%s: %s", key, fmt);
  }
  c->ndiff++;
}

static bool was_deleted(kc_consistency *c, kc_str ns, kc_str name) {
  for (size_t i = 0; i < c->ndeleted; i++) {
    const char *d = c->deleted[i];
    if (strlen(d) == ns.len + 1 + name.len && (ns.len == 0 || memcmp(d, ns.ptr, ns.len) == 0) &&
        d[ns.len] == '/' && memcmp(d + ns.len + 1, name.ptr, name.len) == 0)
      return true;
  }
  return false;
}

static int build_set(kc_consistency *c) {
  size_t cap = 16;
  while (cap < c->nitems * 2) cap *= 2;
  c->set = calloc(cap, sizeof *c->set);
  if (!c->set) return -ENOMEM;
  c->set_cap = cap;
  for (size_t i = 0; i < c->nitems; i++) {
    size_t h =
        (size_t)key_hash(kc_obj_namespace(c->items[i]), kc_obj_name(c->items[i])) & (cap - 1);
    while (c->set[h]) h = (h + 1) & (cap - 1);
    c->set[h] = (uint32_t)(i + 1);
  }
  return 0;
}

static bool listed(kc_consistency *c, kc_str ns, kc_str name) {
  size_t h = (size_t)key_hash(ns, name) & (c->set_cap - 1);
  for (; c->set[h]; h = (h + 1) & (c->set_cap - 1)) {
    const kc_obj *o = c->items[c->set[h] - 1];
    if (kc_str_eq(kc_obj_namespace(o), ns) && kc_str_eq(kc_obj_name(o), name)) return true;
  }
  return false;
}

static void finish_compare(kc_consistency *c) {
  c->stats.checks++;
  const char *what = kc_reflector_describe(c->r);
  if (c->ndiff == 0) {
    kc_debug("consistency", "%s: cache equals the server's %zu objects at resourceVersion %s", what,
             c->nitems, c->list_rv);
  } else {
    char ex[KC_CONSISTENCY_EXAMPLES * 410] = "";
    size_t n = 0;
    for (size_t i = 0; i < c->ndiff && i < KC_CONSISTENCY_EXAMPLES; i++) {
      int w = snprintf(ex + n, sizeof ex - n, "%s%s", i ? "; " : "", c->examples[i]);
      if (w > 0 && (size_t)w < sizeof ex - n) n += (size_t)w;
    }
    kc_warn("consistency",
            "%s: the cache differs from the server at resourceVersion %s in %llu of %zu keys "
            "(e.g. %s); relisting",
            what, c->list_rv, (unsigned long long)c->ndiff, c->nitems, ex);
    c->stats.diffs += c->ndiff;
    c->stats.repairs++;
  }
  uint64_t nd = c->ndiff;
  reset_check(c);
  c->state = C_IDLE;
  if (nd) {
    char why[96];
    snprintf(why, sizeof why, "consistency check found %llu differences", (unsigned long long)nd);
    kc_reflector_relist(c->r, why);
  }
  schedule(c);
}

/* One slice of the comparison; re-arms the timer for the next. */
static void compare_slice(kc_consistency *c) {
  size_t end;
  if (c->state == C_COMPARE_LISTED) {
    end = c->pos + KC_CONSISTENCY_SLICE < c->nitems ? c->pos + KC_CONSISTENCY_SLICE : c->nitems;
    for (; c->pos < end; c->pos++) {
      const kc_obj *s = c->items[c->pos];
      kc_obj *o = kc_store_get(c->store, kc_obj_namespace(s), kc_obj_name(s));
      if (!o) {
        if (!was_deleted(c, kc_obj_namespace(s), kc_obj_name(s)))
          example(c, "on the server, missing from the cache", kc_obj_namespace(s), kc_obj_name(s),
                  NULL, NULL);
        continue;
      }
      bool same = kc_str_eq(kc_obj_uid(o), kc_obj_uid(s)) &&
                  kc_str_eq(kc_obj_resource_version(o), kc_obj_resource_version(s));
      if (!same && kc_rv_number(kc_obj_resource_version(o)) <= c->list_rvn)
        example(c, NULL, kc_obj_namespace(s), kc_obj_name(s), o, s);
      kc_obj_unref(o);
    }
    if (c->pos < c->nitems) goto again;
    if (build_set(c) < 0 || kc_store_list(c->store, (kc_str){0}, NULL, &c->cached) < 0) {
      give_up(c, "out of memory");
      return;
    }
    c->state = C_COMPARE_CACHED;
    c->pos = 0;
    goto again;
  }
  end = c->pos + KC_CONSISTENCY_SLICE < c->cached.n ? c->pos + KC_CONSISTENCY_SLICE : c->cached.n;
  for (; c->pos < end; c->pos++) {
    const kc_obj *o = c->cached.v[c->pos];
    uint64_t n = kc_rv_number(kc_obj_resource_version(o));
    if (n > c->list_rvn) continue; /* created (or changed) after the list */
    if (!listed(c, kc_obj_namespace(o), kc_obj_name(o)))
      example(c, "in the cache, not on the server", kc_obj_namespace(o), kc_obj_name(o), NULL,
              NULL);
  }
  if (c->pos < c->cached.n) goto again;
  finish_compare(c);
  return;
again:
  kc_next_turn_start(&c->turn, on_turn);
}

/* WAIT: until the reflector has seen the list's RV, then compare. */
static void start_compare(kc_consistency *c) {
  const kc_reflector_stats *rs = kc_reflector_stats_get(c->r);
  uint64_t seen = kc_rv_number(kc_str_c(rs->resource_version));
  if (seen < c->list_rvn) {
    if (kc_clock_now_ms() - c->wait_started_ms > WAIT_MAX_MS) {
      char why[200];
      snprintf(why, sizeof why, "the watch did not reach the list's resourceVersion %s in %d s "
               "(at %s)", c->list_rv, WAIT_MAX_MS / 1000, rs->resource_version);
      give_up(c, why);
      return;
    }
    uv_timer_start(&c->timer, on_timer, WAIT_POLL_MS, 0);
    return;
  }
  c->state = C_COMPARE_LISTED;
  c->pos = 0;
  compare_slice(c);
}

static void start_check(kc_consistency *c) {
  const kc_reflector_stats *rs = kc_reflector_stats_get(c->r);
  if (!rs->synced) {
    schedule(c); /* not synced yet: nothing to compare */
    return;
  }
  reset_check(c);
  c->list_rv[0] = 0;
  c->state = C_LIST;
  start_list(c);
}

static void on_turn(kc_next_turn *t) {
  kc_consistency *c = t->data;
  if (c->state == C_COMPARE_LISTED || c->state == C_COMPARE_CACHED) compare_slice(c);
}

static void on_timer(uv_timer_t *t) {
  kc_consistency *c = t->data;
  switch (c->state) {
  case C_IDLE: start_check(c); break;
  case C_WAIT: start_compare(c); break;
  case C_COMPARE_LISTED:
  case C_COMPARE_CACHED: compare_slice(c); break;
  case C_LIST:
  case C_CLOSED: break;
  }
}

static uint64_t next_rand(kc_consistency *c) { return kc_xorshift64s(&c->rng); }

static void schedule(kc_consistency *c) {
  if (c->state != C_IDLE) return;
  uv_timer_stop(&c->timer);
  if (!c->period_ms) return;
  uint64_t jitter = c->period_ms / 10 ? next_rand(c) % (c->period_ms / 10) : 0;
  uv_timer_start(&c->timer, on_timer, c->period_ms + jitter, 0);
}

/* --- API ------------------------------------------------------------------------ */

static void free_check(uv_handle_t *h);

int kc_consistency_new(uv_loop_t *loop, kc_api *api, struct kc_decode_pool *pool, kc_reflector *r,
                       kc_store *s, uint64_t period_ms, kc_consistency **out) {
  if (!loop || !api || !r || !s) return -EINVAL;
  kc_consistency *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  if (uv_timer_init(loop, &c->timer) != 0) {
    free(c);
    return -ENOMEM;
  }
  c->timer.data = c;
  c->open_handles = 1;
  if (kc_next_turn_init(loop, &c->turn, c) != 0) {
    c->state = C_CLOSED;
    uv_close((uv_handle_t *)&c->timer, free_check);
    return -ENOMEM;
  }
  c->open_handles = 2;
  c->loop = loop;
  c->api = api;
  c->pool = pool;
  c->r = r;
  c->store = s;
  c->period_ms = period_ms;
  c->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)c) | 1;
  c->state = C_IDLE;
  schedule(c);
  *out = c;
  return 0;
}

void kc_consistency_set_period(kc_consistency *c, uint64_t period_ms) {
  if (!c || c->period_ms == period_ms) return;
  c->period_ms = period_ms;
  schedule(c);
}

int kc_consistency_run(kc_consistency *c) {
  if (c->state != C_IDLE) return -EBUSY;
  uv_timer_stop(&c->timer);
  start_check(c);
  return 0;
}

void kc_consistency_note_delete(kc_consistency *c, kc_str ns, kc_str name) {
  if (!c || c->state == C_IDLE || c->state == C_CLOSED) return;
  if (KC_ARRAY_ROOM(c->deleted, c->cap_deleted, c->ndeleted, 64) < 0) {
    give_up(c, "out of memory");
    return;
  }
  char *k = malloc(ns.len + name.len + 2);
  if (!k) {
    give_up(c, "out of memory");
    return;
  }
  if (ns.len) memcpy(k, ns.ptr, ns.len);
  k[ns.len] = '/';
  memcpy(k + ns.len + 1, name.ptr, name.len);
  k[ns.len + 1 + name.len] = 0;
  c->deleted[c->ndeleted++] = k;
}

void kc_consistency_note_relist(kc_consistency *c) {
  if (!c || c->state == C_IDLE || c->state == C_CLOSED) return;
  kc_debug("consistency", "%s: relisted during the check; check ended", kc_reflector_describe(c->r));
  c->stats.skipped++;
  reset_check(c);
  c->state = C_IDLE;
  schedule(c);
}

static void free_check(uv_handle_t *h) {
  kc_consistency *c = h->data;
  if (--c->open_handles > 0) return;
  free(c->items);
  free(c->deleted);
  kc_obj_vec_release(&c->cached);
  free(c);
}

void kc_consistency_close(kc_consistency *c) {
  if (!c || c->state == C_CLOSED) return;
  reset_check(c);
  c->state = C_CLOSED;
  uv_timer_stop(&c->timer);
  kc_next_turn_close(&c->turn, free_check);
  uv_close((uv_handle_t *)&c->timer, free_check);
}

const kc_consistency_stats *kc_consistency_stats_get(const kc_consistency *c) { return &c->stats; }
