/* SPDX-License-Identifier: Apache-2.0 */
/* crashreport: see crashreport.h. */
#include "base/crashreport.h"

#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define KC_CRASH_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KC_CRASH_UNDER_ASAN 1
#endif
#endif

struct slot {
  atomic_bool used;
  _Atomic long tid;
  _Atomic(const char *) controller, plugin, key; /* key NULL: idle */
};

static struct slot slots[KC_CRASH_SLOTS];
static atomic_bool installed;
static atomic_bool reporting;
static _Thread_local struct slot *my_slot;
static _Thread_local void *my_altstack;

static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define NFATAL (sizeof fatal / sizeof fatal[0])

/* --- async-signal-safe output ------------------------------------------------ */

static void put(const char *s) {
  if (!s) s = "-";
  size_t n = 0;
  while (s[n]) n++;
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void put_u(unsigned long long v) {
  char b[24];
  size_t i = sizeof b;
  b[--i] = '\0';
  do {
    b[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  put(b + i);
}

static void put_hex(uintptr_t v) {
  char b[2 + 2 * sizeof v + 1];
  size_t i = sizeof b;
  b[--i] = '\0';
  do {
    b[--i] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  b[--i] = 'x';
  b[--i] = '0';
  put(b + i);
}

static const char *sig_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV (segmentation fault)";
  case SIGBUS: return "SIGBUS (bus error)";
  case SIGILL: return "SIGILL (illegal instruction)";
  case SIGFPE: return "SIGFPE (arithmetic exception)";
  case SIGABRT: return "SIGABRT (abort)";
  }
  return "fatal signal";
}

static void put_work(const struct slot *s) {
  put("controller=");
  put(atomic_load_explicit(&s->controller, memory_order_relaxed));
  put(" plugin=");
  put(atomic_load_explicit(&s->plugin, memory_order_relaxed));
  put(" key=");
  put(atomic_load_explicit(&s->key, memory_order_relaxed));
  put(" thread=");
  put_u((unsigned long long)atomic_load_explicit(&s->tid, memory_order_relaxed));
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  int saved = errno;
  if (atomic_exchange(&reporting, true)) { /* another thread reports: wait for the end */
    for (;;) pause();
  }
  put("kctrld: fatal signal ");
  put(sig_name(sig));
  put(" (");
  put_u((unsigned)sig);
  put(")");
  if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) && si && si->si_code > 0) {
    put(" at address ");
    put_hex((uintptr_t)si->si_addr);
  }
  struct slot *me = my_slot;
  if (me && atomic_load_explicit(&me->key, memory_order_relaxed)) {
    put(" while reconciling ");
    put_work(me);
  } else {
    put(" outside any reconcile (thread ");
    put_u((unsigned long long)syscall(SYS_gettid));
    put(")");
  }
  put("\n");
  for (size_t i = 0; i < KC_CRASH_SLOTS; i++) {
    struct slot *s = &slots[i];
    if (s == me || !atomic_load_explicit(&s->used, memory_order_relaxed) ||
        !atomic_load_explicit(&s->key, memory_order_relaxed))
      continue;
    put("kctrld: also reconciling at the time: ");
    put_work(s);
    put("\n");
  }
  put("kctrld: backtrace:\n");
  void *frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  put("kctrld: re-raising the signal with its default action\n");
  errno = saved;
  /* SA_RESETHAND put the default action back; the signal is blocked until
   * the handler returns, then it ends the process (a fault also re-faults). */
  raise(sig);
}

/* --- setup ------------------------------------------------------------------- */

static size_t altstack_size(void) {
  long n = sysconf(_SC_SIGSTKSZ);
  size_t sz = n > 0 ? (size_t)n : 0;
  return sz < 65536 ? 65536 : sz; /* backtrace() needs room */
}

static int altstack_on(void) {
  if (my_altstack) return 0;
  size_t sz = altstack_size();
  void *mem = malloc(sz);
  if (!mem) return -ENOMEM;
  stack_t st = {.ss_sp = mem, .ss_size = sz, .ss_flags = 0};
  if (sigaltstack(&st, NULL) < 0) {
    int e = -errno;
    free(mem);
    return e;
  }
  my_altstack = mem;
  return 0;
}

static void altstack_off(void) {
  if (!my_altstack) return;
  stack_t st = {.ss_flags = SS_DISABLE};
  if (sigaltstack(&st, NULL) == 0) { /* still in use (on it): keep the memory */
    free(my_altstack);
    my_altstack = NULL;
  }
}

bool kc_crash_installed(void) { return atomic_load(&installed); }

int kc_crash_install(void) {
#ifdef KC_CRASH_UNDER_ASAN
  (void)on_fatal;
  return -ENOTSUP;
#else
  if (atomic_load(&installed)) return 0;
  void *warm[4];
  backtrace(warm, 4); /* loads libgcc_s now, not in the handler */
  int rc = altstack_on();
  if (rc < 0) return rc;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < NFATAL; i++)
    if (sigaction(fatal[i], &sa, NULL) < 0) return -errno;
  atomic_store(&installed, true);
  return 0;
#endif
}

int kc_crash_thread_enter(void) {
  if (!atomic_load(&installed) || my_slot) return 0;
  sigset_t set;
  sigemptyset(&set);
  for (size_t i = 0; i < NFATAL; i++) sigaddset(&set, fatal[i]);
  int rc = pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  if (rc) return -rc;
  if ((rc = altstack_on()) < 0) return rc;
  for (size_t i = 0; i < KC_CRASH_SLOTS; i++) {
    bool no = false;
    if (atomic_compare_exchange_strong(&slots[i].used, &no, true)) {
      atomic_store(&slots[i].tid, (long)syscall(SYS_gettid));
      atomic_store(&slots[i].key, NULL);
      my_slot = &slots[i];
      return 0;
    }
  }
  return -ENOSPC;
}

void kc_crash_thread_leave(void) {
  if (my_slot) {
    atomic_store(&my_slot->key, NULL);
    atomic_store(&my_slot->used, false);
    my_slot = NULL;
  }
  altstack_off();
}

void kc_crash_busy(const char *controller, const char *plugin, const char *key) {
  struct slot *s = my_slot;
  if (!s) return;
  atomic_store_explicit(&s->controller, controller, memory_order_relaxed);
  atomic_store_explicit(&s->plugin, plugin, memory_order_relaxed);
  atomic_store_explicit(&s->key, key, memory_order_release);
}

void kc_crash_idle(void) {
  struct slot *s = my_slot;
  if (s) atomic_store_explicit(&s->key, NULL, memory_order_release);
}
