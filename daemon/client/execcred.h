/* SPDX-License-Identifier: Apache-2.0 */
/* execcred: the credential of an exec credential plugin (kubeconfig
 * `users[].user.exec`, client-go's k8s.io/client-go/plugin/pkg/client/auth/exec),
 * kept current for every request of the daemon.
 *
 * Owns: one refresh thread, the plugin process while it runs (started by
 * base/spawn.h: its own process group, stdin /dev/null, stdout and stderr on
 * pipes, no other descriptor of the daemon) and the cached credential (a
 * bearer token and/or a PEM client certificate + key, with an optional
 * expiry).
 *
 * Behaviour:
 *  - The plugin runs on the refresh thread only: never on the loop thread.
 *    Its environment is the daemon's plus the `env` entries plus
 *    KUBERNETES_EXEC_INFO (an ExecCredential with spec.interactive false and,
 *    with provideClusterInfo, spec.cluster: server, tls-server-name,
 *    insecure-skip-tls-verify, certificate-authority-data, proxy-url and
 *    config from the cluster's extension client.authentication.k8s.io/exec).
 *  - stdout (at most KC_EXEC_STDOUT_MAX bytes) is parsed as an ExecCredential
 *    of the configured apiVersion and never logged; one already expired is a
 *    failure. stderr (64 KiB at most) is logged line by line (info level)
 *    when the run ends, with secrets redacted: the old and new token and
 *    every word of 16 or more token/base64 characters become [REDACTED],
 *    unless each piece of the word between '.', '/', '-', '_' and '~' reads
 *    as a name (shorter than 16 and of one case, or camel case): an apiVersion
 *    such as client.authentication.k8s.io/v1beta1, a URL path or
 *    KUBERNETES_EXEC_INFO stays readable.
 *  - A run that takes longer than the timeout (KCTRLD_EXEC_TIMEOUT_SECONDS,
 *    default 30 s) has its process group killed. A missing command (ENOENT)
 *    error carries the installHint. A failed run is retried with backoff
 *    (1 s doubling to 30 s); a still valid cached credential is kept.
 *  - A credential with expirationTimestamp is re-fetched in the background
 *    when min(30 s, 10 % of its lifetime) remains (the later of the two
 *    client-go-style thresholds), and is not handed out once expired. One
 *    without expiry is kept until a 401 rejects it.
 *  - Every run counts in rest_client_exec_plugin_call_total, and a stored
 *    credential's client certificate gives rest_client_exec_plugin_ttl_seconds
 *    and, when it replaces another, a rotation age (restmetrics.h).
 *  - A 401 answered to a request made with generation G re-runs the plugin
 *    once: later 401s for G (the same burst) are ignored, since the
 *    generation moves on when the new credential is stored.
 *
 * Context: kc_execcred_new / kc_execcred_free: one owner thread (the one that
 * creates the kc_api). kc_execcred_current and kc_execcred_rejected: any
 * thread; with wait_ms 0 kc_execcred_current never blocks beyond a mutex
 * held for a copy (safe on the loop thread).
 * Errors: 0 or a negative errno; messages name the kubeconfig file and user.
 * Ownership: a kc_exec_cred filled by kc_execcred_current or
 * kc_execcred_parse is the caller's; release with kc_exec_cred_clear (zeroes
 * secrets). kc_execcred_new copies what it needs from the creds.
 */
#ifndef KC_EXECCRED_H
#define KC_EXECCRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/kubeconfig.h"

#define KC_EXEC_STDOUT_MAX (1u << 20)
#define KC_EXEC_V1 "client.authentication.k8s.io/v1"
#define KC_EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

typedef struct kc_exec_cred {
  char *token;    /* NULL when the plugin gave a certificate only */
  char *cert;     /* PEM, NUL-terminated, or NULL */
  size_t cert_len;
  char *key;      /* PEM, NUL-terminated, or NULL */
  size_t key_len;
  int64_t expiry; /* unix seconds; 0 = no expiry */
} kc_exec_cred;

void kc_exec_cred_clear(kc_exec_cred *c);

/* Parses a plugin's stdout: an ExecCredential of api_version with
 * status.token and/or status.clientCertificateData + clientKeyData and an
 * optional status.expirationTimestamp (RFC 3339). Returns 0, -EINVAL with a
 * message in err (which never contains the secrets), or -ENOMEM. Any thread. */
int kc_execcred_parse(const char *json, size_t len, const char *api_version, kc_exec_cred *out,
                      char *err, size_t errlen);

/* Parses an RFC 3339 time ("2026-12-01T10:00:00Z", fractions and offsets
 * allowed) into unix seconds. Returns 0 or -EINVAL. */
int kc_rfc3339_parse(const char *s, int64_t *out);

/* Replaces secrets in line (in place; see the header comment), also every
 * occurrence of `secret` when not NULL. */
void kc_execcred_redact(char *line, const char *secret);

typedef struct kc_execcred kc_execcred;

/* Starts the refresh thread and the first run. Returns 0, -EINVAL (no exec
 * config in creds), -ENOMEM or -errno of pthread_create. */
int kc_execcred_new(const kc_kube_creds *creds, kc_execcred **out);
/* Stops the thread (a running plugin is killed) and frees everything. */
void kc_execcred_free(kc_execcred *s);

/* Copies the current credential into *out and its generation into *gen.
 * Returns 0, or -EAGAIN when there is no valid credential (a run is then
 * requested), or -ENOMEM. With wait_ms > 0, when there is no valid
 * credential or its generation is stale_gen (a 401 rejected it; 0 = none)
 * and a run is pending or in progress, first waits up to wait_ms for that
 * run to end (worker threads only: it blocks). */
int kc_execcred_current(kc_execcred *s, uint64_t wait_ms, uint64_t stale_gen, kc_exec_cred *out,
                        uint64_t *gen);
/* A request made with generation gen got a 401. */
void kc_execcred_rejected(kc_execcred *s, uint64_t gen);
/* fn(ud) runs on the refresh thread each time a different credential is
 * stored (after the lock is released; it must not block). NULL: none. */
void kc_execcred_on_new(kc_execcred *s, void (*fn)(void *ud), void *ud);

/* --- Test seam: for tests only, not called by the daemon --- */
/* Number of plugin runs started so far. */
uint64_t kc_execcred_runs(kc_execcred *s);

#endif
