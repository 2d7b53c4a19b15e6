/* SPDX-License-Identifier: Apache-2.0 */
/* apisim_child: test helper that runs the build's own kube-apisim as a child
 * process (seeded with the demo PodSet CRD and objects) and talks to it with
 * libcurl. Used by the test_errors_* tests that drive a whole daemon; its
 * HTTP client and clock also serve test_informer_apisim.
 *
 * Threads: sim_call from any thread; the rest from the test's main thread.
 * Errors: sim_paths_init/sim_start return 0 or -1; sim_call returns the HTTP
 * status (0 on transport failure). Ownership: *out bodies are malloc'ed.
 */
#ifndef TEST_APISIM_CHILD_H
#define TEST_APISIM_CHILD_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

extern char sim_build_dir[PATH_MAX]; /* the directory holding kctrld and kube-apisim */
extern char sim_root_dir[PATH_MAX];  /* the repository */
extern char sim_tmp_dir[64];         /* a fresh directory, removed by sim_paths_free */
extern char sim_url[128];
extern char sim_kubeconfig[PATH_MAX];

/* Finds the directories from /proc/self/exe (<root>/<build>/tests/<test>)
 * and creates sim_tmp_dir. */
int sim_paths_init(void);
void sim_paths_free(void);
void sim_tmp_path(char *buf, size_t cap, const char *name);
int sim_write_file(const char *path, const char *text);

int sim_start(void);
void sim_stop(void);
long sim_call(const char *method, const char *path, const char *body, const char *ctype, char **out);
/* GET of an absolute URL (e.g. kctrld's /metrics). */
long sim_get_url(const char *url, char **out);
/* What sim_call and sim_get_url do (they wait 20 s at most): a blocking
 * request to an absolute URL, waiting timeout_ms at most. A body goes with a
 * Content-Type of ctype (NULL: application/json). *out (may be NULL) gets
 * the response body, NULL when there is none. */
long sim_request(const char *method, const char *url, const char *body, const char *ctype,
                 long timeout_ms, char **out);

uint64_t sim_mono_ms(void);
void sim_sleep_ms(unsigned ms);
/* A free loopback TCP port (bound and released: a small race, fine here). */
unsigned sim_free_port(void);

#endif
