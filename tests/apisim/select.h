/* SPDX-License-Identifier: Apache-2.0 */
/* select: label and field selector parsing and matching, written from the
 * grammar in docs/api-contract.md section 5 (independent of daemon/).
 *
 * Threads: any; parsed selectors are read-only after parsing.
 * Errors: parse functions return 0, or -EINVAL with *err (malloc'd) holding
 * the message kube-apiserver would put in its 400 Status.
 * Ownership: selectors own their strings; free with the _free functions.
 */
#ifndef APISIM_SELECT_H
#define APISIM_SELECT_H

#include <stdbool.h>

#include "json.h"

enum sim_lop { L_EXISTS, L_NOTEXISTS, L_EQ, L_NEQ, L_IN, L_NOTIN, L_GT, L_LT };

struct sim_lreq {
  char *key;
  enum sim_lop op;
  char **vals;
  size_t nvals;
  long long num;
};

struct sim_lsel {
  struct sim_lreq *r;
  size_t n;
};

int sim_lsel_parse(const char *s, struct sim_lsel *out, char **err);
bool sim_lsel_match(const struct sim_lsel *sel, const jv *labels);
void sim_lsel_free(struct sim_lsel *sel);

struct sim_freq {
  char *field, *value;
  bool neq;
};

struct sim_fsel {
  struct sim_freq *r;
  size_t n;
};

int sim_fsel_parse(const char *s, struct sim_fsel *out, char **err);
void sim_fsel_free(struct sim_fsel *sel);
/* Value of a selectable field of an object (NULL-safe dom), as the field
 * label set renders it (bools as "true"/"false"). Returns malloc'd text. */
char *sim_field_value(const jv *dom, const char *field);

#endif
