/* SPDX-License-Identifier: Apache-2.0 */
/* authcache: see authcache.h. */
#include "ops/authcache.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

typedef struct slot {
  unsigned char key[KC_AUTHCACHE_KEY_LEN];
  uint64_t expires_ms;
  kc_authcache_entry e;
} slot;

struct kc_authcache {
  pthread_mutex_t mu;
  uint64_t allow_ttl_ms, deny_ttl_ms;
  size_t max, n;
  slot *v;
};

int kc_authcache_new(const kc_authcache_options *o, kc_authcache **out) {
  *out = NULL;
  kc_authcache *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  c->allow_ttl_ms = o && o->allow_ttl_ms ? o->allow_ttl_ms : 60000;
  c->deny_ttl_ms = o && o->deny_ttl_ms ? o->deny_ttl_ms : 10000;
  c->max = o && o->max_entries ? o->max_entries : 256;
  c->v = calloc(c->max, sizeof *c->v);
  int rc = c->v ? pthread_mutex_init(&c->mu, NULL) : ENOMEM;
  if (rc != 0) {
    free(c->v);
    free(c);
    return -rc;
  }
  *out = c;
  return 0;
}

void kc_authcache_free(kc_authcache *c) {
  if (!c) return;
  /* Digests of tokens: wiped before the memory goes back. */
  memset(c->v, 0, c->max * sizeof *c->v);
  free(c->v);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

void kc_authcache_key(const char *token, const char *verb, const char *path,
                      unsigned char key[KC_AUTHCACHE_KEY_LEN]) {
  gnutls_hash_hd_t h;
  memset(key, 0, KC_AUTHCACHE_KEY_LEN);
  if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0) return; /* all-zero: never stored (see put) */
  /* NUL separators: ("a", "bc") and ("ab", "c") differ. */
  gnutls_hash(h, token, strlen(token) + 1);
  gnutls_hash(h, verb, strlen(verb) + 1);
  gnutls_hash(h, path, strlen(path) + 1);
  gnutls_hash_deinit(h, key);
}

static bool key_unset(const unsigned char key[KC_AUTHCACHE_KEY_LEN]) {
  for (size_t i = 0; i < KC_AUTHCACHE_KEY_LEN; i++)
    if (key[i]) return false;
  return true;
}

static slot *find(kc_authcache *c, const unsigned char key[KC_AUTHCACHE_KEY_LEN]) {
  for (size_t i = 0; i < c->n; i++)
    if (memcmp(c->v[i].key, key, KC_AUTHCACHE_KEY_LEN) == 0) return &c->v[i];
  return NULL;
}

bool kc_authcache_get(kc_authcache *c, const unsigned char key[KC_AUTHCACHE_KEY_LEN], kc_authcache_entry *out) {
  pthread_mutex_lock(&c->mu);
  slot *s = find(c, key);
  bool hit = s && s->expires_ms > kc_clock_now_ms();
  if (hit) *out = s->e;
  pthread_mutex_unlock(&c->mu);
  return hit;
}

void kc_authcache_put(kc_authcache *c, const unsigned char key[KC_AUTHCACHE_KEY_LEN],
                      const kc_authcache_entry *e) {
  if (key_unset(key)) return;
  uint64_t now = kc_clock_now_ms();
  pthread_mutex_lock(&c->mu);
  slot *s = find(c, key);
  if (!s && c->n < c->max) s = &c->v[c->n++];
  if (!s) { /* full: an expired entry, else the one that expires first */
    s = &c->v[0];
    for (size_t i = 1; i < c->n && s->expires_ms > now; i++)
      if (c->v[i].expires_ms < s->expires_ms) s = &c->v[i];
  }
  memcpy(s->key, key, KC_AUTHCACHE_KEY_LEN);
  s->e = *e;
  s->expires_ms = now + (e->status == 200 ? c->allow_ttl_ms : c->deny_ttl_ms);
  pthread_mutex_unlock(&c->mu);
}

size_t kc_authcache_size(kc_authcache *c) {
  pthread_mutex_lock(&c->mu);
  size_t n = c->n;
  pthread_mutex_unlock(&c->mu);
  return n;
}
