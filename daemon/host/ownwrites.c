/* SPDX-License-Identifier: Apache-2.0 */
/* ownwrites: see ownwrites.h. */
#include "host/ownwrites.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/hash.h"
#include "watch/decode.h"

#define NBUCKETS 4096u

/* One record: the last write of key to an object of one slot. */
struct rec {
  struct rec *hnext;         /* hash chain */
  struct rec *older, *newer; /* age list, oldest at w->oldest */
  unsigned slot;
  uint64_t rv;
  bool tombstone;
  uint64_t written_ns;
  const char *ns, *name, *uid; /* into text, after the key */
  char text[];                 /* key \0 ns \0 name \0 uid \0 */
};

struct parked {
  char *key;
  uint64_t since_ns;
  bool timed_out; /* a record of it expired while it waited */
};

struct kc_ownwrites {
  pthread_mutex_t mu;
  atomic_uint refs;
  kc_ownwrites_source *src;
  size_t nsrc;
  size_t cap;
  uint64_t timeout_ns;
  struct rec *buckets[NBUCKETS];
  struct rec *oldest, *newest;
  struct parked *parked;
  size_t nparked, parked_cap;
  kc_ownwrites_stats st;
};

static unsigned bucket_of(const char *key, unsigned slot) {
  return (unsigned)(kc_mix64(kc_hash_str(key) + slot) % NBUCKETS);
}

kc_ownwrites *kc_ownwrites_new(const kc_ownwrites_source *sources, size_t nsources, size_t cap,
                               uint64_t timeout_ns) {
  kc_ownwrites *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  if (pthread_mutex_init(&w->mu, NULL) != 0) {
    free(w);
    return NULL;
  }
  atomic_init(&w->refs, 1);
  w->cap = cap ? cap : KC_OWNWRITES_CAP;
  w->timeout_ns = timeout_ns ? timeout_ns : KC_OWNWRITES_TIMEOUT_NS;
  w->src = calloc(nsources ? nsources : 1, sizeof *w->src);
  bool ok = w->src != NULL;
  for (size_t i = 0; ok && i < nsources; i++) {
    w->src[i].api_path = strdup(sources[i].api_path);
    w->src[i].resource = strdup(sources[i].resource);
    w->src[i].namespaced = sources[i].namespaced;
    w->nsrc = i + 1;
    ok = w->src[i].api_path && w->src[i].resource;
  }
  if (!ok) {
    kc_ownwrites_unref(w);
    return NULL;
  }
  return w;
}

static void unlink_rec(kc_ownwrites *w, struct rec *r) {
  struct rec **pp = &w->buckets[bucket_of(r->text, r->slot)];
  while (*pp != r) pp = &(*pp)->hnext;
  *pp = r->hnext;
  if (r->older) r->older->newer = r->newer;
  else w->oldest = r->newer;
  if (r->newer) r->newer->older = r->older;
  else w->newest = r->older;
  w->st.records--;
  free(r);
}

void kc_ownwrites_ref(kc_ownwrites *w) { atomic_fetch_add(&w->refs, 1); }

void kc_ownwrites_unref(kc_ownwrites *w) {
  if (!w || atomic_fetch_sub(&w->refs, 1) != 1) return;
  while (w->oldest) unlink_rec(w, w->oldest);
  kc_ownwrites_unpark_all(w);
  free(w->parked);
  for (size_t i = 0; i < w->nsrc; i++) {
    free((char *)w->src[i].api_path);
    free((char *)w->src[i].resource);
  }
  free(w->src);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

/* ---- paths ---- */

/* The rest of s after prefix, or NULL when s does not start with it. */
static const char *after_prefix(const char *s, const char *prefix) {
  size_t n = strlen(prefix);
  return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

/* Copies the next path segment of *s (after its "/") into buf; false when
 * there is none or it does not fit. */
static bool segment(const char **s, char *buf, size_t cap) {
  if (**s != '/') return false;
  const char *b = *s + 1, *e = b;
  while (*e && *e != '/' && *e != '?') e++;
  if (e == b || (size_t)(e - b) >= cap) return false;
  memcpy(buf, b, (size_t)(e - b));
  buf[e - b] = '\0';
  *s = e;
  return true;
}

static int match_source(const kc_ownwrites_source *src, const char *path, char *ns, size_t ns_cap,
                        char *name, size_t name_cap) {
  const char *s = after_prefix(path, src->api_path);
  char word[256];
  ns[0] = name[0] = '\0';
  if (!s) return 0;
  if (src->namespaced) {
    if (!segment(&s, word, sizeof word) || strcmp(word, "namespaces") != 0 ||
        !segment(&s, ns, ns_cap))
      return 0;
  }
  if (!segment(&s, word, sizeof word) || strcmp(word, src->resource) != 0) return 0;
  if (*s == '/' && !segment(&s, name, name_cap)) return 0;
  /* Then at most a subresource that writes the object itself: a path
   * below a Namespace ("/api/v1/namespaces/ns/configmaps") is another
   * resource's. */
  if (*s == '/' && name[0]) {
    if (!segment(&s, word, sizeof word)) return 0;
    static const char *const subs[] = {"status", "scale", "finalize", "ephemeralcontainers",
                                       "resize"};
    bool known = false;
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) known = known || !strcmp(word, subs[i]);
    if (!known) return 0;
  }
  return *s == '\0' || *s == '?';
}

int kc_ownwrites_match(const kc_ownwrites *w, const char *path, unsigned *slot, char *ns,
                       size_t ns_cap, char *name, size_t name_cap) {
  for (size_t i = 0; i < w->nsrc; i++)
    if (match_source(&w->src[i], path, ns, ns_cap, name, name_cap)) {
      *slot = (unsigned)i;
      return 1;
    }
  return 0;
}

/* ---- records ---- */

static struct rec *find(kc_ownwrites *w, const char *key, unsigned slot) {
  for (struct rec *r = w->buckets[bucket_of(key, slot)]; r; r = r->hnext)
    if (r->slot == slot && strcmp(r->text, key) == 0) return r;
  return NULL;
}

/* Appends a record (replacing key's record of slot); under the lock. */
static void put(kc_ownwrites *w, const char *key, unsigned slot, const char *ns, const char *name,
                kc_str uid, uint64_t rv, bool tombstone, uint64_t now) {
  struct rec *old = find(w, key, slot);
  if (old) {
    /* Within one informer a later write is a later resourceVersion; a
     * number smaller than the kept one can only come from another history
     * (a restored server): keep the larger, which the timeout bounds. */
    if (!tombstone && !old->tombstone && old->rv > rv) rv = old->rv;
    unlink_rec(w, old);
  }
  size_t kl = strlen(key), nl = strlen(ns), ml = strlen(name);
  struct rec *r = malloc(sizeof *r + kl + nl + ml + uid.len + 4);
  if (!r) return; /* an unrecorded write only costs the wait */
  char *t = r->text;
  memcpy(t, key, kl + 1);
  r->ns = t += kl + 1;
  memcpy(t, ns, nl + 1);
  r->name = t += nl + 1;
  memcpy(t, name, ml + 1);
  r->uid = t += ml + 1;
  if (uid.len) memcpy(t, uid.ptr, uid.len);
  t[uid.len] = '\0';
  r->slot = slot;
  r->rv = rv;
  r->tombstone = tombstone;
  r->written_ns = now;
  unsigned b = bucket_of(key, slot);
  r->hnext = w->buckets[b];
  w->buckets[b] = r;
  r->newer = NULL;
  r->older = w->newest;
  if (w->newest) w->newest->newer = r;
  else w->oldest = r;
  w->newest = r;
  w->st.records++;
  w->st.recorded++;
  while (w->st.records > w->cap) {
    unlink_rec(w, w->oldest);
    w->st.overflow++;
  }
}

void kc_ownwrites_record(kc_ownwrites *w, const char *key, const char *method, const char *path,
                         const char *body, size_t len) {
  if (!w || !key || !*key || !method || !path) return;
  bool del = strcmp(method, "DELETE") == 0;
  kc_obj *o = NULL;
  if (body && len) {
    char err[8];
    o = kc_obj_parse(body, len, NULL, err, sizeof err);
    if (o && kc_str_eq_c(kc_obj_kind(o), "Status")) { /* a delete's answer: no object */
      kc_obj_unref(o);
      o = NULL;
    }
  }
  uint64_t rv = 0;
  kc_str uid = {NULL, 0};
  if (o) {
    rv = kc_rv_number(kc_obj_resource_version(o));
    uid = kc_obj_uid(o);
  }
  /* A delete answered with the object still there (deletionTimestamp:
   * finalizers or a grace period keep it) changed it: an update. */
  bool tombstone = del && !(o && o->deleting);
  uint64_t now = kc_clock_now_ns();
  pthread_mutex_lock(&w->mu);
  for (size_t i = 0; i < w->nsrc; i++) {
    char ns[256], name[256];
    if (!match_source(&w->src[i], path, ns, sizeof ns, name, sizeof name)) continue;
    if (!name[0] && o) { /* a create (POST to the collection): the answer names it */
      kc_str n = kc_obj_name(o);
      if (n.len < sizeof name) {
        memcpy(name, n.ptr, n.len);
        name[n.len] = '\0';
      }
    }
    if (!name[0]) continue;
    put(w, key, (unsigned)i, ns, name, uid, rv, tombstone, now);
  }
  pthread_mutex_unlock(&w->mu);
  kc_obj_unref(o);
}

/* Drops what expired; a parked key that loses a record so is timed out.
 * Under the lock. */
static void expire(kc_ownwrites *w, uint64_t now) {
  while (w->oldest && now - w->oldest->written_ns >= w->timeout_ns) {
    struct rec *r = w->oldest;
    for (size_t i = 0; i < w->nparked; i++)
      if (strcmp(w->parked[i].key, r->text) == 0) w->parked[i].timed_out = true;
    unlink_rec(w, r);
  }
}

/* Drops key's observed records; true when none is left. Under the lock;
 * fn runs under it too (it reads informers, never this table). */
static bool ready_locked(kc_ownwrites *w, const char *key, kc_ownwrites_observe_fn fn, void *ud) {
  bool ready = true;
  for (size_t i = 0; i < w->nsrc; i++) {
    struct rec *r = find(w, key, (unsigned)i);
    if (!r) continue;
    kc_ownwrite v = {r->slot, r->ns, r->name, r->uid, r->rv, r->tombstone};
    if (fn(ud, &v) == KC_OWNWRITE_OBSERVED) unlink_rec(w, r);
    else ready = false;
  }
  return ready;
}

/* Ends the wait of parked key i (it is ready). Under the lock. */
static struct parked unpark(kc_ownwrites *w, size_t i, uint64_t now) {
  struct parked p = w->parked[i];
  w->parked[i] = w->parked[--w->nparked];
  w->st.parked = w->nparked;
  kc_reconcile_histogram_observe(&w->st.wait_time, (double)(now - p.since_ns) / 1e9);
  if (p.timed_out) w->st.timeouts++;
  return p;
}

bool kc_ownwrites_ready(kc_ownwrites *w, const char *key, kc_ownwrites_observe_fn fn, void *ud) {
  pthread_mutex_lock(&w->mu);
  uint64_t now = kc_clock_now_ns();
  expire(w, now);
  bool ready = w->st.records == 0 || ready_locked(w, key, fn, ud);
  /* Queued again by an event while it waited, and ready now: its wait ends
   * here (a recheck would queue it once more). */
  for (size_t i = 0; ready && i < w->nparked; i++)
    if (strcmp(w->parked[i].key, key) == 0) {
      free(unpark(w, i, now).key);
      break;
    }
  pthread_mutex_unlock(&w->mu);
  return ready;
}

int kc_ownwrites_park(kc_ownwrites *w, const char *key) {
  pthread_mutex_lock(&w->mu);
  int rc = 0;
  for (size_t i = 0; i < w->nparked && rc == 0; i++)
    if (strcmp(w->parked[i].key, key) == 0) rc = -EALREADY;
  char *copy = rc == 0 ? strdup(key) : NULL;
  if (rc == 0 && (!copy || KC_ARRAY_ROOM(w->parked, w->parked_cap, w->nparked, 16) < 0)) rc = -ENOMEM;
  if (rc == 0) {
    w->parked[w->nparked++] = (struct parked){copy, kc_clock_now_ns(), false};
    w->st.waits++;
    w->st.parked = w->nparked;
  } else {
    free(copy);
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

void kc_ownwrites_recheck(kc_ownwrites *w, kc_ownwrites_observe_fn fn, void *ud,
                          void (*ready)(void *ud2, const char *key), void *ud2) {
  if (!w->nparked) return; /* loop thread: only it parks and releases */
  uint64_t now = kc_clock_now_ns();
  size_t i = 0;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    expire(w, now);
    while (i < w->nparked && !ready_locked(w, w->parked[i].key, fn, ud)) i++;
    if (i >= w->nparked) {
      pthread_mutex_unlock(&w->mu);
      return;
    }
    struct parked p = unpark(w, i, now);
    pthread_mutex_unlock(&w->mu);
    /* Outside the lock: ready may queue the key, which may come back here. */
    ready(ud2, p.key);
    free(p.key);
  }
}

bool kc_ownwrites_next_timeout(kc_ownwrites *w, uint64_t *when_ns) {
  pthread_mutex_lock(&w->mu);
  bool found = false;
  uint64_t best = UINT64_MAX;
  for (size_t i = 0; i < w->nparked; i++)
    for (size_t s = 0; s < w->nsrc; s++) {
      struct rec *r = find(w, w->parked[i].key, (unsigned)s);
      if (r && r->written_ns + w->timeout_ns < best) {
        best = r->written_ns + w->timeout_ns;
        found = true;
      }
    }
  pthread_mutex_unlock(&w->mu);
  if (found) *when_ns = best;
  return found;
}

void kc_ownwrites_relisted(kc_ownwrites *w, unsigned slot) {
  pthread_mutex_lock(&w->mu);
  for (struct rec *r = w->oldest, *next; r; r = next) {
    next = r->newer;
    if (r->slot == slot) unlink_rec(w, r);
  }
  pthread_mutex_unlock(&w->mu);
}

void kc_ownwrites_drop_key(kc_ownwrites *w, const char *key) {
  pthread_mutex_lock(&w->mu);
  for (size_t i = 0; w->st.records && i < w->nsrc; i++) {
    struct rec *r = find(w, key, (unsigned)i);
    if (r) unlink_rec(w, r);
  }
  pthread_mutex_unlock(&w->mu);
}

void kc_ownwrites_drop_object(kc_ownwrites *w, const char *key, unsigned slot, const char *ns,
                              const char *name) {
  pthread_mutex_lock(&w->mu);
  struct rec *r = w->st.records ? find(w, key, slot) : NULL;
  if (r && strcmp(r->ns, ns) == 0 && strcmp(r->name, name) == 0) unlink_rec(w, r);
  pthread_mutex_unlock(&w->mu);
}

void kc_ownwrites_unpark_all(kc_ownwrites *w) {
  pthread_mutex_lock(&w->mu);
  for (size_t i = 0; i < w->nparked; i++) free(w->parked[i].key);
  w->nparked = 0;
  w->st.parked = 0;
  pthread_mutex_unlock(&w->mu);
}

void kc_ownwrites_stats_get(kc_ownwrites *w, kc_ownwrites_stats *out) {
  pthread_mutex_lock(&w->mu);
  *out = w->st;
  pthread_mutex_unlock(&w->mu);
}
