/* SPDX-License-Identifier: Apache-2.0 */
/* api: the Kubernetes REST semantics on top of the store: routing of
 * /api and /apis paths, discovery, get/list/watch (resourceVersion rules,
 * pagination with continue tokens, selectors), create/update/patch/delete
 * (optimistic concurrency, status subresource, generation, finalizers,
 * CRD registration) with the Status errors kube-apiserver returns.
 *
 * Threads: any MHD connection thread; takes sim_mu internally.
 * Errors: handlers always produce a response (a Status on failure);
 * sim_api_seed returns 0 or a negative errno with *err set (malloc'd).
 * Ownership: sim_api_seed takes ownership of dom.
 */
#ifndef APISIM_API_H
#define APISIM_API_H

#include <stdbool.h>

#include "json.h"
#include "server.h"
#include "types.h"

struct sim_config {
  bool watch_410_http;      /* answer too-old watches with HTTP 410 */
  bool continue_expiry;     /* expired continue tokens get 410 */
  bool watch_list;          /* sendInitialEvents supported (WatchList gate) */
  bool rv0_ignores_limit;   /* RV=0 lists are served whole, like the watch cache */
  size_t watch_chunk_split; /* split watch output into chunks of this size */
  unsigned min_request_timeout_s; /* default watch length: [x, 2x) */
  bool sharded_list_watch;  /* ShardedListAndWatch gate: shardSelector honoured */
};
extern struct sim_config sim_cfg;

void sim_api_handle(struct sim_req *req, struct sim_resp *resp);

/* Stores an object as if restored from etcd (seeds, --generate): server
 * fields are filled, status is kept, a missing namespace is created.
 * Returns 0, -EEXIST, or -EINVAL. */
int sim_api_seed(jv *dom, char **err);
/* The same with sim_mu held. */
int sim_api_seed_locked(jv *dom, char **err);

/* One modification for the load generator: rewrites an annotation (and,
 * with spec=true, a spec field, bumping generation) of the object after
 * *cursor (round robin; *cursor is updated, malloc'd). silent=true stores
 * the change (new resourceVersion) without a watch event or history entry:
 * a lost event, for the tests of consistency checks. Returns 0 or -ENOENT
 * when the collection is empty. */
int sim_api_modify(struct sim_rtype *rt, char **cursor, bool spec, bool silent);

#endif
