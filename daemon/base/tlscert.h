/* SPDX-License-Identifier: Apache-2.0 */
/* tlscert: the certificate chain and private key one TLS listener serves
 * (the secure metrics endpoint), in GnuTLS's form, since libmicrohttpd
 * speaks TLS through GnuTLS.
 *
 * Two sources:
 *  - PEM files (a chain, leaf first, and its key): read at kc_tlscert_new,
 *    and read again when either file changes (inode, size or mtime, through
 *    symlinks, so a Secret volume's atomic swap counts). A handshake checks
 *    the files at most once per check_ms; a pair that does not load or
 *    whose key does not match the leaf (a rotation caught half way) is
 *    logged and the previous pair is served until the files change again;
 *  - none: a self-signed ECDSA P-256 certificate made in memory at
 *    kc_tlscert_new (CN kctrld, SANs localhost, the host name, 127.0.0.1 and
 *    ::1; valid one year), for a scraper that skips verification.
 *
 * Handshakes take the pair through GnuTLS's certificate retrieve callback
 * (kc_tlscert_retrieve_fn, installed by libmicrohttpd with
 * MHD_OPTION_HTTPS_CERT_CALLBACK). That callback carries no user pointer,
 * so one store per process is the active one (kc_tlscert_activate).
 * A replaced pair stays allocated until kc_tlscert_free: a TLS session that
 * took it may still refer to it (rotations are rare; each costs a few KB).
 *
 * Context: kc_tlscert_new/activate/deactivate/free: the loop thread (free
 * only after the listener's threads are joined); the retrieve callback and
 * kc_tlscert_generation: any thread (the current pair is guarded by a mutex).
 * Errors: 0 or a negative errno (-EINVAL: a file is not a PEM certificate or
 * key, or they do not match; the reason is logged; -EBUSY: another store is
 * active).
 */
#ifndef KC_TLSCERT_H
#define KC_TLSCERT_H

#include <stdint.h>

typedef struct kc_tlscert kc_tlscert;

/* cert_file and key_file both NULL: self-signed; both set: the files
 * (copied). check_ms: 0 means 1000. */
int kc_tlscert_new(const char *cert_file, const char *key_file, uint64_t check_ms, kc_tlscert **out);
void kc_tlscert_free(kc_tlscert *c);

/* Makes c the store the retrieve callback reads; deactivate(c) undoes it. */
int kc_tlscert_activate(kc_tlscert *c);
void kc_tlscert_deactivate(kc_tlscert *c);

/* The GnuTLS retrieve callback (a gnutls_certificate_retrieve_function2),
 * as the pointer MHD_OPTION_HTTPS_CERT_CALLBACK takes. */
void *kc_tlscert_retrieve_fn(void);

/* --- Test seam: for tests only, not called by the daemon --- */
/* How many pairs were loaded (1 after new; +1 per reload). Any thread. */
uint64_t kc_tlscert_generation(kc_tlscert *c);
/* Runs the file check now, as a handshake would (ignoring check_ms). */
void kc_tlscert_check_now(kc_tlscert *c);

#endif
