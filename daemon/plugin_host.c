/* plugin_host: see plugin_host.h. */
#include "plugin_host.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

_Static_assert((int)KC_RESULT_DONE == KCTRLD_RESULT_DONE, "result codes");
_Static_assert((int)KC_RESULT_REQUEUE == KCTRLD_RESULT_REQUEUE, "result codes");
_Static_assert((int)KC_RESULT_REQUEUE_AFTER == KCTRLD_RESULT_REQUEUE_AFTER, "result codes");
_Static_assert((int)KC_RESULT_ERROR == KCTRLD_RESULT_ERROR, "result codes");

/* Size of the 1.0 plugin table: anything smaller is refused. */
#define PLUGIN_TABLE_MIN_SIZE (offsetof(struct kctrld_plugin, fini) + sizeof(void (*)(void *)))

struct kctrld_ctx {
  kc_plugin_instance *inst;
  const char *key;          /* NULL in init/fini */
  kc_reconcile_result *res; /* NULL in init/fini */
  bool after_set;
  char api_error[256];
};

struct kc_plugin {
  struct kc_plugin *next;
  char *path;
  dev_t dev;
  ino_t ino;
  void *handle;
  const struct kctrld_plugin *table;
  atomic_uint live_instances; /* an abandoned reconcile may free the last one on its thread */
};

struct kc_plugin_instance {
  kc_plugin *plugin;
  char *controller;
  char *log_ctx; /* "controller/plugin" */
  void *instance;
  void *daemon_data;
  kc_expectations *exp;
  void (*on_free)(void *arg); /* after fini: releases what settings point into */
  void *on_free_arg;
};

static kc_plugin *loaded; /* loop thread only */
/* Set at the daemon's exit: a reconcile abandoned then (still running on a
 * detached worker) gets no daemon to call into. */
static atomic_bool host_closed;
static struct kc_host_services services;
static _Thread_local kctrld_ctx *current_ctx; /* set around plugin calls */

/* ---- fallbacks for services the daemon has not provided ---- */

static int no_settings_string(const kctrld_settings *s, const char *p, const char **o) { return -ENOSYS; }
static int no_settings_int(const kctrld_settings *s, const char *p, int64_t *o) { return -ENOSYS; }
static int no_settings_bool(const kctrld_settings *s, const char *p, bool *o) { return -ENOSYS; }
static int no_settings_duration_ms(const kctrld_settings *s, const char *p, int64_t *o) { return -ENOSYS; }
static int no_settings_len(const kctrld_settings *s, const char *p, size_t *o) { return -ENOSYS; }
static int no_cache_get(kctrld_ctx *c, const kctrld_ref *r, const kctrld_object **o) { return -ENOSYS; }
static int no_cache_list(kctrld_ctx *c, const char *a, const char *k, const kctrld_list_opts *op,
                         kctrld_list **o) { return -ENOSYS; }
static size_t no_list_len(const kctrld_list *l) { return 0; }
static const kctrld_object *no_list_item(const kctrld_list *l, size_t i) { return NULL; }
static void no_list_release(kctrld_list *l) {}
static const kctrld_object *no_object_ref(const kctrld_object *o) { return o; }
static void no_object_release(const kctrld_object *o) {}
static kctrld_str no_str(const kctrld_object *o) { return (kctrld_str){NULL, 0}; }
static int64_t no_object_generation(const kctrld_object *o) { return 0; }
static bool no_object_deleting(const kctrld_object *o) { return false; }
static kctrld_str no_object_label(const kctrld_object *o, const char *k) { return (kctrld_str){NULL, 0}; }
static int no_object_each_label(const kctrld_object *o, bool (*cb)(kctrld_str, kctrld_str, void *),
                                void *ud) { return 0; }
static int no_object_get(const kctrld_object *o, const char *p, kctrld_value *v) { return -ENOSYS; }
static int no_object_each(const kctrld_object *o, const char *p,
                          bool (*cb)(const kctrld_value *, void *), void *ud) { return -ENOSYS; }
static int no_object_string(const kctrld_object *o, const char *p, char *b, size_t n) { return -ENOSYS; }
static int no_object_int(const kctrld_object *o, const char *p, int64_t *v) { return -ENOSYS; }
static int no_object_bool(const kctrld_object *o, const char *p, bool *v) { return -ENOSYS; }
static int no_value_get(const kctrld_value *v, const char *p, kctrld_value *o) { return -ENOSYS; }
static int no_value_string(const kctrld_value *v, char *b, size_t n) { return -ENOSYS; }
static int no_value_int(const kctrld_value *v, int64_t *o) { return -ENOSYS; }
static int no_api_write(kctrld_ctx *c, const char *j, size_t n, const kctrld_object **o) { return -ENOSYS; }
static int no_api_patch(kctrld_ctx *c, const kctrld_ref *r, int t, const char *p, size_t n, bool s,
                        const kctrld_object **o) { return -ENOSYS; }
static int no_api_delete(kctrld_ctx *c, const kctrld_ref *r, const kctrld_delete_opts *o) { return -ENOSYS; }
static int no_api_get(kctrld_ctx *c, const kctrld_ref *r, const kctrld_object **o) { return -ENOSYS; }
static int no_event(kctrld_ctx *c, const kctrld_object *o, int t, const char *r, const char *m) { return -ENOSYS; }

static const struct kc_host_services fallback = {
    .settings_string = no_settings_string, .settings_int = no_settings_int,
    .settings_bool = no_settings_bool, .settings_duration_ms = no_settings_duration_ms,
    .settings_len = no_settings_len, .cache_get = no_cache_get, .cache_list = no_cache_list,
    .list_len = no_list_len, .list_item = no_list_item, .list_release = no_list_release,
    .object_ref = no_object_ref, .object_release = no_object_release,
    .object_namespace = no_str, .object_name = no_str, .object_uid = no_str,
    .object_resource_version = no_str, .object_api_version = no_str, .object_kind = no_str,
    .object_creation_timestamp = no_str, .object_generation = no_object_generation,
    .object_deleting = no_object_deleting, .object_json = no_str, .object_label = no_object_label,
    .object_each_label = no_object_each_label, .object_get = no_object_get,
    .object_each = no_object_each, .object_string = no_object_string,
    .object_int = no_object_int, .object_bool = no_object_bool, .value_get = no_value_get,
    .value_string = no_value_string, .value_int = no_value_int, .api_create = no_api_write,
    .api_update = no_api_write, .api_update_status = no_api_write, .api_patch = no_api_patch,
    .api_delete = no_api_delete, .api_get = no_api_get, .event = no_event,
};

/* ---- host-implemented functions ---- */

static void *host_alloc(size_t size) { return size ? malloc(size) : NULL; }
static void *host_realloc(void *p, size_t size) { return realloc(p, size); }
static void host_free(void *p) { free(p); }

__attribute__((format(printf, 2, 3))) static void host_log(int level, const char *fmt, ...) {
  if (level < KC_LOG_ERROR) level = KC_LOG_ERROR;
  if (level > KC_LOG_DEBUG) level = KC_LOG_DEBUG;
  if (level > (int)kc_log_get_level()) return;
  char msg[3072];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const kctrld_ctx *ctx = current_ctx;
  if (ctx && ctx->key)
    kc_log((enum kc_log_level)level, "plugin", "%s key=%s", msg, ctx->key);
  else
    kc_log((enum kc_log_level)level, "plugin", "%s", msg);
}

static int host_result_requeue_after(kctrld_ctx *ctx, uint64_t ms) {
  if (ctx && ctx->res) {
    ctx->res->after_ms = ms;
    ctx->after_set = true;
  }
  return KCTRLD_RESULT_REQUEUE_AFTER;
}

__attribute__((format(printf, 2, 3))) static int host_result_error(kctrld_ctx *ctx, const char *fmt,
                                                                   ...) {
  if (ctx && ctx->res && fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->res->message, sizeof ctx->res->message, fmt, ap);
    va_end(ap);
  }
  return KCTRLD_RESULT_ERROR;
}

static const char *host_ctx_controller(const kctrld_ctx *ctx) {
  return ctx && ctx->inst ? ctx->inst->controller : "";
}

static const char *host_ctx_api_error(const kctrld_ctx *ctx) { return ctx ? ctx->api_error : ""; }

struct fin_scan {
  const char *name;
  size_t len;
  int index; /* of the match, -1 if none */
  int count;
};

static bool fin_visit(const kctrld_value *v, void *ud) {
  struct fin_scan *s = ud;
  /* Finalizers are qualified names: their JSON text needs no escapes. */
  if (v->type == KCTRLD_JSON_STRING && v->raw.len == s->len + 2 &&
      memcmp(v->raw.ptr + 1, s->name, s->len) == 0 && s->index < 0)
    s->index = s->count;
  s->count++;
  return true;
}

static int fin_scan(const kctrld_object *obj, const char *finalizer, struct fin_scan *s) {
  s->name = finalizer;
  s->len = strlen(finalizer);
  s->index = -1;
  s->count = 0;
  int rc = services.object_each(obj, "metadata.finalizers[]", fin_visit, s);
  return rc < 0 ? rc : 0;
}

static bool host_object_has_finalizer(const kctrld_object *obj, const char *finalizer) {
  struct fin_scan s;
  if (!obj || !finalizer || fin_scan(obj, finalizer, &s) < 0) return false;
  return s.index >= 0;
}

/* Copies a slice into a C string buffer; false if it does not fit. */
static bool slice_copy(kctrld_str s, char *buf, size_t cap) {
  if (s.len >= cap) return false;
  if (s.len) memcpy(buf, s.ptr, s.len);
  buf[s.len] = '\0';
  return true;
}

/* A finalizer must be a qualified name; refuse anything needing escapes. */
static bool finalizer_ok(const char *f) {
  if (!f || !*f || strlen(f) > 316) return false;
  for (const char *p = f; *p; p++)
    if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) return false;
  return true;
}

struct obj_ref_buf {
  char api_version[256], kind[128], ns[64], name[254];
  kctrld_ref ref;
};

static int ref_of(const kctrld_object *obj, struct obj_ref_buf *b) {
  if (!slice_copy(services.object_api_version(obj), b->api_version, sizeof b->api_version) ||
      !slice_copy(services.object_kind(obj), b->kind, sizeof b->kind) ||
      !slice_copy(services.object_namespace(obj), b->ns, sizeof b->ns) ||
      !slice_copy(services.object_name(obj), b->name, sizeof b->name) || !b->kind[0] || !b->name[0])
    return -EINVAL;
  b->ref = (kctrld_ref){b->api_version, b->kind, b->ns[0] ? b->ns : NULL, b->name};
  return 0;
}

static int host_finalizer_add(kctrld_ctx *ctx, const kctrld_object *obj, const char *finalizer) {
  if (!obj || !finalizer_ok(finalizer)) return -EINVAL;
  struct fin_scan s;
  int rc = fin_scan(obj, finalizer, &s);
  if (rc < 0) return rc;
  if (s.index >= 0) return 0;
  struct obj_ref_buf b;
  char rv[64];
  if (ref_of(obj, &b) < 0 || !slice_copy(services.object_resource_version(obj), rv, sizeof rv))
    return -EINVAL;
  char patch[768];
  int n;
  if (s.count == 0)
    n = snprintf(patch, sizeof patch,
                 "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"%s\"},"
                 "{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"%s\"]}]",
                 rv, finalizer);
  else
    n = snprintf(patch, sizeof patch,
                 "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"%s\"},"
                 "{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":\"%s\"}]",
                 rv, finalizer);
  if (n < 0 || (size_t)n >= sizeof patch) return -EINVAL;
  return services.api_patch(ctx, &b.ref, KCTRLD_PATCH_JSON, patch, (size_t)n, false, NULL);
}

static int host_finalizer_remove(kctrld_ctx *ctx, const kctrld_object *obj, const char *finalizer) {
  if (!obj || !finalizer_ok(finalizer)) return -EINVAL;
  struct fin_scan s;
  int rc = fin_scan(obj, finalizer, &s);
  if (rc < 0) return rc;
  if (s.index < 0) return 0;
  struct obj_ref_buf b;
  if (ref_of(obj, &b) < 0) return -EINVAL;
  char patch[768];
  /* The test op makes it fail (-ESTALE) if the list moved meanwhile. */
  int n = snprintf(patch, sizeof patch,
                   "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/%d\",\"value\":\"%s\"},"
                   "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/%d\"}]",
                   s.index, finalizer, s.index);
  if (n < 0 || (size_t)n >= sizeof patch) return -EINVAL;
  return services.api_patch(ctx, &b.ref, KCTRLD_PATCH_JSON, patch, (size_t)n, false, NULL);
}

__attribute__((format(printf, 5, 6))) static int host_event(kctrld_ctx *ctx,
                                                            const kctrld_object *regarding,
                                                            int type, const char *reason,
                                                            const char *fmt, ...) {
  if (!reason || !*reason || !regarding) return -EINVAL;
  char msg[1024] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
  }
  return services.event(ctx, regarding, type, reason, msg);
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static kc_expectations *exp_of(kctrld_ctx *ctx) { return ctx && ctx->inst ? ctx->inst->exp : NULL; }

static int host_expect_creations(kctrld_ctx *ctx, const char *key, int64_t n) {
  kc_expectations *e = exp_of(ctx);
  return e ? kc_expectations_set(e, key, n, 0, mono_ns()) : -EINVAL;
}
static int host_expect_deletions(kctrld_ctx *ctx, const char *key, int64_t n) {
  kc_expectations *e = exp_of(ctx);
  return e ? kc_expectations_set(e, key, 0, n, mono_ns()) : -EINVAL;
}
static void host_creation_observed(kctrld_ctx *ctx, const char *key) {
  kc_expectations *e = exp_of(ctx);
  if (e) kc_expectations_observe(e, key, 1, 0);
}
static void host_deletion_observed(kctrld_ctx *ctx, const char *key) {
  kc_expectations *e = exp_of(ctx);
  if (e) kc_expectations_observe(e, key, 0, 1);
}
static bool host_expectations_satisfied(kctrld_ctx *ctx, const char *key) {
  kc_expectations *e = exp_of(ctx);
  return e ? kc_expectations_satisfied(e, key, mono_ns()) : true;
}
static void host_expectations_forget(kctrld_ctx *ctx, const char *key) {
  kc_expectations *e = exp_of(ctx);
  if (e) kc_expectations_forget(e, key);
}

/* ---- the table ---- */

static struct kctrld_host_api host_api = {
    .abi_major = KCTRLD_ABI_MAJOR,
    .abi_minor = KCTRLD_ABI_MINOR,
    .struct_size = sizeof(struct kctrld_host_api),
    .build_signature = KCTRLD_BUILD_SIGNATURE,
#ifdef KCTRLD_VERSION
    .version = KCTRLD_VERSION,
#else
    .version = "unknown",
#endif
    .alloc = host_alloc,
    .realloc = host_realloc,
    .free = host_free,
    .log = host_log,
    .result_requeue_after = host_result_requeue_after,
    .result_error = host_result_error,
    .ctx_controller = host_ctx_controller,
    .ctx_api_error = host_ctx_api_error,
    .object_has_finalizer = host_object_has_finalizer,
    .finalizer_add = host_finalizer_add,
    .finalizer_remove = host_finalizer_remove,
    .event = host_event,
    .expect_creations = host_expect_creations,
    .expect_deletions = host_expect_deletions,
    .creation_observed = host_creation_observed,
    .deletion_observed = host_deletion_observed,
    .expectations_satisfied = host_expectations_satisfied,
    .expectations_forget = host_expectations_forget,
};
static bool host_api_ready;

static void install(const struct kc_host_services *svc) {
#define KC_COPY(m) \
  services.m = svc && svc->m ? svc->m : fallback.m; \
  host_api.m = services.m;
  KC_SERVICE_MEMBERS(KC_COPY)
#undef KC_COPY
  services.event = svc && svc->event ? svc->event : fallback.event;
  host_api_ready = true;
}

void kc_plugin_host_set_services(const struct kc_host_services *svc) {
  atomic_store(&host_closed, false); /* a daemon (again) in this process */
  install(svc);
}

const struct kctrld_host_api *kc_plugin_host_api(void) {
  if (!host_api_ready) install(NULL);
  return &host_api;
}

/* ---- loading ---- */

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 0;
}

/* Ownership and mode rules for the file and its directory. */
static int check_file(const char *path, const struct stat *st, char *err, size_t errlen) {
  if (!S_ISREG(st->st_mode)) {
    fail(err, errlen, "plugin %s is not a regular file", path);
    return -EINVAL;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    fail(err, errlen,
         "plugin %s is writable by %s (mode %04o): refusing to load code others can change; "
         "run chmod go-w on it",
         path, (st->st_mode & S_IWOTH) ? "other users" : "its group",
         (unsigned)(st->st_mode & 07777));
    return -EPERM;
  }
  if (st->st_uid != 0 && st->st_uid != geteuid()) {
    fail(err, errlen, "plugin %s is owned by uid %u, which is neither root nor the daemon's uid %u",
         path, (unsigned)st->st_uid, (unsigned)geteuid());
    return -EPERM;
  }
  char *copy = strdup(path);
  if (!copy) return -ENOMEM;
  struct stat dst;
  const char *dir = dirname(copy);
  int rc = 0;
  if (stat(dir, &dst) == 0 && (dst.st_mode & (S_IWGRP | S_IWOTH)) && !(dst.st_mode & S_ISVTX)) {
    fail(err, errlen,
         "plugin %s is in directory %s, which is writable by other users (mode %04o) without "
         "the sticky bit: the file could be replaced",
         path, dir, (unsigned)(dst.st_mode & 07777));
    rc = -EPERM;
  }
  free(copy);
  return rc;
}

static int check_table(const char *path, const struct kctrld_plugin *t, char *err, size_t errlen) {
  if (!t) {
    fail(err, errlen,
         "plugin %s refused to load: its kctrld_plugin_entry returned NULL (daemon ABI %d.%d)",
         path, KCTRLD_ABI_MAJOR, KCTRLD_ABI_MINOR);
    return -ECANCELED;
  }
  if (t->abi_major != KCTRLD_ABI_MAJOR) {
    fail(err, errlen,
         "plugin %s was built for plugin ABI %u.%u but this daemon has ABI %d.%d: rebuild it "
         "against this daemon's kctrld/plugin.h",
         path, t->abi_major, t->abi_minor, KCTRLD_ABI_MAJOR, KCTRLD_ABI_MINOR);
    return -ENOTSUP;
  }
  if (t->struct_size < PLUGIN_TABLE_MIN_SIZE) {
    fail(err, errlen,
         "plugin %s has a plugin table of %u bytes (ABI %u.%u); ABI %d.%d needs at least %zu",
         path, t->struct_size, t->abi_major, t->abi_minor, KCTRLD_ABI_MAJOR, KCTRLD_ABI_MINOR,
         (size_t)PLUGIN_TABLE_MIN_SIZE);
    return -ENOTSUP;
  }
  if (!t->build_signature || strcmp(t->build_signature, KCTRLD_BUILD_SIGNATURE) != 0) {
    fail(err, errlen, "plugin %s build signature \"%s\" does not match the daemon's \"%s\"", path,
         t->build_signature ? t->build_signature : "(none)", KCTRLD_BUILD_SIGNATURE);
    return -ENOTSUP;
  }
  const char *missing = !t->name || !*t->name ? "name" : !t->init ? "init" : !t->reconcile ? "reconcile" : NULL;
  if (missing) {
    fail(err, errlen, "plugin %s has an incomplete plugin table: %s is missing", path, missing);
    return -EINVAL;
  }
  return 0;
}

int kc_plugin_load(const char *path, kc_plugin **out, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  if (!path || !*path) {
    fail(err, errlen, "no plugin path given");
    return -EINVAL;
  }
  /* Check the file we open; then dlopen it by path and make sure the path
   * still names that file. (dlopen of /proc/self/fd/N is no way around the
   * race: glibc matches already loaded objects by that name, so a second
   * plugin would get the first one's handle.) The directory check above
   * keeps other users from swapping the file in between. */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT)
      fail(err, errlen, "plugin %s does not exist", path);
    else
      fail(err, errlen, "cannot open plugin %s: %s", path, strerror(e));
    return -e;
  }
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    fail(err, errlen, "cannot stat plugin %s: %s", path, strerror(e));
    return -e;
  }
  int rc = check_file(path, &st, err, errlen);
  if (rc < 0) {
    close(fd);
    return rc;
  }
  for (kc_plugin *p = loaded; p; p = p->next) {
    if (p->dev == st.st_dev && p->ino == st.st_ino) {
      close(fd);
      *out = p;
      return 0;
    }
  }
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  close(fd);
  struct stat again;
  if (h && (stat(path, &again) != 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino)) {
    dlclose(h);
    fail(err, errlen, "plugin %s was replaced while it was being loaded", path);
    return -EAGAIN;
  }
  if (!h) {
    const char *why = dlerror();
    fail(err, errlen, "cannot load plugin %s: %s (check its dependencies with: ldd %s)", path,
         why ? why : "unknown dlopen error", path);
    return -ELIBBAD;
  }
  dlerror();
  void *sym = dlsym(h, "kctrld_plugin_entry");
  if (!sym) {
    fail(err, errlen,
         "plugin %s does not export kctrld_plugin_entry (declare it with KCTRLD_EXPORT from "
         "kctrld/plugin.h; check with: nm -D %s)",
         path, path);
    dlclose(h);
    return -ENOEXEC;
  }
  kctrld_plugin_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry); /* object pointer -> function pointer, as POSIX allows */
  const struct kctrld_plugin *t = entry(kc_plugin_host_api());
  rc = check_table(path, t, err, errlen);
  if (rc < 0) {
    dlclose(h);
    return rc;
  }
  kc_plugin *p = calloc(1, sizeof *p);
  if (!p || !(p->path = strdup(path))) {
    free(p);
    dlclose(h);
    fail(err, errlen, "out of memory loading plugin %s", path);
    return -ENOMEM;
  }
  p->dev = st.st_dev;
  p->ino = st.st_ino;
  p->handle = h;
  p->table = t;
  p->next = loaded;
  loaded = p;
  kc_info("plugin", "loaded plugin=%s path=%s abi=%u.%u version=%s", t->name, path, t->abi_major,
          t->abi_minor, t->version ? t->version : "-");
  *out = p;
  return 0;
}

const char *kc_plugin_name(const kc_plugin *p) { return p->table->name; }
const char *kc_plugin_path(const kc_plugin *p) { return p->path; }
const struct kctrld_plugin *kc_plugin_table(const kc_plugin *p) { return p->table; }

void kc_plugin_host_unload_all(void) {
  atomic_store(&host_closed, true);
  kc_plugin **link = &loaded;
  while (*link) {
    kc_plugin *p = *link;
    unsigned live = atomic_load(&p->live_instances);
    if (live) {
      /* Abandoned reconciles still run in it; their instances free
       * themselves when they return, so p must outlive them. */
      kc_warn("plugin", "plugin=%s left loaded: %u instances still in abandoned reconciles", p->table->name,
              live);
      link = &p->next;
      continue;
    }
    *link = p->next;
    dlclose(p->handle);
    free(p->path);
    free(p);
  }
}

/* ---- instances and calls ---- */

static void instance_free_mem(kc_plugin_instance *inst) {
  kc_plugin *p = inst->plugin;
  kc_expectations_free(inst->exp);
  free(inst->controller);
  free(inst->log_ctx);
  free(inst);
  atomic_fetch_sub(&p->live_instances, 1); /* last: p may be freed right after */
}

int kc_plugin_instance_new(kc_plugin *p, const char *controller, const kctrld_settings *settings,
                           void *daemon_data, kc_plugin_instance **out, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  kc_plugin_instance *inst = calloc(1, sizeof *inst);
  if (!inst) return -ENOMEM;
  inst->plugin = p;
  atomic_fetch_add(&p->live_instances, 1);
  inst->daemon_data = daemon_data;
  inst->controller = strdup(controller ? controller : "");
  size_t n = strlen(inst->controller ? inst->controller : "") + strlen(p->table->name) + 2;
  inst->log_ctx = malloc(n);
  inst->exp = kc_expectations_new(0);
  if (!inst->controller || !inst->log_ctx || !inst->exp) {
    instance_free_mem(inst);
    fail(err, errlen, "out of memory creating controller %s", controller ? controller : "");
    return -ENOMEM;
  }
  snprintf(inst->log_ctx, n, "%s/%s", inst->controller, p->table->name);
  kctrld_ctx ctx = {.inst = inst};
  kctrld_ctx *saved = current_ctx;
  const char *saved_log = kc_log_get_context();
  current_ctx = &ctx;
  kc_log_set_context(inst->log_ctx);
  int rc = p->table->init(&ctx, settings, &inst->instance);
  kc_log_set_context(saved_log);
  current_ctx = saved;
  if (rc != 0) {
    int returned = rc;
    if (rc > 0) rc = -rc; /* tolerate positive errnos from plugins */
    if (rc == INT_MIN) rc = -EINVAL; /* -rc would overflow */
    fail(err, errlen, "plugin %s (%s) init failed for controller %s: %s (init returned %d)", p->table->name,
         p->path, inst->controller, strerror(-rc), returned);
    instance_free_mem(inst);
    return rc;
  }
  *out = inst;
  return 0;
}

void kc_plugin_instance_free(kc_plugin_instance *inst) {
  if (!inst) return;
  if (inst->plugin->table->fini) {
    kctrld_ctx ctx = {.inst = inst};
    kctrld_ctx *saved = current_ctx;
    const char *saved_log = kc_log_get_context();
    current_ctx = &ctx;
    kc_log_set_context(inst->log_ctx);
    inst->plugin->table->fini(inst->instance);
    kc_log_set_context(saved_log);
    current_ctx = saved;
  }
  if (inst->on_free) inst->on_free(inst->on_free_arg);
  instance_free_mem(inst);
}

void kc_plugin_instance_on_free(kc_plugin_instance *inst, void (*fn)(void *arg), void *arg) {
  inst->on_free = fn;
  inst->on_free_arg = arg;
}

void kc_plugin_reconcile(void *ud, const char *key, kc_reconcile_result *res) {
  kc_plugin_instance *inst = ud;
  kctrld_ctx ctx = {.inst = inst, .key = key, .res = res};
  res->kind = KC_RESULT_DONE;
  res->after_ms = 0;
  res->message[0] = '\0';
  kctrld_ctx *saved = current_ctx;
  const char *saved_log = kc_log_get_context();
  current_ctx = &ctx;
  kc_log_set_context(inst->log_ctx);
  int rc = inst->plugin->table->reconcile(inst->instance, &ctx, key);
  kc_log_set_context(saved_log);
  current_ctx = saved;
  switch (rc) {
  case KCTRLD_RESULT_DONE:
    res->kind = KC_RESULT_DONE;
    break;
  case KCTRLD_RESULT_REQUEUE:
    res->kind = KC_RESULT_REQUEUE;
    break;
  case KCTRLD_RESULT_REQUEUE_AFTER:
    /* Without result_requeue_after there is no delay: back off instead. */
    res->kind = ctx.after_set ? KC_RESULT_REQUEUE_AFTER : KC_RESULT_REQUEUE;
    break;
  case KCTRLD_RESULT_ERROR:
    res->kind = KC_RESULT_ERROR;
    if (!res->message[0]) snprintf(res->message, sizeof res->message, "error (no message)");
    break;
  default:
    res->kind = KC_RESULT_ERROR;
    snprintf(res->message, sizeof res->message, "plugin %s returned invalid result %d",
             inst->plugin->table->name, rc);
    break;
  }
}

kc_expectations *kc_plugin_instance_expectations(kc_plugin_instance *inst) { return inst->exp; }
const char *kc_plugin_instance_controller(const kc_plugin_instance *inst) { return inst->controller; }

void *kc_ctx_daemon_data(const kctrld_ctx *ctx) {
  if (atomic_load(&host_closed)) return NULL;
  return ctx && ctx->inst ? ctx->inst->daemon_data : NULL;
}
const char *kc_ctx_key(const kctrld_ctx *ctx) { return ctx ? ctx->key : NULL; }
kc_plugin_instance *kc_ctx_instance(const kctrld_ctx *ctx) { return ctx ? ctx->inst : NULL; }

void kc_ctx_set_api_error(kctrld_ctx *ctx, const char *fmt, ...) {
  if (!ctx) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->api_error, sizeof ctx->api_error, fmt, ap);
  va_end(ap);
}
