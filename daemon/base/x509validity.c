/* SPDX-License-Identifier: Apache-2.0 */
#include "base/x509validity.h"

#include <errno.h>
#include <gnutls/x509.h>
#include <limits.h>
#include <string.h>

int kc_x509_pem_validity(const char *pem, size_t len, int64_t *not_before, int64_t *not_after) {
  /* GnuTLS finds the first PEM certificate block itself; a length that
   * does not fit its datum type is no certificate of ours. */
  if (!pem || len == 0 || len > UINT_MAX || !memmem(pem, len, "-----BEGIN CERTIFICATE-----", 27))
    return -EINVAL;
  gnutls_x509_crt_t crt;
  if (gnutls_x509_crt_init(&crt) < 0) return -ENOMEM;
  const gnutls_datum_t d = {(unsigned char *)(uintptr_t)pem, (unsigned int)len};
  int rc = -EINVAL;
  if (gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM) >= 0) {
    time_t nb = gnutls_x509_crt_get_activation_time(crt);
    time_t na = gnutls_x509_crt_get_expiration_time(crt);
    if (nb != (time_t)-1 && na != (time_t)-1) {
      *not_before = (int64_t)nb;
      *not_after = (int64_t)na;
      rc = 0;
    }
  }
  gnutls_x509_crt_deinit(crt);
  return rc;
}
