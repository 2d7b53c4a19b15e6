/* SPDX-License-Identifier: Apache-2.0 */
/* shardsel: the `shardSelector` list/watch parameter of KEP-5866 (sharded
 * list and watch, Kubernetes 1.36 alpha, gate ShardedListAndWatch), written
 * for kube-apisim independently of daemon/ (its own parser and hash).
 *
 * Grammar: a CEL expression of shardRange() calls joined with ||:
 *   shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
 *     || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')
 * The field is object.metadata.uid or object.metadata.namespace (the same in
 * every range); bounds are string literals '0x' + 16 lowercase hex digits,
 * or '0x10000000000000000' (2^64); start < end. An object matches when the
 * 64-bit FNV-1a of the field's string value h has start <= h < end for one
 * range. The expression is parsed as CEL would (operators, literals, calls,
 * parentheses) and the tree then checked in the API server's order, with its
 * messages (docs/apisim.md "Sharded list and watch" lists them; CEL's own
 * syntax-error texts are approximated).
 *
 * Threads: any; a parsed selector is read-only.
 * Errors: sim_shardsel_parse returns 0, or -EINVAL with *err (malloc'd)
 * holding the message (without the "invalid shard selector: " prefix the
 * API handler adds).
 * Ownership: a selector owns its strings; sim_shardsel_free.
 */
#ifndef APISIM_SHARDSEL_H
#define APISIM_SHARDSEL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "json.h"

struct sim_shard_range {
  uint64_t start, end;
  bool end_max; /* end is 2^64 */
};

struct sim_shardsel {
  char *field;  /* "metadata.uid" or "metadata.namespace" */
  char *text;   /* the selector as given (echoed in metadata.shardInfo) */
  struct sim_shard_range *r;
  size_t n;
};

uint64_t sim_fnv1a64(const char *s, size_t n);
int sim_shardsel_parse(const char *s, struct sim_shardsel *out, char **err);
/* The object's field value hashed against the ranges (a missing field is ""). */
bool sim_shardsel_match(const struct sim_shardsel *sel, const jv *dom);
void sim_shardsel_free(struct sim_shardsel *sel);
#endif
