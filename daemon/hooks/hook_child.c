/* SPDX-License-Identifier: Apache-2.0 */
/* hook_child: see hook_child.h. */
#include "hooks/hook_child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/spawn.h"

#define LINE_MAX_BYTES 4096
#define READ_CHUNK 65536

struct kc_hook_child {
  pid_t pid;
  int in, out, err; /* the daemon's ends; -1 once closed */
  bool reaped;
  int status;
  char *label;
  char line[LINE_MAX_BYTES]; /* the partial stderr line */
  size_t linelen;
};

static atomic_uint unreaped;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;
static unsigned stops_running; /* stop_mu */

unsigned kc_hook_children_unreaped(void) {
  return atomic_load(&unreaped);
}

pid_t kc_hook_child_pid(const kc_hook_child *c) {
  return c->pid;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
  return 0;
}

int kc_hook_child_spawn(const char *label, const char *const *argv, const char *const *envp,
                        kc_hook_child **out, char *err, size_t errlen) {
  *out = NULL;
  kc_hook_child *c = calloc(1, sizeof *c);
  if (!c || !(c->label = strdup(label ? label : ""))) {
    free(c);
    kc_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  const int stdio[3] = {KC_SPAWN_PIPE, KC_SPAWN_PIPE, KC_SPAWN_PIPE};
  int ours[3];
  int rc = kc_spawn(argv, envp, stdio, ours, &c->pid, err, errlen);
  if (rc) {
    free(c->label);
    free(c);
    return rc;
  }
  atomic_fetch_add(&unreaped, 1);
  c->in = ours[0];
  c->out = ours[1];
  c->err = ours[2];
  if ((rc = set_nonblock(c->in)) || (rc = set_nonblock(c->out)) || (rc = set_nonblock(c->err))) {
    kc_errf(err, errlen, "cannot set up the pipes of %s: %s", argv[0], strerror(-rc));
    kc_hook_child_kill(c, NULL, NULL, NULL);
    return rc;
  }
  *out = c;
  return 0;
}

/* ---- stderr ---------------------------------------------------------------- */

static void log_line(void *ud, pid_t pid, const char *line, size_t len) {
  const kc_hook_child *c = ud;
  kc_warn("hook", "%s pid=%d: %.*s", c->label, (int)pid, (int)len, line);
}

static void emit(kc_hook_child *c, kc_hook_line_fn fn, void *ud) {
  if (fn) fn(ud, c->pid, c->line, c->linelen);
  c->linelen = 0;
}

/* Reads what stderr has now (non-blocking); at EOF flushes the last line
 * and closes it. Returns false once closed. */
static bool read_stderr(kc_hook_child *c, kc_hook_line_fn fn, void *ud) {
  if (c->err < 0) return false;
  char buf[4096];
  for (;;) {
    ssize_t n = read(c->err, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {
      if (c->linelen) emit(c, fn, ud);
      close_fd(&c->err);
      return false;
    }
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\n') {
        emit(c, fn, ud);
        continue;
      }
      if (c->linelen == sizeof c->line) emit(c, fn, ud);
      c->line[c->linelen++] = buf[i];
    }
  }
}

/* ---- exchange ----------------------------------------------------------------- */

static int remaining_ms(uint64_t deadline_ns) {
  uint64_t now = kc_clock_now_ns();
  if (now >= deadline_ns) return 0;
  uint64_t ms = (deadline_ns - now + 999999) / 1000000;
  return ms > 1000000 ? 1000000 : (int)ms;
}

/* Records c as reaped with wait status st. */
static void reaped(kc_hook_child *c, int st) {
  c->reaped = true;
  c->status = st;
  atomic_fetch_sub(&unreaped, 1);
}

/* Reaps c if it exited. Returns true when reaped. */
static bool try_reap(kc_hook_child *c) {
  if (c->reaped) return true;
  /* Its group is killed first, while the unreaped zombie still holds the
   * pid: what it left running (a script's background processes) goes too,
   * and the group id cannot have been reused. */
  int exited = kc_spawn_exited(c->pid);
  if (exited == 0 || (exited < 0 && exited != -ECHILD)) return false; /* still running */
  int st = 0;
  if (exited > 0) {
    kc_spawn_kill_group(c->pid, SIGKILL);
    kc_spawn_reap(c->pid, &st);
  }
  reaped(c, st); /* -ECHILD: not ours to wait for any more, status 0 */
  return true;
}

int kc_hook_child_exchange(kc_hook_child *c, const char *req, size_t len, enum kc_hook_read mode,
                           uint64_t deadline_ns, size_t max, kc_buf *out, int *status,
                           kc_hook_line_fn fn, void *ud) {
  kc_buf_reset(out);
  size_t off = 0;
  bool out_eof = c->out < 0;
  if (mode == KC_HOOK_READ_LINE && (c->in < 0 || out_eof)) return -EPIPE;
  if (c->in < 0) off = len;
  for (;;) {
    if (mode == KC_HOOK_READ_EOF && off == len) close_fd(&c->in);
    if (out_eof) break;
    struct pollfd pf[3];
    int n = 0, iin = -1, iout, ierr = -1;
    if (off < len && c->in >= 0) {
      pf[n] = (struct pollfd){.fd = c->in, .events = POLLOUT};
      iin = n++;
    }
    pf[n] = (struct pollfd){.fd = c->out, .events = POLLIN};
    iout = n++;
    if (c->err >= 0) {
      pf[n] = (struct pollfd){.fd = c->err, .events = POLLIN};
      ierr = n++;
    }
    int ms = remaining_ms(deadline_ns);
    if (ms == 0) return -ETIMEDOUT;
    int r = poll(pf, (nfds_t)n, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -EIO;
    if (r == 0) return -ETIMEDOUT;
    if (ierr >= 0 && pf[ierr].revents) read_stderr(c, fn, ud);
    if (iin >= 0 && pf[iin].revents) {
      ssize_t w = write(c->in, req + off, len - off);
      if (w > 0) {
        off += (size_t)w;
      } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        /* EPIPE (SIGPIPE is ignored in the daemon) or POLLERR: the child
         * stopped reading. A per-call hook may ignore its stdin. */
        if (mode == KC_HOOK_READ_LINE) return -EPIPE;
        close_fd(&c->in);
        off = len;
      }
    }
    if (pf[iout].revents) {
      if (kc_buf_reserve(out, READ_CHUNK) != 0) return out->err == -ENOMEM ? -ENOMEM : -E2BIG;
      ssize_t got = read(c->out, out->p + out->len, READ_CHUNK);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (got <= 0) {
        out_eof = true;
        if (mode == KC_HOOK_READ_LINE) {
          read_stderr(c, fn, ud);
          return -EPIPE;
        }
        continue;
      }
      size_t before = out->len;
      out->len += (size_t)got;
      out->p[out->len] = '\0';
      if (mode == KC_HOOK_READ_LINE) {
        char *nl = memchr(out->p + before, '\n', (size_t)got);
        if (nl) {
          size_t line = (size_t)(nl - out->p);
          bool extra = line + 1 < out->len;
          out->len = line;
          out->p[line] = '\0';
          if (line > max) return -E2BIG;
          read_stderr(c, fn, ud);
          /* Bytes after the line, or an answer before the whole request
           * was read: the stream is out of step either way. */
          return extra || off < len ? -EPROTO : 0;
        }
      }
      if (out->len > max) return -E2BIG;
    }
  }
  /* EOF mode: stdout is closed; wait for the exit, logging stderr. */
  close_fd(&c->out);
  while (!try_reap(c)) {
    int ms = remaining_ms(deadline_ns);
    if (ms == 0) return -ETIMEDOUT;
    if (c->err >= 0) {
      struct pollfd pf = {.fd = c->err, .events = POLLIN};
      if (poll(&pf, 1, ms < 10 ? ms : 10) > 0) read_stderr(c, fn, ud);
    } else {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
  }
  read_stderr(c, fn, ud);
  if (status) *status = c->status;
  return 0;
}

/* ---- kill and stop ---------------------------------------------------------- */

static void finish(kc_hook_child *c, kc_hook_line_fn fn, void *ud) {
  read_stderr(c, fn, ud); /* what is left; the group is gone, so EOF comes */
  close_fd(&c->in);
  close_fd(&c->out);
  close_fd(&c->err);
  free(c->label);
  free(c);
}

static void reap_blocking(kc_hook_child *c) {
  if (c->reaped) return;
  int st;
  kc_spawn_reap(c->pid, &st); /* status 0 when it is not ours any more */
  reaped(c, st);
}

void kc_hook_child_kill(kc_hook_child *c, int *status, kc_hook_line_fn fn, void *ud) {
  if (!c) return;
  /* Never signal a reaped pid: it may belong to someone else by now. */
  if (!try_reap(c)) kc_spawn_kill_group(c->pid, SIGKILL);
  reap_blocking(c);
  if (status) *status = c->status;
  finish(c, fn, ud);
}

struct stop_job {
  kc_hook_child **v;
  size_t n;
  uint64_t grace_ms;
};

static void stop_now(struct stop_job *j) {
  for (size_t i = 0; i < j->n; i++) {
    kc_hook_child *c = j->v[i];
    close_fd(&c->in);
    if (!try_reap(c)) kc_spawn_kill_group(c->pid, SIGTERM);
  }
  uint64_t deadline = kc_clock_now_ns() + j->grace_ms * 1000000ull;
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < j->n; i++) {
      read_stderr(j->v[i], log_line, j->v[i]);
      all &= try_reap(j->v[i]);
    }
    if (all || kc_clock_now_ns() >= deadline) break;
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  for (size_t i = 0; i < j->n; i++) {
    kc_hook_child *c = j->v[i];
    if (!c->reaped)
      kc_warn("hook", "%s pid=%d: still running %llu ms after SIGTERM; killing it", c->label,
              (int)c->pid, (unsigned long long)j->grace_ms);
    kc_hook_child_kill(c, NULL, log_line, c);
  }
  free(j->v);
  free(j);
}

static void *stop_thread(void *arg) {
  stop_now(arg);
  pthread_mutex_lock(&stop_mu);
  stops_running--;
  pthread_cond_broadcast(&stop_cv);
  pthread_mutex_unlock(&stop_mu);
  return NULL;
}

void kc_hook_child_stop(kc_hook_child *const *v, size_t n, uint64_t grace_ms) {
  if (!n) return;
  struct stop_job *j = malloc(sizeof *j);
  kc_hook_child **copy = malloc(n * sizeof *copy);
  if (!j || !copy) {
    free(j);
    free(copy);
    for (size_t i = 0; i < n; i++)
      kc_hook_child_kill(v[i], NULL, log_line, v[i]);
    return;
  }
  memcpy(copy, v, n * sizeof *copy);
  *j = (struct stop_job){copy, n, grace_ms};
  pthread_mutex_lock(&stop_mu);
  stops_running++;
  pthread_mutex_unlock(&stop_mu);
  pthread_attr_t attr;
  pthread_t t;
  bool started = pthread_attr_init(&attr) == 0;
  if (started) {
    started = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
              pthread_create(&t, &attr, stop_thread, j) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!started) stop_thread(j);
}

int kc_hook_child_drain(uint64_t timeout_ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)(timeout_ms / 1000);
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  int rc = 0;
  pthread_mutex_lock(&stop_mu);
  while (stops_running && rc == 0)
    if (pthread_cond_timedwait(&stop_cv, &stop_mu, &until) == ETIMEDOUT) rc = -ETIMEDOUT;
  if (!stops_running) rc = 0;
  pthread_mutex_unlock(&stop_mu);
  return rc;
}
