/* SPDX-License-Identifier: Apache-2.0 */
/* notify: see notify.h. */
#include "ops/notify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "base/log.h"

struct kc_notify {
  uv_timer_t watchdog;
  uint64_t period_us;
  bool ready, stopping, warned;
  char status[512];
};

/* sd_notify returns > 0 when sent, 0 without NOTIFY_SOCKET, < 0 on error. */
static int send_msg(kc_notify *n, const char *msg) {
  int rc = sd_notify(0, msg); /* 0: keep NOTIFY_SOCKET in the environment */
  if (rc < 0 && !n->warned) {
    n->warned = true;
    kc_warn("notify", "sd_notify failed: %s (further failures not logged)", strerror(-rc));
  }
  return rc < 0 ? rc : 0;
}

/* Copies status into buf as one line. */
static void one_line(char *buf, size_t cap, const char *status) {
  snprintf(buf, cap, "%s", status);
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
}

static int send_with_status(kc_notify *n, const char *head, const char *status) {
  char msg[640];
  if (status) {
    one_line(n->status, sizeof n->status, status);
    snprintf(msg, sizeof msg, "%s%sSTATUS=%s", head, head[0] ? "\n" : "", n->status);
  } else {
    snprintf(msg, sizeof msg, "%s", head);
  }
  return send_msg(n, msg);
}

static void on_watchdog(uv_timer_t *t) {
  kc_notify *n = t->data;
  send_msg(n, "WATCHDOG=1");
}

int kc_notify_new(uv_loop_t *loop, kc_notify **out) {
  kc_notify *n = calloc(1, sizeof *n);
  if (!n) return -ENOMEM;
  int rc = uv_timer_init(loop, &n->watchdog);
  if (rc < 0) {
    free(n);
    return rc;
  }
  n->watchdog.data = n;
  uint64_t usec = 0;
  rc = sd_watchdog_enabled(0, &usec);
  if (rc < 0) kc_warn("notify", "ignoring invalid WATCHDOG_USEC/WATCHDOG_PID: %s", strerror(-rc));
  if (rc > 0 && usec > 0) {
    n->period_us = usec / 2;
    uint64_t ms = n->period_us / 1000;
    if (ms == 0) ms = 1;
    uv_timer_start(&n->watchdog, on_watchdog, 0, ms);
    kc_info("notify", "systemd watchdog on: ping every %" PRIu64 " ms (WATCHDOG_USEC=%" PRIu64 ")",
            ms, usec);
  }
  *out = n;
  return 0;
}

int kc_notify_ready(kc_notify *n, const char *status) {
  if (n->ready) return kc_notify_status(n, status);
  n->ready = true;
  return send_with_status(n, "READY=1", status);
}

bool kc_notify_is_ready(const kc_notify *n) { return n->ready; }

int kc_notify_status(kc_notify *n, const char *status) {
  if (!status) return 0;
  char line[sizeof n->status];
  one_line(line, sizeof line, status);
  if (strcmp(line, n->status) == 0) return 0;
  return send_with_status(n, "", status);
}

int kc_notify_reloading(kc_notify *n, const char *status) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char head[96];
  snprintf(head, sizeof head, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
           (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
  return send_with_status(n, head, status);
}

int kc_notify_reloaded(kc_notify *n, const char *status) {
  n->ready = true;
  return send_with_status(n, "READY=1", status);
}

int kc_notify_stopping(kc_notify *n, const char *status) {
  if (n->stopping) return 0;
  n->stopping = true;
  /* Pings go on while in-flight work drains: the loop is still alive, and
   * TimeoutStopSec= bounds the drain. */
  return send_with_status(n, "STOPPING=1", status);
}

uint64_t kc_notify_watchdog_period_us(const kc_notify *n) { return n->period_us; }

static void on_closed(uv_handle_t *h) { free(h->data); }

void kc_notify_close(kc_notify *n) {
  if (!n) return;
  uv_timer_stop(&n->watchdog);
  uv_close((uv_handle_t *)&n->watchdog, on_closed);
}
