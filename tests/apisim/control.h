/* SPDX-License-Identifier: Apache-2.0 */
/* control: the /_apisim/ test-control endpoint (documented in
 * docs/apisim.md): history compaction, dropping watches, injected faults
 * and latency, request counters and log, runtime configuration, load
 * generation and the modification stream.
 *
 * Threads: any connection thread; state guarded by an internal mutex
 * (never held while sim_mu is taken, so no lock-order issue). The
 * modification stream runs on its own thread.
 * Errors: handlers answer 400 with a Status on bad input.
 * Ownership: sim_fault strings are owned by the fault table; copies
 * handed out by sim_control_take_fault borrow nothing.
 */
#ifndef APISIM_CONTROL_H
#define APISIM_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "server.h"

enum sim_fault_action {
  SIM_FAULT_STATUS,   /* answer with code (429/500/503/...) */
  SIM_FAULT_RESET,    /* close the connection without a response */
  SIM_FAULT_STALL,    /* accept and never answer (watch: never send) */
  SIM_FAULT_WATCH_RESET, /* watch: drop the connection after N events */
  SIM_FAULT_CHUNKS,   /* watch: split the stream into tiny chunks */
};

struct sim_fault_hit {
  enum sim_fault_action action;
  int code;
  int retry_after; /* seconds, < 0: no header */
  int after_events;
  size_t chunk;
  char message[256];
  bool plain;      /* body as plain text (APF style) */
};

/* Consumes one matching fault, if any. watch: whether the request is a
 * watch (faults may target only watches or only non-watches). */
bool sim_control_take_fault(const char *method, const char *url, bool watch,
                            struct sim_fault_hit *out);
unsigned sim_control_latency_ms(const char *method, const char *url);
/* The delay of each event on a watch of url: the largest ms of the latency
 * rules with "watchEvents" that match it (0: events go out at once). */
unsigned sim_control_event_latency_ms(const char *method, const char *url);
/* Records a finished request (verb may be NULL for non-API paths). */
void sim_control_record(const char *method, const char *url, const char *query, const char *verb,
                        int code);
void sim_control_handle(struct sim_req *req, struct sim_resp *resp);
void sim_control_stop(void);

#endif
