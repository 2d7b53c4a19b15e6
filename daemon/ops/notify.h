/* SPDX-License-Identifier: Apache-2.0 */
/* notify: the systemd service manager protocol (sd_notify(3)) on libsystemd.
 *
 * Owns the watchdog timer and the last STATUS= text. Messages:
 *  - READY=1 once (kc_notify_ready), when the daemon serves (ops.h
 *    kc_ops_started: informers started, caches not necessarily synced) and
 *    the process leads or stands by; again after every reload
 *    (kc_notify_reloaded);
 *  - STATUS=<one line> only when the text changes (newlines become spaces);
 *  - WATCHDOG=1 from a loop timer at half of WATCHDOG_USEC
 *    (sd_watchdog_enabled, which also checks WATCHDOG_PID), so a wedged loop
 *    stops the pings and systemd restarts the service;
 *  - RELOADING=1 and MONOTONIC_USEC=<CLOCK_MONOTONIC us> in ONE datagram
 *    (what Type=notify-reload requires), READY=1 when the reload is applied
 *    or rejected;
 *  - STOPPING=1 first thing on shutdown.
 * NOTIFY_SOCKET is never unset (later messages need it). Without
 * NOTIFY_SOCKET every call is a cheap no-op.
 *
 * Context: loop thread only. Errors: 0 or a negative errno; a failed send is
 * logged once per kind and never fatal (the service manager may be gone).
 * Ownership: strings are borrowed for the call.
 */
#ifndef KC_NOTIFY_H
#define KC_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct kc_notify kc_notify;

/* Reads the environment and starts the watchdog timer when systemd asked
 * for one. *out is freed by kc_notify_close. */
int kc_notify_new(uv_loop_t *loop, kc_notify **out);

/* Sends READY=1 (with STATUS=status when not NULL) the first time only;
 * later calls just update the status. */
int kc_notify_ready(kc_notify *n, const char *status);
bool kc_notify_is_ready(const kc_notify *n);

/* Sends STATUS=status when it differs from the last one sent. */
int kc_notify_status(kc_notify *n, const char *status);

/* Sends "RELOADING=1\nMONOTONIC_USEC=<now>" in one datagram (+ STATUS). */
int kc_notify_reloading(kc_notify *n, const char *status);
/* Sends READY=1 with STATUS=status: the reload was applied or rejected. */
int kc_notify_reloaded(kc_notify *n, const char *status);

/* Sends STOPPING=1 (+ STATUS) once; watchdog pings go on until close. */
int kc_notify_stopping(kc_notify *n, const char *status);

/* Stops the timer; memory is freed in the close callback. NULL is a no-op. */
void kc_notify_close(kc_notify *n);

/* --- Test seam: for tests only, not called by the daemon --- */
/* The watchdog ping period in us (half of WATCHDOG_USEC), 0 when off. */
uint64_t kc_notify_watchdog_period_us(const kc_notify *n);

#endif
