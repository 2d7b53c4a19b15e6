/* SPDX-License-Identifier: Apache-2.0 */
/* fakeapi: an in-memory Kubernetes API server for the unit tests of the
 * informer and the controller (tests/unit/test_informer.c,
 * test_controller.c), on mini_server.h.
 *
 * It serves LIST, WATCH and GET of one object (nothing else) of the
 * resources given at start,
 * namespaced, from one store with one resourceVersion counter, as the real
 * server does: a LIST answers the current objects of the namespace (or of
 * all namespaces) with the current resourceVersion and no pages; a WATCH
 * from resourceVersion N waits until an event newer than N exists for its
 * scope, answers every such event and ends the response (the reflector
 * re-watches from the last one at once); a WATCH that saw nothing for
 * 1.1 s ends empty (a routine end for the reflector, see reflector.c). So
 * every object the test writes reaches the informer as exactly one watch
 * event, in the order written.
 *
 * Test hooks: fakeapi_hold makes the LISTs of one namespace wait until
 * released (an informer part that syncs late); fakeapi_expire answers the
 * next WATCH with 410 Gone (the reflector relists).
 *
 * Threads: the fakeapi_* calls from the test's thread; requests are served
 * on mini_server's connection threads, under one mutex.
 * Errors: fakeapi_start returns NULL when the server cannot start;
 * fakeapi_put/fakeapi_delete abort the test (cmocka fail) on misuse or
 * allocation failure.
 * Ownership: strings passed in are copied; everything is freed by
 * fakeapi_stop, which must run after the clients stopped using the server.
 */
#ifndef TEST_FAKEAPI_H
#define TEST_FAKEAPI_H

#include <stdbool.h>
#include <stdint.h>

typedef struct fakeapi fakeapi;

/* One served resource: api_path "/api/v1" or "/apis/G/V", plural
 * resource, and the apiVersion and kind written into its objects. */
typedef struct fakeapi_resource {
  const char *api_path;
  const char *resource;
  const char *api_version;
  const char *kind;
} fakeapi_resource;

/* Starts a server for n resources (the array is copied). */
fakeapi *fakeapi_start(const fakeapi_resource *res, unsigned n);
/* Releases every waiting request, stops the server and frees it. NULL ok. */
void fakeapi_stop(fakeapi *f);
/* "http://127.0.0.1:PORT" (borrowed). */
const char *fakeapi_url(const fakeapi *f);

/* Creates (ADDED) or replaces (MODIFIED) ns/name of resource with
 *   {"apiVersion":..,"kind":..,"metadata":{"name":..,"namespace":..,
 *    "resourceVersion":"RV"<, meta>}<, rest>}
 * where meta and rest are extra JSON members ("" or NULL: none), e.g.
 * meta = "\"generation\":2", rest = "\"spec\":{}". Returns the new
 * resourceVersion. */
uint64_t fakeapi_put(fakeapi *f, const char *resource, const char *ns, const char *name,
                     const char *meta, const char *rest);
/* Deletes ns/name (DELETED, carrying the last state at a new
 * resourceVersion). Returns that resourceVersion, 0 when absent. */
uint64_t fakeapi_delete(fakeapi *f, const char *resource, const char *ns, const char *name);

/* While held, LISTs of namespace ns wait (without answering). */
void fakeapi_hold(fakeapi *f, const char *ns, bool hold);
/* The next WATCH request (any scope) is answered 410 Gone. */
void fakeapi_expire(fakeapi *f);
/* LIST requests answered so far for namespace ns ("" = all namespaces). */
unsigned fakeapi_lists(fakeapi *f, const char *ns);

#endif
