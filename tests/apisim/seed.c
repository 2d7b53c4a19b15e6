/* SPDX-License-Identifier: Apache-2.0 */
#include "seed.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api_int.h"

static char *fixture_dir;

void sim_set_fixture_dir(const char *dir)
{
  free(fixture_dir);
  fixture_dir = dir ? sim_xstrdup(dir) : NULL;
}

static int seed_doc(jv *doc, const char *path, char **err)
{
  const char *kind = jv_gets(doc, "kind");
  size_t kl = kind ? strlen(kind) : 0;
  const jv *items = jv_get(doc, "items");
  if (kind && kl > 4 && strcmp(kind + kl - 4, "List") == 0 && items && items->t == J_ARR) {
    /* A List: items may lack kind/apiVersion (typed lists). */
    char *ikind = sim_xstrndup(kind, kl - 4);
    const char *av = jv_gets(doc, "apiVersion");
    for (size_t i = 0; i < items->n; i++) {
      jv *it = jv_copy(items->u.a[i]);
      if (it->t == J_OBJ && !jv_get(it, "kind") && strcmp(ikind, "") != 0) jv_set_str(it, "kind", ikind);
      if (it->t == J_OBJ && !jv_get(it, "apiVersion") && av) jv_set_str(it, "apiVersion", av);
      int rc = seed_doc(it, path, err);
      if (rc < 0) {
        free(ikind);
        jv_free(doc);
        return rc;
      }
    }
    free(ikind);
    jv_free(doc);
    return 0;
  }
  char *e = NULL;
  int rc = sim_api_seed(doc, &e);
  if (rc < 0) {
    *err = sim_xasprintf("%s: %s", path, e);
    free(e);
  }
  return rc;
}

static int seed_file(const char *path, char **err)
{
  size_t len;
  char *buf = sim_read_file(path, &len);
  if (!buf) {
    *err = sim_xasprintf("%s: %s", path, strerror(errno));
    return -errno;
  }
  jv **docs = NULL;
  size_t n = 0;
  char jerr[256];
  jv *one = NULL;
  /* JSON first (faster, exact numbers); YAML otherwise. */
  size_t i = 0;
  while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) i++;
  if (i < len && (buf[i] == '{' || buf[i] == '[')) one = jv_parse(buf, len, jerr, sizeof jerr);
  if (one) {
    docs = sim_xmalloc(sizeof(jv *));
    docs[0] = one;
    n = 1;
  } else {
    char *e = NULL;
    if (sim_yaml_parse_all(buf, len, &docs, &n, &e) < 0) {
      *err = sim_xasprintf("%s: %s", path, e);
      free(e);
      free(buf);
      return -EINVAL;
    }
  }
  free(buf);
  int rc = 0;
  for (size_t k = 0; k < n; k++) {
    if (rc == 0) rc = seed_doc(docs[k], path, err);
    else jv_free(docs[k]);
  }
  free(docs);
  return rc;
}

static int name_cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int sim_seed_path(const char *path, char **err)
{
  struct stat st;
  *err = NULL;
  if (stat(path, &st) < 0) {
    *err = sim_xasprintf("%s: %s", path, strerror(errno));
    return -errno;
  }
  if (!S_ISDIR(st.st_mode)) return seed_file(path, err);
  DIR *d = opendir(path);
  if (!d) {
    *err = sim_xasprintf("%s: %s", path, strerror(errno));
    return -errno;
  }
  char **names = NULL;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    const char *nm = de->d_name;
    size_t l = strlen(nm);
    bool ok = (l > 5 && strcmp(nm + l - 5, ".json") == 0) || (l > 5 && strcmp(nm + l - 5, ".yaml") == 0) ||
              (l > 4 && strcmp(nm + l - 4, ".yml") == 0);
    if (!ok) continue;
    names = sim_xrealloc(names, (n + 1) * sizeof(char *));
    names[n++] = sim_xasprintf("%s/%s", path, nm);
  }
  closedir(d);
  /* Sorted, so that CRDs in "00-crds.yaml" come before their instances. */
  if (n) qsort(names, n, sizeof(char *), name_cmp);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    if (rc == 0) rc = seed_file(names[i], err);
    free(names[i]);
  }
  free(names);
  return rc;
}

/* ---- --generate ---- */

struct tmpl {
  const char *resource, *file, *fallback;
};

static const struct tmpl tmpls[] = {
  {"pods", "objects/pod-k8s-openapi-coredns.json",
   "{\"metadata\":{\"labels\":{\"k8s-app\":\"kube-dns\"}},\"spec\":{\"containers\":[{\"name\":\"coredns\",\"image\":\"registry.k8s.io/coredns/coredns:v1.11.1\"}],\"nodeName\":\"kind-control-plane\"},\"status\":{\"phase\":\"Running\"}}"},
  {"configmaps", "objects/configmap-k9s.json", "{\"data\":{\"a\":\"b\"}}"},
  {"secrets", "objects/secret-k9s.json", "{\"type\":\"Opaque\",\"data\":{\"a\":\"Yg==\"}}"},
  {"services", "objects/service-kubectl-neat.json", "{\"spec\":{\"ports\":[{\"port\":80}]}}"},
  {"events", "objects/event-k9s.json", "{\"reason\":\"Pulled\",\"type\":\"Normal\",\"involvedObject\":{\"kind\":\"Pod\"}}"},
  {"nodes", "objects/node-kubernetes-fieldmanager.json", "{\"spec\":{},\"status\":{}}"},
  {"deployments.apps", "objects/deployment-k9s.json",
   "{\"spec\":{\"replicas\":1,\"selector\":{\"matchLabels\":{\"app\":\"x\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"x\",\"image\":\"x\"}]}}}}"},
  {"replicasets.apps", "objects/replicaset-k9s.json",
   "{\"spec\":{\"replicas\":1,\"selector\":{\"matchLabels\":{\"app\":\"x\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"x\",\"image\":\"x\"}]}}}}"},
  {"leases.coordination.k8s.io", NULL, "{\"spec\":{\"holderIdentity\":\"x\",\"leaseDurationSeconds\":15}}"},
};

/* The template of resource: its fixture when a fixture directory is set (a
 * fixture that cannot be read or parsed is an error, *err says which, so
 * generated objects are never silently smaller than asked for), else the
 * built-in minimal object. */
static jv *load_template(const char *resource, char **err)
{
  const struct tmpl *t = NULL;
  for (size_t i = 0; i < sizeof tmpls / sizeof tmpls[0]; i++)
    if (strcmp(tmpls[i].resource, resource) == 0) t = &tmpls[i];
  char perr[256];
  if (t && t->file && fixture_dir) {
    char *p = sim_xasprintf("%s/%s", fixture_dir, t->file);
    size_t len;
    char *buf = sim_read_file(p, &len);
    if (!buf) {
      *err = sim_xasprintf("--generate: fixture %s: %s", p, strerror(errno));
      free(p);
      return NULL;
    }
    jv *d = jv_parse(buf, len, perr, sizeof perr);
    free(buf);
    if (!d || d->t != J_OBJ) {
      *err = sim_xasprintf("--generate: fixture %s: %s", p, d ? "not a JSON object" : perr);
      jv_free(d);
      free(p);
      return NULL;
    }
    free(p);
    return d;
  }
  const char *fb = t ? t->fallback : "{\"spec\":{\"size\":3,\"color\":\"blue\"}}";
  jv *d = jv_parse(fb, strlen(fb), perr, sizeof perr);
  if (!d) *err = sim_xasprintf("--generate: built-in template of %s: %s", resource, perr);
  return d;
}

int sim_generate(const char *resource, size_t n, char **err)
{
  *err = NULL;
  pthread_mutex_lock(&sim_mu);
  struct sim_rtype *rt = sim_type_by_name_locked(resource);
  char *kind = rt ? sim_xstrdup(rt->kind) : NULL, *gv = rt ? sim_xstrdup(rt->gv) : NULL;
  char *plural = rt ? sim_xstrdup(rt->plural) : NULL;
  bool namespaced = rt && rt->namespaced;
  pthread_mutex_unlock(&sim_mu);
  if (!rt) {
    *err = sim_xasprintf("--generate: unknown resource %s (use plural[.group])", resource);
    return -EINVAL;
  }
  jv *tpl = load_template(resource, err);
  if (!tpl) {
    free(kind); free(gv); free(plural);
    return -EINVAL;
  }
  jv *md = jv_obj_ensure(tpl, "metadata");
  const char *drop[] = {"uid", "resourceVersion", "creationTimestamp", "generateName",
                        "deletionTimestamp", "selfLink"};
  for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) jv_del(md, drop[i]);
  jv_set_str(tpl, "apiVersion", gv);
  jv_set_str(tpl, "kind", kind);
  int rc = 0;
  static unsigned long long gen_seq; /* unique names across calls */
  for (size_t i = 0; i < n; i++) {
    unsigned long long k = __atomic_fetch_add(&gen_seq, 1, __ATOMIC_RELAXED);
    jv *o = jv_copy(tpl);
    jv *m = jv_obj_ensure(o, "metadata");
    char name[96], ns[32], v[32];
    snprintf(name, sizeof name, "gen-%s-%06llu", plural, k);
    jv_set_str(m, "name", name);
    if (namespaced) {
      snprintf(ns, sizeof ns, "gen-%llu", k % 4);
      jv_set_str(m, "namespace", ns);
    } else {
      jv_del(m, "namespace");
    }
    jv *labels = jv_obj_ensure(m, "labels");
    snprintf(v, sizeof v, "app-%llu", k % 10);
    jv_set_str(labels, "apisim.kctrld.io/app", v);
    jv_set_str(labels, "apisim.kctrld.io/generated", "true");
    if (strcmp(plural, "pods") == 0) {
      jv *spec = jv_obj_ensure(o, "spec");
      snprintf(v, sizeof v, "node-%llu", k % 8);
      jv_set_str(spec, "nodeName", v);
      jv *st = jv_obj_ensure(o, "status");
      jv_set_str(st, "phase", k % 10 == 9 ? "Pending" : "Running");
    }
    char *e = NULL;
    rc = sim_api_seed(o, &e);
    if (rc < 0) {
      *err = e;
      break;
    }
  }
  jv_free(tpl);
  free(kind);
  free(gv);
  free(plural);
  return rc;
}

/* ---- kubeconfig ---- */

static char *file_b64(const char *path)
{
  size_t n;
  char *d = sim_read_file(path, &n);
  if (!d) return NULL;
  char *b = sim_b64_encode(d, n);
  free(d);
  return b;
}

int sim_write_kubeconfig(const char *path, const char *url, const char *token,
                         const char *ca_file, const char *client_cert, const char *client_key)
{
  char *tmp = sim_xasprintf("%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    int e = -errno;
    free(tmp);
    return e;
  }
  fprintf(f, "apiVersion: v1\nkind: Config\nclusters:\n- name: apisim\n  cluster:\n    server: %s\n", url);
  if (ca_file) {
    char *b = file_b64(ca_file);
    if (b) fprintf(f, "    certificate-authority-data: %s\n", b);
    free(b);
  }
  fprintf(f, "users:\n- name: apisim\n  user:");
  bool any = false;
  if (token) {
    fprintf(f, "\n    token: \"%s\"", token);
    any = true;
  }
  if (client_cert && client_key) {
    char *c = file_b64(client_cert), *k = file_b64(client_key);
    if (c && k) {
      fprintf(f, "\n    client-certificate-data: %s\n    client-key-data: %s", c, k);
      any = true;
    }
    free(c);
    free(k);
  }
  fprintf(f, "%s\n", any ? "" : " {}");
  fprintf(f, "contexts:\n- name: apisim\n  context:\n    cluster: apisim\n    user: apisim\n"
             "    namespace: default\ncurrent-context: apisim\n");
  int rc = 0;
  if (fclose(f) != 0) rc = -errno;
  if (rc == 0 && rename(tmp, path) < 0) rc = -errno;
  free(tmp);
  return rc;
}
