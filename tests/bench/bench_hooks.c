/* SPDX-License-Identifier: Apache-2.0 */
/* bench_hooks: the cost of one no-op reconcile in-process (a C plugin
 * table, run through plugin_host like a .so), isolated (the noop plugin of
 * tests/bench/plugins, built at start with cc, under `isolation: process`:
 * its cache read travels to this process and back; this binary is its own
 * plugin child) vs an exec hook, persistent
 * (a Python child answering JSON lines) and per-call (one `sh` run per
 * reconcile), and a webhook hook (POSTs to a Python http.server child on
 * loopback, HTTP/1.1 keep-alive), on the same fake host environment: one cache of ConfigMaps,
 * every reconcile reads its object from it (the hooks also build and parse
 * the kctrld.io/hook/v1 documents). No API server: the reconcile itself is
 * measured, on `workers` threads calling kc_plugin_reconcile like the
 * worker pool does.
 *
 * For each mode two runs: as fast as possible (reconciles/s), and paced at
 * --rate reconciles/s (default 1000: achieved rate, p50/p99/max latency).
 *
 *   build/bench/bench_hooks [--workers N] [--count N] [--rate R] [--keys N]
 *
 * Needs cc, python3 and sh in PATH (modes whose program is missing fail and are
 * reported). Not a test: it prints a table and exits 0 unless a mode
 * failed. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "config/config.h"
#include "watch/decode.h"
#include "hooks/hook_child.h"
#include "hooks/hook_exec.h"
#include "hooks/hook_webhook.h"
#include "client/http.h"
#include "hooks/isolate.h"
#include "hooks/isolate_child.h"
#include "host/hostapi.h"
#include "host/plugin_host.h"
#include "cache/store.h"

static kc_store *cms;

static int f_get(void *ud, const char *av, const char *kind, kc_str ns, kc_str name, kc_obj **out) {
  *out = kc_store_get(cms, ns, name);
  return *out ? 0 : -ENOENT;
}
static int f_list(void *ud, const char *av, const char *kind, kc_str ns,
                  const kc_label_selector *sel, kc_obj_vec *out) {
  return kc_store_list(cms, ns, sel, out);
}
static const kc_host_env_ops ops = {.cache_get = f_get, .cache_list = f_list};

/* The in-process no-op: what a minimal C plugin does, read its object. */
static const struct kctrld_host_api *host;
static int noop_init(kctrld_ctx *ctx, const kctrld_settings *s, void **instance) {
  host = kc_hostapi_table();
  return 0;
}
static int noop_reconcile(void *instance, kctrld_ctx *ctx, const char *key) {
  char ns[64], name[64];
  if (sscanf(key, "%63[^/]/%63s", ns, name) != 2) return KCTRLD_RESULT_ERROR;
  const kctrld_ref ref = {"v1", "ConfigMap", ns, name};
  const kctrld_object *o = NULL;
  if (host->cache_get(ctx, &ref, &o) == 0) host->object_release(o);
  return KCTRLD_RESULT_DONE;
}
static const struct kctrld_plugin noop_plugin = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_plugin),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
    .name = "bench-inproc",
    .init = noop_init,
    .reconcile = noop_reconcile,
};

/* The hooks, written to a temp dir at start. */
static const char PY[] =
    "import sys\nfor line in sys.stdin:\n"
    "    sys.stdout.write('{\"result\":\"done\"}\\n')\n    sys.stdout.flush()\n";
static const char SH[] = "cat >/dev/null\necho '{\"result\":\"done\"}'\n";
/* argv[1]: the port file. */
static const char WEB[] =
    "import os, sys\nfrom http.server import BaseHTTPRequestHandler, ThreadingHTTPServer\n"
    "class H(BaseHTTPRequestHandler):\n    protocol_version = 'HTTP/1.1'\n"
    "    disable_nagle_algorithm = True\n"
    "    def do_POST(self):\n        self.rfile.read(int(self.headers['Content-Length']))\n"
    "        b = b'{\"result\":\"done\"}'\n        self.send_response(200)\n"
    "        self.send_header('Content-Type', 'application/json')\n"
    "        self.send_header('Content-Length', str(len(b)))\n        self.end_headers()\n"
    "        self.wfile.write(b)\n    def log_message(self, *a):\n        pass\n"
    "s = ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
    "open(sys.argv[1] + '.tmp', 'w').write(str(s.server_address[1]))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\ns.serve_forever()\n";

/* Starts the webhook server; its port in *port, 0 when it did not start. */
static pid_t start_web(const char *script, const char *portfile, int *port) {
  *port = 0;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execlp("python3", "python3", script, portfile, (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 200 && !*port; i++) {
    FILE *f = fopen(portfile, "r");
    if (f) {
      if (fscanf(f, "%d", port) != 1) *port = 0;
      fclose(f);
    }
    if (!*port) usleep(25 * 1000);
  }
  return pid;
}

static void write_hook(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "bench_hooks: cannot write %s\n", path);
    exit(1);
  }
}

struct run {
  kc_plugin_instance *inst;
  unsigned count, nkeys;
  double rate; /* 0: as fast as possible */
  uint64_t t0;
  atomic_uint next;
  atomic_uint errors;
  uint64_t *lat;
};

static uint64_t now_ns(void) {
  return kc_clock_now_ns();
}

static void *worker(void *arg) {
  struct run *r = arg;
  char key[64];
  for (;;) {
    unsigned i = atomic_fetch_add(&r->next, 1);
    if (i >= r->count) break;
    if (r->rate > 0) {
      uint64_t at = r->t0 + (uint64_t)((double)i * 1e9 / r->rate);
      struct timespec ts = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
      }
    }
    snprintf(key, sizeof key, "bench/cm-%u", i % r->nkeys);
    kc_reconcile_result res;
    uint64_t a = now_ns();
    kc_plugin_reconcile(r->inst, key, &res);
    r->lat[i] = now_ns() - a;
    if (res.kind != KC_RESULT_DONE) {
      if (atomic_fetch_add(&r->errors, 1) == 0)
        fprintf(stderr, "bench_hooks: %s: %s\n", key, res.message);
    }
  }
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Runs count reconciles on workers threads; prints one row. Returns the errors. */
static unsigned measure(const char *mode, kc_plugin_instance *inst, unsigned workers,
                        unsigned count, unsigned nkeys, double rate) {
  struct run r = {.inst = inst, .count = count, .nkeys = nkeys, .rate = rate};
  r.lat = calloc(count, sizeof *r.lat);
  pthread_t t[64];
  if (!r.lat || workers > 64) abort();
  r.t0 = now_ns() + 5000000; /* paced runs start in 5 ms */
  uint64_t start = now_ns();
  for (unsigned i = 0; i < workers; i++)
    if (pthread_create(&t[i], NULL, worker, &r) != 0) abort();
  for (unsigned i = 0; i < workers; i++)
    pthread_join(t[i], NULL);
  double secs = (double)(now_ns() - (rate > 0 ? r.t0 : start)) / 1e9;
  qsort(r.lat, count, sizeof *r.lat, cmp_u64);
  char offered[32];
  if (rate > 0)
    snprintf(offered, sizeof offered, "%.0f/s", rate);
  else
    snprintf(offered, sizeof offered, "max");
  printf("%-22s %7u %8s %12.0f %10.1f %10.1f %10.1f %6u\n", mode, workers, offered, count / secs,
         r.lat[count / 2] / 1e3, r.lat[(size_t)(count * 0.99)] / 1e3, r.lat[count - 1] / 1e3,
         atomic_load(&r.errors));
  unsigned e = atomic_load(&r.errors);
  free(r.lat);
  return e;
}

/* hook: the controller's hook (YAML), or NULL: the built-in no-op, or
 * with so set: that plugin file under isolation: process. */
static kc_plugin_instance *instance(const char *name, kc_config **cfg, const char *hook,
                                    const char *so, unsigned workers) {
  char err[1024];
  kc_plugin *p = NULL;
  const kc_host_env env = {&ops, NULL, NULL, false, NULL};
  kc_plugin_instance *inst = NULL;
  if (!hook && !so) {
    if (kc_plugin_builtin(&noop_plugin, &p, err, sizeof err) ||
        kc_plugin_instance_new(p, name, &env, &inst, err, sizeof err)) {
      fprintf(stderr, "bench_hooks: %s\n", err);
      exit(1);
    }
    return inst;
  }
  char text[2048];
  if (so)
    snprintf(text, sizeof text,
             "controllers:\n  - name: %s\n    for: {apiVersion: v1, kind: ConfigMap}\n"
             "    workers: %u\n    plugin: %s\n    isolation: process\n",
             name, workers, so);
  else
    snprintf(
        text, sizeof text,
        "controllers:\n  - name: %s\n    for: {apiVersion: v1, kind: ConfigMap}\n    workers: %u\n"
        "    hook: %s\n",
        name, workers, hook);
  if (kc_config_load_buffer("bench.yaml", NULL, text, strlen(text), cfg, err, sizeof err) ||
      kc_plugin_builtin(so                                     ? kc_isolate_plugin()
                        : (*cfg)->controllers[0].hook->webhook ? kc_hook_webhook_plugin()
                                                               : kc_hook_exec_plugin(),
                        &p, err, sizeof err) ||
      kc_plugin_instance_new_arg(p, name, &env, (void *)&(*cfg)->controllers[0], &inst, err,
                                 sizeof err)) {
    fprintf(stderr, "bench_hooks: %s\n", err);
    exit(1);
  }
  return inst;
}

/* The noop plugin as a .so in dir (NULL when cc fails: the mode is skipped). */
static const char *build_noop(const char *dir, char *so, size_t cap) {
  char cmd[1024];
  snprintf(so, cap, "%s/noop.so", dir);
  const char *cc = getenv("CC") ? getenv("CC") : "cc";
  snprintf(cmd, sizeof cmd,
           "%s -std=c11 -O2 -shared -fPIC -fvisibility=hidden -Iinclude -Itests/bench/plugins "
           "-o %s tests/bench/plugins/noop.c",
           cc, so);
  if (system(cmd) != 0) {
    fprintf(stderr, "bench_hooks: cannot build the noop plugin (run from the source tree)\n");
    return NULL;
  }
  return so;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], KC_ISOLATE_CHILD_FLAG) == 0) return kc_isolate_child_main();
  unsigned workers = 1, count = 20000, nkeys = 1000, percall_count = 1000;
  double rate = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--workers"))
      workers = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--count"))
      count = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--rate"))
      rate = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--keys"))
      nkeys = (unsigned)atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: %s [--workers N] [--count N] [--rate R] [--keys N]\n", argv[0]);
      return 2;
    }
  }
  if (!workers || workers > 64 || !count || !nkeys) return 2;
  signal(SIGPIPE, SIG_IGN);
  kc_log_set_level(KC_LOG_WARN);
  cms = kc_store_new(NULL, 0);
  for (unsigned i = 0; i < nkeys; i++) {
    char json[512], err[128];
    snprintf(json, sizeof json,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"bench\","
             "\"name\":\"cm-%u\","
             "\"uid\":\"uid-%u\",\"resourceVersion\":\"%u\",\"labels\":{\"app\":\"bench\"}},"
             "\"data\":{\"key\":\"a value of some length for the request\"}}",
             i, i, i + 1);
    kc_obj *o = kc_obj_parse(json, strlen(json), NULL, err, sizeof err);
    if (!o || kc_store_upsert(cms, o, NULL) < 0) abort();
    kc_obj_unref(o);
  }
  printf("no-op reconcile, %u worker thread(s), %u keys in the cache\n", workers, nkeys);
  printf("%-22s %7s %8s %12s %10s %10s %10s %6s\n", "mode", "workers", "offered", "reconciles/s",
         "p50 us", "p99 us", "max us", "errors");
  char dir[] = "/tmp/bench-hooks-XXXXXX", py[512], sh[512], web[256], pyfile[128], shfile[128],
       webfile[128], portfile[128];
  if (!mkdtemp(dir)) return 1;
  if (kc_http_global_init() < 0) return 1;
  snprintf(pyfile, sizeof pyfile, "%s/noop.py", dir);
  snprintf(shfile, sizeof shfile, "%s/noop.sh", dir);
  snprintf(webfile, sizeof webfile, "%s/web.py", dir);
  snprintf(portfile, sizeof portfile, "%s/port", dir);
  write_hook(pyfile, PY);
  write_hook(shfile, SH);
  write_hook(webfile, WEB);
  snprintf(py, sizeof py, "{exec: {command: [python3, %s]}}", pyfile);
  snprintf(sh, sizeof sh, "{exec: {command: [sh, %s], mode: per-call}}", shfile);
  int port = 0;
  pid_t webpid = start_web(webfile, portfile, &port);
  if (!port) fprintf(stderr, "bench_hooks: the webhook server did not start (python3?)\n");
  snprintf(web, sizeof web, "{webhook: {url: 'http://127.0.0.1:%d/'}}", port ? port : 1);
  char sobuf[256];
  const char *so = build_noop(dir, sobuf, sizeof sobuf);
  struct {
    const char *name, *hook, *so;
    unsigned count;
  } modes[] = {
      {"in-process", NULL, NULL, count},
      {"isolated (process)", NULL, so, count},
      {"exec persistent (py)", py, NULL, count},
      {"exec per-call (sh)", sh, NULL, percall_count < count ? percall_count : count},
      {"webhook (py http)", web, NULL, count},
  };
  unsigned errors = 0;
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    if (m == 1 && !so) {
      errors++;
      continue;
    }
    kc_config *cfg = NULL;
    kc_plugin_instance *inst = instance("bench", &cfg, modes[m].hook, modes[m].so, workers);
    /* warm-up: children started, caches touched (not counted) */
    measure("  (warm-up)", inst, workers,
            workers * 10 < modes[m].count ? workers * 10 : modes[m].count, nkeys, 0);
    errors += measure(modes[m].name, inst, workers, modes[m].count, nkeys, 0);
    unsigned paced =
        (unsigned)(rate * 2) < modes[m].count * 2 ? (unsigned)(rate * 2) : modes[m].count * 2;
    errors += measure(modes[m].name, inst, workers, paced, nkeys, rate);
    kc_plugin_instance_free(inst);
    kc_config_free(cfg);
  }
  kc_hook_child_drain(10000);
  kc_hostapi_thread_cleanup();
  kc_plugin_host_unload_all();
  kc_store_free(cms);
  if (webpid > 0) {
    kill(webpid, SIGTERM);
    waitpid(webpid, NULL, 0);
  }
  remove(pyfile);
  remove(shfile);
  remove(webfile);
  remove(portfile);
  if (so) remove(so);
  rmdir(dir);
  return errors ? 1 : 0;
}
