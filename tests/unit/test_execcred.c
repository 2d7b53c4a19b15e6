/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for daemon/client/execcred.c: the ExecCredential parser, RFC 3339 times,
 * stderr redaction, and the refresh thread running small sh plugins (token,
 * environment and KUBERNETES_EXEC_INFO, once-per-401 re-runs, expiry,
 * failing, hanging, malformed and missing commands). Waits are bounded
 * polls on the observable state, never timing assertions. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/execcred.h"
#include "client/kubeconfig.h"
#include "client/restmetrics.h"
#include "testutil.h"

static char dir[256];

#define V1 "client.authentication.k8s.io/v1"

/* ---- parser ---- */

static int parse(const char *json, kc_exec_cred *c, char *err, size_t errlen) {
  return kc_execcred_parse(json, strlen(json), V1, c, err, errlen);
}

static void expect_bad(const char *json, const char *want) {
  kc_exec_cred c;
  char err[512];
  int rc = parse(json, &c, err, sizeof err);
  if (rc != -EINVAL) fail_msg("rc=%d for %s", rc, json);
  if (!strstr(err, want)) fail_msg("got \"%s\", want \"%s\"", err, want);
  assert_null(c.token);
}

static void test_parse(void **state) {
  kc_exec_cred c;
  char err[256];
  assert_int_equal(parse("{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\","
                         "\"status\":{\"token\":\"abc\",\"expirationTimestamp\":"
                         "\"2026-12-01T10:00:00Z\"}}",
                         &c, err, sizeof err),
                   0);
  assert_string_equal(c.token, "abc");
  assert_int_equal(c.expiry, 1796119200);
  assert_null(c.cert);
  kc_exec_cred_clear(&c);
  assert_null(c.token);
  assert_int_equal(parse("{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\",\"spec\":{},"
                         "\"status\":{\"clientCertificateData\":\"CERT\",\"clientKeyData\":\"KEY\"}}",
                         &c, err, sizeof err),
                   0);
  assert_null(c.token);
  assert_string_equal(c.cert, "CERT");
  assert_int_equal(c.cert_len, 4);
  assert_string_equal(c.key, "KEY");
  assert_int_equal(c.expiry, 0);
  kc_exec_cred_clear(&c);

  expect_bad("", "plugin output is not JSON (0 bytes)");
  expect_bad("token: secret-value", "plugin output is not JSON");
  expect_bad("[1]", "not a JSON object");
  expect_bad("{\"apiVersion\":\"" V1 "\",\"status\":{\"token\":\"t\"}}",
             "not an ExecCredential (kind missing)");
  expect_bad("{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
             "\"status\":{\"token\":\"t\"}}",
             "exec plugin is configured to use API version " V1
             ", plugin returned version client.authentication.k8s.io/v1beta1");
  expect_bad("{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\"}",
             "exec plugin didn't return a status field");
  expect_bad("{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\",\"status\":{}}",
             "exec plugin didn't return a token or cert/key pair");
  expect_bad("{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\",\"status\":{\"token\":\"t\","
             "\"clientCertificateData\":\"C\"}}",
             "returned clientCertificateData without clientKeyData");
  expect_bad("{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\",\"status\":{\"token\":5}}",
             "must be strings");
  expect_bad("{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\",\"status\":{\"token\":\"t\","
             "\"expirationTimestamp\":\"tomorrow\"}}",
             "expirationTimestamp \"tomorrow\" is not an RFC 3339 time");
  /* The secret never appears in a message. */
  char e2[512];
  assert_int_equal(parse("{\"kind\":\"ExecCredential\",\"apiVersion\":\"x\",\"status\":"
                         "{\"token\":\"SECRET-TOKEN\"}}",
                         &c, e2, sizeof e2),
                   -EINVAL);
  assert_null(strstr(e2, "SECRET"));
  assert_int_equal(parse("{\"kind\":\"ExecCredential\",\"token\":\"SECRET-TOKEN\" broken", &c, e2,
                         sizeof e2),
                   -EINVAL);
  assert_null(strstr(e2, "SECRET"));
}

static void test_rfc3339(void **state) {
  int64_t t;
  assert_int_equal(kc_rfc3339_parse("1970-01-01T00:00:00Z", &t), 0);
  assert_int_equal(t, 0);
  assert_int_equal(kc_rfc3339_parse("2024-02-29T23:59:59.123456789Z", &t), 0);
  assert_int_equal(t, 1709251199);
  assert_int_equal(kc_rfc3339_parse("2024-03-01T01:00:00+02:00", &t), 0);
  assert_int_equal(t, 1709247600);
  assert_int_equal(kc_rfc3339_parse("2024-02-29T22:00:00-01:00", &t), 0);
  assert_int_equal(t, 1709247600);
  assert_int_equal(kc_rfc3339_parse("2024-02-29 22:00:00Z", &t), -EINVAL);
  assert_int_equal(kc_rfc3339_parse("2024-13-01T00:00:00Z", &t), -EINVAL);
  assert_int_equal(kc_rfc3339_parse("2024-01-01T00:00:00", &t), -EINVAL);
  assert_int_equal(kc_rfc3339_parse("2024-01-01T00:00:00Zjunk", &t), -EINVAL);
  assert_int_equal(kc_rfc3339_parse("2024-01-01T00:00:00.Z", &t), -EINVAL);
}

static void test_redact(void **state) {
  char line[256];
  snprintf(line, sizeof line, "got token eyJhbGciOiJSUzI1NiJ9.payload.sig for user bob");
  kc_execcred_redact(line, NULL);
  assert_string_equal(line, "got token [REDACTED] for user bob");
  snprintf(line, sizeof line, "short secret s3cr3t-x here, s3cr3t-x again");
  kc_execcred_redact(line, "s3cr3t-x");
  assert_string_equal(line, "short secret ******** here, ******** again");
  snprintf(line, sizeof line, "longer: abc-1234567 end");
  kc_execcred_redact(line, "abc-1234567");
  assert_string_equal(line, "longer: [REDACTED] end");
  /* A secret that looks like the replacement is not searched again. */
  snprintf(line, sizeof line, "a **** b [REDACTED] c");
  kc_execcred_redact(line, "****");
  assert_string_equal(line, "a **** b [REDACTED] c");
  kc_execcred_redact(line, "[REDACTED]");
  assert_string_equal(line, "a **** b [REDACTED] c");
  snprintf(line, sizeof line, "MIIBszCCAVmgAwIBAgIUabcdefgh+/== and words");
  kc_execcred_redact(line, NULL);
  assert_string_equal(line, "[REDACTED] and words");
  /* Names stay: a group/version, camel and upper case words, URL paths. */
  static const char *const text[] = {
      "apiVersion client.authentication.k8s.io/v1beta1 is deprecated, use client.authentication.k8s.io/v1",
      "KUBERNETES_EXEC_INFO read; expirationTimestamp missing in ExecCredential",
      "see https://login.example.com/auth/realms/kubernetes-prod/protocol/openid-connect",
      "uid 0f8fad5b-d9cb-469f-a165-70867728950e",
  };
  for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
    snprintf(line, sizeof line, "%s", text[i]);
    kc_execcred_redact(line, NULL);
    assert_string_equal(line, text[i]);
  }
  /* Credentials still go: a long lowercase hex run, a base64url token with
   * dashes, a JWT inside a name-like word. */
  snprintf(line, sizeof line, "key 8f14e45fceea167a5a36dedd4bea2543 used");
  kc_execcred_redact(line, NULL);
  assert_string_equal(line, "key [REDACTED] used");
  snprintf(line, sizeof line, "token sha256~Zm9v-QmF6cXV4X3Rva2VuX3ZhbHVl-x2 ok");
  kc_execcred_redact(line, NULL);
  assert_string_equal(line, "token [REDACTED] ok");
  snprintf(line, sizeof line, "bearer a.b/eyJhbGciOiJSUzI1NiJ9x");
  kc_execcred_redact(line, NULL);
  assert_string_equal(line, "bearer [REDACTED]");
}

/* ---- the refresh thread with sh plugins ---- */

static char *path_in(const char *name) {
  static char buf[4][512];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
  return buf[i];
}

static void write_script(const char *name, const char *body) {
  const char *p = path_in(name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\n%s", body);
  fclose(f);
  assert_int_equal(chmod(p, 0700), 0);
}

/* Creds for a kubeconfig whose exec runs `script` (in dir). */
static kc_kube_creds *creds_for(const char *script, const char *extra) {
  char kc[2048];
  snprintf(kc, sizeof kc,
           "current-context: x\n"
           "clusters:\n"
           "- name: c\n"
           "  cluster:\n"
           "    server: https://h:6443\n"
           "    certificate-authority-data: UEVN\n"
           "    extensions: [{name: client.authentication.k8s.io/exec, extension: {aud: k}}]\n"
           "users:\n"
           "- name: u\n"
           "  user:\n"
           "    exec:\n"
           "      apiVersion: " V1 "\n"
           "      interactiveMode: Never\n"
           "      command: ./%s\n"
           "      args: [one, two]\n"
           "      env: [{name: PLUGIN_ENV, value: hello}]\n"
           "      provideClusterInfo: true\n"
           "%s"
           "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
           script, extra ? extra : "");
  char name[512];
  snprintf(name, sizeof name, "%s/kubeconfig", dir);
  kc_kube_creds *c = NULL;
  char err[512];
  int rc = kc_kubeconfig_parse(name, kc, strlen(kc), NULL, &c, err, sizeof err);
  if (rc < 0) fail_msg("%s", err);
  return c;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* Polls until the credential generation differs from `old` (20 s at most). */
static uint64_t wait_gen_change(kc_execcred *s, uint64_t old, kc_exec_cred *c) {
  for (int i = 0; i < 1000; i++) {
    uint64_t gen = 0;
    if (kc_execcred_current(s, 0, 0, c, &gen) == 0) {
      if (gen != old) return gen;
      kc_exec_cred_clear(c);
    }
    sleep_ms(20);
  }
  fail_msg("the generation stayed %llu", (unsigned long long)old);
  return 0;
}

#define OK_PLUGIN                                                                         \
  "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count\n"                   \
  "echo \"$KUBERNETES_EXEC_INFO\" > info; echo \"$PLUGIN_ENV $1 $2\" > env\n"             \
  "echo \"issued token-number-$n secret abcdefghijklmnopqrstuvwxyz\" >&2\n"               \
  "echo '{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\"," \
  "\"status\":{\"token\":\"token-number-'$n'\"}}'\n"

static void test_plugin_token_and_401(void **state) {
  write_script("ok.sh", "cd \"$(dirname \"$0\")\"\n" OK_PLUGIN);
  unlink(path_in("count"));
  kc_kube_creds *creds = creds_for("ok.sh", NULL);
  kc_execcred *s = NULL;
  tu_stderr_begin();
  assert_int_equal(kc_execcred_new(creds, &s), 0);
  kc_exec_cred c;
  uint64_t gen = 0;
  assert_int_equal(kc_execcred_current(s, 20000, 0, &c, &gen), 0);
  assert_string_equal(c.token, "token-number-1");
  assert_int_equal(gen, 1);
  kc_exec_cred_clear(&c);
  /* Environment, args and KUBERNETES_EXEC_INFO. */
  char *env = tu_read_file(path_in("env"), NULL);
  assert_string_equal(env, "hello one two\n");
  free(env);
  char *info = tu_read_file(path_in("info"), NULL);
  assert_non_null(strstr(info, "{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\",\"spec\":"
                               "{\"cluster\":{\"server\":\"https://h:6443\","
                               "\"certificate-authority-data\":\"UEVN\",\"config\":{\"aud\":\"k\"}},"
                               "\"interactive\":false}}"));
  free(info);
  /* A burst of 401s for generation 1: one re-run. */
  kc_execcred_rejected(s, 1);
  kc_execcred_rejected(s, 1);
  kc_execcred_rejected(s, 1);
  gen = wait_gen_change(s, 1, &c);
  assert_int_equal(gen, 2);
  assert_string_equal(c.token, "token-number-2");
  kc_exec_cred_clear(&c);
  /* A late 401 for generation 1 is ignored; one for 2 re-runs. */
  kc_execcred_rejected(s, 1);
  kc_execcred_rejected(s, 2);
  gen = wait_gen_change(s, 2, &c);
  assert_string_equal(c.token, "token-number-3");
  kc_exec_cred_clear(&c);
  assert_int_equal(kc_execcred_runs(s), 3);
  kc_execcred_free(s);
  char *log = tu_stderr_end();
  /* stderr is logged, redacted; the tokens never are. */
  if (!strstr(log, "exec plugin stderr: issued [REDACTED] secret [REDACTED]"))
    fail_msg("no redacted stderr line in:\n%s", log);
  assert_null(strstr(log, "token-number-"));
  assert_null(strstr(log, "abcdefghijklmnop"));
  assert_non_null(strstr(log, "exec plugin gave a token without expiry"));
  free(log);
  kc_kube_creds_free(creds);
}

static void test_plugin_expiry(void **state) {
  /* Each token lives 3 s: the thread re-runs before it expires. */
  write_script("exp.sh", "cd \"$(dirname \"$0\")\"\n"
                         "n=$(cat ecount 2>/dev/null || echo 0); n=$((n+1)); echo $n > ecount\n"
                         "t=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)\n"
                         "echo '{\"kind\":\"ExecCredential\",\"apiVersion\":"
                         "\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"exp-'$n'\","
                         "\"expirationTimestamp\":\"'$t'\"}}'\n");
  unlink(path_in("ecount"));
  kc_kube_creds *creds = creds_for("exp.sh", NULL);
  kc_execcred *s = NULL;
  tu_stderr_begin();
  assert_int_equal(kc_execcred_new(creds, &s), 0);
  kc_exec_cred c;
  uint64_t gen = 0;
  assert_int_equal(kc_execcred_current(s, 20000, 0, &c, &gen), 0);
  assert_string_equal(c.token, "exp-1");
  assert_true(c.expiry > 0);
  kc_exec_cred_clear(&c);
  gen = wait_gen_change(s, gen, &c);
  assert_string_equal(c.token, "exp-2");
  kc_exec_cred_clear(&c);
  kc_execcred_free(s);
  char *log = tu_stderr_end();
  assert_non_null(strstr(log, "exec plugin gave a token expiring in"));
  free(log);
  kc_kube_creds_free(creds);
}

/* Runs a plugin expected to fail; returns the log. */
static char *failing(const char *script, const char *extra) {
  kc_kube_creds *creds = creds_for(script, extra);
  kc_execcred *s = NULL;
  tu_stderr_begin();
  assert_int_equal(kc_execcred_new(creds, &s), 0);
  kc_exec_cred c;
  uint64_t gen;
  assert_int_equal(kc_execcred_current(s, 8000, 0, &c, &gen), -EAGAIN);
  assert_null(c.token);
  kc_execcred_free(s);
  kc_kube_creds_free(creds);
  return tu_logfmt_plain(tu_stderr_end());
}

static void expect_log(char *log, const char *want) {
  if (!strstr(log, want)) fail_msg("no \"%s\" in:\n%s", want, log);
}

static uint64_t exec_calls(const char *code, const char *status) {
  kc_rest_metrics_snapshot snap;
  assert_int_equal(kc_rest_metrics_snapshot_get(&snap), 0);
  uint64_t n = 0;
  for (size_t i = 0; i < snap.nexec_calls; i++)
    if (!strcmp(snap.exec_calls[i].code, code) && !strcmp(snap.exec_calls[i].call_status, status))
      n = snap.exec_calls[i].count;
  kc_rest_metrics_snapshot_free(&snap);
  return n;
}

/* Every outcome also counts in rest_client_exec_plugin_call_total, in
 * client-go's terms: the exit code, -1 for a signal (our timeout kill too),
 * 0/no_error once the process succeeded even if its output is unusable,
 * 1/plugin_not_found_error for a missing command. */
static void test_plugin_failures(void **state) {
  kc_rest_metrics_reset();
  write_script("fail.sh", "echo 'cannot reach the identity provider' >&2\nexit 3\n");
  char *log = failing("fail.sh", NULL);
  expect_log(log, "exec plugin stderr: cannot reach the identity provider");
  expect_log(log, "exec plugin failed: ");
  expect_log(log, "fail.sh exited with status 3; retrying in 1s (");
  expect_log(log, "/kubeconfig user \"u\")");
  free(log);
  assert_true(exec_calls("3", KC_EXEC_EXECUTION_ERROR) >= 1);

  write_script("sig.sh", "kill -TERM $$\n");
  log = failing("sig.sh", NULL);
  expect_log(log, "sig.sh was killed by signal 15 (SIGTERM: Terminated); retrying in ");
  free(log);
  uint64_t signalled = exec_calls("-1", KC_EXEC_EXECUTION_ERROR);
  assert_true(signalled >= 1);

  write_script("bad.sh", "echo 'token: not-json-at-all-but-secret'\n");
  log = failing("bad.sh", NULL);
  expect_log(log, "bad.sh: plugin output is not JSON (");
  assert_null(strstr(log, "not-json-at-all"));
  free(log);

  write_script("wrong.sh", "echo '{\"kind\":\"ExecCredential\",\"apiVersion\":"
                           "\"client.authentication.k8s.io/v1\",\"status\":{}}'\n");
  log = failing("wrong.sh", NULL);
  expect_log(log, "exec plugin didn't return a token or cert/key pair");
  free(log);

  write_script("old.sh", "echo '{\"kind\":\"ExecCredential\",\"apiVersion\":"
                         "\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"t\","
                         "\"expirationTimestamp\":\"2001-01-01T00:00:00Z\"}}'\n");
  log = failing("old.sh", NULL);
  expect_log(log, "old.sh returned a credential whose expirationTimestamp has passed");
  free(log);
  assert_true(exec_calls("0", KC_EXEC_NO_ERROR) >= 3);

  log = failing("missing.sh", "      installHint: 'install missing.sh from example.com'\n");
  expect_log(log, "missing.sh not found; install missing.sh from example.com");
  free(log);
  assert_true(exec_calls("1", KC_EXEC_NOT_FOUND) >= 1);

  /* Hangs, with a child in its process group: both killed at the timeout. */
  write_script("hang.sh", "cd \"$(dirname \"$0\")\"\nsleep 60 &\necho $! > hang.child\nsleep 60\n");
  setenv("KCTRLD_EXEC_TIMEOUT_SECONDS", "1", 1);
  log = failing("hang.sh", NULL);
  unsetenv("KCTRLD_EXEC_TIMEOUT_SECONDS");
  expect_log(log, "hang.sh did not finish within 1 s; its process group was killed");
  free(log);
  assert_true(exec_calls("-1", KC_EXEC_EXECUTION_ERROR) > signalled);
  char *child = tu_read_file(path_in("hang.child"), NULL);
  assert_non_null(child);
  pid_t pid = (pid_t)atoi(child);
  free(child);
  bool gone = false;
  for (int i = 0; i < 500 && !gone; i++) {
    char st[64], buf[512];
    snprintf(st, sizeof st, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(st, "r");
    /* Gone, or a zombie waiting for init. */
    gone = !f || (fgets(buf, sizeof buf, f) && strstr(buf, ") Z "));
    if (f) fclose(f);
    if (!gone) sleep_ms(10);
  }
  assert_true(gone);
}

static void test_plugin_cert(void **state) {
  write_script("cert.sh", "cat <<'EOF'\n{\"kind\":\"ExecCredential\",\"apiVersion\":"
                          "\"client.authentication.k8s.io/v1\",\"status\":{\"clientCertificateData\":"
                          "\"-----BEGIN CERTIFICATE-----\\nAAA\\n\",\"clientKeyData\":\"KEYPEM\"}}\nEOF\n");
  kc_kube_creds *creds = creds_for("cert.sh", NULL);
  kc_execcred *s = NULL;
  tu_stderr_begin();
  assert_int_equal(kc_execcred_new(creds, &s), 0);
  kc_exec_cred c;
  uint64_t gen;
  assert_int_equal(kc_execcred_current(s, 20000, 0, &c, &gen), 0);
  assert_null(c.token);
  assert_string_equal(c.cert, "-----BEGIN CERTIFICATE-----\nAAA\n");
  assert_string_equal(c.key, "KEYPEM");
  kc_exec_cred_clear(&c);
  kc_execcred_free(s);
  free(tu_stderr_end());
  kc_kube_creds_free(creds);
}

/* Two real client certificates (made with openssl for this test): the
 * first valid from 2026-12-06T08:15:54Z (1796544954) to 2027-01-05T08:15:54Z,
 * the second until 2126-11-12T08:15:54Z (4950144954). */
#define CERT_CRED_1 \
  "{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"stat" \
  "us\":{\"clientCertificateData\":\"-----BEGIN CERTIFICATE-----\\nMIIBgTCCASegAwIBAgIUdV" \
  "/9QmX1djVVlKyrZeXkxOj1uoEwCgYIKoZIzj0EAwIw\\nFjEUMBIGA1UEAwwLZXhlYy1jbGllbnQwHhcNMjYxM" \
  "jA2MDgxNTU0WhcNMjcwMTA1\\nMDgxNTU0WjAWMRQwEgYDVQQDDAtleGVjLWNsaWVudDBZMBMGByqGSM49AgEG" \
  "CCqG\\nSM49AwEHA0IABGR5LTMGUAl5lnQewhH8+M6avjy85263fejfgL9YvRLeHTMYohdK\\nhMZNcIYemkOz" \
  "gSFCbuFIUDztr2haJA9Y+E2jUzBRMB0GA1UdDgQWBBQi/xzKe1B/\\nAvLTHrBfpbH95M6aiDAfBgNVHSMEGDA" \
  "WgBQi/xzKe1B/AvLTHrBfpbH95M6aiDAP\\nBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIF7cJn" \
  "OPibDBUXJKr4gA\\nKkx0TmkvlPcEIW8dv1ZPSlEoAiEA9Xip4kfCLONLOq2+L5egwFMVOEoLlHe0K6yH\\nJK" \
  "odOOs=\\n-----END CERTIFICATE-----\\n\",\"clientKeyData\":\"KEYPEM\"}}"
#define CERT_CRED_2 \
  "{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"stat" \
  "us\":{\"clientCertificateData\":\"-----BEGIN CERTIFICATE-----\\nMIIBdTCCARugAwIBAgIUF9" \
  "DSre/9SqqR5s4LUdJH5YaPxt0wCgYIKoZIzj0EAwIw\\nDzENMAsGA1UEAwwEbG9uZzAgFw0yNjEyMDYwODE1N" \
  "TRaGA8yMTI2MTExMjA4MTU1\\nNFowDzENMAsGA1UEAwwEbG9uZzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IA" \
  "BJpj\\nlpdv44h+btXl3i4fiqw8b2G8a1rSy3HGagzDPgFw1++AsPhuPMq9Qidac4sS0FNJ\\nkoZSmom2L2Sj" \
  "QyKcacejUzBRMB0GA1UdDgQWBBTnnKgbD0+Eetg078I9/Cvj8SPI\\nMTAfBgNVHSMEGDAWgBTnnKgbD0+Eetg" \
  "078I9/Cvj8SPIMTAPBgNVHRMBAf8EBTAD\\nAQH/MAoGCCqGSM49BAMCA0gAMEUCIGqVEhnnGG2UTHHaVJSfxT" \
  "2B744yOn11J2RF\\nzHU9f2tmAiEA0pt42Lpwi0F4PmSypvDenNtbhLwV648imefppgU/d1U=\\n-----END C" \
  "ERTIFICATE-----\\n\",\"clientKeyData\":\"KEYPEM\"}}"

/* The client certificate's notAfter feeds rest_client_exec_plugin_ttl_seconds;
 * a certificate replaced by another has its age (since notBefore) observed. */
static void test_plugin_cert_metrics(void **state) {
  kc_rest_metrics_reset();
  FILE *f = fopen(path_in("cred1.json"), "w");
  assert_non_null(f);
  fputs(CERT_CRED_1, f);
  fclose(f);
  f = fopen(path_in("cred2.json"), "w");
  assert_non_null(f);
  fputs(CERT_CRED_2, f);
  fclose(f);
  write_script("certs.sh", "cd \"$(dirname \"$0\")\"\n"
                           "n=$(cat certcount 2>/dev/null || echo 0); n=$((n+1)); echo $n > certcount\n"
                           "[ $n -gt 2 ] && n=2; cat cred$n.json\n");
  unlink(path_in("certcount"));
  kc_kube_creds *creds = creds_for("certs.sh", NULL);
  kc_execcred *s = NULL;
  tu_stderr_begin();
  assert_int_equal(kc_execcred_new(creds, &s), 0);
  kc_exec_cred c;
  uint64_t gen = 0;
  assert_int_equal(kc_execcred_current(s, 20000, 0, &c, &gen), 0);
  kc_exec_cred_clear(&c);
  kc_rest_metrics_snapshot snap;
  assert_int_equal(kc_rest_metrics_snapshot_get(&snap), 0);
  assert_true(snap.exec_configured);
  assert_int_equal(snap.exec_cert_not_after, 1799136954);
  uint64_t rotations = 0;
  for (size_t b = 0; b <= KC_REST_ROTATION_BUCKETS; b++) rotations += snap.rotation_counts[b];
  assert_int_equal(rotations, 0);
  kc_rest_metrics_snapshot_free(&snap);
  /* A 401 re-runs the plugin, which now hands the second certificate. */
  kc_execcred_rejected(s, gen);
  wait_gen_change(s, gen, &c);
  kc_exec_cred_clear(&c);
  assert_int_equal(kc_rest_metrics_snapshot_get(&snap), 0);
  assert_int_equal(snap.exec_cert_not_after, 4950144954LL);
  rotations = 0;
  for (size_t b = 0; b <= KC_REST_ROTATION_BUCKETS; b++) rotations += snap.rotation_counts[b];
  assert_int_equal(rotations, 1);
  double age = (double)time(NULL) - 1796544954.0;
  assert_true(snap.rotation_sum_seconds > age - 60 && snap.rotation_sum_seconds < age + 60);
  assert_true(exec_calls("0", KC_EXEC_NO_ERROR) == 2 || exec_calls("0", KC_EXEC_NO_ERROR) == 3);
  kc_rest_metrics_snapshot_free(&snap);
  kc_execcred_free(s);
  free(tu_stderr_end());
  kc_kube_creds_free(creds);
}

/* A descriptor the daemon holds without close-on-exec (as a library may
 * leave a socket or file) does not reach the plugin: what the plugin script
 * runs (ls) has 0-2 and the directory it reads, nothing else. */
static void test_plugin_descriptors(void **state) {
  write_script("fds.sh",
               "cd \"$(dirname \"$0\")\"\nls -l /proc/self/fd > fds\n"
               "echo '{\"kind\":\"ExecCredential\",\"apiVersion\":"
               "\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"fd-token\"}}'\n");
  int stray = memfd_create("kc-execcred-stray", 0);
  assert_true(stray > 2);
  kc_kube_creds *creds = creds_for("fds.sh", NULL);
  kc_execcred *s = NULL;
  tu_stderr_begin();
  assert_int_equal(kc_execcred_new(creds, &s), 0);
  kc_exec_cred c;
  uint64_t gen;
  assert_int_equal(kc_execcred_current(s, 20000, 0, &c, &gen), 0);
  assert_string_equal(c.token, "fd-token");
  kc_exec_cred_clear(&c);
  kc_execcred_free(s);
  free(tu_stderr_end());
  kc_kube_creds_free(creds);
  close(stray);
  char *fds = tu_read_file(path_in("fds"), NULL);
  assert_non_null(fds);
  if (strstr(fds, "kc-execcred-stray"))
    fail_msg("the daemon's descriptor reached the plugin:\n%s", fds);
  char *all = strdup(fds);
  assert_non_null(all);
  int std = 0;
  for (char *line = strtok(fds, "\n"); line; line = strtok(NULL, "\n")) {
    char *arrow = strstr(line, " -> ");
    if (!arrow) continue; /* "total 0" */
    char *num = arrow;
    while (num > line && num[-1] != ' ')
      num--;
    int fd = atoi(num);
    const char *target = arrow + 4;
    if (fd < 3)
      std++;
    else if (strncmp(target, "/proc/", 6) != 0) /* ls's directory */
      fail_msg("fd %d -> %s reached the plugin:\n%s", fd, target, all);
  }
  assert_int_equal(std, 3);
  free(all);
  free(fds);
}

static int setup(void **state) {
  snprintf(dir, sizeof dir, "/tmp/kctrld-execcred.XXXXXX");
  if (!mkdtemp(dir)) return -1;
  return 0;
}

static int teardown(void **state) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_rfc3339),
      cmocka_unit_test(test_redact),
      cmocka_unit_test(test_plugin_token_and_401),
      cmocka_unit_test(test_plugin_expiry),
      cmocka_unit_test(test_plugin_failures),
      cmocka_unit_test(test_plugin_cert),
      cmocka_unit_test(test_plugin_cert_metrics),
      cmocka_unit_test(test_plugin_descriptors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
