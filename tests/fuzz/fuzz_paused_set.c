/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the paused-controllers file of the state directory:
 * runtime/pausedset.c's kc_paused_set_parse. Input = the file. An accepted
 * file gives distinct names of 1-63 characters of [A-Za-z0-9._-]; a
 * refused one gives no names and a reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pausedset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy, so reads past the end are caught by ASan. */
  char *text = malloc(size ? size : 1);
  if (!text) abort();
  memcpy(text, data, size);
  char **names = NULL, why[320];
  size_t n = 0;
  why[0] = '\0';
  int rc = kc_paused_set_parse(text, size, &names, &n, why, sizeof why);
  if (rc < 0) {
    if (names || n || !why[0]) abort();
  } else {
    for (size_t i = 0; i < n; i++) {
      size_t len = strlen(names[i]);
      static const char allowed[] = "abcdefghijklmnopqrstuvwxyz"
                                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
      if (len == 0 || len > 63 || strspn(names[i], allowed) != len) abort();
      for (size_t j = 0; j < i; j++)
        if (strcmp(names[i], names[j]) == 0) abort();
    }
    kc_paused_set_names_free(names, n);
  }
  free(text);
  return 0;
}
