/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/lease/shardplan.c's claim logic: the observation clock
 * (kc_shard_observe & co), the planner (kc_shard_plan) case by case, and a
 * simulation of several replicas on a fake clock and a fake Lease store
 * that plays the electors of leader.c (acquire a free or, on our clock,
 * expired record; renew every retryPeriod; fencing deadline = the last
 * successful write + renewDeadline): convergence to balance, a crash, a
 * replica frozen (SIGSTOP) and resumed, a newcomer, and at every step of
 * the fake clock at most one replica whose fence admits a range.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/apiclient.h"
#include "apisim_child.h"
#include "lease/sharding.h"

#define LD_MS 15000
#define RD_MS 10000
#define RP_MS 2000

static void test_observe(void **state) {
  (void)state;
  kc_shard_obs o = {0};
  assert_false(kc_shard_obs_live(&o, 0));
  assert_true(kc_shard_obs_expiry(&o) == UINT64_MAX);
  kc_shard_observe(&o, "a", 15, 1, 1000);
  assert_true(kc_shard_obs_live(&o, 1000));
  assert_true(kc_shard_obs_live(&o, 15999));
  assert_false(kc_shard_obs_live(&o, 16000));
  /* the same content seen again: the clock keeps running from the first sight */
  kc_shard_observe(&o, "a", 15, 1, 9000);
  assert_int_equal(o.changed_ms, 1000);
  assert_false(kc_shard_obs_live(&o, 16000));
  /* a renewal (new content) restarts it */
  kc_shard_observe(&o, "a", 15, 2, 17000);
  assert_int_equal(o.changed_ms, 17000);
  assert_true(kc_shard_obs_live(&o, 31999));
  /* a released record (no holder) is never live */
  kc_shard_observe(&o, "", 1, 3, 18000);
  assert_false(kc_shard_obs_live(&o, 18000));
  kc_shard_observe_absent(&o);
  assert_false(o.present);
}

static void test_names(void **state) {
  (void)state;
  char buf[64];
  int n = kc_shard_member_lease_name("kctrld-a", "host_0123", buf, sizeof buf);
  assert_int_equal(n, (int)strlen("kctrld-a-member-") + 16);
  assert_memory_equal(buf, "kctrld-a-member-", 16);
  char other[64];
  kc_shard_member_lease_name("kctrld-a", "host_0124", other, sizeof other);
  assert_string_not_equal(buf, other);
  assert_int_equal(kc_shard_member_lease_name("p", "x", buf, 10), -ENOSPC);
  assert_int_equal(kc_shard_range_of_lease("kctrld-a", 8, "kctrld-a-0"), 0);
  assert_int_equal(kc_shard_range_of_lease("kctrld-a", 8, "kctrld-a-7"), 7);
  assert_int_equal(kc_shard_range_of_lease("kctrld-a", 8, "kctrld-a-8"), -1);
  assert_int_equal(kc_shard_range_of_lease("kctrld-a", 8, "kctrld-a-07"), -1);
  assert_int_equal(kc_shard_range_of_lease("kctrld-a", 8, "kctrld-a-"), -1);
  assert_int_equal(kc_shard_range_of_lease("kctrld-a", 8, "kctrld-a-member-0"), -1);
  assert_int_equal(kc_shard_range_of_lease("kctrld-a", 8, "kctrld-ab-1"), -1);
  assert_int_equal(kc_shard_range_of_lease("kctrld-a", 20, "kctrld-a-19"), 19);
}

/* --- reading a LeaseList ------------------------------------------------------------ */

typedef struct seen_items {
  int n;
  char names[8][64];
  int ranges[8];
  char holders[8][256];
  uint64_t content[8];
} seen_items;

static void on_item_cb(const kc_shard_lease_item *it, void *ud) {
  seen_items *s = ud;
  if (s->n >= 8) fail_msg("too many items");
  snprintf(s->names[s->n], 64, "%s", it->name);
  s->ranges[s->n] = it->range;
  snprintf(s->holders[s->n], sizeof s->holders[0], "%s", it->rec->holder);
  s->content[s->n] = it->content;
  assert_non_null(it->lease);
  s->n++;
}

#define LEASE(name, holder, renew)                                                                 \
  "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"s\",\"resourceVersion\":\"7\"},"           \
  "\"spec\":{\"holderIdentity\":\"" holder "\",\"leaseDurationSeconds\":3,\"renewTime\":\"" renew  \
  "\"}}"

static void test_scan_leases(void **state) {
  (void)state;
  const char *list =
      "{\"kind\":\"LeaseList\",\"items\":[" LEASE("p-0", "a", "2024-01-01T00:00:00.000000Z") "," LEASE("p-3", "b", "2024-01-01T00:00:00.000000Z") "," LEASE(
          "p-4", "b",
          "x") "," LEASE("p-member-00000000000000ff", "a",
                         "2024-01-01T00:00:00.000000Z") "," LEASE("q-1", "c",
                                                                  "y") "," LEASE("p-1", "a",
                                                                                 "2024-01-01T00:00:"
                                                                                 "01.000000Z") ","
                                                                                               "{\""
                                                                                               "met"
                                                                                               "ada"
                                                                                               "ta"
                                                                                               "\":"
                                                                                               "{}}"
                                                                                               ",7]"
                                                                                               "}";
  seen_items s = {0};
  char err[128];
  assert_int_equal(
      kc_shard_scan_leases(list, strlen(list), "p", 4, on_item_cb, &s, err, sizeof err), 0);
  assert_int_equal(s.n, 4); /* p-4 is out of range, q-1 another prefix */
  assert_string_equal(s.names[0], "p-0");
  assert_int_equal(s.ranges[0], 0);
  assert_string_equal(s.holders[0], "a");
  assert_int_equal(s.ranges[1], 3);
  assert_string_equal(s.names[2], "p-member-00000000000000ff");
  assert_int_equal(s.ranges[2], -1);
  assert_int_equal(s.ranges[3], 1);
  /* the fingerprint changes with the record (a renewal), not with the name */
  assert_true(s.content[0] != s.content[3]);
  assert_true(s.content[0] != s.content[1]); /* other holder */
  assert_int_equal(kc_shard_scan_leases("[1", 2, "p", 4, on_item_cb, &s, err, sizeof err),
                   -EBADMSG);
  assert_true(err[0] != '\0');
}

/* --- the planner, case by case --------------------------------------------------- */

#define MAXN 64

typedef struct plan {
  kc_shard_plan_range r[MAXN];
  unsigned claim[MAXN], give[MAXN];
  kc_shard_plan_out out;
} plan;

static void run(plan *p, const char *self, const char *const *m, size_t nm, unsigned n) {
  p->out = (kc_shard_plan_out){.claim = p->claim, .give = p->give};
  assert_int_equal(kc_shard_plan(self, m, nm, p->r, n, &p->out), 0);
}

static void set(plan *p, unsigned i, enum kc_shard_state st, const char *holder, bool live) {
  p->r[i] = (kc_shard_plan_range){st, holder, live};
}

static void test_plan_cases(void **state) {
  (void)state;
  plan p;
  memset(&p, 0, sizeof p);
  kc_shard_plan_out o = {.claim = p.claim, .give = p.give};
  assert_int_equal(kc_shard_plan("a", NULL, 0, p.r, 0, &o), -EINVAL);

  /* alone: claim everything free */
  for (unsigned i = 0; i < 4; i++)
    set(&p, i, KC_SHARD_FREE, "", false);
  run(&p, "a", NULL, 0, 4);
  assert_int_equal(p.out.target, 4);
  assert_int_equal(p.out.members, 1);
  assert_int_equal(p.out.nclaim, 4);
  assert_int_equal(p.out.ngive, 0);

  /* two live others (and duplicates and self in the list): target ceil(4/3) = 2;
   * ranges held live by others are not claimed, expired ones are */
  const char *m[] = {"b", "c", "b", "a"};
  set(&p, 0, KC_SHARD_FREE, "b", true);
  set(&p, 1, KC_SHARD_FREE, "c", true);
  set(&p, 2, KC_SHARD_FREE, "b", false); /* expired */
  set(&p, 3, KC_SHARD_FREE, "", false);
  run(&p, "a", m, 4, 4);
  assert_int_equal(p.out.members, 3);
  assert_int_equal(p.out.target, 2);
  assert_int_equal(p.out.nclaim, 2);
  bool got[4] = {0};
  for (size_t k = 0; k < p.out.nclaim; k++)
    got[p.claim[k]] = true;
  assert_true(got[2] && got[3]);

  /* our own record, still live (a restart of ours): claimable */
  set(&p, 0, KC_SHARD_FREE, "a", true);
  set(&p, 1, KC_SHARD_OWNED, "a", true);
  set(&p, 2, KC_SHARD_FREE, "b", true);
  set(&p, 3, KC_SHARD_FREE, "c", true);
  run(&p, "a", m, 2, 4);
  assert_int_equal(p.out.nclaim, 1);
  assert_int_equal(p.claim[0], 0);

  /* over target: give the excess, pending claims before owned ranges */
  for (unsigned i = 0; i < 4; i++)
    set(&p, i, KC_SHARD_OWNED, "a", true);
  set(&p, 1, KC_SHARD_CLAIMING, "", false);
  run(&p, "a", m, 2, 4); /* 3 live: target 2, we count 4 */
  assert_int_equal(p.out.ngive, 2);
  assert_int_equal(p.give[0], 1);
  assert_int_equal(p.out.nclaim, 0);

  /* draining and releasing ranges count for nobody and are not claimed */
  set(&p, 0, KC_SHARD_DRAINING, "a", true);
  set(&p, 1, KC_SHARD_RELEASING, "a", true);
  set(&p, 2, KC_SHARD_FREE, "", false);
  set(&p, 3, KC_SHARD_FREE, "", false);
  run(&p, "a", NULL, 0, 4);
  assert_int_equal(p.out.nclaim, 2);
  for (size_t k = 0; k < p.out.nclaim; k++)
    assert_true(p.claim[k] >= 2);

  /* 4 ranges, 3 replicas at 2/2/0: nothing free; the richest (ties: the
   * greatest identity) gives one, the other keeps its two */
  const char *bc[] = {"b", "c"};
  set(&p, 0, KC_SHARD_OWNED, "a", true);
  set(&p, 1, KC_SHARD_OWNED, "a", true);
  set(&p, 2, KC_SHARD_FREE, "b", true);
  set(&p, 3, KC_SHARD_FREE, "b", true);
  run(&p, "a", bc, 2, 4); /* a ties with b, b > a: a keeps */
  assert_int_equal(p.out.ngive, 0);
  const char *ab[] = {"a", "c"};
  for (unsigned i = 0; i < 4; i++)
    p.r[i].state = p.r[i].state == KC_SHARD_OWNED ? KC_SHARD_FREE : KC_SHARD_OWNED;
  set(&p, 0, KC_SHARD_FREE, "a", true);
  set(&p, 1, KC_SHARD_FREE, "a", true);
  set(&p, 2, KC_SHARD_OWNED, "b", true);
  set(&p, 3, KC_SHARD_OWNED, "b", true);
  run(&p, "b", ab, 2, 4); /* b is the greatest of the richest */
  assert_int_equal(p.out.ngive, 1);
  /* with a free range, nobody gives: the short one claims it */
  set(&p, 0, KC_SHARD_FREE, "", false);
  run(&p, "b", ab, 2, 4);
  assert_int_equal(p.out.ngive, 0);
}

/* --- the simulation ------------------------------------------------------------------- */

#define NR 5

typedef struct lease {
  char holder[32];
  uint64_t version; /* bumped by every write */
} lease;

typedef struct replica {
  char id[32];
  bool alive, frozen;
  kc_shard_obs obs[MAXN];
  kc_shard_obs mobs[NR];
  enum kc_shard_state st[MAXN];
  uint64_t valid_until[MAXN]; /* fence */
  uint64_t last_tick;
} replica;

typedef struct sim {
  unsigned n;
  uint64_t now;
  lease ranges[MAXN];
  lease members[NR];
  replica r[NR];
  unsigned handoffs;
} sim;

static void write_lease(lease *l, const char *holder) {
  size_t n = strlen(holder);
  if (n >= sizeof l->holder) n = sizeof l->holder - 1;
  memmove(l->holder, holder, n);
  l->holder[n] = '\0';
  l->version++;
}

/* One pass of replica k: renew (the electors), observe (the LIST), plan,
 * act. Frozen or dead replicas do nothing. */
static void step_replica(sim *s, unsigned k) {
  replica *r = &s->r[k];
  if (!r->alive || r->frozen) return;
  if (s->now < r->last_tick + RP_MS) return;
  r->last_tick = s->now;
  /* renew what we hold; a record someone else wrote means we lost it */
  for (unsigned i = 0; i < s->n; i++) {
    if (r->st[i] != KC_SHARD_OWNED && r->st[i] != KC_SHARD_DRAINING) continue;
    if (strcmp(s->ranges[i].holder, r->id) == 0 && s->now < r->valid_until[i]) {
      write_lease(&s->ranges[i], r->id);
      r->valid_until[i] = s->now + RD_MS;
    } else {
      r->st[i] = KC_SHARD_FREE; /* lost (on_stopped_leading) */
      r->valid_until[i] = 0;
      s->handoffs++;
    }
  }
  write_lease(&s->members[k], r->id);
  /* the LIST */
  for (unsigned i = 0; i < s->n; i++)
    kc_shard_observe(&r->obs[i], s->ranges[i].holder, LD_MS / 1000, s->ranges[i].version, s->now);
  for (unsigned j = 0; j < NR; j++)
    if (s->members[j].version)
      kc_shard_observe(&r->mobs[j], s->members[j].holder, LD_MS / 1000, s->members[j].version,
                       s->now);
  /* plan */
  kc_shard_plan_range pr[MAXN];
  const char *m[NR];
  size_t nm = 0;
  for (unsigned j = 0; j < NR; j++)
    if (kc_shard_obs_live(&r->mobs[j], s->now)) m[nm++] = r->mobs[j].holder;
  for (unsigned i = 0; i < s->n; i++)
    pr[i] =
        (kc_shard_plan_range){r->st[i], r->obs[i].holder, kc_shard_obs_live(&r->obs[i], s->now)};
  unsigned claim[MAXN], give[MAXN];
  kc_shard_plan_out out = {.claim = claim, .give = give};
  assert_int_equal(kc_shard_plan(r->id, m, nm, pr, s->n, &out), 0);
  /* give: no reconcile in flight here, so drain ends at once: clear the
   * fence, then release (holder "") */
  for (size_t g = 0; g < out.ngive; g++) {
    unsigned i = give[g];
    r->valid_until[i] = 0;
    if (strcmp(s->ranges[i].holder, r->id) == 0) write_lease(&s->ranges[i], "");
    r->st[i] = KC_SHARD_FREE;
    s->handoffs++;
  }
  /* claim: the elector takes a free record, or one expired on OUR clock */
  for (size_t c = 0; c < out.nclaim; c++) {
    unsigned i = claim[c];
    lease *l = &s->ranges[i];
    kc_shard_observe(&r->obs[i], l->holder, LD_MS / 1000, l->version, s->now); /* its GET */
    bool take =
        !l->holder[0] || strcmp(l->holder, r->id) == 0 || !kc_shard_obs_live(&r->obs[i], s->now);
    if (!take) continue;
    write_lease(l, r->id);
    r->st[i] = KC_SHARD_OWNED;
    r->valid_until[i] = s->now + RD_MS;
  }
}

/* At most one replica's fence admits each range, at every instant. */
static void check_fences(const sim *s) {
  for (unsigned i = 0; i < s->n; i++) {
    int admitted = 0;
    for (unsigned k = 0; k < NR; k++)
      if (s->r[k].alive && s->r[k].st[i] == KC_SHARD_OWNED && s->now < s->r[k].valid_until[i])
        admitted++;
    if (admitted > 1)
      fail_msg("range %u admitted by %d replicas at t=%llu", i, admitted,
               (unsigned long long)s->now);
  }
}

/* Advances the fake clock in 250 ms steps, each replica in turn. */
static void advance(sim *s, uint64_t ms) {
  for (uint64_t t = 0; t < ms; t += 250) {
    s->now += 250;
    for (unsigned k = 0; k < NR; k++) {
      step_replica(s, (k + (unsigned)(s->now / 250)) % NR);
      check_fences(s);
    }
  }
}

static unsigned owned_by(const sim *s, unsigned k) {
  unsigned c = 0;
  for (unsigned i = 0; i < s->n; i++)
    if (s->r[k].st[i] == KC_SHARD_OWNED && s->now < s->r[k].valid_until[i]) c++;
  return c;
}

static unsigned owned_total(const sim *s) {
  unsigned c = 0;
  for (unsigned k = 0; k < NR; k++)
    if (s->r[k].alive && !s->r[k].frozen) c += owned_by(s, k);
  return c;
}

/* Balanced: every range owned, each live replica has floor or ceil. */
static bool balanced(const sim *s) {
  unsigned live = 0;
  for (unsigned k = 0; k < NR; k++)
    live += s->r[k].alive && !s->r[k].frozen;
  if (owned_total(s) != s->n) return false;
  for (unsigned k = 0; k < NR; k++) {
    if (!s->r[k].alive || s->r[k].frozen) continue;
    unsigned c = owned_by(s, k);
    if (c < s->n / live || c > (s->n + live - 1) / live) return false;
  }
  return true;
}

/* Runs until balanced, at most limit_ms of fake time; returns the time it took. */
static uint64_t until_balanced(sim *s, uint64_t limit_ms) {
  uint64_t t0 = s->now;
  while (!balanced(s)) {
    if (s->now - t0 > limit_ms) {
      for (unsigned k = 0; k < NR; k++)
        if (s->r[k].alive) print_message("# %s owns %u\n", s->r[k].id, owned_by(s, k));
      for (unsigned i = 0; i < s->n; i++) {
        print_message("# range %u holder=%s v=%llu:", i, s->ranges[i].holder,
                      (unsigned long long)s->ranges[i].version);
        for (unsigned k = 0; k < NR; k++)
          if (s->r[k].alive)
            print_message(" st=%d live=%d", s->r[k].st[i],
                          kc_shard_obs_live(&s->r[k].obs[i], s->now));
        print_message("\n");
      }
      fail_msg("not balanced after %llu ms", (unsigned long long)limit_ms);
    }
    advance(s, 250);
  }
  return s->now - t0;
}

static void start_replica(sim *s, unsigned k) {
  replica *r = &s->r[k];
  memset(r, 0, sizeof *r);
  snprintf(r->id, sizeof r->id, "replica-%u_%08x", k, 0x1000u * (k + 3));
  r->alive = true;
  r->last_tick = s->now > RP_MS ? s->now - RP_MS : 0;
}

static void sim_scenario(unsigned n) {
  sim *s = calloc(1, sizeof *s);
  assert_non_null(s);
  s->n = n;
  s->now = 100000;
  for (unsigned k = 0; k < 3; k++)
    start_replica(s, k);
  until_balanced(s, 60000);
  /* stable: nothing moves any more */
  unsigned h = s->handoffs;
  advance(s, 30000);
  assert_true(balanced(s));
  assert_int_equal(s->handoffs, h);

  /* SIGKILL replica 0: its ranges are taken once its records expired on
   * the others' clocks: seen at most a retryPeriod after its last renewal
   * (before the kill), valid leaseDuration from then, noticed at the next
   * pass of a replica (every retryPeriod here; the component also wakes
   * at the expiry itself) */
  s->r[0].alive = false;
  uint64_t took = until_balanced(s, LD_MS + 3 * RP_MS);
  assert_true(took <= LD_MS + 2 * RP_MS + 250);
  assert_int_equal(owned_by(s, 1) + owned_by(s, 2), n);

  /* SIGSTOP replica 1 for longer than leaseDuration: replica 2 takes
   * everything; on SIGCONT, replica 1's fences are already closed (the
   * check above runs at every step), and it rejoins */
  s->r[1].frozen = true;
  until_balanced(s, LD_MS + 3 * RP_MS);
  assert_int_equal(owned_by(s, 2), n);
  s->r[1].frozen = false;
  for (unsigned i = 0; i < n; i++)
    assert_true(s->now >= s->r[1].valid_until[i]);
  until_balanced(s, 3 * LD_MS);

  /* two newcomers (a 4th and a 5th replica): rebalance, never two owners */
  start_replica(s, 3);
  start_replica(s, 4);
  start_replica(s, 0);
  until_balanced(s, 4 * LD_MS);
  h = s->handoffs;
  advance(s, 30000);
  assert_int_equal(s->handoffs, h);
  free(s);
}

static void test_sim_8(void **state) {
  (void)state;
  sim_scenario(8);
}
static void test_sim_4(void **state) { /* fewer ranges than replicas at the end */
  (void)state;
  sim_scenario(4);
}
static void test_sim_31(void **state) {
  (void)state;
  sim_scenario(31);
}

/* --- the component against kube-apisim ----------------------------------------------- */

static struct {
  uv_loop_t loop;
  uv_timer_t tick;
  kc_api *api;
  kc_kube_creds creds;
  int acquired;
  int down;
} R;

static void r_tick(uv_timer_t *t) {
  (void)t;
}
static void r_acquired(unsigned index, void *ud) {
  (void)index, (void)ud;
  R.acquired++;
}
static void r_down(void *ud) {
  (void)ud;
  R.down++;
}

static size_t owned_n(kc_sharding *sh, bool has[4]) {
  kc_shard_range r[4];
  size_t n = kc_sharding_owned_ranges(sh, r, 4);
  for (unsigned i = 0; i < 4; i++)
    has[i] = false;
  for (size_t k = 0; k < n && k < 4; k++)
    has[kc_sharding_range_of(sh, r[k].start)] = true;
  return n;
}

static size_t held_n(kc_sharding *sh) {
  kc_shard_range r[4];
  return kc_sharding_held_ranges(sh, r, 4);
}

/* Runs the loop until a and b own exactly na and nb ranges (b may be NULL). */
static void run_until_owned(kc_sharding *a, size_t na, kc_sharding *b, size_t nb, unsigned ms) {
  uint64_t end = sim_mono_ms() + ms;
  bool h[4];
  while (!(owned_n(a, h) == na && (!b || owned_n(b, h) == nb))) {
    if (sim_mono_ms() > end)
      fail_msg("a owns %zu (want %zu), b owns %zu (want %zu)", owned_n(a, h), na,
               b ? owned_n(b, h) : 0, nb);
    uv_run(&R.loop, UV_RUN_ONCE);
  }
}

static void run_loop_ms(unsigned ms) {
  uint64_t end = sim_mono_ms() + ms;
  while (sim_mono_ms() < end)
    uv_run(&R.loop, UV_RUN_ONCE);
}

/* Two components on one loop with real Leases in kube-apisim (namespace
 * key, 4 ranges, lease 1 s / renew deadline 600 ms / retry 100 ms): the
 * first takes every range; a key it runs is fenced by its range, also
 * when the loop stalls past the renew deadline; when the
 * second joins, the first hands off 2 ranges, but keeps the one with a
 * reconcile in flight (draining, still held and still writable) until the
 * reconcile ends, and only then the second gets it; a key of a range not
 * owned is never admitted; shutdown gives everything back. */
static void test_component_apisim(void **state) {
  (void)state;
  if (sim_paths_init() < 0 || sim_start() < 0) {
    print_message("# kube-apisim not available: skipped\n");
    sim_paths_free();
    return;
  }
  assert_int_equal(
      sim_call("POST", "/api/v1/namespaces",
               "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"shards\"}}",
               NULL, NULL),
      201);
  assert_int_equal(uv_loop_init(&R.loop), 0);
  assert_int_equal(uv_timer_init(&R.loop, &R.tick), 0);
  uv_timer_start(&R.tick, r_tick, 5, 5);
  R.creds = (kc_kube_creds){.server = sim_url};
  assert_int_equal(kc_api_new(&R.loop, &R.creds, &R.api), 0);
  kc_sharding_spec spec = {.shards = 4,
                           .key = KC_SHARD_KEY_NAMESPACE,
                           .lease_namespace = "shards",
                           .lease_prefix = "t",
                           .lease_duration_ms = 1000,
                           .renew_deadline_ms = 600,
                           .retry_period_ms = 100};
  kc_sharding_callbacks cb = {.on_acquired = r_acquired};
  kc_sharding *a = NULL, *b = NULL;
  assert_int_equal(kc_sharding_new(&R.loop, R.api, "ctl", &spec, "id-a", NULL, 5000, &cb, NULL, &a),
                   0);
  /* the range of a hash: the split's, at the boundaries too */
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 2000; i++) {
    uint64_t h = i < 8 ? (uint64_t)(i / 2) * (UINT64_MAX / 4 + 1) - (uint64_t)(i % 2)
                       : (x *= 0xbf58476d1ce4e5b9ULL);
    kc_shard_range want;
    unsigned r = kc_sharding_range_of(a, h);
    kc_shard_ranges_split(4, r, &want);
    assert_true(kc_shard_range_contains(&want, h));
  }
  assert_int_equal(kc_sharding_start(a), 0);
  assert_int_equal(kc_sharding_start(a), -EALREADY);
  run_until_owned(a, 4, NULL, 0, 10000);
  assert_int_equal(R.acquired, 4);

  /* a key of the top range (the one handed off first), in flight on a */
  char key[32] = "";
  for (int i = 0; i < 1000 && !key[0]; i++) {
    char ns[16];
    snprintf(ns, sizeof ns, "ns%d", i);
    if (kc_sharding_range_of(a, kc_shard_hash(ns, strlen(ns))) == 3)
      snprintf(key, sizeof key, "%s/x", ns);
  }
  assert_true(key[0]);
  assert_true(kc_sharding_owns_key(a, key));
  assert_true(kc_sharding_admit(a, key));
  kc_shard_fence tok, none;
  assert_false(kc_sharding_fence_active());
  assert_false(kc_sharding_fence_capture(&none)); /* no fence here: nothing captured */
  kc_sharding_fence_enter(a, key);
  assert_true(kc_sharding_fence_active());
  assert_true(kc_sharding_fence_ok());
  assert_true(kc_sharding_fence_capture(&tok)); /* an Event recorded now */
  kc_sharding_fence_leave();
  assert_false(kc_sharding_fence_active());
  assert_true(kc_sharding_fence_ok()); /* no fence on this thread any more */
  assert_true(kc_sharding_fence_check(&tok)); /* sent later, the range still held */

  /* The loop stalls (as under SIGSTOP) past the renew deadline: a reconcile
   * in flight may not write any more, before the loop noticed anything. */
  kc_sharding_fence_enter(a, key);
  sim_sleep_ms(800); /* > renewDeadline 600 ms after the last renewal */
  assert_false(kc_sharding_fence_ok());
  kc_sharding_fence_leave();
  kc_sharding_end(a, key, false);
  /* the loop notices (renew deadline passed: lost, drained, released) and
   * claims the ranges again */
  uint64_t until = sim_mono_ms() + 10000;
  while (!kc_sharding_owns_key(a, key)) {
    if (sim_mono_ms() > until) fail_msg("range 3 not owned again");
    uv_run(&R.loop, UV_RUN_ONCE);
  }
  run_until_owned(a, 4, NULL, 0, 10000);
  /* the range was lost and claimed again since the capture: an Event
   * recorded under the old hold is not sent */
  assert_true(kc_sharding_owns_key(a, key));
  assert_false(kc_sharding_fence_check(&tok));
  kc_sharding_fence_drop(&tok);
  kc_sharding_stats st0;
  kc_sharding_get_stats(a, &st0);
  assert_true(st0.handoffs >= 1);
  assert_true(kc_sharding_admit(a, key));
  kc_sharding_fence_enter(a, key);
  assert_true(kc_sharding_fence_capture(&tok));
  kc_sharding_fence_leave();
  assert_true(kc_sharding_fence_check(&tok));

  assert_int_equal(kc_sharding_new(&R.loop, R.api, "ctl", &spec, "id-b", NULL, 5000, &cb, NULL, &b),
                   0);
  assert_int_equal(kc_sharding_start(b), 0);
  run_until_owned(a, 2, b, 1, 10000);
  bool ha[4], hb[4];
  owned_n(a, ha);
  owned_n(b, hb);
  assert_false(ha[3]);
  assert_false(hb[3]);
  assert_int_equal(held_n(a), 3); /* range 3 drains: still held */
  run_loop_ms(1500);              /* longer than the lease: the drain holds it */
  owned_n(b, hb);
  assert_false(hb[3]);
  kc_sharding_fence_enter(a, key);
  assert_true(kc_sharding_fence_ok()); /* the draining range still writes */
  kc_sharding_fence_leave();
  /* a key of one of b's ranges is never admitted on a */
  char bkey[32] = "";
  for (int i = 0; i < 1000 && !bkey[0]; i++) {
    char ns[16];
    snprintf(ns, sizeof ns, "ns%d", i);
    unsigned r = kc_sharding_range_of(a, kc_shard_hash(ns, strlen(ns)));
    if (r != 3 && hb[r]) snprintf(bkey, sizeof bkey, "%s/y", ns);
  }
  assert_true(bkey[0]);
  assert_false(kc_sharding_owns_key(a, bkey));
  assert_false(kc_sharding_admit(a, bkey));
  assert_true(kc_sharding_owns_key(b, bkey));
  kc_sharding_end(a, key, false); /* the reconcile ended: release, b takes it */
  run_until_owned(a, 2, b, 2, 10000);
  owned_n(b, hb);
  assert_true(hb[3]);
  assert_false(kc_sharding_owns_key(a, key));
  assert_false(kc_sharding_admit(a, key));
  assert_false(kc_sharding_fence_check(&tok)); /* handed off: its Events are dropped */
  kc_sharding_fence_drop(&tok);
  kc_sharding_fence_enter(a, key); /* not admitted: nothing may be written */
  assert_false(kc_sharding_fence_ok());
  assert_true(kc_sharding_fence_capture(&tok));
  assert_false(kc_sharding_fence_check(&tok));
  kc_sharding_fence_drop(&tok);
  kc_sharding_fence_leave();
  assert_true(kc_sharding_owns_key(b, key));

  kc_sharding_stats st;
  kc_sharding_get_stats(a, &st);
  assert_int_equal(st.shards, 4);
  assert_int_equal(st.owned, 2);
  assert_int_equal(st.members, 2);
  assert_true(st.handoffs >= 2);
  kc_buf js = {0};
  assert_int_equal(kc_sharding_debug_json(a, &js), 0);
  assert_non_null(strstr(js.p, "\"members\":["));
  assert_non_null(strstr(js.p, "\"state\":\"owned\""));
  kc_buf_free(&js);

  /* b shuts down: its ranges go back at once (released, no expiry wait) */
  kc_sharding_shutdown(b, r_down, NULL);
  uint64_t end = sim_mono_ms() + 5000;
  while (!R.down) {
    if (sim_mono_ms() > end) fail_msg("shutdown did not finish");
    uv_run(&R.loop, UV_RUN_ONCE);
  }
  run_until_owned(a, 4, NULL, 0, 10000);
  kc_sharding_close(b);
  kc_sharding_close(a);
  kc_api_close(R.api);
  uv_close((uv_handle_t *)&R.tick, NULL);
  uv_run(&R.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&R.loop), 0);
  sim_stop();
  sim_paths_free();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_observe),     cmocka_unit_test(test_names),
      cmocka_unit_test(test_scan_leases), cmocka_unit_test(test_plan_cases),
      cmocka_unit_test(test_sim_8),       cmocka_unit_test(test_sim_4),
      cmocka_unit_test(test_sim_31),      cmocka_unit_test(test_component_apisim),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
