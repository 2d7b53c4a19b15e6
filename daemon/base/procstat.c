/* SPDX-License-Identifier: Apache-2.0 */
/* procstat: see procstat.h. */
#include "base/procstat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Reads an unsigned decimal at *p (leading spaces skipped); false when
 * there is none or it overflows. */
static bool read_u64(const char **p, const char *end, uint64_t *out) {
  const char *s = *p;
  while (s < end && *s == ' ') s++;
  if (s >= end || *s < '0' || *s > '9') return false;
  uint64_t v = 0;
  while (s < end && *s >= '0' && *s <= '9') {
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
    s++;
  }
  if (s < end && *s != ' ' && *s != '\n') return false;
  *p = s;
  *out = v;
  return true;
}

/* Skips one space-separated field (any sign or digits). */
static bool skip_field(const char **p, const char *end) {
  const char *s = *p;
  while (s < end && *s == ' ') s++;
  if (s >= end || *s == '\n') return false;
  while (s < end && *s != ' ' && *s != '\n') s++;
  *p = s;
  return true;
}

int kc_procstat_parse_stat(const char *text, size_t len, kc_proc_stat_fields *out) {
  const char *end = text + len, *rp = NULL;
  for (const char *s = text; s < end; s++)
    if (*s == ')') rp = s;
  if (!rp || !memchr(text, '(', (size_t)(rp - text))) return -EINVAL;
  /* After "pid (comm)": field 3 (state) is the first; utime is field 14. */
  const char *p = rp + 1;
  uint64_t v;
  int64_t rss = 0;
  kc_proc_stat_fields f = {0};
  for (int field = 3; field <= 24; field++) {
    switch (field) {
    case 14:
    case 15:
    case 22:
    case 23:
      if (!read_u64(&p, end, &v)) return -EINVAL;
      if (field == 14) f.utime_ticks = v;
      else if (field == 15) f.stime_ticks = v;
      else if (field == 22) f.starttime_ticks = v;
      else f.vsize_bytes = v;
      break;
    case 24: {
      /* rss is signed in the kernel's format (%ld). */
      while (p < end && *p == ' ') p++;
      bool neg = p < end && *p == '-';
      if (neg) p++;
      if (!read_u64(&p, end, &v) || v > (uint64_t)INT64_MAX) return -EINVAL;
      rss = neg ? -(int64_t)v : (int64_t)v;
      break;
    }
    default:
      if (!skip_field(&p, end)) return -EINVAL;
    }
  }
  f.rss_pages = rss;
  *out = f;
  return 0;
}

int kc_procstat_parse_btime(const char *text, size_t len, uint64_t *btime) {
  const char *end = text + len, *line = text;
  while (line < end) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) eol = end;
    if (eol - line > 6 && memcmp(line, "btime ", 6) == 0) {
      const char *p = line + 6;
      uint64_t v;
      if (!read_u64(&p, eol, &v) || p != eol) return -EINVAL;
      *btime = v;
      return 0;
    }
    line = eol + 1;
  }
  return -EINVAL;
}

/* Reads a small /proc file whole into buf (NUL-terminated); its length. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      return -e;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (ssize_t)n;
}

/* /proc/stat's lines can be long (the "intr" line has one number per
 * interrupt): it is scanned line by line in pieces, keeping only lines that
 * start with "btime". */
static int read_btime(uint64_t *out) {
  FILE *f = fopen("/proc/stat", "re");
  if (!f) return -errno;
  char piece[256];
  bool at_line_start = true;
  int rc = -EINVAL;
  while (fgets(piece, sizeof piece, f)) {
    size_t n = strlen(piece);
    if (at_line_start && kc_procstat_parse_btime(piece, n, out) == 0) {
      rc = 0;
      break;
    }
    at_line_start = n > 0 && piece[n - 1] == '\n';
  }
  fclose(f);
  return rc;
}

/* The start time is a constant of the process: computed once. */
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static double start_time_seconds = -1;

static void compute_start_time(void) {
  char buf[1024];
  kc_proc_stat_fields f;
  uint64_t btime;
  long tck = sysconf(_SC_CLK_TCK);
  ssize_t n = read_small("/proc/self/stat", buf, sizeof buf);
  if (n <= 0 || tck <= 0 || kc_procstat_parse_stat(buf, (size_t)n, &f) < 0 || read_btime(&btime) < 0)
    return;
  start_time_seconds = (double)btime + (double)f.starttime_ticks / (double)tck;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -errno;
  int n = 0;
  struct dirent *e;
  /* The directory's own descriptor is counted too, as client_golang's
   * collector counts the one it reads the directory through. */
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

int kc_process_stats_read(kc_process_stats *out) {
  memset(out, 0, sizeof *out);
  char buf[1024];
  kc_proc_stat_fields f;
  long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  if (tck <= 0 || page <= 0) return -EINVAL;
  ssize_t n = read_small("/proc/self/stat", buf, sizeof buf);
  if (n < 0) return (int)n;
  int rc = kc_procstat_parse_stat(buf, (size_t)n, &f);
  if (rc < 0) return rc;
  int fds = count_fds();
  if (fds < 0) return fds;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return -errno;
  pthread_once(&start_once, compute_start_time);
  if (start_time_seconds < 0) return -EINVAL;
  out->cpu_seconds = (double)(f.utime_ticks + f.stime_ticks) / (double)tck;
  out->virtual_bytes = (double)f.vsize_bytes;
  out->resident_bytes = (double)f.rss_pages * (double)page;
  out->open_fds = fds;
  out->max_fds = rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur;
  out->start_time_seconds = start_time_seconds;
  return 0;
}
