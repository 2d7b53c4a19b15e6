/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/client/kubeconfig.c: merge order, relative paths, data fields,
 * errors with positions, in-cluster, resolution order. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fileperm.h"
#include "client/kubeconfig.h"
#include "testutil.h"

static char dir[256];
static char perm_err[1024]; /* messages of the permission tests */

static void write_file(const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *path_of(const char *name) {
  static char buf[4][512];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
  return buf[i];
}

/* ---- permissions (fileperm.h) ---- */

static const char *TOKEN_KC =
    "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
    "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
    "users: [{name: u, user: {token: secret}}]\n"
    "contexts: [{name: x, context: {cluster: c, user: u}}]\n";

/* Loads path; returns the rc, the captured log in *log (malloc'ed). */
static int load_logged(const char *path, char **log) {
  kc_kube_creds *c = NULL;
  tu_stderr_begin();
  int rc = kc_kubeconfig_load(&path, 1, false, NULL, &c, perm_err, sizeof perm_err);
  *log = tu_stderr_end();
  kc_kube_creds_free(c);
  return rc;
}

static void test_permissions(void **state) {
  write_file("perm.yaml", TOKEN_KC);
  char p[512], f[512], tok[512], key[512];
  snprintf(p, sizeof p, "%s", path_of("perm.yaml"));
  snprintf(f, sizeof f, "%s", path_of("files.yaml"));
  snprintf(tok, sizeof tok, "%s", path_of("tok"));
  snprintf(key, sizeof key, "%s", path_of("k.pem"));
  char *log;
  /* Private: silent. */
  assert_int_equal(chmod(p, 0600), 0);
  assert_int_equal(load_logged(p, &log), 0);
  assert_null(strstr(log, "readable"));
  free(log);
  /* A token others can read: a warning naming the file. */
  assert_int_equal(chmod(p, 0644), 0);
  assert_int_equal(load_logged(p, &log), 0);
  char want[700];
  snprintf(want, sizeof want, "kubeconfig holding a bearer token %s is readable by other users (mode 0644)", p);
  if (!strstr(log, want)) fail_msg("no warning \"%s\" in:\n%s", want, log);
  free(log);
  /* Writable by others or the group: refused, with the fix. */
  assert_int_equal(chmod(p, 0646), 0);
  assert_int_equal(load_logged(p, &log), -EPERM);
  free(log);
  snprintf(want, sizeof want, "kubeconfig %s is writable by other users (mode 0646): refusing to "
                              "use credentials and a server others can change; run chmod go-w on it", p);
  assert_string_equal(perm_err, want);
  assert_int_equal(chmod(p, 0660), 0);
  assert_int_equal(load_logged(p, &log), -EPERM);
  free(log);
  assert_non_null(strstr(perm_err, "is writable by its group (mode 0660)"));
  /* The override: loaded, with the refusal as a warning. */
  kc_fileperm_set_allow_insecure(true);
  assert_int_equal(load_logged(p, &log), 0);
  kc_fileperm_set_allow_insecure(false);
  if (!strstr(log, "is writable by its group (mode 0660)") ||
      !strstr(log, "--allow-insecure-permissions"))
    fail_msg("no override warning in:\n%s", log);
  free(log);

  /* Token and key files named by the kubeconfig. */
  write_file("tok", "t0k\n");
  write_file("k.pem", "key\n");
  write_file("c.pem", "cert\n");
  write_file("files.yaml",
             "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
             "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
             "users: [{name: u, user: {tokenFile: tok, client-certificate: c.pem, client-key: k.pem}}]\n"
             "contexts: [{name: x, context: {cluster: c, user: u}}]\n");
  assert_int_equal(chmod(f, 0644), 0); /* no secret inline: no warning for it */
  assert_int_equal(chmod(tok, 0600), 0);
  assert_int_equal(chmod(key, 0640), 0);
  assert_int_equal(load_logged(f, &log), 0);
  snprintf(want, sizeof want, "client key file %s is readable by its group (mode 0640)", key);
  if (!strstr(log, want)) fail_msg("no warning \"%s\" in:\n%s", want, log);
  assert_null(strstr(log, "token file"));
  assert_null(strstr(log, "kubeconfig holding"));
  free(log);
  assert_int_equal(chmod(tok, 0620), 0);
  assert_int_equal(load_logged(f, &log), -EPERM);
  free(log);
  snprintf(want, sizeof want, "token file %s is writable by its group (mode 0620)", tok);
  assert_non_null(strstr(perm_err, want));
  assert_int_equal(chmod(tok, 0600), 0);
  /* The directory: writable by others without the sticky bit. */
  assert_int_equal(chmod(dir, 0777), 0);
  assert_int_equal(load_logged(f, &log), -EPERM);
  free(log);
  assert_non_null(strstr(perm_err, "without the sticky bit"));
  assert_int_equal(chmod(dir, 0700), 0);
}

static int setup(void **state) {
  snprintf(dir, sizeof dir, "/tmp/kctrld-kubeconfig.XXXXXX");
  if (!mkdtemp(dir)) return -1;
  return 0;
}

static int teardown(void **state) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static const char *A =
    "apiVersion: v1\n"
    "kind: Config\n"
    "current-context: dev\n"
    "clusters:\n"
    "- name: c1\n"
    "  cluster:\n"
    "    server: https://127.0.0.1:6443/\n"
    "    certificate-authority: certs/ca.crt\n"
    "    tls-server-name: kubernetes\n"
    "users:\n"
    "- name: u1\n"
    "  user:\n"
    "    tokenFile: token\n"
    "contexts:\n"
    "- name: dev\n"
    "  context: {cluster: c1, user: u1, namespace: team-a}\n";

static const char *B =
    "current-context: other\n"
    "clusters:\n"
    "- name: c1\n"
    "  cluster: {server: https://b.example:443}\n"
    "- name: c2\n"
    "  cluster:\n"
    "    server: https://c2.example:6443\n"
    "    insecure-skip-tls-verify: true\n"
    "users:\n"
    "- name: u2\n"
    "  user:\n"
    "    token: abc\n"
    "    tokenFile: /ignored\n"
    "    client-certificate-data: aGVsbG8gY2VydA==\n" /* "hello cert" */
    "    client-key-data: aGVsbG8ga2V5\n"             /* "hello key" */
    "contexts:\n"
    "- name: dev\n"
    "  context: {cluster: c2, user: u2}\n"
    "- name: other\n"
    "  context: {cluster: c2, user: u2}\n";

static void test_single_file_relative_paths(void **state) {
  write_file("a.yaml", A);
  const char *p = path_of("a.yaml");
  kc_kube_creds *c = NULL;
  char err[256];
  assert_int_equal(kc_kubeconfig_load(&p, 1, false, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://127.0.0.1:6443"); /* trailing slash dropped */
  char want[4200];
  char real[4096];
  assert_non_null(realpath(dir, real));
  snprintf(want, sizeof want, "%s/certs/ca.crt", real);
  assert_string_equal(c->ca_file, want);
  snprintf(want, sizeof want, "%s/token", real);
  assert_string_equal(c->token_file, want);
  assert_null(c->token);
  assert_string_equal(c->tls_server_name, "kubernetes");
  assert_string_equal(c->namespace_, "team-a");
  assert_false(c->insecure);
  assert_false(c->in_cluster);
  assert_non_null(strstr(c->source, "context dev"));
  kc_kube_creds_free(c);
}

static void test_merge_first_wins(void **state) {
  write_file("a.yaml", A);
  write_file("b.yaml", B);
  char p0[512], p1[512], p2[512];
  snprintf(p0, sizeof p0, "%s", path_of("missing.yaml"));
  snprintf(p1, sizeof p1, "%s", path_of("a.yaml"));
  snprintf(p2, sizeof p2, "%s", path_of("b.yaml"));
  const char *paths[] = {p0, p1, p2};
  kc_kube_creds *c = NULL;
  char err[256];
  /* current-context "dev" from a.yaml wins; context dev from a.yaml wins. */
  assert_int_equal(kc_kubeconfig_load(paths, 3, true, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://127.0.0.1:6443");
  kc_kube_creds_free(c);
  /* Reversed: b's current-context "other" -> c2 with data fields. */
  const char *rev[] = {path_of("b.yaml"), path_of("a.yaml")};
  assert_int_equal(kc_kubeconfig_load(rev, 2, true, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://c2.example:6443");
  assert_true(c->insecure);
  assert_string_equal(c->token, "abc");
  assert_int_equal(c->cert_len, 10);
  assert_memory_equal(c->cert_data, "hello cert", 10);
  assert_string_equal(c->key_data, "hello key");
  assert_string_equal(c->namespace_, "default");
  kc_kube_creds_free(c);
  /* Explicit context: cluster c1 is a.yaml's (first definition wins whole). */
  assert_int_equal(kc_kubeconfig_load(paths, 3, true, "dev", &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://127.0.0.1:6443");
  kc_kube_creds_free(c);
  const char *rev2[] = {path_of("b.yaml"), path_of("a.yaml")};
  assert_int_equal(kc_kubeconfig_load(rev2, 2, true, "dev", &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://c2.example:6443"); /* b's dev context */
  kc_kube_creds_free(c);
  /* Missing file not skipped: error. */
  assert_int_equal(kc_kubeconfig_load(paths, 3, false, NULL, &c, err, sizeof err), -ENOENT);
  assert_non_null(strstr(err, "missing.yaml"));
}

static void test_ca_data_pem(void **state) {
  /* Base64 of a PEM block (wrapped over lines, as kubectl writes it). */
  static const char pem[] = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n";
  static const char b64[] =
      "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJzekNDQVZtZ0F3SUJBZ0lVCi0tLS0tRU5E\n"
      "IENFUlRJRklDQVRFLS0tLS0K";
  char *out;
  size_t n;
  assert_int_equal(kc_base64_decode(b64, strlen(b64), &out, &n), 0);
  assert_int_equal(n, strlen(pem));
  assert_string_equal(out, pem);
  free(out);
  assert_int_equal(kc_base64_decode("a$==", 4, &out, &n), -EINVAL);
  assert_int_equal(kc_base64_decode("QQ==QQ", 6, &out, &n), -EINVAL);
  assert_int_equal(kc_base64_decode("QUJD", 4, &out, &n), 0);
  assert_string_equal(out, "ABC");
  free(out);

  char text[1024];
  snprintf(text, sizeof text,
           "current-context: x\n"
           "clusters: [{name: c, cluster: {server: 'https://h:1', certificate-authority-data: "
           "\"%s\"}}]\n"
           "contexts: [{name: x, context: {cluster: c}}]\n",
           "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJzekNDQVZtZ0F3SUJBZ0lVCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K");
  write_file("d.yaml", text);
  const char *p = path_of("d.yaml");
  kc_kube_creds *c = NULL;
  char err[256];
  assert_int_equal(kc_kubeconfig_load(&p, 1, false, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->ca_data, pem);
  assert_null(c->ca_file);
  assert_null(c->token);
  assert_null(c->token_file);
  kc_kube_creds_free(c);
}

static void expect_error(const char *text, const char *want) {
  write_file("e.yaml", text);
  const char *p = path_of("e.yaml");
  kc_kube_creds *c = NULL;
  char err[512];
  int rc = kc_kubeconfig_load(&p, 1, false, NULL, &c, err, sizeof err);
  if (rc != -EINVAL) fail_msg("rc=%d for %s", rc, text);
  assert_null(c);
  char full[700];
  snprintf(full, sizeof full, "%s%s", p, want);
  if (strncmp(err, full, strlen(full)) != 0) fail_msg("got \"%s\", want prefix \"%s\"", err, full);
}

static void test_exec_and_proxy(void **state) {
  write_file("x.yaml",
             "current-context: x\n"
             "clusters:\n"
             "- name: c\n"
             "  cluster:\n"
             "    server: https://h:1\n"
             "    proxy-url: socks5://127.0.0.1:1080\n"
             "    extensions:\n"
             "    - name: other\n"
             "      extension: {a: 1}\n"
             "    - name: client.authentication.k8s.io/exec\n"
             "      extension: {audience: \"x\\\"y\", n: 3, on: true, list: [a, 1.5], v: '7'}\n"
             "users:\n"
             "- name: u\n"
             "  user:\n"
             "    exec:\n"
             "      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: bin/plugin\n"
             "      args: [--flag, value]\n"
             "      env: [{name: A, value: '1'}, {name: B, value: two}]\n"
             "      installHint: install it\n"
             "      provideClusterInfo: true\n"
             "      interactiveMode: IfAvailable\n"
             "contexts: [{name: x, context: {cluster: c, user: u}}]\n");
  const char *p = path_of("x.yaml");
  kc_kube_creds *c = NULL;
  char err[512];
  assert_int_equal(kc_kubeconfig_load(&p, 1, false, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->proxy_url, "socks5://127.0.0.1:1080");
  assert_non_null(c->exec);
  char want[4700];
  char real[4096];
  assert_non_null(realpath(dir, real));
  snprintf(want, sizeof want, "%s/bin/plugin", real);
  assert_string_equal(c->exec->command, want);
  assert_int_equal(c->exec->nargs, 2);
  assert_string_equal(c->exec->args[1], "value");
  assert_int_equal(c->exec->nenv, 2);
  assert_string_equal(c->exec->env[1].name, "B");
  assert_string_equal(c->exec->env[1].value, "two");
  assert_string_equal(c->exec->api_version, "client.authentication.k8s.io/v1");
  assert_string_equal(c->exec->install_hint, "install it");
  assert_true(c->exec->provide_cluster_info);
  assert_string_equal(c->exec->cluster_config,
                      "{\"audience\":\"x\\\"y\",\"n\":3,\"on\":true,\"list\":[\"a\",1.5],\"v\":\"7\"}");
  snprintf(want, sizeof want, "%s user \"u\"", p);
  assert_string_equal(c->exec->where, want);
  kc_exec_config *d = NULL;
  assert_int_equal(kc_exec_config_dup(c->exec, &d), 0);
  assert_string_equal(d->env[0].value, "1");
  assert_string_equal(d->args[0], "--flag");
  kc_exec_config_free(d);
  kc_kube_creds_free(c);
  /* A bare command is looked up in PATH, as client-go. */
  c = NULL;
  const char *kc = "current-context: x\n"
                   "clusters: [{name: c, cluster: {server: 'https://h:1', proxy-url: 'http://p:3128'}}]\n"
                   "users: [{name: u, user: {exec: {command: aws, apiVersion: "
                   "client.authentication.k8s.io/v1beta1}}}]\n"
                   "contexts: [{name: x, context: {cluster: c, user: u}}]\n";
  assert_int_equal(kc_kubeconfig_parse("/m/kc", kc, strlen(kc), NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->exec->command, "aws");
  assert_null(c->exec->cluster_config);
  assert_false(c->exec->provide_cluster_info);
  assert_string_equal(c->proxy_url, "http://p:3128");
  kc_kube_creds_free(c);
}

static void test_errors_with_positions(void **state) {
  expect_error("current-context: x\n"
               "clusters:\n"
               "- name: c\n"
               "  cluster:\n"
               "    server: https://h:1\n"
               "    certificate-authority: ca.crt\n"
               "    insecure-skip-tls-verify: true\n"
               "contexts: [{name: x, context: {cluster: c}}]\n",
               ":7:31: specifying a root certificates file with the insecure flag");
  expect_error("current-context: nope\ncontexts: []\n", ":1:18: context \"nope\" not found");
  expect_error("current-context: x\n"
               "contexts:\n"
               "- name: x\n"
               "  context:\n"
               "    cluster: gone\n",
               ":5:14: cluster \"gone\" not found");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h:1', "
               "certificate-authority-data: '!!notbase64'}}]\n"
               "contexts: [{name: x, context: {cluster: c}}]\n",
               ":2:83: certificate-authority-data: invalid base64");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
               "users:\n"
               "- name: u\n"
               "  user:\n"
               "    exec: {command: aws}\n"
               "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
               ":6:11: user \"u\": exec has no apiVersion");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
               "users:\n"
               "- name: u\n"
               "  user:\n"
               "    auth-provider: {name: oidc}\n"
               "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
               ":6:5: user \"u\": auth-provider plugins were removed from client-go; use an exec "
               "credential plugin instead (kubelogin");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
               "users:\n"
               "- name: u\n"
               "  user:\n"
               "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1alpha1}\n"
               "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
               ":6:38: user \"u\": exec apiVersion \"client.authentication.k8s.io/v1alpha1\" is "
               "not supported");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
               "users:\n"
               "- name: u\n"
               "  user:\n"
               "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}\n"
               "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
               ":6:11: user \"u\": exec interactiveMode must be specified");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
               "users:\n"
               "- name: u\n"
               "  user:\n"
               "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1beta1, "
               "interactiveMode: Always}\n"
               "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
               ":6:93: user \"u\": exec interactiveMode Always needs a terminal");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h:1', proxy-url: 'ftp://p:1'}}]\n"
               "contexts: [{name: x, context: {cluster: c}}]\n",
               ":2:66: cluster \"c\": proxy-url \"ftp://p:1\": only http, https and socks5");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h:1', "
               "insecure-skip-tls-verify: yes}}]\n"
               "contexts: [{name: x, context: {cluster: c}}]\n",
               ":2:81: insecure-skip-tls-verify");
  expect_error("clusters: {c: 1}\n", ":1:11: clusters: expected a sequence");
  expect_error("clusters: [{name: c, cluster: {}}]\n", ": no current-context set");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'h:1'}}]\n"
               "contexts: [{name: x, context: {cluster: c}}]\n",
               ":2:40: server \"h:1\" is not an http(s) URL");
  expect_error("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
               "users: [{name: u, user: {client-certificate: c.pem}}]\n"
               "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
               ":3:9: user \"u\": client certificate without client key");
  expect_error("a: [unclosed\n", ":");
}

static void test_in_cluster(void **state) {
  char sa[400];
  snprintf(sa, sizeof sa, "%s/sa", dir);
  assert_int_equal(mkdir(sa, 0700), 0);
  write_file("sa/token", "tok-1\n");
  write_file("sa/ca.crt", "pem");
  write_file("sa/namespace", "kctrld-system\n");
  kc_kube_creds *c = NULL;
  char err[256];
  unsetenv("KUBERNETES_SERVICE_HOST");
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  assert_int_equal(kc_kube_in_cluster(sa, &c, err, sizeof err), -ENOENT);
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  unsetenv("POD_NAMESPACE");
  assert_int_equal(kc_kube_in_cluster(sa, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://10.96.0.1:443");
  assert_string_equal(c->namespace_, "kctrld-system");
  assert_true(c->in_cluster);
  assert_null(c->token);
  char want[512];
  snprintf(want, sizeof want, "%s/token", sa);
  assert_string_equal(c->token_file, want);
  snprintf(want, sizeof want, "%s/ca.crt", sa);
  assert_string_equal(c->ca_file, want);
  kc_kube_creds_free(c);
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("POD_NAMESPACE", "from-env", 1);
  assert_int_equal(kc_kube_in_cluster(sa, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://[fd00::1]:443");
  assert_string_equal(c->namespace_, "from-env");
  kc_kube_creds_free(c);
  unsetenv("POD_NAMESPACE");
  unlink(path_of("sa/namespace"));
  assert_int_equal(kc_kube_in_cluster(sa, &c, err, sizeof err), 0);
  assert_string_equal(c->namespace_, "default");
  kc_kube_creds_free(c);
  unlink(path_of("sa/token"));
  assert_int_equal(kc_kube_in_cluster(sa, &c, err, sizeof err), -ENOENT);
  assert_non_null(strstr(err, "token"));
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
}

static void test_resolve_order(void **state) {
  write_file("a.yaml", A);
  write_file("b.yaml", B);
  kc_kube_creds *c = NULL;
  char err[256];
  char env[1200];
  snprintf(env, sizeof env, "%s:%s", path_of("b.yaml"), path_of("a.yaml"));
  setenv("KUBECONFIG", env, 1);
  /* --kubeconfig wins over KUBECONFIG. */
  assert_int_equal(kc_kube_resolve_context(path_of("a.yaml"), NULL, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://127.0.0.1:6443");
  kc_kube_creds_free(c);
  /* KUBECONFIG (merged, b first) wins over the config file's setting. */
  assert_int_equal(kc_kube_resolve_context(NULL, path_of("a.yaml"), NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://c2.example:6443");
  kc_kube_creds_free(c);
  /* KUBECONFIG naming only missing files falls through to the config's. */
  setenv("KUBECONFIG", path_of("none.yaml"), 1);
  assert_int_equal(kc_kube_resolve_context(NULL, path_of("a.yaml"), NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://127.0.0.1:6443");
  kc_kube_creds_free(c);
  /* --kubeconfig must exist. */
  assert_int_equal(kc_kube_resolve_context(path_of("none.yaml"), NULL, NULL, &c, err, sizeof err),
                   -ENOENT);
  /* Nothing else: in-cluster, which is not available here. */
  unsetenv("KUBECONFIG");
  unsetenv("KUBERNETES_SERVICE_HOST");
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  setenv("HOME", dir, 1);
  assert_int_equal(kc_kube_resolve_context(NULL, NULL, NULL, &c, err, sizeof err), -ENOENT);
  assert_non_null(strstr(err, "not running in a cluster"));
  char want[700];
  snprintf(want, sizeof want, "and no %s/.kube/config", dir);
  assert_non_null(strstr(err, want));
  /* Last of all: $HOME/.kube/config. */
  char kd[600];
  snprintf(kd, sizeof kd, "%s/.kube", dir);
  assert_true(mkdir(kd, 0700) == 0 || errno == EEXIST);
  write_file(".kube/config", B);
  assert_int_equal(kc_kube_resolve_context(NULL, NULL, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://c2.example:6443");
  snprintf(want, sizeof want, "kubeconfig %s/.kube/config (context", dir);
  assert_non_null(strstr(c->source, want));
  kc_kube_creds_free(c);
  /* --context picks another context, whichever file is used. */
  write_file("ctx.yaml", "current-context: one\n"
                         "clusters: [{name: c1, cluster: {server: 'https://one:1'}},"
                         " {name: c2, cluster: {server: 'https://two:2'}}]\n"
                         "contexts: [{name: one, context: {cluster: c1}},"
                         " {name: two, context: {cluster: c2, namespace: ns2}}]\n");
  assert_int_equal(kc_kube_resolve_context(path_of("ctx.yaml"), NULL, "two", &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://two:2");
  assert_string_equal(c->namespace_, "ns2");
  kc_kube_creds_free(c);
  setenv("KUBECONFIG", path_of("ctx.yaml"), 1);
  assert_int_equal(kc_kube_resolve_context(NULL, NULL, "two", &c, err, sizeof err), 0);
  assert_string_equal(c->server, "https://two:2");
  kc_kube_creds_free(c);
  unsetenv("KUBECONFIG");
  assert_int_equal(kc_kube_resolve_context(NULL, path_of("ctx.yaml"), "nope", &c, err, sizeof err),
                   -EINVAL);
  assert_non_null(strstr(err, "context \"nope\" not found"));
  if (home) setenv("HOME", home, 1);
  else unsetenv("HOME");
  free(home);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_file_relative_paths),
      cmocka_unit_test(test_merge_first_wins),
      cmocka_unit_test(test_ca_data_pem),
      cmocka_unit_test(test_errors_with_positions),
      cmocka_unit_test(test_exec_and_proxy),
      cmocka_unit_test(test_in_cluster),
      cmocka_unit_test(test_resolve_order),
      cmocka_unit_test(test_permissions),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
