/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig: see kubeconfig.h. */
#include "client/kubeconfig.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fileperm.h"
#include "base/log.h"
#include "json/yamltree.h"

#define COMPONENT "kubeconfig"
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define MAX_FILES 16

struct entry {
  const char *name;
  const kc_yaml_node *body; /* the cluster/user/context mapping */
  const kc_yaml_node *item; /* the list item, for positions */
  const char *dir;          /* directory of the defining file */
};

struct table {
  struct entry *v;
  size_t len, cap;
};

struct merged {
  kc_yaml_doc *docs[MAX_FILES];
  char *dirs[MAX_FILES];
  size_t ndocs;
  struct table clusters, users, contexts;
  const char *current;
  const kc_yaml_node *current_node;
  const char *first_file;
  bool from_files; /* loaded from files (permissions are checked), not a buffer */
};

/* ---- small helpers ---- */

static void zfree(char *p, size_t len) {
  if (!p) return;
  explicit_bzero(p, len);
  free(p);
}

static void zfree_str(char *p) {
  if (p) zfree(p, strlen(p));
}

void kc_exec_config_free(kc_exec_config *e) {
  if (!e) return;
  free(e->command);
  for (size_t i = 0; i < e->nargs; i++) free(e->args[i]);
  free(e->args);
  for (size_t i = 0; i < e->nenv; i++) {
    free(e->env[i].name);
    zfree_str(e->env[i].value); /* plugins get secrets through env too */
  }
  free(e->env);
  free(e->api_version);
  free(e->install_hint);
  free(e->cluster_config);
  free(e->where);
  free(e);
}

static char *dup_or_null(const char *s, bool *fail) {
  if (!s) return NULL;
  char *r = strdup(s);
  if (!r) *fail = true;
  return r;
}

int kc_exec_config_dup(const kc_exec_config *in, kc_exec_config **out) {
  *out = NULL;
  if (!in) return 0;
  kc_exec_config *e = calloc(1, sizeof *e);
  if (!e) return -ENOMEM;
  bool fail = false;
  e->command = dup_or_null(in->command, &fail);
  e->api_version = dup_or_null(in->api_version, &fail);
  e->install_hint = dup_or_null(in->install_hint, &fail);
  e->cluster_config = dup_or_null(in->cluster_config, &fail);
  e->where = dup_or_null(in->where, &fail);
  e->provide_cluster_info = in->provide_cluster_info;
  if (in->nargs && !(e->args = calloc(in->nargs, sizeof *e->args))) fail = true;
  for (size_t i = 0; e->args && i < in->nargs; i++, e->nargs++)
    e->args[i] = dup_or_null(in->args[i], &fail);
  if (in->nenv && !(e->env = calloc(in->nenv, sizeof *e->env))) fail = true;
  for (size_t i = 0; e->env && i < in->nenv; i++, e->nenv++) {
    e->env[i].name = dup_or_null(in->env[i].name, &fail);
    e->env[i].value = dup_or_null(in->env[i].value, &fail);
  }
  if (fail) {
    kc_exec_config_free(e);
    return -ENOMEM;
  }
  *out = e;
  return 0;
}

void kc_kube_creds_free(kc_kube_creds *c) {
  if (!c) return;
  kc_exec_config_free(c->exec);
  free(c->proxy_url);
  free(c->server);
  free(c->ca_file);
  zfree(c->ca_data, c->ca_len);
  free(c->cert_file);
  zfree(c->cert_data, c->cert_len);
  free(c->key_file);
  zfree(c->key_data, c->key_len);
  zfree_str(c->token);
  free(c->token_file);
  free(c->tls_server_name);
  free(c->namespace_);
  free(c->source);
  free(c);
}

static int b64val(unsigned char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

int kc_base64_decode(const char *in, size_t len, char **out, size_t *outlen) {
  char *buf = malloc(len / 4 * 3 + 4);
  if (!buf) return -ENOMEM;
  size_t n = 0;
  unsigned acc = 0;
  int bits = 0;
  bool pad = false;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)in[i];
    if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
    if (ch == '=') {
      pad = true;
      continue;
    }
    int v = b64val(ch);
    if (v < 0 || pad) {
      zfree(buf, len / 4 * 3 + 4);
      return -EINVAL;
    }
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      buf[n++] = (char)((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) { /* a lone trailing character carries no whole byte */
    zfree(buf, len / 4 * 3 + 4);
    return -EINVAL;
  }
  buf[n] = '\0';
  *out = buf;
  *outlen = n;
  return 0;
}

/* Joins a relative path onto dir; absolute paths are copied. */
static char *resolve_path(const char *dir, const char *p) {
  char *r = NULL;
  if (p[0] == '/' || !dir) return strdup(p);
  if (asprintf(&r, "%s/%s", dir, p) < 0) return NULL;
  return r;
}

static char *dir_of(const char *path) {
  char *copy = strdup(path);
  if (!copy) return NULL;
  char *slash = strrchr(copy, '/');
  if (slash == copy) slash[1] = '\0';
  else if (slash) *slash = '\0';
  else strcpy(copy, ".");
  char real[PATH_MAX];
  if (realpath(copy, real)) {
    free(copy);
    return strdup(real);
  }
  return copy;
}

static int table_add(struct table *t, const struct entry *e) {
  for (size_t i = 0; i < t->len; i++)
    if (strcmp(t->v[i].name, e->name) == 0) return 0; /* first definition wins */
  if (KC_ARRAY_ROOM(t->v, t->cap, t->len, 8) < 0) return -ENOMEM;
  t->v[t->len++] = *e;
  return 0;
}

static const struct entry *table_find(const struct table *t, const char *name) {
  for (size_t i = 0; i < t->len; i++)
    if (strcmp(t->v[i].name, name) == 0) return &t->v[i];
  return NULL;
}

static void merged_free(struct merged *m) {
  for (size_t i = 0; i < m->ndocs; i++) {
    kc_yaml_free(m->docs[i]);
    free(m->dirs[i]);
  }
  free(m->clusters.v);
  free(m->users.v);
  free(m->contexts.v);
}

/* Reads one named list ("clusters" with inner key "cluster", ...). */
static int read_list(const kc_yaml_node *root, const char *list, const char *inner,
                     struct table *t, const char *dir, char *err, size_t errlen) {
  const kc_yaml_node *seq = kc_yaml_map_get(root, list);
  if (!seq || kc_yaml_is_null(seq)) return 0;
  int rc = kc_yaml_expect(seq, KC_YAML_SEQUENCE, list, err, errlen);
  if (rc < 0) return rc;
  for (size_t i = 0; i < seq->u.seq.len; i++) {
    const kc_yaml_node *item = &seq->u.seq.items[i];
    rc = kc_yaml_expect(item, KC_YAML_MAPPING, list, err, errlen);
    if (rc < 0) return rc;
    const kc_yaml_node *name = kc_yaml_map_get(item, "name");
    if (!name) return kc_yaml_error(err, errlen, item, "%s entry without a name", list);
    struct entry e = {.item = item, .dir = dir};
    rc = kc_yaml_get_string(name, "name", &e.name, err, errlen);
    if (rc < 0) return rc;
    e.body = kc_yaml_map_get(item, inner);
    if (e.body && !kc_yaml_is_null(e.body)) {
      rc = kc_yaml_expect(e.body, KC_YAML_MAPPING, inner, err, errlen);
      if (rc < 0) return rc;
    } else {
      e.body = NULL;
    }
    rc = table_add(t, &e);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Takes ownership of doc. */
static int add_doc(struct merged *m, const char *path, kc_yaml_doc *doc, char *err,
                   size_t errlen) {
  int rc;
  if (m->ndocs == MAX_FILES) {
    kc_yaml_free(doc);
    snprintf(err, errlen, "%s: more than %d kubeconfig files", path, MAX_FILES);
    return -EINVAL;
  }
  char *dir = dir_of(path);
  if (!dir) {
    kc_yaml_free(doc);
    return -ENOMEM;
  }
  m->docs[m->ndocs] = doc;
  m->dirs[m->ndocs] = dir;
  m->ndocs++;
  if (!m->first_file) m->first_file = kc_yaml_file(doc);
  const kc_yaml_node *root = kc_yaml_root(doc);
  if (!root) return 0;
  rc = kc_yaml_expect(root, KC_YAML_MAPPING, "kubeconfig", err, errlen);
  if (rc < 0) return rc;
  const kc_yaml_node *cur = kc_yaml_map_get(root, "current-context");
  if (cur && !kc_yaml_is_null(cur) && !m->current) {
    rc = kc_yaml_get_string(cur, "current-context", &m->current, err, errlen);
    if (rc < 0) return rc;
    if (!m->current[0]) m->current = NULL;
    else m->current_node = cur;
  }
  if ((rc = read_list(root, "clusters", "cluster", &m->clusters, dir, err, errlen)) < 0 ||
      (rc = read_list(root, "users", "user", &m->users, dir, err, errlen)) < 0 ||
      (rc = read_list(root, "contexts", "context", &m->contexts, dir, err, errlen)) < 0)
    return rc;
  return 0;
}

static int load_one(struct merged *m, const char *path, bool skip_missing, char *err,
                    size_t errlen) {
  kc_yaml_doc *doc = NULL;
  /* A kubeconfig others can write can point the daemon at their server. */
  int rc = kc_fileperm_check_path("kubeconfig", path,
                                  "use credentials and a server others can change", 0, err, errlen);
  if (rc < 0 && rc != -ENOENT) return rc;
  m->from_files = true;
  rc = kc_yaml_load_file(path, &doc, err, errlen);
  if (rc == -ENOENT && skip_missing) return 0;
  if (rc < 0) {
    if (rc == -ENOENT) snprintf(err, errlen, "%s: kubeconfig file not found", path);
    return rc;
  }
  return add_doc(m, path, doc, err, errlen);
}

/* Optional string field; *out stays NULL when absent. */
static int opt_string(const kc_yaml_node *map, const char *key, const char **out, char *err,
                      size_t errlen) {
  *out = NULL;
  const kc_yaml_node *n = map ? kc_yaml_map_get(map, key) : NULL;
  if (!n || kc_yaml_is_null(n)) return 0;
  int rc = kc_yaml_get_string(n, key, out, err, errlen);
  if (rc == 0 && !(*out)[0]) *out = NULL;
  return rc;
}

static int opt_path(const kc_yaml_node *map, const char *key, const char *dir, char **out,
                    char *err, size_t errlen) {
  const char *s;
  int rc = opt_string(map, key, &s, err, errlen);
  if (rc < 0 || !s) return rc;
  *out = resolve_path(dir, s);
  return *out ? 0 : -ENOMEM;
}

static int opt_data(const kc_yaml_node *map, const char *key, char **out, size_t *outlen,
                    char *err, size_t errlen) {
  const char *s;
  int rc = opt_string(map, key, &s, err, errlen);
  if (rc < 0 || !s) return rc;
  rc = kc_base64_decode(s, strlen(s), out, outlen);
  if (rc == -EINVAL)
    return kc_yaml_error(err, errlen, kc_yaml_map_get(map, key), "%s: invalid base64", key);
  return rc;
}

static int fill_cluster(kc_kube_creds *c, const struct entry *e, char *err, size_t errlen) {
  const kc_yaml_node *b = e->body;
  const char *server;
  int rc = opt_string(b, "server", &server, err, errlen);
  if (rc < 0) return rc;
  if (!server)
    return kc_yaml_error(err, errlen, e->item, "cluster \"%s\" has no server", e->name);
  if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
    return kc_yaml_error(err, errlen, kc_yaml_map_get(b, "server"),
                         "server \"%s\" is not an http(s) URL", server);
  c->server = strdup(server);
  if (!c->server) return -ENOMEM;
  size_t n = strlen(c->server);
  while (n > 0 && c->server[n - 1] == '/') c->server[--n] = '\0';
  if ((rc = opt_path(b, "certificate-authority", e->dir, &c->ca_file, err, errlen)) < 0 ||
      (rc = opt_data(b, "certificate-authority-data", &c->ca_data, &c->ca_len, err, errlen)) < 0)
    return rc;
  const kc_yaml_node *ins = kc_yaml_map_get(b, "insecure-skip-tls-verify");
  if (ins && !kc_yaml_is_null(ins)) {
    rc = kc_yaml_get_bool(ins, "insecure-skip-tls-verify", &c->insecure, err, errlen);
    if (rc < 0) return rc;
    if (c->insecure && (c->ca_file || c->ca_data))
      return kc_yaml_error(err, errlen, ins,
                           "specifying a root certificates file with the insecure flag is not "
                           "allowed");
  }
  const char *sni;
  if ((rc = opt_string(b, "tls-server-name", &sni, err, errlen)) < 0) return rc;
  if (sni && !(c->tls_server_name = strdup(sni))) return -ENOMEM;
  const char *proxy;
  if ((rc = opt_string(b, "proxy-url", &proxy, err, errlen)) < 0) return rc;
  if (proxy) {
    /* client-go's schemes (http, https, socks5); libcurl resolves names
     * through a socks5h proxy, which client-go's socks5 dialer also does. */
    static const char *const schemes[] = {"http://", "https://", "socks5://", "socks5h://"};
    bool ok = false;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
      if (strncmp(proxy, schemes[i], strlen(schemes[i])) == 0 && proxy[strlen(schemes[i])])
        ok = true;
    if (!ok)
      return kc_yaml_error(err, errlen, kc_yaml_map_get(b, "proxy-url"),
                           "cluster \"%s\": proxy-url \"%s\": only http, https and socks5 "
                           "proxies are supported",
                           e->name, proxy);
    if (!(c->proxy_url = strdup(proxy))) return -ENOMEM;
  }
  return 0;
}

/* A YAML subtree as JSON (plain true/false/null and numbers as JSON values,
 * every other scalar as a string). */
static void yaml_to_json(kc_buf *b, const kc_yaml_node *n) {
  if (!n || kc_yaml_is_null(n)) {
    kc_buf_puts(b, "null");
    return;
  }
  switch (n->type) {
  case KC_YAML_SCALAR: {
    const char *t = n->u.scalar.text;
    if (n->u.scalar.plain && (strcmp(t, "true") == 0 || strcmp(t, "false") == 0)) {
      kc_buf_puts(b, t);
      return;
    }
    if (n->u.scalar.plain && n->u.scalar.len && n->u.scalar.len < 32) {
      char *end = NULL;
      errno = 0;
      (void)strtod(t, &end);
      bool digits = strspn(t, "+-0123456789.eE") == n->u.scalar.len && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9'));
      if (digits && end && *end == '\0' && errno == 0) {
        kc_buf_puts(b, t);
        return;
      }
    }
    kc_buf_json(b, t, n->u.scalar.len);
    return;
  }
  case KC_YAML_SEQUENCE:
    kc_buf_putc(b, '[');
    for (size_t i = 0; i < n->u.seq.len; i++) {
      if (i) kc_buf_putc(b, ',');
      yaml_to_json(b, &n->u.seq.items[i]);
    }
    kc_buf_putc(b, ']');
    return;
  case KC_YAML_MAPPING:
    kc_buf_putc(b, '{');
    for (size_t i = 0; i < n->u.map.len; i++) {
      if (i) kc_buf_putc(b, ',');
      kc_buf_json(b, n->u.map.pairs[i].key.u.scalar.text, n->u.map.pairs[i].key.u.scalar.len);
      kc_buf_putc(b, ':');
      yaml_to_json(b, &n->u.map.pairs[i].value);
    }
    kc_buf_putc(b, '}');
    return;
  }
}

/* The cluster's extension client.authentication.k8s.io/exec as JSON. */
static int exec_cluster_config(const struct entry *ce, char **out, char *err, size_t errlen) {
  *out = NULL;
  const kc_yaml_node *ext = kc_yaml_map_get(ce->body, "extensions");
  if (!ext || kc_yaml_is_null(ext)) return 0;
  int rc = kc_yaml_expect(ext, KC_YAML_SEQUENCE, "extensions", err, errlen);
  if (rc < 0) return rc;
  for (size_t i = 0; i < ext->u.seq.len; i++) {
    const kc_yaml_node *it = &ext->u.seq.items[i];
    if ((rc = kc_yaml_expect(it, KC_YAML_MAPPING, "extensions entry", err, errlen)) < 0) return rc;
    const char *name;
    if ((rc = opt_string(it, "name", &name, err, errlen)) < 0) return rc;
    if (!name || strcmp(name, "client.authentication.k8s.io/exec") != 0) continue;
    kc_buf b = {0};
    yaml_to_json(&b, kc_yaml_map_get(it, "extension"));
    if (b.err) {
      kc_buf_free(&b);
      return -ENOMEM;
    }
    *out = kc_buf_take(&b);
    return *out ? 0 : -ENOMEM;
  }
  return 0;
}

static int fill_exec(kc_kube_creds *c, const struct entry *e, const kc_yaml_node *x, char *err,
                     size_t errlen) {
  int rc = kc_yaml_expect(x, KC_YAML_MAPPING, "exec", err, errlen);
  if (rc < 0) return rc;
  kc_exec_config *ex = calloc(1, sizeof *ex);
  if (!ex) return -ENOMEM;
  c->exec = ex;
  const char *cmd, *ver, *hint, *mode;
  if ((rc = opt_string(x, "command", &cmd, err, errlen)) < 0 ||
      (rc = opt_string(x, "apiVersion", &ver, err, errlen)) < 0 ||
      (rc = opt_string(x, "installHint", &hint, err, errlen)) < 0 ||
      (rc = opt_string(x, "interactiveMode", &mode, err, errlen)) < 0)
    return rc;
  if (!cmd) return kc_yaml_error(err, errlen, x, "user \"%s\": exec has no command", e->name);
  if (!ver)
    return kc_yaml_error(err, errlen, x, "user \"%s\": exec has no apiVersion", e->name);
  if (strcmp(ver, "client.authentication.k8s.io/v1") != 0 &&
      strcmp(ver, "client.authentication.k8s.io/v1beta1") != 0)
    return kc_yaml_error(err, errlen, kc_yaml_map_get(x, "apiVersion"),
                         "user \"%s\": exec apiVersion \"%s\" is not supported (use "
                         "client.authentication.k8s.io/v1 or v1beta1)",
                         e->name, ver);
  if (!mode && strcmp(ver, "client.authentication.k8s.io/v1") == 0)
    return kc_yaml_error(err, errlen, x,
                         "user \"%s\": exec interactiveMode must be specified for "
                         "client.authentication.k8s.io/v1 (kctrld runs it as Never)",
                         e->name);
  if (mode && strcmp(mode, "Always") == 0)
    return kc_yaml_error(err, errlen, kc_yaml_map_get(x, "interactiveMode"),
                         "user \"%s\": exec interactiveMode Always needs a terminal, which a "
                         "daemon does not have (use Never or IfAvailable)",
                         e->name);
  if (mode && strcmp(mode, "Never") != 0 && strcmp(mode, "IfAvailable") != 0)
    return kc_yaml_error(err, errlen, kc_yaml_map_get(x, "interactiveMode"),
                         "user \"%s\": exec interactiveMode \"%s\" is not one of Never, "
                         "IfAvailable, Always",
                         e->name, mode);
  /* client-go: a command with a path separator is relative to the file. */
  ex->command = strchr(cmd, '/') ? resolve_path(e->dir, cmd) : strdup(cmd);
  ex->api_version = strdup(ver);
  if (!ex->command || !ex->api_version || (hint && !(ex->install_hint = strdup(hint))))
    return -ENOMEM;
  const kc_yaml_node *pci = kc_yaml_map_get(x, "provideClusterInfo");
  if (pci && !kc_yaml_is_null(pci) &&
      (rc = kc_yaml_get_bool(pci, "provideClusterInfo", &ex->provide_cluster_info, err, errlen)) < 0)
    return rc;
  const kc_yaml_node *args = kc_yaml_map_get(x, "args");
  if (args && !kc_yaml_is_null(args)) {
    if ((rc = kc_yaml_expect(args, KC_YAML_SEQUENCE, "args", err, errlen)) < 0) return rc;
    if (args->u.seq.len && !(ex->args = calloc(args->u.seq.len, sizeof *ex->args))) return -ENOMEM;
    for (size_t i = 0; i < args->u.seq.len; i++) {
      const char *a;
      if ((rc = kc_yaml_get_string(&args->u.seq.items[i], "args entry", &a, err, errlen)) < 0)
        return rc;
      if (!(ex->args[ex->nargs] = strdup(a))) return -ENOMEM;
      ex->nargs++;
    }
  }
  const kc_yaml_node *env = kc_yaml_map_get(x, "env");
  if (env && !kc_yaml_is_null(env)) {
    if ((rc = kc_yaml_expect(env, KC_YAML_SEQUENCE, "env", err, errlen)) < 0) return rc;
    if (env->u.seq.len && !(ex->env = calloc(env->u.seq.len, sizeof *ex->env))) return -ENOMEM;
    for (size_t i = 0; i < env->u.seq.len; i++) {
      const kc_yaml_node *it = &env->u.seq.items[i];
      if ((rc = kc_yaml_expect(it, KC_YAML_MAPPING, "env entry", err, errlen)) < 0) return rc;
      const kc_yaml_node *nn = kc_yaml_map_get(it, "name"), *vn = kc_yaml_map_get(it, "value");
      if (!nn || !vn)
        return kc_yaml_error(err, errlen, it, "user \"%s\": exec env entry needs name and value",
                             e->name);
      const char *name, *value;
      if ((rc = kc_yaml_get_string(nn, "name", &name, err, errlen)) < 0 ||
          (rc = kc_yaml_get_string(vn, "value", &value, err, errlen)) < 0)
        return rc;
      if (!name[0] || strchr(name, '='))
        return kc_yaml_error(err, errlen, nn, "user \"%s\": exec env name \"%s\" is invalid",
                             e->name, name);
      if (!(ex->env[ex->nenv].name = strdup(name))) return -ENOMEM;
      if (!(ex->env[ex->nenv].value = strdup(value))) {
        free(ex->env[ex->nenv].name);
        return -ENOMEM;
      }
      ex->nenv++;
    }
  }
  if (asprintf(&ex->where, "%s user \"%s\"", x->file ? x->file : "kubeconfig", e->name) < 0) {
    ex->where = NULL;
    return -ENOMEM;
  }
  return 0;
}

static int fill_user(kc_kube_creds *c, const struct entry *e, char *err, size_t errlen) {
  const kc_yaml_node *b = e->body;
  if (!b) return 0;
  const kc_yaml_pair *p;
  if ((p = kc_yaml_map_pair(b, "auth-provider")))
    return kc_yaml_error(err, errlen, &p->key,
                         "user \"%s\": auth-provider plugins were removed from client-go; use "
                         "an exec credential plugin instead (kubelogin for OIDC and Azure, "
                         "gke-gcloud-auth-plugin for GKE, aws eks get-token for EKS)",
                         e->name);
  const char *tok;
  int rc = opt_string(b, "token", &tok, err, errlen);
  if (rc < 0) return rc;
  const kc_yaml_node *x = kc_yaml_map_get(b, "exec");
  if (x && !kc_yaml_is_null(x)) {
    const char *tf;
    if ((rc = opt_string(b, "tokenFile", &tf, err, errlen)) < 0) return rc;
    if (tok || tf)
      return kc_yaml_error(err, errlen, x, "user \"%s\": exec cannot be combined with %s",
                           e->name, tok ? "token" : "tokenFile");
    if ((rc = fill_exec(c, e, x, err, errlen)) < 0) return rc;
  }
  if (tok && !(c->token = strdup(tok))) return -ENOMEM;
  if ((rc = opt_path(b, "tokenFile", e->dir, &c->token_file, err, errlen)) < 0 ||
      (rc = opt_path(b, "client-certificate", e->dir, &c->cert_file, err, errlen)) < 0 ||
      (rc = opt_data(b, "client-certificate-data", &c->cert_data, &c->cert_len, err, errlen)) <
          0 ||
      (rc = opt_path(b, "client-key", e->dir, &c->key_file, err, errlen)) < 0 ||
      (rc = opt_data(b, "client-key-data", &c->key_data, &c->key_len, err, errlen)) < 0)
    return rc;
  bool cert = c->cert_file || c->cert_data, key = c->key_file || c->key_data;
  if (cert != key)
    return kc_yaml_error(err, errlen, e->item, "user \"%s\": %s without %s", e->name,
                         cert ? "client certificate" : "client key",
                         cert ? "client key" : "client certificate");
  return 0;
}

/* Files holding the user's credentials: a token or key file others can
 * write is refused (fileperm.h; a missing one is left to the reader), any
 * of them readable by others, the kubeconfig with inline secrets included,
 * is warned about. */
static int check_cred_files(const kc_kube_creds *c, const struct entry *ue, char *err,
                            size_t errlen) {
  const char *file = ue->item ? ue->item->file : NULL;
  if (file && (c->token || c->key_data))
    kc_fileperm_warn_readable(c->token ? "kubeconfig holding a bearer token"
                                       : "kubeconfig holding a client key",
                              file, NULL);
  const char *paths[] = {c->token_file, c->key_file};
  const char *whats[] = {"token file", "client key file"};
  for (int i = 0; i < 2; i++) {
    if (!paths[i]) continue;
    int rc = kc_fileperm_check_path(whats[i], paths[i], "authenticate with credentials others can change",
                                    0, err, errlen);
    if (rc < 0 && rc != -ENOENT) return rc;
    if (rc == 0) kc_fileperm_warn_readable(whats[i], paths[i], NULL);
  }
  return 0;
}

/* Builds creds from the loaded documents; frees m. */
static int build(struct merged *m_, const char *context, kc_kube_creds **out, char *err,
                 size_t errlen);

int kc_kubeconfig_load(const char *const *paths, size_t npaths, bool skip_missing,
                       const char *context, kc_kube_creds **out, char *err, size_t errlen) {
  char dummy[8];
  if (!err) {
    err = dummy;
    errlen = sizeof dummy;
  }
  err[0] = '\0';
  struct merged m = {0};
  int rc = 0;
  for (size_t i = 0; i < npaths && rc == 0; i++)
    if (paths[i][0]) rc = load_one(&m, paths[i], skip_missing, err, errlen);
  if (rc < 0) {
    merged_free(&m);
    return rc;
  }
  return build(&m, context, out, err, errlen);
}

int kc_kubeconfig_parse(const char *name, const char *buf, size_t len, const char *context,
                        kc_kube_creds **out, char *err, size_t errlen) {
  char dummy[8];
  if (!err) {
    err = dummy;
    errlen = sizeof dummy;
  }
  err[0] = '\0';
  struct merged m = {0};
  kc_yaml_doc *doc = NULL;
  int rc = kc_yaml_load_buffer(name, buf, len, &doc, err, errlen);
  if (rc == 0) rc = add_doc(&m, name, doc, err, errlen);
  if (rc < 0) {
    merged_free(&m);
    return rc;
  }
  return build(&m, context, out, err, errlen);
}

static int build(struct merged *m_, const char *context, kc_kube_creds **out, char *err,
                 size_t errlen) {
  struct merged m = *m_;
  kc_kube_creds *c = NULL;
  int rc = 0;
  if (m.ndocs == 0) {
    snprintf(err, errlen, "no kubeconfig file found");
    rc = -ENOENT;
    goto done;
  }
  const char *ctxname = context ? context : m.current;
  if (!ctxname) {
    snprintf(err, errlen, "%s: no current-context set", m.first_file);
    rc = -EINVAL;
    goto done;
  }
  const struct entry *ctx = table_find(&m.contexts, ctxname);
  if (!ctx || !ctx->body) {
    if (m.current_node && !context)
      rc = kc_yaml_error(err, errlen, m.current_node, "context \"%s\" not found", ctxname);
    else
      snprintf(err, errlen, "%s: context \"%s\" not found", m.first_file, ctxname), rc = -EINVAL;
    goto done;
  }
  const char *cluster, *user, *ns;
  if ((rc = opt_string(ctx->body, "cluster", &cluster, err, errlen)) < 0 ||
      (rc = opt_string(ctx->body, "user", &user, err, errlen)) < 0 ||
      (rc = opt_string(ctx->body, "namespace", &ns, err, errlen)) < 0)
    goto done;
  if (!cluster) {
    rc = kc_yaml_error(err, errlen, ctx->item, "context \"%s\" names no cluster", ctxname);
    goto done;
  }
  const struct entry *ce = table_find(&m.clusters, cluster);
  if (!ce || !ce->body) {
    rc = kc_yaml_error(err, errlen, kc_yaml_map_get(ctx->body, "cluster"),
                       "cluster \"%s\" not found", cluster);
    goto done;
  }
  const struct entry *ue = NULL;
  if (user && !(ue = table_find(&m.users, user))) {
    rc = kc_yaml_error(err, errlen, kc_yaml_map_get(ctx->body, "user"), "user \"%s\" not found",
                       user);
    goto done;
  }
  c = calloc(1, sizeof *c);
  if (!c) {
    rc = -ENOMEM;
    goto done;
  }
  if ((rc = fill_cluster(c, ce, err, errlen)) < 0) goto done;
  if (ue && (rc = fill_user(c, ue, err, errlen)) < 0) goto done;
  if (c->exec && c->exec->provide_cluster_info &&
      (rc = exec_cluster_config(ce, &c->exec->cluster_config, err, errlen)) < 0)
    goto done;
  if (ue && m.from_files && (rc = check_cred_files(c, ue, err, errlen)) < 0) goto done;
  c->namespace_ = strdup(ns ? ns : "default");
  if (!c->namespace_ || asprintf(&c->source, "kubeconfig %s (context %s)", m.first_file,
                                 ctxname) < 0) {
    c->source = NULL;
    rc = -ENOMEM;
    goto done;
  }
  *out = c;
  c = NULL;
done:
  kc_kube_creds_free(c);
  merged_free(&m);
  return rc;
}

static int read_small_file(const char *path, char **out) {
  FILE *f = fopen(path, "re");
  if (!f) return -errno;
  char *buf = malloc(65537);
  if (!buf) {
    fclose(f);
    return -ENOMEM;
  }
  size_t n = fread(buf, 1, 65536, f);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    zfree(buf, 65537);
    return -EIO;
  }
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) n--;
  buf[n] = '\0';
  *out = buf;
  return 0;
}

int kc_kube_in_cluster(const char *sa_dir, kc_kube_creds **out, char *err, size_t errlen) {
  char dummy[8];
  if (!err) {
    err = dummy;
    errlen = sizeof dummy;
  }
  const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    snprintf(err, errlen, "not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset)");
    return -ENOENT;
  }
  if (!sa_dir) sa_dir = SA_DIR;
  kc_kube_creds *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  int rc = -ENOMEM;
  c->in_cluster = true;
  bool v6 = strchr(host, ':') != NULL;
  if (asprintf(&c->server, v6 ? "https://[%s]:%s" : "https://%s:%s", host, port) < 0) {
    c->server = NULL;
    goto fail;
  }
  if (asprintf(&c->token_file, "%s/token", sa_dir) < 0) {
    c->token_file = NULL;
    goto fail;
  }
  if (access(c->token_file, R_OK) != 0) {
    rc = -errno;
    snprintf(err, errlen, "in-cluster: cannot read token file %s: %s", c->token_file,
             strerror(errno));
    goto fail;
  }
  if (asprintf(&c->ca_file, "%s/ca.crt", sa_dir) < 0) {
    c->ca_file = NULL;
    goto fail;
  }
  const char *ns = getenv("POD_NAMESPACE");
  if (ns && *ns) {
    c->namespace_ = strdup(ns);
  } else {
    char *nsfile = NULL, *text = NULL;
    if (asprintf(&nsfile, "%s/namespace", sa_dir) < 0) goto fail;
    if (read_small_file(nsfile, &text) == 0 && text[0]) c->namespace_ = text;
    else {
      free(text);
      c->namespace_ = strdup("default");
    }
    free(nsfile);
  }
  if (!c->namespace_ || !(c->source = strdup("in-cluster service account"))) goto fail;
  *out = c;
  return 0;
fail:
  kc_kube_creds_free(c);
  return rc;
}

int kc_kube_resolve_context(const char *flag_path, const char *config_path, const char *context,
                            kc_kube_creds **out, char *err, size_t errlen) {
  char dummy[8];
  if (!err) {
    err = dummy;
    errlen = sizeof dummy;
  }
  if (context && !*context) context = NULL;
  if (flag_path && *flag_path)
    return kc_kubeconfig_load(&flag_path, 1, false, context, out, err, errlen);
  const char *env = getenv("KUBECONFIG");
  if (env && *env) {
    char *copy = strdup(env);
    if (!copy) return -ENOMEM;
    const char *paths[MAX_FILES];
    size_t n = 0;
    for (char *save = NULL, *p = strtok_r(copy, ":", &save); p && n < MAX_FILES;
         p = strtok_r(NULL, ":", &save))
      paths[n++] = p;
    int rc = kc_kubeconfig_load(paths, n, true, context, out, err, errlen);
    free(copy);
    if (rc != -ENOENT) return rc;
    kc_warn(COMPONENT, "no file of KUBECONFIG exists, trying the next source KUBECONFIG=%s", env);
  }
  if (config_path && *config_path)
    return kc_kubeconfig_load(&config_path, 1, false, context, out, err, errlen);
  int rc = kc_kube_in_cluster(NULL, out, err, errlen);
  if (rc != -ENOENT) {
    if (rc == 0 && context)
      kc_warn(COMPONENT, "--context %s ignored: using the in-cluster service account", context);
    return rc;
  }
  /* Last: $HOME/.kube/config (controller-runtime's order). */
  const char *home = getenv("HOME");
  char *path = NULL;
  if (home && *home && asprintf(&path, "%s/.kube/config", home) < 0) return -ENOMEM;
  if (path && access(path, F_OK) == 0) {
    const char *p = path;
    rc = kc_kubeconfig_load(&p, 1, false, context, out, err, errlen);
    free(path);
    return rc;
  }
  snprintf(err, errlen,
           "no credentials: no --kubeconfig, KUBECONFIG or kubeconfig: setting, not running in a "
           "cluster (KUBERNETES_SERVICE_HOST/PORT unset) and no %s",
           path ? path : "$HOME/.kube/config (HOME unset)");
  free(path);
  return -ENOENT;
}
