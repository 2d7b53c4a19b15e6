/* SPDX-License-Identifier: Apache-2.0 */
/* x509validity: the validity period (notBefore, notAfter) of the first
 * certificate of a PEM bundle, read with GnuTLS. Nothing is verified: this
 * only tells when a certificate handed to us (an exec credential plugin's
 * clientCertificateData) starts and stops being valid, for the metrics that
 * report its age and time to live.
 * Context: any thread; pure. Errors: 0, -EINVAL (no such certificate) or
 * -ENOMEM. Fuzzed by tests/fuzz/fuzz_x509validity.c.
 */
#ifndef KC_X509VALIDITY_H
#define KC_X509VALIDITY_H

#include <stddef.h>
#include <stdint.h>

/* Unix seconds of the first certificate's notBefore and notAfter. */
int kc_x509_pem_validity(const char *pem, size_t len, int64_t *not_before, int64_t *not_after);

#endif
