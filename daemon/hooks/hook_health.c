/* SPDX-License-Identifier: Apache-2.0 */
/* hook_health: see hook_health.h. */
#include "hooks/hook_health.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

#define TRACKED 64          /* outstanding exchanges tracked per instance */
#define KILL_GRACE_MS 1000  /* an exchange past its timeout is being killed */

struct kc_hook_health_entry {
  struct kc_hook_health_entry *next;
  char *controller;
  uint64_t timeout_ms;
  uint64_t started_ms[TRACKED]; /* 0: free */
  bool failing;                 /* the latest exchange got no answer */
  char why[256];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static kc_hook_health_entry *entries;

kc_hook_health_entry *kc_hook_health_register(const char *controller, uint64_t timeout_ms) {
  kc_hook_health_entry *e = calloc(1, sizeof *e);
  if (!e || !(e->controller = strdup(controller ? controller : ""))) {
    free(e);
    return NULL;
  }
  e->timeout_ms = timeout_ms;
  pthread_mutex_lock(&mu);
  e->next = entries;
  entries = e;
  pthread_mutex_unlock(&mu);
  return e;
}

void kc_hook_health_unregister(kc_hook_health_entry *e) {
  if (!e) return;
  pthread_mutex_lock(&mu);
  for (kc_hook_health_entry **p = &entries; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      break;
    }
  pthread_mutex_unlock(&mu);
  free(e->controller);
  free(e);
}

int kc_hook_health_begin(kc_hook_health_entry *e) {
  if (!e) return -1;
  uint64_t now = kc_clock_now_ms();
  int token = -1;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < TRACKED && token < 0; i++)
    if (!e->started_ms[i]) {
      e->started_ms[i] = now ? now : 1;
      token = i;
    }
  pthread_mutex_unlock(&mu);
  return token;
}

void kc_hook_health_end(kc_hook_health_entry *e, int token, bool answered, const char *why) {
  if (!e) return;
  pthread_mutex_lock(&mu);
  if (token >= 0 && token < TRACKED) e->started_ms[token] = 0;
  e->failing = !answered;
  if (!answered) snprintf(e->why, sizeof e->why, "%s", why && *why ? why : "no answer");
  pthread_mutex_unlock(&mu);
}

void kc_hook_health_abandon(kc_hook_health_entry *e, int token) {
  if (!e) return;
  pthread_mutex_lock(&mu);
  if (token >= 0 && token < TRACKED) e->started_ms[token] = 0;
  pthread_mutex_unlock(&mu);
}

bool kc_hook_health(const char *controller, char *why, size_t cap) {
  uint64_t now = kc_clock_now_ms();
  bool ok = true;
  pthread_mutex_lock(&mu);
  for (kc_hook_health_entry *e = entries; e && ok; e = e->next) {
    if (strcmp(e->controller, controller) != 0) continue;
    if (e->failing) {
      snprintf(why, cap, "hook not answering: %s", e->why);
      ok = false;
      break;
    }
    for (int i = 0; i < TRACKED; i++) {
      uint64_t t = e->started_ms[i];
      if (t && now > t && now - t > e->timeout_ms + KILL_GRACE_MS) {
        snprintf(why, cap, "hook not answering: a request outstanding for %llu ms (timeout %llu ms)",
                 (unsigned long long)(now - t), (unsigned long long)e->timeout_ms);
        ok = false;
        break;
      }
    }
  }
  pthread_mutex_unlock(&mu);
  return ok;
}
