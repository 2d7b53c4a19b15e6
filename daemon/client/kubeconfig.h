/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig: finds the credentials the daemon talks to the API server with
 * (docs/api-contract.md section 14).
 *
 * Order (kc_kube_resolve_context): the --kubeconfig file (that file only, must
 * exist), else the KUBECONFIG path list (':'-separated, missing files
 * skipped, merged: the first file to define a cluster/user/context name wins
 * whole, the first current-context wins), else the kubeconfig named in the
 * daemon's config file, else in-cluster (service account), else
 * $HOME/.kube/config (controller-runtime's GetConfig order: flag, KUBECONFIG,
 * in-cluster, home; the config file's setting ranks as a flag default).
 *
 * Supported kubeconfig fields: clusters[].cluster.{server,
 * certificate-authority, certificate-authority-data, insecure-skip-tls-verify,
 * tls-server-name}, users[].user.{token, tokenFile, client-certificate[-data],
 * client-key[-data], exec}, clusters[].cluster.{proxy-url, extensions},
 * contexts[].context.{cluster, user, namespace}, current-context. Relative
 * paths resolve against the directory of the file that defined the entry
 * (an exec command only when it contains a '/', as client-go).
 * exec: command, args, env (name/value list), apiVersion
 * (client.authentication.k8s.io/v1 or v1beta1), installHint,
 * provideClusterInfo, interactiveMode (Never or IfAvailable; Always is an
 * error: a daemon has no terminal; required for v1 as in client-go).
 * `auth-provider` users are rejected with a message naming exec plugins as
 * the replacement; proxy-url schemes other than http, https, socks5(h) are
 * errors.
 * Errors name `file:line:col` (YAML parsed with yamltree).
 *
 * Context: any thread (no shared state; reads the environment and files).
 * Permissions (fileperm.h): a kubeconfig file, token file or client key
 * file writable by group/others (or in a directory they can write without
 * the sticky bit) is refused with -EPERM; a token file, key file or a
 * kubeconfig holding a token or client-key-data that others can read is
 * logged as a warning. Not for kc_kubeconfig_parse (no file) nor in-cluster
 * (the kubelet mounts the token 0644).
 * Errors: 0 or a negative errno; on -EINVAL/-ENOENT/-EPERM a one-line
 * message is written to err.
 * Ownership: a kc_kube_creds is the caller's; free with kc_kube_creds_free,
 * which zeroes secrets.
 */
#ifndef KC_KUBECONFIG_H
#define KC_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* users[].user.exec (execcred.h runs it). */
typedef struct kc_exec_env {
  char *name;
  char *value;
} kc_exec_env;

typedef struct kc_exec_config {
  char *command; /* as written; one with a '/' resolved against the kubeconfig's dir */
  char **args;
  size_t nargs;
  kc_exec_env *env;
  size_t nenv;
  char *api_version;  /* client.authentication.k8s.io/v1 or v1beta1 */
  char *install_hint; /* or NULL */
  bool provide_cluster_info;
  /* JSON of the cluster's extension "client.authentication.k8s.io/exec"
   * (spec.cluster.config), or NULL. */
  char *cluster_config;
  char *where; /* "FILE user \"NAME\"", for messages */
} kc_exec_config;

typedef struct kc_kube_creds {
  char *server;     /* "https://host:port" (no trailing slash) */
  char *ca_file;    /* absolute path, or NULL */
  char *ca_data;    /* decoded PEM bytes (NUL-terminated), or NULL */
  size_t ca_len;
  char *cert_file;
  char *cert_data;
  size_t cert_len;
  char *key_file;
  char *key_data;
  size_t key_len;
  char *token;      /* static bearer token, or NULL */
  char *token_file; /* re-read periodically; used when token is NULL */
  bool insecure;    /* insecure-skip-tls-verify */
  char *tls_server_name;
  char *namespace_; /* default namespace ("default" when unset) */
  bool in_cluster;
  char *source;     /* human description for logs, e.g. "kubeconfig /x (context dev)" */
  kc_exec_config *exec; /* exec credential plugin, or NULL */
  char *proxy_url;      /* cluster proxy-url (http, https, socks5 schemes), or NULL */
} kc_kube_creds;

/* Deep copy of an exec config (NULL gives NULL with rc 0). Returns 0 or -ENOMEM. */
int kc_exec_config_dup(const kc_exec_config *in, kc_exec_config **out);
void kc_exec_config_free(kc_exec_config *e);

/* Loads and merges the kubeconfig files paths[0..npaths). Files that do not
 * exist are skipped when skip_missing, else an error. `context` overrides
 * current-context when not NULL. Returns 0, -ENOENT (no file found / nothing
 * defined), -EINVAL (bad content, positioned message) or -ENOMEM. */
int kc_kubeconfig_load(const char *const *paths, size_t npaths, bool skip_missing,
                       const char *context, kc_kube_creds **out, char *err, size_t errlen);

/* In-cluster service account. sa_dir NULL means
 * /var/run/secrets/kubernetes.io/serviceaccount. Returns 0, -ENOENT when not
 * in a cluster (KUBERNETES_SERVICE_HOST/PORT unset) or the token is missing. */
int kc_kube_in_cluster(const char *sa_dir, kc_kube_creds **out, char *err, size_t errlen);

/* The full resolution order above. flag_path: --kubeconfig (or NULL);
 * config_path: the config file's setting (or NULL); context: --context (or
 * NULL = current-context; ignored, with a warning, for in-cluster). */
int kc_kube_resolve_context(const char *flag_path, const char *config_path, const char *context,
                            kc_kube_creds **out, char *err, size_t errlen);

void kc_kube_creds_free(kc_kube_creds *c);

/* Decodes standard base64 (padding optional, whitespace skipped) into a
 * malloc'd NUL-terminated buffer. Returns 0, -EINVAL or -ENOMEM. */
int kc_base64_decode(const char *in, size_t len, char **out, size_t *outlen);

/* --- Test seam: for tests only, not called by the daemon --- */
/* kc_kubeconfig_load for one kubeconfig held in memory; `name` is used as
 * its file name in messages and relative paths resolve against its
 * directory. */
int kc_kubeconfig_parse(const char *name, const char *buf, size_t len, const char *context,
                        kc_kube_creds **out, char *err, size_t errlen);

#endif
