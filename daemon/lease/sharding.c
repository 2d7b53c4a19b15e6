/* SPDX-License-Identifier: Apache-2.0 */
/* sharding: see sharding.h.
 *
 * Loop-thread state: the slots' state, electors and in-flight counts, the
 * observed Leases, the tombstones, the LIST in flight. Shared with worker
 * threads: the slots' valid_until (atomics), the in-flight key table
 * (mutex), the reference count and `closed`.
 */
#include "base/clock.h"
#include "lease/sharding.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/idset.h"
#include "lease/leader.h"
#include "base/buf.h"
#include "base/log.h"
#include "kube/kname.h"
#include "kube/kurl.h"

#define LIST_MAX (8u << 20)
#define COMPONENT "sharding"

/* ---- the component ---------------------------------------------------------------- */

typedef struct slot {
  kc_sharding *sh;
  unsigned index;
  kc_shard_range range;
  enum kc_shard_state state;
  bool given; /* draining because we gave it up (else lost) */
  kc_leader *le;
  char lease_name[256];
  _Atomic uint64_t valid_until; /* fence: kc_clock_now_ms() must be below */
  _Atomic uint64_t epoch;       /* acquisitions of this range (fence tokens) */
  unsigned inflight;
  uint64_t drain_since, claim_since;
  kc_shard_obs obs;
  kc_obj *last;    /* the Lease as the last LIST showed it */
  uint64_t cached; /* last count of cached `for` objects */
} slot;

typedef struct member {
  char name[256];
  kc_shard_obs obs;
  bool seen;
} member;

struct kc_sharding {
  atomic_uint refs;
  atomic_bool closed;
  uv_loop_t *loop;
  kc_api *api;
  char *controller, *identity, *ns, *prefix, *list_path;
  kc_sharding_spec spec;
  kc_informer *inf;
  uint64_t drain_ms;
  kc_sharding_callbacks cb;
  void *ud;
  unsigned n;
  slot *slots;
  kc_leader *member_le;
  char member_name[256];
  member *members;
  size_t nmembers, capmembers;
  uv_timer_t timer;
  bool timer_open;
  int open_leaders;
  bool started, stopping, member_released;
  void (*shutdown_done)(void *ud);
  void *shutdown_ud;
  kc_api_call *list_call;
  kc_buf list_resp;
  uint64_t next_list;
  unsigned last_target, last_members;
  kc_iddict tombs; /* key -> range of a deleted `for` object */
  pthread_mutex_t mu;
  kc_iddict inflight; /* key -> range (mutex) */
  _Atomic uint64_t handoffs, acquisitions;
};

static _Thread_local struct {
  kc_sharding *sh;
  int range; /* -1: the key was not admitted: nothing may be written */
} fence;

static uint32_t key_h32(const char *key, size_t len) {
  return (uint32_t)kc_shard_hash(key, len);
}

void kc_sharding_retain(kc_sharding *sh) {
  atomic_fetch_add(&sh->refs, 1);
}
void kc_sharding_unref(kc_sharding *sh);
static void sh_unref(kc_sharding *sh) {
  kc_sharding_unref(sh);
}

void kc_sharding_unref(kc_sharding *sh) {
  if (atomic_fetch_sub(&sh->refs, 1) != 1) return;
  for (unsigned i = 0; sh->slots && i < sh->n; i++)
    kc_obj_unref(sh->slots[i].last);
  kc_iddict_free(&sh->tombs);
  kc_iddict_free(&sh->inflight);
  pthread_mutex_destroy(&sh->mu);
  kc_buf_free(&sh->list_resp);
  free(sh->slots), free(sh->members);
  free(sh->controller), free(sh->identity), free(sh->ns), free(sh->prefix), free(sh->list_path);
  free(sh);
}

unsigned kc_sharding_range_of(const kc_sharding *sh, uint64_t h) {
  /* the ranges are contiguous and in order: the last one starting at or below h */
  unsigned lo = 0, hi = sh->n - 1;
  while (lo < hi) {
    unsigned mid = lo + (hi - lo + 1) / 2;
    if (sh->slots[mid].range.start <= h)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

uint64_t kc_sharding_obj_hash(const kc_sharding *sh, const kc_obj *obj) {
  kc_str s = sh->spec.key == KC_SHARD_KEY_NAMESPACE ? kc_obj_namespace(obj) : kc_obj_uid(obj);
  return kc_shard_hash(s.ptr ? s.ptr : "", s.len);
}

/* Range of a key, or -ENOENT (also for a malformed key: kname.h). */
static int key_range(kc_sharding *sh, const char *key) {
  kc_str ns, name;
  if (!kc_name_split_key(key, strlen(key), &ns, &name)) return -ENOENT;
  if (sh->spec.key == KC_SHARD_KEY_NAMESPACE)
    return (int)kc_sharding_range_of(sh, kc_shard_hash(ns.ptr, ns.len));
  kc_obj *o = sh->inf ? kc_informer_get(sh->inf, ns, name) : NULL;
  if (o) {
    int r = (int)kc_sharding_range_of(sh, kc_sharding_obj_hash(sh, o));
    kc_obj_unref(o);
    return r;
  }
  size_t kl = strlen(key);
  kc_iddict_ent *e = kc_iddict_find(&sh->tombs, key, kl, NULL, 0, key_h32(key, kl));
  if (e) {
    kc_iditer it = kc_iditer_start(&e->set);
    uint32_t id;
    if (kc_iditer_next(&it, &id)) return (int)id;
  }
  return -ENOENT;
}

static void forget_tomb(kc_sharding *sh, const char *key) {
  size_t kl = strlen(key);
  kc_iddict_ent *e = kc_iddict_find(&sh->tombs, key, kl, NULL, 0, key_h32(key, kl));
  if (e) kc_iddict_remove(&sh->tombs, e);
}

int kc_sharding_note_deleted(kc_sharding *sh, const kc_obj *obj) {
  if (sh->spec.key == KC_SHARD_KEY_NAMESPACE) return 0; /* the key says it */
  char key[512];
  int kl = kc_obj_key(obj, key, sizeof key);
  if (kl <= 0) return kl < 0 ? kl : -EINVAL;
  forget_tomb(sh, key);
  unsigned r = kc_sharding_range_of(sh, kc_sharding_obj_hash(sh, obj));
  return kc_iddict_add(&sh->tombs, key, (size_t)kl, NULL, 0, key_h32(key, (size_t)kl), r);
}

static bool slot_admits(const slot *s) {
  return s->state == KC_SHARD_OWNED && kc_clock_now_ms() < atomic_load(&s->valid_until);
}

bool kc_sharding_owns_obj(const kc_sharding *sh, const kc_obj *obj) {
  return slot_admits(&sh->slots[kc_sharding_range_of(sh, kc_sharding_obj_hash(sh, obj))]);
}

bool kc_sharding_owns_key(kc_sharding *sh, const char *key) {
  int r = key_range(sh, key);
  return r >= 0 && slot_admits(&sh->slots[r]);
}

static void check_drain(slot *s);

bool kc_sharding_admit(kc_sharding *sh, const char *key) {
  int r = key_range(sh, key);
  if (r < 0 || !slot_admits(&sh->slots[r])) {
    forget_tomb(sh, key); /* dropped: nobody here runs it */
    return false;
  }
  size_t kl = strlen(key);
  pthread_mutex_lock(&sh->mu);
  kc_iddict_ent *e = kc_iddict_find(&sh->inflight, key, kl, NULL, 0, key_h32(key, kl));
  if (e) kc_iddict_remove(&sh->inflight, e); /* cannot happen: the queue runs a key once */
  int rc = kc_iddict_add(&sh->inflight, key, kl, NULL, 0, key_h32(key, kl), (uint32_t)r);
  pthread_mutex_unlock(&sh->mu);
  if (rc < 0) return false;
  sh->slots[r].inflight++;
  return true;
}

void kc_sharding_end(kc_sharding *sh, const char *key, bool requeued) {
  if (!requeued) forget_tomb(sh, key);
  size_t kl = strlen(key);
  int r = -1;
  pthread_mutex_lock(&sh->mu);
  kc_iddict_ent *e = kc_iddict_find(&sh->inflight, key, kl, NULL, 0, key_h32(key, kl));
  if (e) {
    kc_iditer it = kc_iditer_start(&e->set);
    uint32_t id;
    if (kc_iditer_next(&it, &id)) r = (int)id;
    kc_iddict_remove(&sh->inflight, e);
  }
  pthread_mutex_unlock(&sh->mu);
  if (r < 0 || (unsigned)r >= sh->n) return;
  slot *s = &sh->slots[r];
  if (s->inflight) s->inflight--;
  check_drain(s);
}

void kc_sharding_fence_enter(kc_sharding *sh, const char *key) {
  size_t kl = strlen(key);
  int r = -1;
  pthread_mutex_lock(&sh->mu);
  kc_iddict_ent *e = kc_iddict_find(&sh->inflight, key, kl, NULL, 0, key_h32(key, kl));
  if (e) {
    kc_iditer it = kc_iditer_start(&e->set);
    uint32_t id;
    if (kc_iditer_next(&it, &id)) r = (int)id;
  }
  pthread_mutex_unlock(&sh->mu);
  atomic_fetch_add(&sh->refs, 1);
  fence.sh = sh;
  fence.range = r;
}

void kc_sharding_fence_leave(void) {
  kc_sharding *sh = fence.sh;
  fence.sh = NULL;
  fence.range = -1;
  if (sh) sh_unref(sh);
}

bool kc_sharding_fence_active(void) { return fence.sh != NULL; }

bool kc_sharding_fence_capture(kc_shard_fence *out) {
  *out = (kc_shard_fence){NULL, -1, 0};
  kc_sharding *sh = fence.sh;
  if (!sh) return false;
  atomic_fetch_add(&sh->refs, 1);
  out->sh = sh;
  out->range = fence.range;
  if (fence.range >= 0) out->epoch = atomic_load(&sh->slots[fence.range].epoch);
  return true;
}

bool kc_sharding_fence_check(const kc_shard_fence *f) {
  kc_sharding *sh = f->sh;
  if (!sh || f->range < 0 || atomic_load(&sh->closed)) return false;
  const slot *s = &sh->slots[f->range];
  return atomic_load(&s->epoch) == f->epoch && kc_clock_now_ms() < atomic_load(&s->valid_until);
}

void kc_sharding_fence_drop(kc_shard_fence *f) {
  if (f->sh) sh_unref(f->sh);
  *f = (kc_shard_fence){NULL, -1, 0};
}

bool kc_sharding_fence_ok(void) {
  kc_sharding *sh = fence.sh;
  if (!sh) return true;
  if (fence.range < 0 || atomic_load(&sh->closed)) return false;
  return kc_clock_now_ms() < atomic_load(&sh->slots[fence.range].valid_until);
}

/* ---- hand-off ---------------------------------------------------------------------- */

static void schedule(kc_sharding *sh, uint64_t delay_ms);
static void maybe_finish_shutdown(kc_sharding *sh);

static void on_slot_released(int err, void *ud) {
  slot *s = ud;
  kc_sharding *sh = s->sh;
  if (s->state != KC_SHARD_RELEASING) return;
  s->state = KC_SHARD_FREE;
  if (err)
    kc_warn(COMPONENT,
            "%s: range %u (lease %s/%s): release failed: %s (it expires after "
            "leaseDuration)",
            sh->controller, s->index, sh->ns, s->lease_name, strerror(-err));
  else
    kc_info(COMPONENT, "%s: range %u (lease %s/%s): released identity=%s", sh->controller, s->index,
            sh->ns, s->lease_name, sh->identity);
  if (!sh->stopping && sh->cb.on_changed) sh->cb.on_changed(sh->ud);
  maybe_finish_shutdown(sh);
  if (!sh->stopping) schedule(sh, 0);
}

static void release_slot(slot *s) {
  kc_sharding *sh = s->sh;
  atomic_store(&s->valid_until, 0); /* nothing of this range writes from now on */
  s->state = KC_SHARD_RELEASING;
  if (kc_leader_release(s->le, on_slot_released, s) < 0) { /* already stopped */
    s->state = KC_SHARD_FREE;
    maybe_finish_shutdown(sh);
  }
}

/* A draining range is released once its in-flight reconciles ended or the
 * bound passed (then they are fenced: valid_until is cleared first). */
static void check_drain(slot *s) {
  if (s->state != KC_SHARD_DRAINING) return;
  kc_sharding *sh = s->sh;
  uint64_t now = kc_clock_now_ms();
  if (s->inflight && now < s->drain_since + sh->drain_ms) return;
  if (s->inflight)
    kc_warn(COMPONENT,
            "%s: range %u: %u reconciles still running after %" PRIu64
            " ms; releasing anyway (their writes are refused)",
            sh->controller, s->index, s->inflight, sh->drain_ms);
  release_slot(s);
}

static void begin_drain(slot *s, bool given, const char *why) {
  kc_sharding *sh = s->sh;
  s->state = KC_SHARD_DRAINING;
  s->given = given;
  s->drain_since = kc_clock_now_ms();
  atomic_fetch_add(&sh->handoffs, 1);
  kc_info(COMPONENT, "%s: range %u (lease %s/%s): %s; draining %u in-flight reconciles",
          sh->controller, s->index, sh->ns, s->lease_name, why, s->inflight);
  if (sh->cb.on_changed) sh->cb.on_changed(sh->ud);
  check_drain(s);
}

static void give_up(slot *s, const char *why) {
  if (s->state == KC_SHARD_OWNED) {
    begin_drain(s, true, why);
  } else if (s->state == KC_SHARD_CLAIMING) {
    kc_debug(COMPONENT, "%s: range %u: claim withdrawn: %s", s->sh->controller, s->index, why);
    release_slot(s);
  }
}

/* ---- elector callbacks ---------------------------------------------------------------- */

static void on_slot_started(void *ud) {
  slot *s = ud;
  kc_sharding *sh = s->sh;
  if (s->state != KC_SHARD_CLAIMING) return; /* re-acquired while draining: still going */
  s->state = KC_SHARD_OWNED;
  atomic_fetch_add(&s->epoch, 1);
  atomic_fetch_add(&sh->acquisitions, 1);
  char end[24];
  if (s->range.end_is_max)
    snprintf(end, sizeof end, "2^64");
  else
    snprintf(end, sizeof end, "0x%016" PRIx64, s->range.end);
  kc_info(COMPONENT, "%s: range %u [0x%016" PRIx64 ", %s) (lease %s/%s): claimed identity=%s",
          sh->controller, s->index, s->range.start, end, sh->ns, s->lease_name, sh->identity);
  if (sh->cb.on_acquired) sh->cb.on_acquired(s->index, sh->ud);
  if (sh->cb.on_changed) sh->cb.on_changed(sh->ud);
}

static void on_slot_stopped(void *ud) {
  slot *s = ud;
  atomic_store(&s->valid_until, 0);
  if (s->state == KC_SHARD_OWNED) begin_drain(s, false, "lost (renew deadline passed or taken)");
}

/* The elector saw the Lease's holder change. A claim that finds another
 * holder is withdrawn at once (no waiting for the next LIST), and the view
 * learns the holder, so the next plan claims another range instead. */
static void on_slot_holder(const char *holder, void *ud) {
  slot *s = ud;
  kc_sharding *sh = s->sh;
  if (!holder[0] || strcmp(holder, sh->identity) == 0) return;
  uint64_t now = kc_clock_now_ms();
  kc_shard_observe(&s->obs, holder, (sh->spec.lease_duration_ms + 999) / 1000,
                   kc_shard_hash(holder, strlen(holder)) ^ now, now);
  if (s->state == KC_SHARD_CLAIMING) {
    give_up(s, "held by another replica");
    if (!sh->stopping) schedule(sh, 0);
  }
}

static void on_slot_renewed(uint64_t until, void *ud) {
  slot *s = ud;
  /* a draining range still holds its Lease: its in-flight reconciles may
   * write until the drain ends (release_slot clears the fence first) */
  if (s->state == KC_SHARD_CLAIMING || s->state == KC_SHARD_OWNED || s->state == KC_SHARD_DRAINING)
    atomic_store(&s->valid_until, until);
}

/* ---- the claim loop --------------------------------------------------------------------- */

static member *find_member(kc_sharding *sh, const char *name, bool add) {
  for (size_t i = 0; i < sh->nmembers; i++)
    if (strcmp(sh->members[i].name, name) == 0) return &sh->members[i];
  if (!add) return NULL;
  if (KC_ARRAY_ROOM(sh->members, sh->capmembers, sh->nmembers, 8) < 0) return NULL;
  member *m = &sh->members[sh->nmembers++];
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "%s", name);
  return m;
}

typedef struct list_scan {
  kc_sharding *sh;
  uint64_t now;
  bool *seen;
} list_scan;

static void on_lease(const kc_shard_lease_item *it, void *ud) {
  list_scan *ls = ud;
  kc_sharding *sh = ls->sh;
  if (it->range >= 0) {
    slot *s = &sh->slots[it->range];
    kc_shard_observe(&s->obs, it->rec->holder, it->rec->duration_s, it->content, ls->now);
    kc_obj_unref(s->last);
    s->last = kc_obj_ref(it->lease);
    ls->seen[it->range] = true;
    return;
  }
  member *m = find_member(sh, it->name, true);
  if (m) {
    kc_shard_observe(&m->obs, it->rec->holder, it->rec->duration_s, it->content, ls->now);
    m->seen = true;
  }
}

static void run_plan(kc_sharding *sh) {
  uint64_t now = kc_clock_now_ms();
  kc_shard_plan_range *pr = calloc(sh->n, sizeof *pr);
  unsigned *claim = calloc(sh->n, sizeof *claim), *give = calloc(sh->n, sizeof *give);
  const char **mem = calloc(sh->nmembers + 1, sizeof *mem);
  if (!pr || !claim || !give || !mem) {
    kc_error(COMPONENT, "%s: claim loop: out of memory", sh->controller);
    free(pr), free(claim), free(give), free(mem);
    return;
  }
  size_t nm = 0;
  for (size_t i = 0; i < sh->nmembers; i++)
    if (kc_shard_obs_live(&sh->members[i].obs, now)) mem[nm++] = sh->members[i].obs.holder;
  for (unsigned i = 0; i < sh->n; i++) {
    slot *s = &sh->slots[i];
    pr[i] = (kc_shard_plan_range){s->state, s->obs.holder, kc_shard_obs_live(&s->obs, now)};
    /* a claim that another live holder keeps: withdraw it */
    if (s->state == KC_SHARD_CLAIMING && pr[i].live && strcmp(s->obs.holder, sh->identity) != 0 &&
        s->obs.holder[0] && now > s->claim_since + (uint64_t)sh->spec.retry_period_ms * 2) {
      give_up(s, "held by another live replica");
      pr[i].state = s->state;
    }
  }
  kc_shard_plan_out out = {.claim = claim, .give = give};
  kc_shard_plan(sh->identity, mem, nm, pr, sh->n, &out);
  if (out.target != sh->last_target || out.members != sh->last_members)
    kc_info(COMPONENT, "%s: %u live replicas, target %u of %u ranges", sh->controller, out.members,
            out.target, sh->n);
  sh->last_target = out.target;
  sh->last_members = out.members;
  for (size_t k = 0; k < out.ngive; k++)
    give_up(&sh->slots[give[k]], "handed off to rebalance");
  for (size_t k = 0; k < out.nclaim; k++) {
    slot *s = &sh->slots[claim[k]];
    if (s->last) kc_leader_observe(s->le, s->last, s->obs.changed_ms);
    if (kc_leader_restart(s->le) == 0) {
      s->state = KC_SHARD_CLAIMING;
      s->claim_since = now;
      kc_debug(COMPONENT, "%s: range %u: claiming", sh->controller, s->index);
    }
  }
  free(pr), free(claim), free(give), free(mem);
}

/* When the loop must look again: the next LIST, an observed record
 * expiring, a drain bound. */
static uint64_t next_wake(kc_sharding *sh, uint64_t now) {
  uint64_t when = sh->next_list;
  /* a replica that died: its ranges are claimable once both its range and
   * its membership records expired (the target counts live members) */
  for (size_t m = 0; m < sh->nmembers; m++) {
    uint64_t e = kc_shard_obs_expiry(&sh->members[m].obs);
    if (e > now && e < when) when = e + 1;
  }
  for (unsigned i = 0; i < sh->n; i++) {
    slot *s = &sh->slots[i];
    uint64_t e = kc_shard_obs_expiry(&s->obs);
    if (s->state == KC_SHARD_FREE && e > now && e < when) when = e + 1;
    if (s->state == KC_SHARD_DRAINING && s->drain_since + sh->drain_ms < when)
      when = s->drain_since + sh->drain_ms;
  }
  return when > now ? when - now : 0;
}

static int on_list_data(kc_api_call *call, const char *p, size_t len, void *ud) {
  (void)call;
  kc_sharding *sh = ud;
  if (sh->list_resp.len + len > LIST_MAX) return KC_HTTP_ABORT;
  kc_buf_add(&sh->list_resp, p, len);
  return sh->list_resp.err ? KC_HTTP_ABORT : KC_HTTP_CONTINUE;
}

static void on_list_done(kc_api_call *call, const kc_api_result *res, void *ud) {
  (void)call;
  kc_sharding *sh = ud;
  sh->list_call = NULL;
  uint64_t now = kc_clock_now_ms();
  sh->next_list = now + (uint64_t)sh->spec.retry_period_ms;
  if (res->error || res->status.code < 200 || res->status.code >= 300) {
    if (res->error)
      kc_warn(COMPONENT, "%s: list leases %s: %s", sh->controller, sh->list_path,
              res->status.message);
    else
      kc_warn(COMPONENT, "%s: list leases %s: HTTP %d %s: %s", sh->controller, sh->list_path,
              res->status.code, res->status.reason, res->status.message);
    schedule(sh, next_wake(sh, now));
    return;
  }
  char err[128] = "";
  bool *seen = calloc(sh->n, sizeof *seen);
  list_scan ls = {sh, now, seen};
  for (size_t i = 0; i < sh->nmembers; i++)
    sh->members[i].seen = false;
  int rc = seen ? kc_shard_scan_leases(sh->list_resp.p ? sh->list_resp.p : "", sh->list_resp.len,
                                       sh->prefix, sh->n, on_lease, &ls, err, sizeof err)
                : -ENOMEM;
  if (rc < 0) {
    kc_warn(COMPONENT, "%s: list leases %s: %s", sh->controller, sh->list_path,
            rc == -ENOMEM ? "out of memory" : err);
    free(seen);
    for (size_t i = 0; i < sh->nmembers; i++)
      sh->members[i].seen = true; /* keep what we know */
    schedule(sh, next_wake(sh, now));
    return;
  }
  for (unsigned i = 0; i < sh->n; i++)
    if (!seen[i]) {
      kc_shard_observe_absent(&sh->slots[i].obs);
      kc_obj_unref(sh->slots[i].last);
      sh->slots[i].last = NULL;
    }
  free(seen);
  for (size_t i = 0; i < sh->nmembers;) { /* forget deleted membership Leases */
    if (!sh->members[i].seen)
      sh->members[i] = sh->members[--sh->nmembers];
    else
      i++;
  }
  if (!sh->stopping) run_plan(sh);
  schedule(sh, next_wake(sh, kc_clock_now_ms()));
}

static void start_list(kc_sharding *sh) {
  kc_buf_reset(&sh->list_resp);
  kc_api_request_opts o = {
      .path = sh->list_path,
      .timeout_ms = (uint64_t)sh->spec.renew_deadline_ms,
      .on_data = on_list_data,
      .on_done = on_list_done,
      .ud = sh,
  };
  if (kc_api_request(sh->api, &o, &sh->list_call) < 0) {
    sh->list_call = NULL;
    sh->next_list = kc_clock_now_ms() + (uint64_t)sh->spec.retry_period_ms;
    schedule(sh, (uint64_t)sh->spec.retry_period_ms);
  }
}

static void on_timer(uv_timer_t *t) {
  kc_sharding *sh = t->data;
  for (unsigned i = 0; i < sh->n; i++)
    check_drain(&sh->slots[i]);
  if (sh->stopping) {
    maybe_finish_shutdown(sh);
    if (!sh->member_released) schedule(sh, 100);
    return;
  }
  if (sh->list_call) return; /* its answer schedules the next wake */
  uint64_t now = kc_clock_now_ms();
  if (now >= sh->next_list) {
    start_list(sh);
    return;
  }
  /* An observed record expired before the next LIST: plan on what we know
   * (the elector's own GET checks the Lease again before taking it). */
  run_plan(sh);
  schedule(sh, next_wake(sh, now));
}

static void schedule(kc_sharding *sh, uint64_t delay_ms) {
  if (sh->timer_open) uv_timer_start(&sh->timer, on_timer, delay_ms, 0);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static void on_handle_closed(uv_handle_t *h) {
  sh_unref(h->data);
}

int kc_sharding_new(uv_loop_t *loop, kc_api *api, const char *controller,
                    const kc_sharding_spec *spec, const char *identity, kc_informer *for_inf,
                    uint64_t drain_ms, const kc_sharding_callbacks *cb, void *ud,
                    kc_sharding **out) {
  *out = NULL;
  if (!loop || !api || !spec || spec->shards <= 0 || spec->shards > KC_MAX_SHARDS ||
      !spec->lease_namespace || !spec->lease_prefix || !identity || !identity[0])
    return -EINVAL;
  kc_sharding *sh = calloc(1, sizeof *sh);
  if (!sh) return -ENOMEM;
  atomic_init(&sh->refs, 1);
  if (pthread_mutex_init(&sh->mu, NULL) != 0) {
    free(sh);
    return -ENOMEM;
  }
  sh->tombs.copy_a = sh->inflight.copy_a = true;
  sh->loop = loop;
  sh->api = api;
  sh->spec = *spec;
  sh->inf = for_inf;
  sh->drain_ms = drain_ms;
  if (cb) sh->cb = *cb;
  sh->ud = ud;
  sh->n = (unsigned)spec->shards;
  sh->controller = strdup(controller ? controller : "");
  sh->identity = strdup(identity);
  sh->ns = strdup(spec->lease_namespace);
  sh->prefix = strdup(spec->lease_prefix);
  kc_buf list = {0};
  kc_url_resource(&list, KC_LEASE_API_PATH, "leases", kc_str_c(spec->lease_namespace),
                  (kc_str){NULL, 0}, NULL);
  sh->list_path = kc_buf_take(&list);
  sh->slots = calloc(sh->n, sizeof *sh->slots);
  int rc =
      (!sh->controller || !sh->identity || !sh->ns || !sh->prefix || !sh->list_path || !sh->slots)
          ? -ENOMEM
          : 0;
  sh->spec.lease_namespace = sh->ns;
  sh->spec.lease_prefix = sh->prefix;
  if (rc == 0 &&
      kc_shard_member_lease_name(sh->prefix, identity, sh->member_name, sizeof sh->member_name) < 0)
    rc = -EINVAL;
  kc_leader_election le = {.enabled = true,
                           .namespace_ = sh->ns,
                           .lease_duration_ms = spec->lease_duration_ms,
                           .renew_deadline_ms = spec->renew_deadline_ms,
                           .retry_period_ms = spec->retry_period_ms};
  for (unsigned i = 0; rc == 0 && i < sh->n; i++) {
    slot *s = &sh->slots[i];
    s->sh = sh;
    s->index = i;
    kc_shard_ranges_split(sh->n, i, &s->range);
    int w = snprintf(s->lease_name, sizeof s->lease_name, "%s-%u", sh->prefix, i);
    if (w < 0 || (size_t)w >= sizeof s->lease_name) rc = -EINVAL;
    le.name = s->lease_name;
    kc_leader_callbacks lcb = {on_slot_started, on_slot_stopped, on_slot_holder, on_slot_renewed};
    if (rc == 0) rc = kc_leader_new(loop, api, &le, identity, &lcb, s, &s->le);
    if (rc == 0) {
      atomic_fetch_add(&sh->refs, 1); /* dropped when the elector is closed */
      sh->open_leaders++;
    }
  }
  if (rc == 0) {
    le.name = sh->member_name;
    rc = kc_leader_new(loop, api, &le, identity, NULL, NULL, &sh->member_le);
  }
  if (rc == 0 && uv_timer_init(loop, &sh->timer) != 0) rc = -ENOMEM;
  if (rc < 0) {
    for (unsigned i = 0; sh->slots && i < sh->n; i++)
      if (sh->slots[i].le) {
        kc_leader_close(sh->slots[i].le);
        atomic_fetch_sub(&sh->refs, 1);
      }
    kc_leader_close(sh->member_le);
    sh_unref(sh);
    return rc;
  }
  sh->timer.data = sh;
  sh->timer_open = true;
  atomic_fetch_add(&sh->refs, 1); /* the timer's */
  *out = sh;
  return 0;
}

int kc_sharding_start(kc_sharding *sh) {
  if (sh->started) return -EALREADY;
  sh->started = true;
  int rc = kc_leader_start(sh->member_le);
  if (rc < 0) return rc;
  kc_info(COMPONENT, "%s: sharding %u ranges by %s, leases %s/%s-*, identity=%s", sh->controller,
          sh->n, sh->spec.key == KC_SHARD_KEY_NAMESPACE ? "metadata.namespace" : "metadata.uid",
          sh->ns, sh->prefix, sh->identity);
  schedule(sh, 0);
  return 0;
}

static void on_member_released(int err, void *ud) {
  kc_sharding *sh = ud;
  (void)err;
  sh->member_released = true;
  void (*done)(void *) = sh->shutdown_done;
  sh->shutdown_done = NULL;
  if (done) done(sh->shutdown_ud);
}

static void maybe_finish_shutdown(kc_sharding *sh) {
  if (!sh->stopping || sh->member_released) return;
  for (unsigned i = 0; i < sh->n; i++)
    if (sh->slots[i].state != KC_SHARD_FREE) return;
  if (kc_leader_release(sh->member_le, on_member_released, sh) < 0) on_member_released(0, sh);
}

void kc_sharding_shutdown(kc_sharding *sh, void (*done)(void *ud), void *ud) {
  if (sh->stopping) return;
  sh->stopping = true;
  sh->shutdown_done = done;
  sh->shutdown_ud = ud;
  kc_api_cancel(sh->list_call);
  sh->list_call = NULL;
  for (unsigned i = 0; i < sh->n; i++) {
    sh->slots[i].inflight = 0;
    give_up(&sh->slots[i], "shutting down");
  }
  maybe_finish_shutdown(sh);
  if (!sh->member_released) schedule(sh, 100); /* drain bounds */
}

void kc_sharding_close(kc_sharding *sh) {
  if (!sh) return;
  atomic_store(&sh->closed, true);
  kc_api_cancel(sh->list_call);
  sh->list_call = NULL;
  for (unsigned i = 0; i < sh->n; i++) {
    atomic_store(&sh->slots[i].valid_until, 0);
    kc_leader_close(sh->slots[i].le);
    sh->slots[i].le = NULL;
    sh_unref(sh); /* the elector's */
  }
  kc_leader_close(sh->member_le);
  sh->member_le = NULL;
  sh->timer_open = false;
  uv_close((uv_handle_t *)&sh->timer, on_handle_closed);
  sh_unref(sh); /* the owner's */
}

/* ---- views --------------------------------------------------------------------------------- */

size_t kc_sharding_owned_ranges(const kc_sharding *sh, kc_shard_range *out, size_t cap) {
  size_t k = 0;
  for (unsigned i = 0; i < sh->n; i++)
    if (sh->slots[i].state == KC_SHARD_OWNED) {
      if (k < cap) out[k] = sh->slots[i].range;
      k++;
    }
  return k;
}

size_t kc_sharding_held_ranges(const kc_sharding *sh, kc_shard_range *out, size_t cap) {
  size_t k = 0;
  for (unsigned i = 0; i < sh->n; i++)
    if (sh->slots[i].state == KC_SHARD_OWNED || sh->slots[i].state == KC_SHARD_DRAINING) {
      if (k < cap) out[k] = sh->slots[i].range;
      k++;
    }
  return k;
}

void kc_sharding_get_stats(const kc_sharding *sh, kc_sharding_stats *out) {
  *out = (kc_sharding_stats){.shards = sh->n,
                             .members = sh->last_members,
                             .handoffs = atomic_load(&sh->handoffs),
                             .acquisitions = atomic_load(&sh->acquisitions)};
  for (unsigned i = 0; i < sh->n; i++)
    if (sh->slots[i].state == KC_SHARD_OWNED) out->owned++;
}

int kc_sharding_count_cached(kc_sharding *sh, uint64_t *per_range, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    per_range[i] = 0;
  if (!sh->inf) return 0;
  kc_obj_vec all = {0};
  int rc = kc_informer_list(sh->inf, (kc_str){NULL, 0}, NULL, &all);
  if (rc < 0) return rc;
  for (size_t i = 0; i < all.n; i++) {
    unsigned r = kc_sharding_range_of(sh, kc_sharding_obj_hash(sh, all.v[i]));
    if (r < n) per_range[r]++;
  }
  kc_obj_vec_release(&all);
  for (unsigned i = 0; i < sh->n && i < n; i++)
    sh->slots[i].cached = per_range[i];
  return 0;
}

static const char *state_name(enum kc_shard_state s) {
  switch (s) {
  case KC_SHARD_FREE: return "free";
  case KC_SHARD_CLAIMING: return "claiming";
  case KC_SHARD_OWNED: return "owned";
  case KC_SHARD_DRAINING: return "draining";
  case KC_SHARD_RELEASING: return "releasing";
  }
  return "?";
}

int kc_sharding_debug_json(kc_sharding *sh, kc_buf *b) {
  uint64_t *cached = calloc(sh->n, sizeof *cached);
  if (!cached) return -ENOMEM;
  kc_sharding_count_cached(sh, cached, sh->n);
  uint64_t now = kc_clock_now_ms();
  kc_buf_puts(b, "{\"controller\":");
  kc_buf_json_c(b, sh->controller);
  kc_buf_puts(b, ",\"identity\":");
  kc_buf_json_c(b, sh->identity);
  kc_buf_printf(b, ",\"key\":\"%s\",\"shards\":%u,\"target\":%u,\"members\":[",
                sh->spec.key == KC_SHARD_KEY_NAMESPACE ? "metadata.namespace" : "metadata.uid",
                sh->n, sh->last_target);
  bool first = true;
  for (size_t i = 0; i < sh->nmembers; i++) {
    if (!kc_shard_obs_live(&sh->members[i].obs, now)) continue;
    if (!first) kc_buf_puts(b, ",");
    first = false;
    kc_buf_json_c(b, sh->members[i].obs.holder);
  }
  uint64_t total = 0;
  kc_buf_puts(b, "],\"ranges\":[");
  for (unsigned i = 0; i < sh->n; i++) {
    slot *s = &sh->slots[i];
    total += cached[i];
    if (i) kc_buf_puts(b, ",");
    kc_buf_printf(b, "{\"index\":%u,\"start\":\"0x%016" PRIx64 "\",\"end\":\"%s", i, s->range.start,
                  s->range.end_is_max ? "0x10000000000000000" : "");
    if (!s->range.end_is_max) kc_buf_printf(b, "0x%016" PRIx64, s->range.end);
    kc_buf_puts(b, "\",\"lease\":");
    kc_buf_json_c(b, s->lease_name);
    kc_buf_puts(b, ",\"holder\":");
    kc_buf_json_c(b, s->obs.holder);
    kc_buf_printf(b,
                  ",\"holderLive\":%s,\"own\":%s,\"state\":\"%s\",\"inFlight\":%u,"
                  "\"objectsCached\":%" PRIu64 "}",
                  kc_shard_obs_live(&s->obs, now) ? "true" : "false",
                  s->state == KC_SHARD_OWNED ? "true" : "false", state_name(s->state), s->inflight,
                  cached[i]);
  }
  kc_buf_printf(b, "],\"objectsCached\":%" PRIu64 ",\"handoffs\":%" PRIu64 "}", total,
                atomic_load(&sh->handoffs));
  free(cached);
  return b->err;
}
