/* SPDX-License-Identifier: Apache-2.0 */
/* Error paths of the whole daemon (daemon/daemon.c and what it drives),
 * run in-process with kc_daemon_run so that ASan and valgrind see every
 * allocation of the failure and recovery paths:
 *  - startup failures: missing/invalid config, missing kubeconfig, a plugin
 *    that does not load with --fail-fast (without it the daemon runs the
 *    other controllers and retries it: test_errors_controller.c), a metrics
 *    address already in use: kc_daemon_run returns the negative errno
 *    (-ENOENT, -EINVAL, -EADDRINUSE), nothing leaked;
 *  - a live run against kube-apisim (the build's own binary, with the demo
 *    PodSet CRD and objects) with injected faults: 503 on discovery, 500 on
 *    the first Pod list, reset connections and 500s on Pod creates, a watch
 *    reset and a relist after compaction; then SIGHUP three times: the same
 *    file (unchanged), an invalid file (rejected, the daemon keeps
 *    reconciling) and a new file that adds the ttl controller and changes
 *    podset's workers (applied, both controllers work afterwards); SIGTERM
 *    ends the run with 0.
 *
 * The daemon runs on the test's main thread; a driver thread plays the
 * operator: it talks to kube-apisim with libcurl, watches the sd_notify
 * datagrams kctrld sends to a NOTIFY_SOCKET owned by the test (READY=1,
 * "reload rejected", "reload applied", ...) and sends the signals. cmocka
 * asserts only on the main thread, so the driver records the first failure
 * and the main thread checks it after kc_daemon_run returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <yajl/yajl_tree.h>

#include "apisim_child.h"
#include "daemon.h"
#include "client/http.h"
#include "base/log.h"
#include "mini_server.h"
#include "testutil.h"

/* Generous: the same binary runs under valgrind (tests/valgrind.sh). */
#define STEP_MS 90000

static void write_file(const char *path, const char *text) {
  assert_int_equal(sim_write_file(path, text), 0);
}

/* Pods of PodSet demo/web that are not being deleted; -1 on error. */
static int live_pods(void) {
  char *body = NULL;
  if (sim_call("GET", "/api/v1/namespaces/demo/pods?labelSelector=podset%3Dweb", NULL, NULL, &body) !=
      200) {
    free(body);
    return -1;
  }
  yajl_val root = yajl_tree_parse(body, NULL, 0);
  free(body);
  static const char *items_path[] = {"items", NULL};
  static const char *del_path[] = {"metadata", "deletionTimestamp", NULL};
  yajl_val items = root ? yajl_tree_get(root, items_path, yajl_t_array) : NULL;
  int n = -1;
  if (items) {
    n = 0;
    for (size_t i = 0; i < YAJL_GET_ARRAY(items)->len; i++)
      if (!yajl_tree_get(YAJL_GET_ARRAY(items)->values[i], del_path, yajl_t_any)) n++;
  }
  yajl_tree_free(root);
  return n;
}

/* A number from GET /_apisim/counters (top-level key), -1 on error. */
static long sim_counter(const char *key) {
  char *body = NULL;
  long v = -1;
  if (sim_call("GET", "/_apisim/counters", NULL, NULL, &body) == 200) {
    yajl_val root = yajl_tree_parse(body, NULL, 0);
    const char *path[] = {key, NULL};
    yajl_val x = root ? yajl_tree_get(root, path, yajl_t_number) : NULL;
    if (x && YAJL_IS_INTEGER(x)) v = (long)YAJL_GET_INTEGER(x);
    yajl_tree_free(root);
  }
  free(body);
  return v;
}

/* ---- configs ---- */

static char cfg_path[PATH_MAX];

static void write_config(const char *extra_controllers, int podset_workers, const char *metrics) {
  FILE *f = fopen(cfg_path, "w");
  assert_non_null(f);
  fprintf(f,
          "logLevel: info\n"
          "metrics: { bindAddress: \"%s\" }\n"
          "informers:\n"
          "  - { apiVersion: v1, kind: Pod, transform: { drop: [metadata.managedFields] } }\n"
          "controllers:\n"
          "  - name: podset\n"
          "    plugin: %s/plugins/podset.so\n"
          "    for: { apiVersion: demo.kctrld.io/v1, kind: PodSet }\n"
          "    owns: [ { apiVersion: v1, kind: Pod } ]\n"
          "    workers: %d\n"
          "%s",
          metrics ? metrics : "127.0.0.1:0", sim_build_dir, podset_workers,
          extra_controllers ? extra_controllers : "");
  assert_int_equal(fclose(f), 0);
}

static char ttl_controller[PATH_MAX + 256];

/* ---- the driver thread ---- */

/* Set by the main thread once kc_daemon_run returned: the driver stops
 * waiting and sends no more signals (the default action would kill us). */
static atomic_bool daemon_done;

struct driver {
  int notify_fd;
  char notes[16384]; /* every datagram received, newline separated */
  size_t nnotes, seen;
  char failure[512];
  int step;
};

static void drv_fail(struct driver *d, const char *fmt, ...) {
  if (d->failure[0]) return;
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(d->failure, sizeof d->failure, "step %d: ", d->step);
  vsnprintf(d->failure + n, sizeof d->failure - (size_t)n, fmt, ap);
  va_end(ap);
}

static void drain_notify(struct driver *d, int wait_ms) {
  struct pollfd p = {d->notify_fd, POLLIN, 0};
  while (poll(&p, 1, wait_ms) == 1) {
    char msg[2048];
    ssize_t r = recv(d->notify_fd, msg, sizeof msg - 1, 0);
    if (r <= 0) break;
    msg[r] = '\0';
    int n = snprintf(d->notes + d->nnotes, sizeof d->notes - d->nnotes, "%s\n", msg);
    if (n > 0 && (size_t)n < sizeof d->notes - d->nnotes) d->nnotes += (size_t)n;
    wait_ms = 0;
  }
}

/* Waits for a notify datagram containing `what` after the ones already
 * consumed; consumes up to and including it. */
static bool wait_notify(struct driver *d, const char *what) {
  uint64_t end = sim_mono_ms() + STEP_MS;
  for (;;) {
    char *hit = strstr(d->notes + d->seen, what);
    if (hit) {
      d->seen = (size_t)(hit - d->notes) + strlen(what);
      return true;
    }
    if (sim_mono_ms() > end || atomic_load(&daemon_done)) return false;
    drain_notify(d, 200);
  }
}

static bool wait_pods(int want) {
  uint64_t end = sim_mono_ms() + STEP_MS;
  while (sim_mono_ms() < end && !atomic_load(&daemon_done)) {
    if (live_pods() == want) return true;
    sim_sleep_ms(200);
  }
  return false;
}

static bool wait_gone(const char *path) {
  uint64_t end = sim_mono_ms() + STEP_MS;
  while (sim_mono_ms() < end && !atomic_load(&daemon_done)) {
    if (sim_call("GET", path, NULL, NULL, NULL) == 404) return true;
    sim_sleep_ms(200);
  }
  return false;
}

static void fault(struct driver *d, const char *json) {
  if (sim_call("POST", "/_apisim/faults", json, NULL, NULL) != 200) drv_fail(d, "cannot inject %s", json);
}

static void scale(struct driver *d, int replicas) {
  char body[64];
  snprintf(body, sizeof body, "{\"spec\":{\"replicas\":%d}}", replicas);
  if (sim_call("PATCH", "/apis/demo.kctrld.io/v1/namespaces/demo/podsets/web", body,
               "application/merge-patch+json", NULL) != 200)
    drv_fail(d, "cannot scale the PodSet to %d", replicas);
}

/* Signals for the daemon: only while it runs. */
static void signal_daemon(int sig) {
  if (!atomic_load(&daemon_done)) kill(getpid(), sig);
}

static void *drive(void *arg) {
  struct driver *d = arg;
  /* kill() to the process must reach the loop thread's handlers, not us. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  d->step = 1;
  if (!wait_notify(d, "READY=1")) drv_fail(d, "no READY=1 (notes: %s)", d->notes);
  if (!d->failure[0] && !wait_pods(3)) drv_fail(d, "podset did not create 3 pods (have %d)", live_pods());

  /* Recovery from a relist after compaction, a watch reset and failed
   * writes (500 then a reset connection). */
  d->step = 2;
  if (!d->failure[0]) {
    fault(d, "{\"action\":\"status\",\"code\":500,\"count\":1,\"method\":\"POST\",\"pathPrefix\":\"/api/v1/namespaces/demo/pods\"}");
    fault(d, "{\"action\":\"reset\",\"count\":1,\"method\":\"POST\",\"pathPrefix\":\"/api/v1/namespaces/demo/pods\"}");
    fault(d, "{\"action\":\"watch-reset\",\"afterEvents\":1,\"count\":1,\"watch\":true,\"pathPrefix\":\"/api/v1/pods\"}");
    sim_call("POST", "/_apisim/compact", "{}", NULL, NULL);
    sim_call("POST", "/_apisim/drop-watches", "{}", NULL, NULL);
    scale(d, 5);
    if (!wait_pods(5)) drv_fail(d, "not scaled to 5 through the faults (have %d)", live_pods());
  }

  /* SIGHUP with the same file: nothing to do. */
  d->step = 3;
  if (!d->failure[0]) {
    signal_daemon(SIGHUP);
    if (!wait_notify(d, "config unchanged")) drv_fail(d, "unchanged reload not reported (notes: %s)", d->notes);
  }

  /* SIGHUP with an invalid file: rejected, the old config keeps running. */
  d->step = 4;
  if (!d->failure[0]) {
    write_file(cfg_path, "controllers: [ { name: broken } ]\n");
    signal_daemon(SIGHUP);
    size_t before = d->seen;
    if (!wait_notify(d, "reload rejected")) drv_fail(d, "invalid reload not rejected (notes: %s)", d->notes);
    /* READY=1 travels in the datagram that carries the outcome. */
    else if (!strstr(d->notes + before, "READY=1")) drv_fail(d, "no READY=1 with the rejected reload");
    scale(d, 4);
    if (!d->failure[0] && !wait_pods(4)) drv_fail(d, "not reconciling after a rejected reload (%d)", live_pods());
  }

  /* SIGHUP with a new controller (ttl) and podset's worker count changed
   * (its controller is stopped and started again). */
  d->step = 5;
  if (!d->failure[0]) {
    write_config(ttl_controller, 1, NULL);
    signal_daemon(SIGHUP);
    if (!wait_notify(d, "reload applied")) drv_fail(d, "reload not applied (notes: %s)", d->notes);
  }
  d->step = 6;
  if (!d->failure[0]) {
    long rc = sim_call("POST", "/api/v1/namespaces/demo/configmaps",
                       "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"brief\","
                       "\"annotations\":{\"kctrld.io/ttl\":\"1s\"}},\"data\":{\"a\":\"b\"}}",
                       NULL, NULL);
    if (rc != 201) drv_fail(d, "cannot create ConfigMap demo/brief: HTTP %ld", rc);
    else if (!wait_gone("/api/v1/namespaces/demo/configmaps/brief"))
      drv_fail(d, "ttl controller added by the reload did not delete demo/brief");
    scale(d, 1);
    if (!d->failure[0] && !wait_pods(1)) drv_fail(d, "podset not working after the reload (%d)", live_pods());
  }
  /* Replaced configs are freed once no plugin instance was created from
   * them: podset kept across two reloads holds the config it started
   * with; the one in between goes. */
  d->step = 7;
  if (!d->failure[0]) {
    write_config(NULL, 1, NULL);
    signal_daemon(SIGHUP);
    if (!wait_notify(d, "reload applied")) drv_fail(d, "ttl removal not applied (notes: %s)", d->notes);
    else if (kc_daemon_configs_alive() != 2)
      drv_fail(d, "%u configs alive after removing ttl, want 2", kc_daemon_configs_alive());
  }
  if (!d->failure[0]) {
    write_config(ttl_controller, 1, NULL);
    signal_daemon(SIGHUP);
    if (!wait_notify(d, "reload applied")) drv_fail(d, "ttl re-add not applied (notes: %s)", d->notes);
    else if (kc_daemon_configs_alive() != 2)
      drv_fail(d, "%u configs alive after re-adding ttl, want 2", kc_daemon_configs_alive());
  }
  d->step = 8;
  if (!d->failure[0] && sim_counter("faultsInjected") < 4)
    drv_fail(d, "only %ld faults were hit", sim_counter("faultsInjected"));
  /* Always end the run (the loop's handlers are installed before READY=1). */
  signal_daemon(SIGTERM);
  return NULL;
}

/* ---- fixtures ---- */

static int setup(void **state) {
  if (sim_paths_init() < 0) return -1;
  sim_tmp_path(cfg_path, sizeof cfg_path, "kctrld.yaml");
  snprintf(ttl_controller, sizeof ttl_controller,
           "  - name: ttl\n"
           "    plugin: %s/plugins/ttl.so\n"
           "    for: { apiVersion: v1, kind: ConfigMap }\n"
           "    settings: { kinds: [ { apiVersion: v1, kind: ConfigMap } ] }\n",
           sim_build_dir);
  return kc_http_global_init() < 0 ? -1 : 0;
}

static int teardown(void **state) {
  sim_stop();
  sim_paths_free();
  return 0;
}

/* ---- startup failures ---- */

static void test_missing_config(void **state) {
  char path[PATH_MAX];
  sim_tmp_path(path, sizeof path, "does-not-exist.yaml");
  kc_daemon_options o = {.config_path = path};
  assert_int_equal(kc_daemon_run(&o), -ENOENT);
}

static void test_invalid_config(void **state) {
  write_file(cfg_path, "informers: [ { apiVersion: v1 } ]\ncontrollers: 7\n");
  kc_daemon_options o = {.config_path = cfg_path};
  assert_int_equal(kc_daemon_run(&o), -EINVAL);
}

static void test_missing_kubeconfig(void **state) {
  write_config(NULL, 1, NULL);
  char kc[PATH_MAX];
  sim_tmp_path(kc, sizeof kc, "no-kubeconfig");
  kc_daemon_options o = {.config_path = cfg_path, .kubeconfig = kc};
  assert_int_equal(kc_daemon_run(&o), -ENOENT);
}

/* Minimal kubeconfig for runs that fail before any request. */
static void write_dead_kubeconfig(char *path, size_t cap) {
  sim_tmp_path(path, cap, "dead-kubeconfig");
  write_file(path, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                   "    server: http://127.0.0.1:9\nusers:\n- name: u\n  user: {}\n"
                   "contexts:\n- name: x\n  context: { cluster: c, user: u }\ncurrent-context: x\n");
}

static void test_plugin_does_not_load(void **state) {
  char kc[PATH_MAX];
  write_dead_kubeconfig(kc, sizeof kc);
  /* With --fail-fast: the first controller loads, the second does not: the
   * first is unwound. */
  char extra[PATH_MAX + 128];
  snprintf(extra, sizeof extra,
           "  - name: ghost\n    plugin: %s/no-such-plugin.so\n"
           "    for: { apiVersion: v1, kind: Pod }\n",
           sim_tmp_dir);
  write_config(extra, 1, NULL);
  kc_daemon_options o = {.config_path = cfg_path, .kubeconfig = kc, .fail_fast = true};
  assert_true(kc_daemon_run(&o) < 0);
  /* A file that is not a shared object at all. */
  char junk[PATH_MAX];
  sim_tmp_path(junk, sizeof junk, "junk.so");
  write_file(junk, "not an ELF file\n");
  snprintf(extra, sizeof extra,
           "  - name: junk\n    plugin: %s\n    for: { apiVersion: v1, kind: Pod }\n", junk);
  write_config(extra, 1, NULL);
  assert_true(kc_daemon_run(&o) < 0);
}

static void test_metrics_address_in_use(void **state) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(s >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(s, 1), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
  char bind_addr[64], kc[PATH_MAX];
  snprintf(bind_addr, sizeof bind_addr, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
  write_dead_kubeconfig(kc, sizeof kc);
  write_config(NULL, 1, bind_addr);
  kc_daemon_options o = {.config_path = cfg_path, .kubeconfig = kc};
  assert_int_equal(kc_daemon_run(&o), -EADDRINUSE);
  close(s);
}

/* ---- transport failures are logged with libcurl's text ---- */

static void tls_handler(const mini_server_request *rq, mini_server_reply *r, void *ud) {
  (void)rq;
  (void)ud;
  r->body = "{}";
}

struct log_watch {
  const char *path;   /* the file stderr goes to */
  const char *needle; /* text a "discovery" line must contain */
  atomic_bool found;
};

/* Waits until a discovery line holding the needle is logged (or STEP_MS),
 * then ends the daemon. */
static void *watch_log(void *arg) {
  struct log_watch *w = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  for (int waited = 0; waited < STEP_MS && !atomic_load(&w->found); waited += 50) {
    char *text = tu_read_file(w->path, NULL);
    for (char *line = text ? strstr(text, "discovery") : NULL; line;
         line = strstr(line + 1, "discovery")) {
      char *eol = strchr(line, '\n');
      if (eol) *eol = '\0';
      if (strstr(line, w->needle)) atomic_store(&w->found, true);
      if (!eol) break;
      *eol = '\n';
    }
    free(text);
    if (!atomic_load(&w->found)) usleep(50 * 1000);
  }
  signal_daemon(SIGTERM);
  return NULL;
}

/* Runs the daemon against kubeconfig `kc` with stderr in a file until a
 * discovery line holds `needle`; returns the log (malloc'ed). */
static char *run_until_logged(const char *kc, const char *needle, bool *found) {
  char logpath[PATH_MAX];
  sim_tmp_path(logpath, sizeof logpath, "transport.log");
  int lfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(lfd >= 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_int_equal(dup2(lfd, 2), 2);
  struct log_watch w = {.path = logpath, .needle = needle};
  atomic_store(&daemon_done, false);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, watch_log, &w), 0);
  kc_daemon_options o = {.config_path = cfg_path, .kubeconfig = kc};
  int code = kc_daemon_run(&o);
  /* A late signal from the watcher must not hit the default action; the
   * mask is restored for the next daemon run. */
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  atomic_store(&daemon_done, true);
  pthread_join(th, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  atomic_store(&daemon_done, false); /* as the next live run expects */
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(lfd);
  char *log = tu_read_file(logpath, NULL);
  unlink(logpath);
  assert_non_null(log);
  assert_int_equal(code, 0);
  *found = atomic_load(&w.found);
  return log;
}

static void test_transport_errors_logged(void **state) {
  /* Connection refused: curl's text names the address, errno text would not. */
  char kc[PATH_MAX];
  write_dead_kubeconfig(kc, sizeof kc);
  write_config(NULL, 1, NULL);
  bool found = false;
  char *log = run_until_logged(kc, "127.0.0.1 port 9", &found);
  if (!found) fail_msg("no discovery line with curl's connect error; log:\n%s", log);
  free(log);

  /* A TLS server whose CA the client does not trust. */
  if (!mini_server_tls_supported()) skip();
  char cmd[2 * PATH_MAX + 512];
  snprintf(cmd, sizeof cmd,
           "(cd '%s' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
           "-nodes -keyout untrusted.key -out untrusted.crt -subj /CN=localhost -days 2 "
           "-addext subjectAltName=DNS:localhost) >/dev/null 2>&1",
           sim_tmp_dir);
  if (system(cmd) != 0) skip();
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/untrusted.crt", sim_tmp_dir);
  char *cert = tu_read_file(path, NULL);
  snprintf(path, sizeof path, "%s/untrusted.key", sim_tmp_dir);
  char *key = tu_read_file(path, NULL);
  assert_non_null(cert);
  assert_non_null(key);
  mini_server *tls = mini_server_start(tls_handler, NULL, cert, key);
  assert_non_null(tls);
  char text[512];
  snprintf(text, sizeof text,
           "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
           "    server: https://localhost:%d\nusers:\n- name: u\n  user: { token: t }\n"
           "contexts:\n- name: x\n  context: { cluster: c, user: u }\ncurrent-context: x\n",
           mini_server_port(tls));
  sim_tmp_path(kc, sizeof kc, "untrusted-kubeconfig");
  write_file(kc, text);
  log = run_until_logged(kc, "SSL certificate problem", &found);
  mini_server_stop(tls);
  free(cert);
  free(key);
  if (!found) fail_msg("no discovery line with curl's TLS error; log:\n%s", log);
  assert_null(strstr(log, "Protocol error"));
  free(log);
}

/* ---- a live run with faults and reloads ---- */

static void test_faults_and_reloads(void **state) {
  char need[PATH_MAX + 32];
  snprintf(need, sizeof need, "%s/kube-apisim", sim_build_dir);
  if (access(need, X_OK) != 0) skip(); /* e.g. only this test was built */
  assert_int_equal(sim_start(), 0);
  /* Before the daemon starts: discovery of the PodSet group fails twice,
   * the first Pod list fails. */
  struct driver *d = calloc(1, sizeof *d);
  assert_non_null(d);
  fault(d, "{\"action\":\"status\",\"code\":503,\"count\":2,\"pathPrefix\":\"/apis/demo.kctrld.io\"}");
  fault(d, "{\"action\":\"status\",\"code\":500,\"count\":1,\"method\":\"GET\",\"watch\":false,\"pathPrefix\":\"/api/v1/pods\"}");
  assert_string_equal(d->failure, "");

  char sock[PATH_MAX];
  sim_tmp_path(sock, sizeof sock, "notify");
  d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  assert_true(d->notify_fd >= 0);
  struct sockaddr_un un = {.sun_family = AF_UNIX};
  assert_true(strlen(sock) < sizeof un.sun_path);
  memcpy(un.sun_path, sock, strlen(sock) + 1);
  assert_int_equal(bind(d->notify_fd, (struct sockaddr *)&un, sizeof un), 0);
  assert_int_equal(setenv("NOTIFY_SOCKET", sock, 1), 0);

  write_config(NULL, 2, NULL);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, drive, d), 0);
  kc_daemon_options o = {.config_path = cfg_path, .kubeconfig = sim_kubeconfig};
  int code = kc_daemon_run(&o);
  /* A late signal from the driver must not hit the default action. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  atomic_store(&daemon_done, true);
  pthread_join(th, NULL);
  unsetenv("NOTIFY_SOCKET");
  close(d->notify_fd);
  sim_stop();
  char failure[sizeof d->failure];
  memcpy(failure, d->failure, sizeof failure);
  free(d);
  assert_string_equal(failure, "");
  assert_int_equal(code, 0);
  assert_int_equal(kc_daemon_configs_alive(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_config),
      cmocka_unit_test(test_invalid_config),
      cmocka_unit_test(test_missing_kubeconfig),
      cmocka_unit_test(test_plugin_does_not_load),
      cmocka_unit_test(test_metrics_address_in_use),
      cmocka_unit_test(test_transport_errors_logged),
      cmocka_unit_test(test_faults_and_reloads),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
