/* SPDX-License-Identifier: Apache-2.0 */
/* certgen: the throw-away PKI kube-apisim serves HTTPS with when it
 * authenticates by token and no --tls-cert is given: a self-signed CA and a
 * server certificate it signs, valid for 127.0.0.1, ::1, localhost and the
 * listen host, made with OpenSSL's libcrypto (ECDSA P-256 keys, SHA-256,
 * valid from an hour ago for 30 days). The CA goes into the kubeconfig the
 * simulator writes, so kubectl and client libraries verify the server as
 * they would a cluster's.
 *
 * Threads: any; keeps no state.
 * Errors: sim_certgen returns 0, or -1 with *err (malloc'd) saying which
 * step failed.
 * Ownership: the caller frees the three PEM strings of struct sim_pki with
 * sim_pki_free.
 */
#ifndef APISIM_CERTGEN_H
#define APISIM_CERTGEN_H

struct sim_pki {
  char *ca_pem;   /* the CA certificate */
  char *cert_pem; /* the server certificate, signed by the CA */
  char *key_pem;  /* the server's private key (PKCS#8) */
};

/* host: the listen address; added to the server certificate's names as an
 * IP address when it parses as one, else as a DNS name. */
int sim_certgen(const char *host, struct sim_pki *out, char **err);
void sim_pki_free(struct sim_pki *p);

#endif
