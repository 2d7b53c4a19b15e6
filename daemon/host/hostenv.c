/* SPDX-License-Identifier: Apache-2.0 */
/* hostenv: see hostenv.h. */
#include "host/hostenv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "host/writeobserver.h"

/* The calling thread's API worker and the client it belongs to. */
struct thread_worker {
  kc_api *api;
  kc_api_worker *worker;
};

static pthread_key_t tkey;
static pthread_once_t tonce = PTHREAD_ONCE_INIT;
static _Thread_local struct thread_worker *tworker;

static void thread_worker_free(void *p) {
  struct thread_worker *t = p;
  if (!t) return;
  kc_api_worker_free(t->worker);
  free(t);
}

static void tkey_init(void) {
  if (pthread_key_create(&tkey, thread_worker_free) != 0) abort(); /* only at startup: EAGAIN */
}

static struct thread_worker *thread_worker(void) {
  if (tworker) return tworker;
  pthread_once(&tonce, tkey_init);
  struct thread_worker *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (pthread_setspecific(tkey, t) != 0) {
    free(t);
    return NULL;
  }
  tworker = t;
  return t;
}

void kc_host_env_thread_cleanup(void) {
  if (!tworker) return;
  pthread_setspecific(tkey, NULL);
  thread_worker_free(tworker);
  tworker = NULL;
}

int kc_host_env_api_request(kc_api *api, const char *method, const char *path,
                            const char *content_type, const void *body, size_t len,
                            uint64_t timeout_ms, kc_api_response *out) {
  *out = (kc_api_response){0};
  if (!api) return -EINVAL;
  struct thread_worker *t = thread_worker();
  if (!t) return -ENOMEM;
  if (t->api != api || !t->worker) {
    kc_api_worker_free(t->worker);
    t->worker = NULL;
    t->api = NULL;
    int rc = kc_api_worker_new(api, &t->worker);
    if (rc < 0) return rc;
    t->api = api;
  }
  int rc = kc_api_do(t->worker, method, path, content_type, body, len, timeout_ms, out);
  if (strcmp(method, "GET") != 0) /* a write: the key's trace (writeobserver.h) */
    kc_write_observer_report(method, path, rc < 0 ? 0 : out->code, rc < 0 ? NULL : out->body,
                             rc < 0 ? 0 : out->body_len);
  return rc;
}
