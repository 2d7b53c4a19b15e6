/* SPDX-License-Identifier: Apache-2.0 */
/* types: the registry of served resource types (built-ins plus the
 * versions of every CustomResourceDefinition) and the discovery documents
 * built from it.
 *
 * Threads: all functions need sim_mu held (the registry changes when CRDs
 * are written), except sim_types_init (startup, single thread).
 * Errors: lookups return NULL; sim_crd_apply_locked returns 0 or -EINVAL
 * with a message.
 * Ownership: struct sim_rtype lives until the process exits (a removed CRD
 * version is marked unserved, never freed, so a running request may keep
 * its pointer); its collection is shared by all versions of one resource.
 */
#ifndef APISIM_TYPES_H
#define APISIM_TYPES_H

#include <stdbool.h>

#include "json.h"
#include "store.h"

enum sim_status_reset {
  SIM_RESET_CR,      /* /status keeps everything but status from storage */
  SIM_RESET_POD,     /* restores spec, deletionTimestamp, ownerReferences */
  SIM_RESET_META,    /* restores spec and ResetObjectMetaForStatus fields */
};

struct sim_rtype {
  char *group, *version, *plural, *singular, *kind;
  char *gv;          /* "v1" or "group/v1" */
  char *short_names; /* comma separated or NULL */
  const char *categories;
  bool namespaced, has_status, is_crd, is_lease, track_generation;
  bool allow_unconditional_update, create_on_update, served;
  bool review_only; /* TokenReview and the like: POST only, nothing stored (review.h) */
  enum sim_status_reset status_reset;
  const char *const *fields; /* extra field selector fields (NULL = only metadata.*) */
  bool own_field_list;       /* unsupported field message flavour */
  char **crd_fields; size_t n_crd_fields; /* CRD selectableFields (dotted paths) */
  const char *bookmark_tail; /* what a typed bookmark carries after metadata */
  char *crd_name;
  struct sim_coll *coll;
};

void sim_types_init(void);
struct sim_rtype *sim_type_find_locked(const char *group, const char *version, const char *plural);
struct sim_rtype *sim_type_by_kind_locked(const char *api_version, const char *kind);
/* Looks up "plural" or "plural.group" (as --generate takes them). */
struct sim_rtype *sim_type_by_name_locked(const char *name);
bool sim_group_version_served_locked(const char *group, const char *version);
bool sim_group_served_locked(const char *group);
struct sim_rtype *sim_type_crd_locked(void);

/* Calls fn for every served type. */
void sim_types_each_locked(void (*fn)(struct sim_rtype *, void *), void *arg);

/* Discovery documents (JSON text appended to b). */
void sim_disc_api(struct sim_buf *b, const char *host);
void sim_disc_apis_locked(struct sim_buf *b);
void sim_disc_group_locked(struct sim_buf *b, const char *group);
void sim_disc_resources_locked(struct sim_buf *b, const char *group, const char *version);

/* Registers/updates the types a CRD object (dom) defines. Validates first:
 * -EINVAL and *msg (malloc'd) describing the problem. */
int sim_crd_validate(const jv *crd, char **field, char **msg);
void sim_crd_apply_locked(const jv *crd);
/* The CRD named name was deleted: unserve its versions, drop its objects. */
void sim_crd_remove_locked(const char *name);
/* Fills status (conditions, acceptedNames, storedVersions) of a CRD dom. */
void sim_crd_set_status(jv *crd);

#endif
