/* SPDX-License-Identifier: Apache-2.0 */
/* crashreport: says who crashed when a fatal signal (SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE, SIGABRT) ends the process, e.g. a plugin's reconcile
 * dereferencing NULL.
 *
 * Owns: the handlers of those five signals (sigaction with SA_SIGINFO,
 * SA_ONSTACK and SA_RESETHAND), an alternate signal stack per registered
 * thread (a stack overflow is reported too), and a fixed table of
 * KC_CRASH_SLOTS per-thread slots in which each worker publishes what it is
 * running: controller name, plugin path, key (three pointer stores before
 * the reconcile, one after; the strings must stay valid while published).
 *
 * The handler uses write(2) on fd 2 only (async-signal-safe: no stdio, no
 * malloc): the signal name and number, the fault address, the faulting
 * thread's controller, plugin and key, the same for every other busy worker,
 * and a backtrace (backtrace_symbols_fd; backtrace() is called once by
 * kc_crash_install so libgcc's unwinder is loaded before any crash). Then it
 * re-raises the signal with the default action, so the process dies by that
 * signal (a core dump where enabled; systemd sees signal=SEGV) and a second
 * fault anywhere cannot loop. Only the first crashing thread reports; others
 * wait for the end.
 *
 * Under AddressSanitizer (which installs its own SEGV handler and report)
 * kc_crash_install does nothing and returns -ENOTSUP; the other calls are then
 * no-ops.
 *
 * Context: kc_crash_install on the main thread before other threads start;
 * kc_crash_thread_enter/leave and kc_crash_busy/idle on the thread itself
 * (any thread). Errors: 0 or a negative errno. Without a free slot
 * (more than KC_CRASH_SLOTS threads) a thread is not reported and
 * kc_crash_thread_enter returns -ENOSPC; nothing else changes.
 */
#ifndef KC_CRASHREPORT_H
#define KC_CRASHREPORT_H

#include <stdbool.h>

#define KC_CRASH_SLOTS 1024

/* Installs the handlers and the calling thread's alternate stack. Returns
 * 0 or a negative errno (-ENOTSUP: skipped under AddressSanitizer). */
int kc_crash_install(void);
bool kc_crash_installed(void);

/* A thread that runs reconciles: claims a slot, sets up its alternate
 * stack and unblocks the five signals (worker threads start with every
 * signal blocked, and a blocked fault kills without a handler). leave
 * undoes it before the thread exits. */
int kc_crash_thread_enter(void);
void kc_crash_thread_leave(void);

/* Publishes (borrowed strings, NULL allowed) / clears what the calling
 * thread runs. */
void kc_crash_busy(const char *controller, const char *plugin, const char *key);
void kc_crash_idle(void);

#endif
