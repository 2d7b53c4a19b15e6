/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for daemon/base/x509validity.c: the validity dates of real
 * certificates (made with openssl for these tests: UTCTime, and
 * GeneralizedTime past 2049), the first of a bundle, and malformed input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/x509validity.h"

/* notBefore 2026-12-06T08:15:54Z, notAfter 2027-01-05T08:15:54Z (UTCTime). */
static const char CERT_30D[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBgTCCASegAwIBAgIUdV/9QmX1djVVlKyrZeXkxOj1uoEwCgYIKoZIzj0EAwIw\n"
    "FjEUMBIGA1UEAwwLZXhlYy1jbGllbnQwHhcNMjYxMjA2MDgxNTU0WhcNMjcwMTA1\n"
    "MDgxNTU0WjAWMRQwEgYDVQQDDAtleGVjLWNsaWVudDBZMBMGByqGSM49AgEGCCqG\n"
    "SM49AwEHA0IABGR5LTMGUAl5lnQewhH8+M6avjy85263fejfgL9YvRLeHTMYohdK\n"
    "hMZNcIYemkOzgSFCbuFIUDztr2haJA9Y+E2jUzBRMB0GA1UdDgQWBBQi/xzKe1B/\n"
    "AvLTHrBfpbH95M6aiDAfBgNVHSMEGDAWgBQi/xzKe1B/AvLTHrBfpbH95M6aiDAP\n"
    "BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIF7cJnOPibDBUXJKr4gA\n"
    "Kkx0TmkvlPcEIW8dv1ZPSlEoAiEA9Xip4kfCLONLOq2+L5egwFMVOEoLlHe0K6yH\n"
    "JKodOOs=\n"
    "-----END CERTIFICATE-----\n";

/* notBefore 2026-12-06T08:15:54Z (UTCTime), notAfter 2126-11-12T08:15:54Z
 * (GeneralizedTime). */
static const char CERT_100Y[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBdTCCARugAwIBAgIUF9DSre/9SqqR5s4LUdJH5YaPxt0wCgYIKoZIzj0EAwIw\n"
    "DzENMAsGA1UEAwwEbG9uZzAgFw0yNjEyMDYwODE1NTRaGA8yMTI2MTExMjA4MTU1\n"
    "NFowDzENMAsGA1UEAwwEbG9uZzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABJpj\n"
    "lpdv44h+btXl3i4fiqw8b2G8a1rSy3HGagzDPgFw1++AsPhuPMq9Qidac4sS0FNJ\n"
    "koZSmom2L2SjQyKcacejUzBRMB0GA1UdDgQWBBTnnKgbD0+Eetg078I9/Cvj8SPI\n"
    "MTAfBgNVHSMEGDAWgBTnnKgbD0+Eetg078I9/Cvj8SPIMTAPBgNVHRMBAf8EBTAD\n"
    "AQH/MAoGCCqGSM49BAMCA0gAMEUCIGqVEhnnGG2UTHHaVJSfxT2B744yOn11J2RF\n"
    "zHU9f2tmAiEA0pt42Lpwi0F4PmSypvDenNtbhLwV648imefppgU/d1U=\n"
    "-----END CERTIFICATE-----\n";

static void test_real_certificates(void **state) {
  (void)state;
  int64_t nb = 0, na = 0;
  assert_int_equal(kc_x509_pem_validity(CERT_30D, strlen(CERT_30D), &nb, &na), 0);
  assert_int_equal(nb, 1796544954);
  assert_int_equal(na, 1799136954);
  assert_int_equal(kc_x509_pem_validity(CERT_100Y, strlen(CERT_100Y), &nb, &na), 0);
  assert_int_equal(nb, 1796544954);
  assert_int_equal(na, 4950144954LL);
  /* A bundle: the first certificate (the leaf) counts. */
  char bundle[4096];
  snprintf(bundle, sizeof bundle, "%s%s", CERT_100Y, CERT_30D);
  assert_int_equal(kc_x509_pem_validity(bundle, strlen(bundle), &nb, &na), 0);
  assert_int_equal(na, 4950144954LL);
}

static void test_malformed(void **state) {
  (void)state;
  int64_t nb = 7, na = 7;
  const char *bad[] = {
      "",
      "-----BEGIN CERTIFICATE-----\nMIIB\n",                     /* no end marker */
      "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n", /* empty */
      "-----BEGIN CERTIFICATE-----\nMII*\n-----END CERTIFICATE-----\n",
      "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(kc_x509_pem_validity(bad[i], strlen(bad[i]), &nb, &na), -EINVAL);
  /* Cut short anywhere: never read past the end, always refused. */
  char cut[sizeof CERT_30D];
  const char *body = strstr(CERT_30D, "\n") + 1, *end = strstr(CERT_30D, "-----END");
  for (const char *p = body; p + 16 < end; p += 7) {
    int n = snprintf(cut, sizeof cut, "-----BEGIN CERTIFICATE-----\n%.*s\n-----END CERTIFICATE-----\n",
                     (int)(p - body), body);
    assert_int_equal(kc_x509_pem_validity(cut, (size_t)n, &nb, &na), -EINVAL);
  }
  assert_int_equal(nb, 7);
  assert_int_equal(na, 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_certificates),
      cmocka_unit_test(test_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
