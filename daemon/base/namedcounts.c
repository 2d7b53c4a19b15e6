/* SPDX-License-Identifier: Apache-2.0 */
/* namedcounts: see namedcounts.h. */
#include "base/namedcounts.h"

#include <stdlib.h>
#include <string.h>

void kc_named_counts_add(kc_named_counts *c, const char *name, unsigned column) {
  if (column >= KC_NAMED_COUNTS_COLUMNS) return;
  if (!name) name = "";
  pthread_mutex_lock(&c->mu);
  size_t i = 0;
  while (i < c->nrows && strcmp(c->rows[i].name, name) != 0) i++;
  if (i == c->nrows) {
    char *copy = strdup(name);
    if (copy && c->nrows == c->caprows) {
      size_t nc = c->caprows ? 2 * c->caprows : 8;
      struct kc_named_count_row *nr = realloc(c->rows, nc * sizeof *nr);
      if (nr) c->rows = nr, c->caprows = nc;
    }
    if (!copy || c->nrows == c->caprows) {
      free(copy);
      pthread_mutex_unlock(&c->mu);
      return;
    }
    c->rows[c->nrows++] = (struct kc_named_count_row){.name = copy};
  }
  c->rows[i].n[column]++;
  pthread_mutex_unlock(&c->mu);
}

uint64_t kc_named_counts_get(kc_named_counts *c, const char *name, unsigned column) {
  uint64_t n = 0;
  if (column >= KC_NAMED_COUNTS_COLUMNS) return 0;
  if (!name) name = "";
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < c->nrows; i++)
    if (strcmp(c->rows[i].name, name) == 0) n = c->rows[i].n[column];
  pthread_mutex_unlock(&c->mu);
  return n;
}

void kc_named_counts_each(kc_named_counts *c,
                          void (*fn)(const char *name, unsigned column, uint64_t n, void *ud),
                          void *ud) {
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < c->nrows; i++)
    for (unsigned v = 0; v < KC_NAMED_COUNTS_COLUMNS; v++)
      if (c->rows[i].n[v]) fn(c->rows[i].name, v, c->rows[i].n[v], ud);
  pthread_mutex_unlock(&c->mu);
}
