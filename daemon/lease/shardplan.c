/* SPDX-License-Identifier: Apache-2.0 */
/* shardplan: see shardplan.h. */
#include "lease/shardplan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "lease/shardsel.h"
#include "watch/decode.h"

void kc_shard_observe(kc_shard_obs *o, const char *holder, int64_t duration_s, uint64_t content,
                      uint64_t now_ms) {
  if (!o->present || o->content != content || strcmp(o->holder, holder) != 0) {
    o->content = content;
    o->changed_ms = now_ms;
  }
  o->present = true;
  snprintf(o->holder, sizeof o->holder, "%s", holder);
  o->duration_s = duration_s;
}

void kc_shard_observe_absent(kc_shard_obs *o) {
  memset(o, 0, sizeof *o);
}

uint64_t kc_shard_obs_expiry(const kc_shard_obs *o) {
  if (!o->present || !o->holder[0]) return UINT64_MAX;
  return o->changed_ms + (uint64_t)(o->duration_s > 0 ? o->duration_s : 0) * 1000u;
}

bool kc_shard_obs_live(const kc_shard_obs *o, uint64_t now_ms) {
  return o->present && o->holder[0] && now_ms < kc_shard_obs_expiry(o);
}

static bool counted_mine(enum kc_shard_state s) {
  return s == KC_SHARD_CLAIMING || s == KC_SHARD_OWNED;
}

/* Ranges a live member (not self) holds. */
static unsigned held_by(const kc_shard_plan_range *r, unsigned n, const char *who) {
  unsigned c = 0;
  for (unsigned i = 0; i < n; i++)
    if (r[i].live && r[i].holder && strcmp(r[i].holder, who) == 0 && !counted_mine(r[i].state)) c++;
  return c;
}

int kc_shard_plan(const char *self, const char *const *members, size_t nmembers,
                  const kc_shard_plan_range *r, unsigned n, kc_shard_plan_out *out) {
  out->nclaim = out->ngive = 0;
  if (n == 0 || !self) return -EINVAL;
  /* live replicas: self + distinct others */
  unsigned live = 1;
  for (size_t i = 0; i < nmembers; i++) {
    if (!members[i] || strcmp(members[i], self) == 0) continue;
    bool dup = false;
    for (size_t j = 0; j < i && !dup; j++)
      dup = members[j] && strcmp(members[j], members[i]) == 0;
    if (!dup) live++;
  }
  unsigned target = (n + live - 1) / live, base = n / live;
  out->target = target;
  out->members = live;
  unsigned mine = 0, free_n = 0;
  for (unsigned i = 0; i < n; i++) {
    if (counted_mine(r[i].state))
      mine++;
    else if (r[i].state == KC_SHARD_FREE &&
             (!r[i].live || !r[i].holder || !r[i].holder[0] || strcmp(r[i].holder, self) == 0))
      free_n++;
  }
  if (mine > target) {
    /* give the excess: pending claims first, then owned ranges from the top */
    unsigned excess = mine - target;
    for (unsigned pass = 0; pass < 2 && excess; pass++)
      for (unsigned i = n; i-- > 0 && excess;)
        if (r[i].state == (pass == 0 ? KC_SHARD_CLAIMING : KC_SHARD_OWNED)) {
          out->give[out->ngive++] = i;
          excess--;
        }
    return 0;
  }
  if (mine < target) {
    /* claim free or expired ranges, starting at a place of our own so that
     * claimers spread instead of racing for range 0 */
    unsigned want = target - mine;
    unsigned start = (unsigned)(kc_shard_hash(self, strlen(self)) % n);
    for (unsigned k = 0; k < n && want; k++) {
      unsigned i = (start + k) % n;
      if (r[i].state != KC_SHARD_FREE) continue;
      if (r[i].live && r[i].holder && r[i].holder[0] && strcmp(r[i].holder, self) != 0) continue;
      out->claim[out->nclaim++] = i;
      want--;
    }
    return 0;
  }
  /* At target. With a surplus of one over base while another live replica
   * has fewer than base and nothing is free, the richest replica (ties: the
   * greatest identity) gives one. */
  if (mine > base && free_n == 0 && mine == target) {
    bool short_one = false, richest = true;
    for (size_t m = 0; m < nmembers; m++) {
      if (!members[m] || strcmp(members[m], self) == 0) continue;
      unsigned c = held_by(r, n, members[m]);
      if (c < base) short_one = true;
      if (c > mine || (c == mine && strcmp(members[m], self) > 0)) richest = false;
    }
    if (short_one && richest) {
      for (unsigned i = n; i-- > 0;)
        if (r[i].state == KC_SHARD_OWNED) {
          out->give[out->ngive++] = i;
          break;
        }
    }
  }
  return 0;
}

int kc_shard_member_lease_name(const char *prefix, const char *identity, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s-member-%016" PRIx64, prefix,
                   kc_shard_hash(identity, strlen(identity)));
  return n > 0 && (size_t)n < cap ? n : -ENOSPC;
}

int kc_shard_range_of_lease(const char *prefix, unsigned n, const char *name) {
  size_t pl = strlen(prefix);
  if (strncmp(name, prefix, pl) != 0 || name[pl] != '-') return -1;
  const char *p = name + pl + 1;
  if (!*p || (*p == '0' && p[1])) return -1;
  unsigned long v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (unsigned long)(*p - '0');
    if (v >= n) return -1;
  }
  return (int)v;
}

/* ---- the LeaseList scan ---------------------------------------------------- */

typedef struct scan {
  const char *prefix, *member_prefix;
  size_t member_prefix_len;
  unsigned n;
  void (*cb)(const kc_shard_lease_item *item, void *ud);
  void *ud;
  int rc;
} scan;

static bool on_item(const kc_json_value *v, void *ud) {
  scan *sc = ud;
  char err[128];
  errno = 0;
  kc_obj *o = kc_obj_parse(v->raw.ptr, v->raw.len, NULL, err, sizeof err);
  if (!o) {
    if (errno == ENOMEM) sc->rc = -ENOMEM;
    return sc->rc == 0;
  }
  char name[256];
  if (kc_obj_name(o).len == 0 || kc_obj_name(o).len >= sizeof name) {
    kc_obj_unref(o);
    return true;
  }
  memcpy(name, kc_obj_name(o).ptr, kc_obj_name(o).len);
  name[kc_obj_name(o).len] = '\0';
  int r = kc_shard_range_of_lease(sc->prefix, sc->n, name);
  bool is_member = r < 0 && strncmp(name, sc->member_prefix, sc->member_prefix_len) == 0;
  if (r >= 0 || is_member) {
    kc_lease_record rec;
    kc_buf raw = {0};
    int rc = kc_leader_lease_record(o, &rec, &raw);
    if (rc == 0 && raw.err) rc = raw.err;
    if (rc == 0) {
      kc_shard_lease_item it = {name, r, &rec, kc_shard_hash(raw.p ? raw.p : "", raw.len), o};
      sc->cb(&it, sc->ud);
    } else {
      sc->rc = rc;
    }
    kc_buf_free(&raw);
  }
  kc_obj_unref(o);
  return sc->rc == 0;
}

int kc_shard_scan_leases(const char *json, size_t len, const char *prefix, unsigned n,
                         void (*cb)(const kc_shard_lease_item *item, void *ud), void *ud, char *err,
                         size_t errlen) {
  char mp[300];
  int w = snprintf(mp, sizeof mp, "%s-member-", prefix);
  if (w < 0 || (size_t)w >= sizeof mp) return -EINVAL;
  errno = 0;
  kc_obj *list = kc_obj_parse(json, len, NULL, err, errlen);
  if (!list) return errno == ENOMEM ? -ENOMEM : -EBADMSG;
  scan sc = {prefix, mp, (size_t)w, n, cb, ud, 0};
  kc_obj_get_each(list, "items[]", on_item, &sc);
  kc_obj_unref(list);
  return sc.rc;
}
