/* SPDX-License-Identifier: Apache-2.0 */
/* config_int: what the files of the config component share while one file
 * is being loaded: the load context (owned allocations, collected error
 * lines), the table-driven key checks and the section parsers one file calls
 * in another. Included only by daemon/config/config*.c; config.h is the
 * interface for everything else.
 *
 * Threads: a struct ctx belongs to the one load it serves; every function
 * here runs on the thread that called kc_config_load_file/_buffer.
 *
 * Errors: the parsers report through cfg_fail (one line per problem) and set
 * ctx.oom when out of memory; none of them stops at the first error. */
#ifndef KC_CONFIG_INT_H
#define KC_CONFIG_INT_H

#include "config/config.h"
#include "kube/kname.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct config_priv;

/* One load in progress. */
struct ctx {
  struct config_priv *priv;
  kc_config *cfg;
  char *err;
  size_t errlen;
  size_t used;    /* bytes of err in use */
  int nerrors;
  bool oom;
  char tmp[640];  /* one message from a yamltree getter */
};

/* ---- owned allocations (freed with the config) ---------------------------- */

/* Keeps p with the config; NULL p or no room marks the load out of memory
 * (p is freed) and returns NULL. */
void *cfg_keep(struct ctx *c, void *p);
void *cfg_xcalloc(struct ctx *c, size_t n, size_t size);
char *cfg_xstrdup(struct ctx *c, const char *s);

/* ---- errors ---------------------------------------------------------------- */

/* Adds the line `file:line:col: message` (at NULL: `file: message`). */
__attribute__((format(printf, 3, 4))) void cfg_fail(struct ctx *c, const kc_yaml_node *at,
                                                    const char *fmt, ...);
/* Folds a yamltree getter's result into the context: -EINVAL becomes an
 * error line, -ENOMEM marks the load as failed. Returns true on success. */
bool cfg_took(struct ctx *c, int rc);
/* Duration in a compact Go-like form for messages: 1h30m, 15s, 2s500ms. */
const char *cfg_fmt_ms(int64_t ms, char *buf, size_t cap);

/* ---- small validators ------------------------------------------------------- */

static inline bool is_lower_alnum(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}
static inline bool is_alnum(char ch) { return is_lower_alnum(ch) || (ch >= 'A' && ch <= 'Z'); }

/* Name rules: kname.h. */
static inline bool dns_label(const char *s) { return kc_name_is_dns_label(s, strlen(s)); }
static inline bool dns_subdomain(const char *s) { return kc_name_is_dns_subdomain(s, strlen(s)); }

/* "v1" or "group/version"; group is a DNS subdomain, version [a-z0-9]+. */
bool cfg_api_version_ok(const char *s);
/* An upper-case letter, then letters and digits; at most 63. */
bool cfg_kind_ok(const char *s);
/* 1..max of [A-Za-z0-9_.-]. */
bool cfg_simple_name(const char *s, size_t max);
/* qsort comparator for an array of strings. */
int cfg_str_cmp_ptr(const void *a, const void *b);

/* ---- table-driven sections -------------------------------------------------- */

enum ftype {
  F_STRING = 1, /* const char * */
  F_PATH,       /* const char *, relative resolved against cfg->dir */
  F_BOOL,       /* bool */
  F_INT,        /* int64_t within [min, max] */
  F_DOUBLE,     /* double within [dmin, dmax] */
  F_DURATION,   /* int64_t ms within [min, max] */
  F_CUSTOM,     /* handled by the caller; only declares the key */
};

struct field {
  const char *key;
  enum ftype type;
  size_t off;
  bool required;
  int64_t min, max;
  double dmin, dmax;
};

#define FIELD(k, t, s, m) {.key = k, .type = t, .off = offsetof(s, m)}
#define FIELD_RANGE(k, t, s, m, lo, hi) {.key = k, .type = t, .off = offsetof(s, m), .min = lo, .max = hi}
#define REQUIRED(k, t, s, m) {.key = k, .type = t, .off = offsetof(s, m), .required = true}
#define CUSTOM(k) {.key = k, .type = F_CUSTOM}

/* p as is when absolute, else joined to the config file's directory. */
const char *cfg_resolve_path(struct ctx *c, const char *p);
/* Checks keys, required keys and types of one mapping and stores every
 * non-custom value at base + off. Returns false when `map` is not a mapping
 * (the caller then skips the section). */
bool cfg_apply_table(struct ctx *c, const kc_yaml_node *map, const char *what,
                     const struct field *t, size_t n, void *base);
/* Reports every key of map that is not in allowed[0..nallowed), each at
 * its own position (not only the first). */
void cfg_check_keys(struct ctx *c, const kc_yaml_node *map, const char *const *allowed,
                    size_t nallowed, const char *what);
/* Position to blame for a key: its value if present, else the section. */
const kc_yaml_node *cfg_blame(const kc_yaml_node *map, const char *key);
/* A YAML string list, kept with the config. Returns false when it is not
 * one (reported) or out of memory. */
bool cfg_string_list(struct ctx *c, const kc_yaml_node *node, const char *what,
                     const char ***v, size_t *n);

/* ---- informers (config_informers.c) ----------------------------------------- */

/* The informer specs being collected; moved into the config at the end. */
struct infvec {
  kc_informer_spec *v;
  size_t n, cap;
};

/* informers[idx] into *inf (identity included). */
void cfg_parse_informer(struct ctx *c, const kc_yaml_node *n, size_t idx, kc_informer_spec *inf);
/* A new slot at the end of iv; NULL when out of memory (marked in c). */
kc_informer_spec *cfg_infvec_push(struct ctx *c, struct infvec *iv);
/* Points ref at the informer it names, the only one watching its kind, or
 * a default informer added for it; reports an ambiguous or dangling one. */
void cfg_bind_ref(struct ctx *c, struct infvec *iv, kc_kind_ref *ref, const char *what);
bool cfg_has_index(const kc_informer_spec *inf, const char *name);

/* ---- controllers and sharding (config_controllers.c) ----------------------- */

/* `sharding:` over *sh, which holds the defaults or the inherited values. */
void cfg_parse_sharding(struct ctx *c, const kc_yaml_node *n, const char *what,
                        kc_sharding_spec *sh);
/* The node to blame for key: where it was written (the controller's
 * section, then the global one), else the controller's section. */
const kc_yaml_node *cfg_shard_blame(const kc_yaml_node *own, const kc_yaml_node *global,
                                    const char *key);
/* controllers[idx] into *ct (its kinds are bound to informers later). */
void cfg_parse_controller(struct ctx *c, const kc_yaml_node *n, size_t idx,
                          kc_controller_spec *ct);

/* ---- hooks (config_hooks.c) ------------------------------------------------- */

/* The `hook:` mapping of controller ctl; NULL when out of memory. */
const kc_hook_spec *cfg_parse_hook(struct ctx *c, const kc_yaml_node *n, const char *ctl);

#endif
