/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for daemon/base/procstat.c: arbitrary bytes as the text of
 * /proc/<pid>/stat and of /proc/stat. */
#include <stdint.h>
#include <stdlib.h>

#include "base/procstat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kc_proc_stat_fields f;
  uint64_t btime;
  (void)kc_procstat_parse_stat((const char *)data, size, &f);
  (void)kc_procstat_parse_btime((const char *)data, size, &btime);
  return 0;
}
