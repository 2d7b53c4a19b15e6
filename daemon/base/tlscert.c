/* SPDX-License-Identifier: Apache-2.0 */
/* tlscert: see tlscert.h. */
#include "base/tlscert.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"

#define MAX_CHAIN 8
#define MAX_PEM (1u << 20)

/* One loaded pair. */
typedef struct pair {
  gnutls_pcert_st chain[MAX_CHAIN];
  unsigned nchain;
  gnutls_privkey_t key;
  struct pair *older; /* the pairs it replaced, freed with the store */
} pair;

/* What identifies a file's content without reading it. */
typedef struct stamp {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
} stamp;

struct kc_tlscert {
  char *cert_file, *key_file; /* NULL: self-signed */
  uint64_t check_ms;
  pthread_mutex_t mu; /* guards everything below */
  pair *cur;
  stamp cert_stamp, key_stamp; /* of the files behind cur, or of the last failed attempt */
  uint64_t checked_ms;
  _Atomic uint64_t generation;
};

static _Atomic(kc_tlscert *) active;

static void pair_free(pair *p) {
  while (p) {
    pair *older = p->older;
    for (unsigned i = 0; i < p->nchain; i++) gnutls_pcert_deinit(&p->chain[i]);
    if (p->key) gnutls_privkey_deinit(p->key);
    free(p);
    p = older;
  }
}

static int read_pem(const char *path, gnutls_datum_t *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t cap = 4096, len = 0;
  unsigned char *buf = malloc(cap);
  if (!buf) {
    close(fd);
    return -ENOMEM;
  }
  for (;;) {
    if (len == cap) {
      if (cap >= MAX_PEM) {
        free(buf);
        close(fd);
        return -EFBIG;
      }
      unsigned char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        close(fd);
        return -ENOMEM;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = -errno;
      free(buf);
      close(fd);
      return e;
    }
    if (n == 0) break;
    len += (size_t)n;
  }
  close(fd);
  out->data = buf;
  out->size = (unsigned)len;
  return 0;
}

static int get_stamp(const char *path, stamp *st) {
  struct stat sb;
  if (stat(path, &sb) < 0) return -errno;
  *st = (stamp){.dev = sb.st_dev, .ino = sb.st_ino, .size = sb.st_size, .mtime = sb.st_mtim};
  return 0;
}

static bool stamp_eq(const stamp *a, const stamp *b) {
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Whether the private key belongs to the leaf: their public keys' DER match. */
static bool key_matches(gnutls_pcert_st *leaf, gnutls_privkey_t key) {
  gnutls_pubkey_t pub;
  if (gnutls_pubkey_init(&pub) < 0) return false;
  bool same = false;
  gnutls_datum_t a = {0}, b = {0};
  if (gnutls_pubkey_import_privkey(pub, key, 0, 0) >= 0 &&
      gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a) >= 0 &&
      gnutls_pubkey_export2(leaf->pubkey, GNUTLS_X509_FMT_DER, &b) >= 0)
    same = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
  gnutls_free(a.data);
  gnutls_free(b.data);
  gnutls_pubkey_deinit(pub);
  return same;
}

/* Loads the files into *out; why gets the reason on -EINVAL or an errno. */
static int load_files(const char *cert_file, const char *key_file, pair **out, char *why, size_t cap) {
  gnutls_datum_t cd = {0}, kd = {0};
  int rc = read_pem(cert_file, &cd);
  if (rc < 0) {
    snprintf(why, cap, "cannot read %s: %s", cert_file, strerror(-rc));
    return rc;
  }
  if ((rc = read_pem(key_file, &kd)) < 0) {
    snprintf(why, cap, "cannot read %s: %s", key_file, strerror(-rc));
    free(cd.data);
    return rc;
  }
  pair *p = calloc(1, sizeof *p);
  rc = -ENOMEM;
  if (!p) goto out;
  unsigned n = MAX_CHAIN;
  int g = gnutls_pcert_list_import_x509_raw(p->chain, &n, &cd, GNUTLS_X509_FMT_PEM, 0);
  if (g < 0 || n == 0) {
    snprintf(why, cap, "%s: no PEM certificate (%s)", cert_file, g < 0 ? gnutls_strerror(g) : "empty");
    rc = -EINVAL;
    goto out;
  }
  p->nchain = n;
  if (gnutls_privkey_init(&p->key) < 0) goto out;
  g = gnutls_privkey_import_x509_raw(p->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
  if (g < 0) {
    snprintf(why, cap, "%s: no PEM private key (%s)", key_file, gnutls_strerror(g));
    rc = -EINVAL;
    goto out;
  }
  if (!key_matches(&p->chain[0], p->key)) {
    snprintf(why, cap, "the key in %s does not match the certificate in %s", key_file, cert_file);
    rc = -EINVAL;
    goto out;
  }
  *out = p;
  p = NULL;
  rc = 0;
out:
  if (rc == -ENOMEM) snprintf(why, cap, "out of memory");
  pair_free(p);
  free(cd.data);
  /* The key's PEM is wiped before it goes back to the allocator. */
  if (kd.data) gnutls_memset(kd.data, 0, kd.size);
  free(kd.data);
  return rc;
}

static int add_san_ip(gnutls_x509_crt_t crt, int family, const char *text) {
  unsigned char ip[16];
  if (inet_pton(family, text, ip) != 1) return -EINVAL;
  return gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, ip,
                                              family == AF_INET ? 4 : 16, GNUTLS_FSAN_APPEND);
}

static int self_signed(pair **out) {
  gnutls_x509_privkey_t xkey = NULL;
  gnutls_x509_crt_t crt = NULL;
  pair *p = calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  int g = gnutls_x509_privkey_init(&xkey);
  if (g >= 0)
    g = gnutls_x509_privkey_generate(xkey, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
  if (g >= 0) g = gnutls_x509_crt_init(&crt);
  unsigned char serial[16] = {0};
  if (g >= 0) g = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
  serial[0] &= 0x7f; /* a positive INTEGER */
  time_t now = time(NULL);
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) < 0) host[0] = '\0';
  if (g >= 0) g = gnutls_x509_crt_set_version(crt, 3);
  if (g >= 0) g = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
  if (g >= 0) g = gnutls_x509_crt_set_activation_time(crt, now - 3600);
  if (g >= 0) g = gnutls_x509_crt_set_expiration_time(crt, now + 365 * 24 * 3600);
  if (g >= 0) g = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, "kctrld", 6);
  if (g >= 0) g = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9, GNUTLS_FSAN_APPEND);
  if (g >= 0 && host[0] && strcmp(host, "localhost") != 0)
    g = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, host, (unsigned)strlen(host),
                                             GNUTLS_FSAN_APPEND);
  if (g >= 0) g = add_san_ip(crt, AF_INET, "127.0.0.1");
  if (g >= 0) g = add_san_ip(crt, AF_INET6, "::1");
  if (g >= 0) g = gnutls_x509_crt_set_key(crt, xkey);
  if (g >= 0) g = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
  if (g >= 0) g = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
  if (g >= 0) g = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
  if (g >= 0) g = gnutls_x509_crt_sign2(crt, crt, xkey, GNUTLS_DIG_SHA256, 0);
  if (g >= 0 && (g = gnutls_pcert_import_x509(&p->chain[0], crt, 0)) >= 0) p->nchain = 1;
  if (g >= 0) g = gnutls_privkey_init(&p->key);
  if (g >= 0) g = gnutls_privkey_import_x509(p->key, xkey, GNUTLS_PRIVKEY_IMPORT_COPY);
  if (crt) gnutls_x509_crt_deinit(crt);
  if (xkey) gnutls_x509_privkey_deinit(xkey);
  if (g < 0) {
    kc_error("tlscert", "cannot make a self-signed certificate: %s", gnutls_strerror(g));
    pair_free(p);
    return g == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EIO;
  }
  *out = p;
  return 0;
}

int kc_tlscert_new(const char *cert_file, const char *key_file, uint64_t check_ms, kc_tlscert **out) {
  *out = NULL;
  if (!cert_file != !key_file) return -EINVAL;
  kc_tlscert *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  c->check_ms = check_ms ? check_ms : 1000;
  int rc = pthread_mutex_init(&c->mu, NULL);
  if (rc != 0) {
    free(c);
    return -rc;
  }
  if (cert_file) {
    c->cert_file = strdup(cert_file);
    c->key_file = strdup(key_file);
    if (!c->cert_file || !c->key_file) {
      kc_tlscert_free(c);
      return -ENOMEM;
    }
    char why[512];
    /* Stamps first: a change while loading is seen by the next check. */
    const char *missing = (rc = get_stamp(cert_file, &c->cert_stamp)) < 0 ? cert_file
                          : (rc = get_stamp(key_file, &c->key_stamp)) < 0 ? key_file
                                                                           : NULL;
    if (missing) snprintf(why, sizeof why, "%s: %s", missing, strerror(-rc));
    if (rc < 0 || (rc = load_files(cert_file, key_file, &c->cur, why, sizeof why)) < 0) {
      kc_error("tlscert", "cannot load the serving certificate: %s", why);
      kc_tlscert_free(c);
      return rc;
    }
    kc_info("tlscert", "serving the certificate in %s (key %s); reloaded when they change", cert_file,
            key_file);
  } else {
    if ((rc = self_signed(&c->cur)) < 0) {
      kc_tlscert_free(c);
      return rc;
    }
    kc_info("tlscert", "serving a self-signed certificate made at start (no certificate files given)");
  }
  c->checked_ms = kc_clock_now_ms();
  atomic_store(&c->generation, 1);
  *out = c;
  return 0;
}

void kc_tlscert_free(kc_tlscert *c) {
  if (!c) return;
  kc_tlscert_deactivate(c);
  pair_free(c->cur);
  pthread_mutex_destroy(&c->mu);
  free(c->cert_file);
  free(c->key_file);
  free(c);
}

int kc_tlscert_activate(kc_tlscert *c) {
  kc_tlscert *none = NULL;
  return atomic_compare_exchange_strong(&active, &none, c) || none == c ? 0 : -EBUSY;
}

void kc_tlscert_deactivate(kc_tlscert *c) {
  kc_tlscert *mine = c;
  atomic_compare_exchange_strong(&active, &mine, NULL);
}

/* Reloads when a file changed; call with mu held. */
static void check_files(kc_tlscert *c) {
  c->checked_ms = kc_clock_now_ms();
  stamp cs, ks;
  if (get_stamp(c->cert_file, &cs) < 0 || get_stamp(c->key_file, &ks) < 0) return; /* mid-swap */
  if (stamp_eq(&cs, &c->cert_stamp) && stamp_eq(&ks, &c->key_stamp)) return;
  c->cert_stamp = cs;
  c->key_stamp = ks;
  pair *p = NULL;
  char why[512];
  int rc = load_files(c->cert_file, c->key_file, &p, why, sizeof why);
  if (rc < 0) {
    kc_warn("tlscert", "the certificate files changed but do not load, serving the previous pair: %s", why);
    return;
  }
  p->older = c->cur;
  c->cur = p;
  uint64_t gen = atomic_fetch_add(&c->generation, 1) + 1;
  kc_info("tlscert", "reloaded the serving certificate from %s (generation %llu)", c->cert_file,
          (unsigned long long)gen);
}

void kc_tlscert_check_now(kc_tlscert *c) {
  if (!c || !c->cert_file) return;
  pthread_mutex_lock(&c->mu);
  check_files(c);
  pthread_mutex_unlock(&c->mu);
}

uint64_t kc_tlscert_generation(kc_tlscert *c) { return c ? atomic_load(&c->generation) : 0; }

static int retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                    unsigned int *pcert_length, gnutls_privkey_t *privkey) {
  kc_tlscert *c = atomic_load(&active);
  if (!c) return -1;
  pthread_mutex_lock(&c->mu);
  if (c->cert_file && kc_clock_now_ms() - c->checked_ms >= c->check_ms) check_files(c);
  *pcert = c->cur->chain;
  *pcert_length = c->cur->nchain;
  *privkey = c->cur->key;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

void *kc_tlscert_retrieve_fn(void) {
  gnutls_certificate_retrieve_function2 *fn = retrieve;
  return (void *)fn;
}
