/* SPDX-License-Identifier: Apache-2.0 */
/* kube-apisim: a Kubernetes API server simulator for kctrld's tests, demo
 * and benchmarks. See docs/apisim.md for the command line and the
 * /_apisim/ control endpoint. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "certgen.h"
#include "rbac.h"
#include "seed.h"
#include "server.h"
#include "store.h"
#include "types.h"
#include "watch.h"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: kube-apisim --listen HOST:PORT [--seed FILE_OR_DIR]... [--kubeconfig-out FILE]\n"
          "         [--token TOKEN] [--token-file FILE] [--tls-cert F --tls-key F [--client-ca F]]\n"
          "         [--tls-ca F] [--kubeconfig-client-cert F --kubeconfig-client-key F]\n"
          "         [--generate RESOURCE=N]... [--history N] [--bookmark-interval-ms MS]\n"
          "         [--watch-410-http] [--no-watch-list] [--min-request-timeout S]\n"
          "         [--rv-offset N] [--fixtures DIR] [--rbac] [--token-auth-file FILE]\n"
          "         [--feature-gates NAME=true|false,...] [--plain-http] [--verbose]\n");
}

/* --feature-gates as kube-apiserver takes it: comma-separated NAME=BOOL.
 * Known: ShardedListAndWatch (default false), WatchList (default true).
 * Returns 0, or -EINVAL after printing why. */
static int feature_gates(const char *v)
{
  char *copy = sim_xstrdup(v), *save = NULL;
  int rc = 0;
  for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
    while (*t == ' ') t++;
    char *eq = strchr(t, '=');
    bool on;
    if (!eq || (strcmp(eq + 1, "true") != 0 && strcmp(eq + 1, "false") != 0)) {
      fprintf(stderr, "kube-apisim: --feature-gates: missing bool value for %s\n", t);
      rc = -EINVAL;
      break;
    }
    on = strcmp(eq + 1, "true") == 0;
    *eq = 0;
    if (strcmp(t, "ShardedListAndWatch") == 0) sim_cfg.sharded_list_watch = on;
    else if (strcmp(t, "WatchList") == 0) sim_cfg.watch_list = on;
    else {
      fprintf(stderr, "kube-apisim: --feature-gates: unrecognized feature gate: %s\n", t);
      rc = -EINVAL;
    }
  }
  free(copy);
  return rc;
}

static void default_fixtures(const char *argv0)
{
  const char *env = getenv("APISIM_FIXTURES");
  if (env) {
    sim_set_fixture_dir(env);
    return;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(exe, sizeof exe, "%s", argv0);
    n = (ssize_t)strlen(exe);
  }
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  /* A build directory (build/kube-apisim) sits beside tests/fixtures. */
  char *objects = sim_xasprintf("%s/../tests/fixtures/objects", exe);
  bool found = access(objects, R_OK) == 0;
  free(objects);
  if (found) {
    char *d = sim_xasprintf("%s/../tests/fixtures", exe);
    sim_set_fixture_dir(d);
    free(d);
  }
}

int main(int argc, char **argv)
{
  const char *listen = NULL, *kubeconfig = NULL, *ca_for_kc = NULL, *kc_cert = NULL, *kc_key = NULL;
  struct sim_server_opts so = {0};
  const char **seeds = NULL, **gens = NULL;
  size_t nseeds = 0, ngens = 0, history = 10000;
  uint64_t rv_offset = 0;
  bool plain_http = false;
  default_fixtures(argv[0]);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && (i++, 1))
    if (ARG("--listen")) listen = v;
    else if (ARG("--seed")) { seeds = sim_xrealloc(seeds, (nseeds + 1) * sizeof *seeds); seeds[nseeds++] = v; }
    else if (ARG("--generate")) { gens = sim_xrealloc(gens, (ngens + 1) * sizeof *gens); gens[ngens++] = v; }
    else if (ARG("--kubeconfig-out")) kubeconfig = v;
    else if (ARG("--token")) so.token = v;
    else if (ARG("--token-file")) so.token_file = v;
    else if (ARG("--tls-cert")) so.tls_cert = v;
    else if (ARG("--tls-key")) so.tls_key = v;
    else if (ARG("--client-ca")) so.client_ca = v;
    else if (ARG("--tls-ca")) ca_for_kc = v;
    else if (ARG("--kubeconfig-client-cert")) kc_cert = v;
    else if (ARG("--kubeconfig-client-key")) kc_key = v;
    else if (ARG("--history")) history = strtoull(v, NULL, 10);
    else if (ARG("--rv-offset")) rv_offset = strtoull(v, NULL, 10);
    else if (ARG("--bookmark-interval-ms")) sim_bookmark_interval_ms = (unsigned)strtoul(v, NULL, 10);
    else if (ARG("--min-request-timeout")) sim_cfg.min_request_timeout_s = (unsigned)strtoul(v, NULL, 10);
    else if (ARG("--fixtures")) sim_set_fixture_dir(v);
    else if (ARG("--feature-gates")) {
      if (feature_gates(v) < 0) return 2;
    }
    else if (ARG("--token-auth-file")) {
      char *err = NULL;
      if (sim_rbac_load_tokens(v, &err) < 0) {
        fprintf(stderr, "kube-apisim: --token-auth-file: %s\n", err ? err : "failed");
        free(err);
        return 2;
      }
    }
    else if (strcmp(a, "--rbac") == 0) sim_rbac_enabled = true;
    else if (strcmp(a, "--plain-http") == 0) plain_http = true;
    else if (strcmp(a, "--watch-410-http") == 0) sim_cfg.watch_410_http = true;
    else if (strcmp(a, "--no-watch-list") == 0) sim_cfg.watch_list = false;
    else if (strcmp(a, "--verbose") == 0) sim_verbose = 1;
    else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { usage(stdout); return 0; }
    else {
      fprintf(stderr, "kube-apisim: unknown or incomplete argument %s\n", a);
      usage(stderr);
      return 2;
    }
#undef ARG
  }
  if (!listen) {
    usage(stderr);
    return 2;
  }
  const char *colon = strrchr(listen, ':');
  if (!colon) {
    fprintf(stderr, "kube-apisim: --listen wants HOST:PORT\n");
    return 2;
  }
  char *host = sim_xstrndup(listen, (size_t)(colon - listen));
  so.host = host;
  so.port = (uint16_t)strtoul(colon + 1, NULL, 10);

  /* Signals are taken synchronously by main; every other thread blocks them. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  sim_store_init(history);
  /* A store whose history starts at N (another cluster's etcd, a restored
   * backup): the first object gets N+1, and RVs up to N are compacted. */
  sim_rv = rv_offset;
  sim_hist_floor = rv_offset;
  sim_types_init();
  /* A fresh cluster's namespaces. */
  const char *nss[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
  for (size_t i = 0; i < 4; i++) {
    char *err = NULL;
    char *doc = sim_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/metadata.name\":\"%s\"}},\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":\"Active\"}}", nss[i], nss[i]);
    char perr[128];
    sim_api_seed(jv_parse(doc, strlen(doc), perr, sizeof perr), &err);
    free(doc);
    free(err);
  }
  for (size_t i = 0; i < nseeds; i++) {
    char *err = NULL;
    if (sim_seed_path(seeds[i], &err) < 0) {
      fprintf(stderr, "kube-apisim: seed: %s\n", err ? err : "failed");
      return 1;
    }
  }
  for (size_t i = 0; i < ngens; i++) {
    const char *eq = strchr(gens[i], '=');
    if (!eq) {
      fprintf(stderr, "kube-apisim: --generate wants RESOURCE=N\n");
      return 2;
    }
    char *res = sim_xstrndup(gens[i], (size_t)(eq - gens[i]));
    char *err = NULL;
    if (sim_generate(res, strtoull(eq + 1, NULL, 10), &err) < 0) {
      fprintf(stderr, "kube-apisim: %s\n", err ? err : "generate failed");
      return 1;
    }
    free(res);
  }
  /* Tokens over plain HTTP are what kubectl refuses to send: with token
   * authentication and no certificate of its own, the simulator serves
   * HTTPS with a CA it makes now, and the kubeconfig trusts that CA. */
  struct sim_pki pki = {0};
  char *kc_ca = NULL;
  if ((so.token || so.token_file || sim_rbac_enabled) && !so.tls_cert && !so.tls_key && !plain_http) {
    char *err = NULL;
    if (sim_certgen(host, &pki, &err) < 0) {
      fprintf(stderr, "kube-apisim: TLS: %s\n", err ? err : "failed");
      free(err);
      return 1;
    }
    so.cert_pem = pki.cert_pem;
    so.key_pem = pki.key_pem;
    kc_ca = sim_xstrdup(pki.ca_pem);
  } else if (ca_for_kc || so.tls_cert) {
    kc_ca = sim_read_file(ca_for_kc ? ca_for_kc : so.tls_cert, NULL);
    if (!kc_ca) {
      fprintf(stderr, "kube-apisim: cannot read %s\n", ca_for_kc ? ca_for_kc : so.tls_cert);
      return 1;
    }
  }
  uint16_t port;
  int rc = sim_server_start(&so, &port);
  bool tls = so.tls_cert || so.cert_pem;
  sim_pki_free(&pki);
  so.cert_pem = so.key_pem = NULL;
  if (rc < 0) {
    fprintf(stderr, "kube-apisim: cannot listen on %s: %s\n", listen, strerror(-rc));
    return 1;
  }
  char url[300];
  snprintf(url, sizeof url, "%s://%s:%u", tls ? "https" : "http", host, port);
  if (kubeconfig) {
    rc = sim_write_kubeconfig(kubeconfig, url, so.token, kc_ca, kc_cert, kc_key);
    if (rc < 0) {
      fprintf(stderr, "kube-apisim: kubeconfig %s: %s\n", kubeconfig, strerror(-rc));
      sim_server_stop();
      return 1;
    }
  }
  free(kc_ca);
  printf("%s\n", url);
  fflush(stdout);
  int sig = 0;
  do {
    sigwait(&set, &sig);
  } while (sig == SIGHUP);
  sim_server_stop();
  free(host);
  free(seeds);
  free(gens);
  return 0;
}
