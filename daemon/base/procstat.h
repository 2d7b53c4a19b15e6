/* SPDX-License-Identifier: Apache-2.0 */
/* procstat: the process's own resource figures, as the Prometheus process
 * collector (client_golang's process_* metrics) reports them on Linux.
 *
 * Owns: reading /proc/self/stat (CPU time, virtual and resident size, start
 * time relative to boot), /proc/stat's btime (boot time), /proc/self/fd
 * (open descriptors) and RLIMIT_NOFILE (the soft limit), and the pure
 * parsers of the two /proc texts (fuzzed: tests/fuzz/fuzz_procstat.c).
 * Nothing is cached: every read reflects the moment of the call.
 *
 * Context: any thread (kctrld reads it on the loop thread while it renders
 * /metrics). Errors: 0 or a negative errno (-EINVAL for text that is not
 * the kernel's format). No allocation.
 */
#ifndef KC_PROCSTAT_H
#define KC_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>

typedef struct kc_process_stats {
  double cpu_seconds;        /* user + system time (utime + stime) */
  double resident_bytes;     /* rss pages x page size */
  double virtual_bytes;      /* vsize */
  double open_fds;           /* entries of /proc/self/fd */
  double max_fds;            /* RLIMIT_NOFILE soft limit; +Inf when unlimited */
  double start_time_seconds; /* since the Unix epoch: boot time + starttime */
} kc_process_stats;

/* What /proc/<pid>/stat says, in its own units. */
typedef struct kc_proc_stat_fields {
  uint64_t utime_ticks, stime_ticks; /* fields 14 and 15 */
  uint64_t starttime_ticks;          /* field 22: since boot */
  uint64_t vsize_bytes;              /* field 23 */
  int64_t rss_pages;                 /* field 24 */
} kc_proc_stat_fields;

/* Parses the text of /proc/<pid>/stat (len bytes, need not be
 * NUL-terminated). The command name (field 2) may hold any bytes, spaces and
 * parentheses included: the fields after it are found after the LAST ')'.
 * Returns 0 or -EINVAL. */
int kc_procstat_parse_stat(const char *text, size_t len, kc_proc_stat_fields *out);

/* Finds the "btime N" line of /proc/stat's text. Returns 0 or -EINVAL. */
int kc_procstat_parse_btime(const char *text, size_t len, uint64_t *btime);

/* Reads every figure now. Returns 0, or a negative errno when /proc cannot
 * be read (then *out is zeroed: the caller leaves the series out). */
int kc_process_stats_read(kc_process_stats *out);

#endif
