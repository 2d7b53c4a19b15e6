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
                         const char *ca_pem, const char *client_cert, const char *client_key)
{
  char *tmp = sim_xasprintf("%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    int e = -errno;
    free(tmp);
    return e;
  }
  fprintf(f, "apiVersion: v1\nkind: Config\nclusters:\n- name: apisim\n  cluster:\n    server: %s\n", url);
  if (ca_pem) {
    char *b = sim_b64_encode(ca_pem, strlen(ca_pem));
    fprintf(f, "    certificate-authority-data: %s\n", b);
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

/* ---- reseed (the /_apisim/reseed control) ---- */

struct collect {
  jv **docs;
  size_t n, cap;
  bool namespaces; /* this pass collects Namespaces only, else everything else */
};

static void collect_type(struct sim_rtype *rt, void *arg)
{
  struct collect *c = arg;
  if ((strcmp(rt->plural, "namespaces") == 0 && rt->group[0] == 0) != c->namespaces) return;
  for (struct sim_obj *o = sim_coll_next_locked(rt->coll, NULL, false); o;
       o = sim_coll_next_locked(rt->coll, o->key, false)) {
    if (c->n == c->cap) {
      c->cap = c->cap ? c->cap * 2 : 256;
      c->docs = sim_xrealloc(c->docs, c->cap * sizeof *c->docs);
    }
    jv *d = jv_copy(o->dom);
    jv_set_str(d, "apiVersion", rt->gv);
    jv_set_str(d, "kind", rt->kind);
    c->docs[c->n++] = d;
  }
}

static void clear_type(struct sim_rtype *rt, void *arg)
{
  (void)arg;
  sim_coll_clear_locked(rt->coll);
}

static void shuffle_docs(jv **docs, size_t n, uint64_t seed)
{
  uint64_t x = seed | 1;
  for (size_t i = n; i > 1; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t j = (size_t)(x % i);
    jv *t = docs[i - 1];
    docs[i - 1] = docs[j];
    docs[j] = t;
  }
}

static int seed_docs_locked(jv **docs, size_t n, size_t *created, char **err)
{
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    char *e = NULL;
    int r = sim_api_seed_locked(docs[i], &e);
    docs[i] = NULL; /* taken */
    if (r < 0 && rc == 0) rc = r;
    if (r < 0 && !*err)
      *err = e;
    else
      free(e);
    if (r == 0) (*created)++;
  }
  return rc;
}

int sim_reseed(const struct sim_reseed *o, struct sim_reseed_result *out, char **err)
{
  *err = NULL;
  memset(out, 0, sizeof *out);
  struct collect ns = {.namespaces = true}, rest = {.namespaces = false};
  int rc = 0;
  pthread_mutex_lock(&sim_mu);
  sim_watch_drop_all_locked(o->reset);
  if (!o->new_cluster) {
    sim_types_each_locked(collect_type, &ns);
    sim_types_each_locked(collect_type, &rest);
    if (o->shuffle) {
      shuffle_docs(ns.docs, ns.n, o->shuffle);
      shuffle_docs(rest.docs, rest.n, o->shuffle * 31 + 7);
    }
  } else {
    const char *names[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
    ns.docs = sim_xcalloc(4, sizeof *ns.docs);
    for (size_t i = 0; i < 4; i++) {
      jv *d = jv_new(J_OBJ);
      jv_set_str(d, "apiVersion", "v1");
      jv_set_str(d, "kind", "Namespace");
      jv *md = jv_obj_ensure(d, "metadata");
      jv_set_str(md, "name", names[i]);
      jv_set_str(jv_obj_ensure(md, "labels"), "kubernetes.io/metadata.name", names[i]);
      ns.docs[ns.n++] = d;
    }
  }
  /* The old history goes: every collection empties and the event ring with
   * it; the counter starts over. */
  sim_types_each_locked(clear_type, NULL);
  sim_compact_locked();
  sim_rv = o->start_rv;
  sim_hist_floor = o->start_rv;
  rc = seed_docs_locked(ns.docs, ns.n, &out->objects, err);
  int rc2 = seed_docs_locked(rest.docs, rest.n, &out->objects, err);
  if (rc == 0) rc = rc2;
  for (size_t i = 0; o->items && o->items->t == J_ARR && i < o->items->n; i++) {
    jv *d = jv_copy(o->items->u.a[i]);
    int r = seed_docs_locked(&d, 1, &out->objects, err);
    if (rc == 0) rc = r;
  }
  if (o->end_rv) {
    if (sim_rv > o->end_rv && rc == 0) {
      *err = sim_xasprintf("the reseeded store is at resourceVersion %llu, past %llu",
                           (unsigned long long)sim_rv, (unsigned long long)o->end_rv);
      rc = -ERANGE;
    } else if (sim_rv < o->end_rv) {
      sim_rv = o->end_rv;
    }
  }
  struct sim_rtype *nt = sim_type_find_locked("", "v1", "namespaces");
  struct sim_obj *ks = nt ? sim_coll_get_locked(nt->coll, "kube-system") : NULL;
  const char *uid = ks ? jv_gets(jv_get(ks->dom, "metadata"), "uid") : NULL;
  snprintf(out->kube_system_uid, sizeof out->kube_system_uid, "%s", uid ? uid : "");
  out->rv = sim_rv;
  pthread_cond_broadcast(&sim_cond);
  pthread_mutex_unlock(&sim_mu);
  free(ns.docs);
  free(rest.docs);
  return rc;
}
