/* SPDX-License-Identifier: Apache-2.0 */
/* certgen: see certgen.h. */
#include "certgen.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "util.h"

#define VALID_BEFORE_S (60L * 60)          /* clocks a little behind still accept it */
#define VALID_FOR_S (30L * 24 * 60 * 60)

/* A PEM text from a write callback into a memory BIO, or NULL. */
static char *bio_text(BIO *b)
{
  char *data = NULL;
  long n = BIO_get_mem_data(b, &data);
  return n > 0 && data ? sim_xstrndup(data, (size_t)n) : NULL;
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

/* A certificate for key named cn, valid now; issuer NULL: self-signed. */
static X509 *new_cert(EVP_PKEY *key, const char *cn, X509 *issuer)
{
  X509 *x = X509_new();
  if (!x) return NULL;
  unsigned char serial[16];
  BIGNUM *bn = NULL;
  bool ok = X509_set_version(x, X509_VERSION_3) == 1 && RAND_bytes(serial, sizeof serial) == 1;
  if (ok) {
    serial[0] &= 0x7f; /* a positive INTEGER */
    bn = BN_bin2bn(serial, sizeof serial, NULL);
    ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
  }
  BN_free(bn);
  X509_NAME *name = X509_get_subject_name(x);
  ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0) == 1;
  ok = ok && X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) == 1;
  ok = ok && X509_gmtime_adj(X509_getm_notBefore(x), -VALID_BEFORE_S) != NULL;
  ok = ok && X509_gmtime_adj(X509_getm_notAfter(x), VALID_FOR_S) != NULL;
  ok = ok && X509_set_pubkey(x, key) == 1;
  if (!ok) {
    X509_free(x);
    return NULL;
  }
  return x;
}

static char *cert_pem(X509 *x)
{
  BIO *b = BIO_new(BIO_s_mem());
  char *pem = b && PEM_write_bio_X509(b, x) == 1 ? bio_text(b) : NULL;
  BIO_free(b);
  return pem;
}

static char *key_pem(EVP_PKEY *k)
{
  BIO *b = BIO_new(BIO_s_mem());
  char *pem = b && PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) == 1 ? bio_text(b) : NULL;
  BIO_free(b);
  return pem;
}

int sim_certgen(const char *host, struct sim_pki *out, char **err)
{
  memset(out, 0, sizeof *out);
  const char *step = "CA key";
  EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *srv_key = NULL;
  X509 *ca = NULL, *srv = NULL;
  char *san = NULL;
  if (!ca_key) goto fail;
  step = "CA certificate";
  ca = new_cert(ca_key, "kube-apisim-ca", NULL);
  if (!ca || !add_ext(ca, ca, NID_basic_constraints, "critical,CA:TRUE") ||
      !add_ext(ca, ca, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") ||
      !add_ext(ca, ca, NID_subject_key_identifier, "hash") ||
      X509_sign(ca, ca_key, EVP_sha256()) <= 0)
    goto fail;
  step = "server key";
  srv_key = EVP_EC_gen("P-256");
  if (!srv_key) goto fail;
  step = "server certificate";
  unsigned char addr[16];
  bool localhost = strcmp(host, "127.0.0.1") == 0 || strcmp(host, "::1") == 0 ||
                   strcmp(host, "localhost") == 0;
  if (localhost || !*host)
    san = sim_xstrdup("IP:127.0.0.1,IP:::1,DNS:localhost");
  else if (inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1)
    san = sim_xasprintf("IP:127.0.0.1,IP:::1,DNS:localhost,IP:%s", host);
  else
    san = sim_xasprintf("IP:127.0.0.1,IP:::1,DNS:localhost,DNS:%s", host);
  srv = new_cert(srv_key, "kube-apisim", ca);
  if (!srv || !add_ext(srv, ca, NID_basic_constraints, "critical,CA:FALSE") ||
      !add_ext(srv, ca, NID_key_usage, "critical,digitalSignature") ||
      !add_ext(srv, ca, NID_ext_key_usage, "serverAuth") ||
      !add_ext(srv, ca, NID_authority_key_identifier, "keyid:always") ||
      !add_ext(srv, ca, NID_subject_alt_name, san) ||
      X509_sign(srv, ca_key, EVP_sha256()) <= 0)
    goto fail;
  step = "PEM encoding";
  out->ca_pem = cert_pem(ca);
  out->cert_pem = cert_pem(srv);
  out->key_pem = key_pem(srv_key);
  if (!out->ca_pem || !out->cert_pem || !out->key_pem) goto fail;
  free(san);
  X509_free(ca);
  X509_free(srv);
  EVP_PKEY_free(ca_key);
  EVP_PKEY_free(srv_key);
  return 0;
fail:
  *err = sim_xasprintf("generating the %s failed", step);
  sim_pki_free(out);
  free(san);
  X509_free(ca);
  X509_free(srv);
  EVP_PKEY_free(ca_key);
  EVP_PKEY_free(srv_key);
  return -1;
}

void sim_pki_free(struct sim_pki *p)
{
  free(p->ca_pem);
  free(p->cert_pem);
  if (p->key_pem) OPENSSL_cleanse(p->key_pem, strlen(p->key_pem));
  free(p->key_pem);
  memset(p, 0, sizeof *p);
}
