/* SPDX-License-Identifier: Apache-2.0 */
/* api_int: definitions shared by the read side (api.c) and the write side
 * (write.c) of the REST handlers. Same rules as api.h. */
#ifndef APISIM_API_INT_H
#define APISIM_API_INT_H

#include "api.h"
#include "store.h"
#include "watch.h"

struct route {
  struct sim_rtype *rt;
  const char *ns;   /* NULL when not in the path */
  const char *name; /* NULL for collections */
  const char *sub;  /* "status" or NULL */
};

/* Resource-level details for Status objects (details.kind = plural). */
void sim_details_for(struct sim_details *d, const struct sim_rtype *rt, const char *name);
/* "pods" or "leases.coordination.k8s.io" */
void sim_qualified(char *out, size_t n, const struct sim_rtype *rt);
bool sim_query_bool(struct sim_req *req, const char *key);
/* Accept negotiation: 0 ok (json), 1 metadata-only, -1 not acceptable. */
int sim_accept(struct sim_req *req, bool list);
void sim_respond_obj(struct sim_resp *resp, int code, const struct sim_rtype *rt,
                     const struct sim_obj *o, bool meta_only);

void sim_handle_create(struct sim_req *req, struct route *r, struct sim_resp *resp);
void sim_handle_update(struct sim_req *req, struct route *r, struct sim_resp *resp);
void sim_handle_patch(struct sim_req *req, struct route *r, struct sim_resp *resp);
void sim_handle_delete(struct sim_req *req, struct route *r, struct sim_resp *resp);
void sim_handle_deletecollection(struct sim_req *req, struct route *r, struct sim_resp *resp);

/* YAML (JSON is a subset) to DOM; every document of a stream. */
int sim_yaml_parse_all(const char *buf, size_t len, jv ***docs, size_t *n, char **err);

#endif
