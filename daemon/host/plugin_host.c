/* SPDX-License-Identifier: Apache-2.0 */
/* plugin_host: see plugin_host.h. */
#include "host/plugin_host.h"

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
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fileperm.h"
#include "base/log.h"

_Static_assert((int)KC_RESULT_DONE == KCTRLD_RESULT_DONE, "result codes");
_Static_assert((int)KC_RESULT_REQUEUE == KCTRLD_RESULT_REQUEUE, "result codes");
_Static_assert((int)KC_RESULT_REQUEUE_AFTER == KCTRLD_RESULT_REQUEUE_AFTER, "result codes");
_Static_assert((int)KC_RESULT_ERROR == KCTRLD_RESULT_ERROR, "result codes");
_Static_assert((int)KC_RESULT_TERMINAL == KCTRLD_RESULT_TERMINAL, "result codes");

/* Size of the 1.0 plugin table: anything smaller is refused. */
#define PLUGIN_TABLE_MIN_SIZE (offsetof(struct kctrld_plugin, fini) + sizeof(void (*)(void *)))

/* A file's identity: another one at the same path is another file (rebuilt,
 * replaced or rewritten in place). */
typedef struct {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime, ctime;
} file_id;

struct kc_plugin {
  struct kc_plugin *next;
  char *path;
  file_id id; /* the file this code was copied from: another one at path is loaded anew */
  int memfd; /* the private copy dlopen'ed as /proc/self/fd/N; never closed (see load_copy) */
  void *handle;
  const struct kctrld_plugin *table; /* NULL: refused (load_rc, load_err) */
  int load_rc;
  char *load_err;
  atomic_uint live_instances; /* an abandoned reconcile may free the last one on its thread */
};

struct kc_plugin_instance {
  kc_plugin *plugin;
  char *controller;
  char *log_ctx; /* "controller/plugin" */
  void *instance;
  kc_host_env env; /* copied; env.ud retained until after on_free */
  kc_expectations *exp;
  kc_desired_spec *sync; /* from env->spec: finalizer and desired state (NULL: none) */
  kc_ownwrites *writes; /* a reference; NULL: writes are not recorded */
  void (*on_free)(void *arg); /* after fini: releases what settings point into */
  void *on_free_arg;
};

/* A file whose code runs elsewhere (isolation: process: a child loads it),
 * as it was when its last instance started: one record per path. */
struct used_file {
  struct used_file *next;
  file_id id;
  char path[];
};

static kc_plugin *loaded; /* loop thread only */
static struct used_file *used_files; /* loop thread only */
static const struct kctrld_host_api *entry_table; /* NULL: kc_hostapi_table() */

void kc_plugin_host_set_table(const struct kctrld_host_api *table) {
  entry_table = table;
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

/* Ownership and mode rules for the file and its directory (fileperm.h). */
static int check_file(const char *path, const struct stat *st, char *err, size_t errlen) {
  return kc_fileperm_check("plugin", path, st, "load code others can change", KC_FILEPERM_OWNER,
                           err, errlen);
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

static bool same_file(const file_id *id, const struct stat *st) {
  return id->dev == st->st_dev && id->ino == st->st_ino && id->size == st->st_size &&
         id->mtime.tv_sec == st->st_mtim.tv_sec && id->mtime.tv_nsec == st->st_mtim.tv_nsec &&
         id->ctime.tv_sec == st->st_ctim.tv_sec && id->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static file_id id_of(const struct stat *st) {
  return (file_id){st->st_dev, st->st_ino, st->st_size, st->st_mtim, st->st_ctim};
}

/* Copies the checked file (fd, st_size bytes) into a sealed memfd and
 * dlopens it as /proc/self/fd/N. A private copy, because glibc's dlopen
 * answers a pathname it has loaded before with the object already loaded
 * (RTLD_NODELETE keeps it even after dlclose): a plugin rebuilt at the same
 * path would keep running the old code. It also makes the check race-free
 * (the code loaded is the file that was checked) and keeps the running code
 * safe from a file rewritten in place. The memfd is never closed: its
 * number is the object's name, and a reused number would make glibc hand
 * out the old object again. Returns the handle, or NULL with *memfd -1 and
 * errno / dlerror in err. */
static void *load_copy(const char *path, int fd, const struct stat *st, int *memfd, char *err,
                       size_t errlen) {
  *memfd = -1;
  const char *base = strrchr(path, '/');
  char name[96];
  snprintf(name, sizeof name, "kctrld-plugin:%s", base ? base + 1 : path);
  int m = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m < 0) {
    fail(err, errlen, "cannot load plugin %s: memfd_create: %s", path, strerror(errno));
    return NULL;
  }
  off_t off = 0;
  while (off < st->st_size) {
    ssize_t n = sendfile(m, fd, &off, (size_t)(st->st_size - off));
    if (n <= 0) {
      fail(err, errlen, "cannot copy plugin %s: %s", path, n < 0 ? strerror(errno) : "file shrank while copied");
      close(m);
      return NULL;
    }
  }
  if (fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    fail(err, errlen, "cannot seal the copy of plugin %s: %s", path, strerror(errno));
    close(m);
    return NULL;
  }
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", m);
  dlerror();
  void *h = dlopen(proc, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char *why = dlerror();
    fail(err, errlen, "cannot load plugin %s: %s (check its dependencies with: ldd %s)", path,
         why ? why : "unknown dlopen error", path);
    close(m);
    return NULL;
  }
  *memfd = m;
  return h;
}

int kc_plugin_load(const char *path, kc_plugin **out, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  if (!path || !*path) {
    fail(err, errlen, "no plugin path given");
    return -EINVAL;
  }
  /* Check the file we open, then load a private copy of what we read from
   * it (load_copy), so the check covers the code that runs. */
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
  const kc_plugin *older = NULL; /* an earlier build loaded from this path */
  for (kc_plugin *p = loaded; p; p = p->next) {
    if (same_file(&p->id, &st)) {
      close(fd);
      if (!p->table) { /* refused before, unchanged since */
        fail(err, errlen, "%s", p->load_err);
        return p->load_rc;
      }
      *out = p;
      return 0;
    }
    if (!older && p->table && strcmp(p->path, path) == 0) older = p;
  }
  int memfd;
  void *h = load_copy(path, fd, &st, &memfd, err, errlen);
  close(fd);
  if (!h) return -ELIBBAD;
  dlerror();
  void *sym = dlsym(h, "kctrld_plugin_entry");
  const struct kctrld_plugin *t = NULL;
  if (!sym) {
    fail(err, errlen,
         "plugin %s does not export kctrld_plugin_entry (declare it with KCTRLD_EXPORT from "
         "kctrld/plugin.h; check with: nm -D %s)",
         path, path);
    rc = -ENOEXEC;
  } else {
    kctrld_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer -> function pointer, as POSIX allows */
    t = entry(entry_table ? entry_table : kc_hostapi_table());
    rc = check_table(path, t, err, errlen);
  }
  /* A refused file is remembered too (its copy stays mapped: RTLD_NODELETE),
   * so retrying it costs no new copy until the file changes. */
  kc_plugin *p = calloc(1, sizeof *p);
  if (!p || !(p->path = strdup(path)) || (rc < 0 && !(p->load_err = strdup(err)))) {
    if (p) free(p->path);
    free(p);
    dlclose(h);
    if (rc == 0) fail(err, errlen, "out of memory loading plugin %s", path);
    return rc < 0 ? rc : -ENOMEM;
  }
  p->id = id_of(&st);
  p->memfd = memfd;
  p->handle = h;
  p->table = rc < 0 ? NULL : t;
  p->load_rc = rc;
  p->next = loaded;
  loaded = p;
  if (rc < 0) return rc;
  if (older)
    kc_info("plugin",
            "loaded plugin=%s path=%s abi=%u.%u version=%s: the file changed since it was loaded "
            "(version %s), the new code runs for new instances",
            t->name, path, t->abi_major, t->abi_minor, t->version ? t->version : "-",
            older->table->version ? older->table->version : "-");
  else
    kc_info("plugin", "loaded plugin=%s path=%s abi=%u.%u version=%s", t->name, path, t->abi_major,
            t->abi_minor, t->version ? t->version : "-");
  *out = p;
  return 0;
}

static struct used_file *find_used(const char *path) {
  struct used_file *u = used_files;
  while (u && strcmp(u->path, path) != 0)
    u = u->next;
  return u;
}

int kc_plugin_file_used(const char *path) {
  struct stat st;
  if (!path || !*path) return -EINVAL;
  if (stat(path, &st) != 0) return -errno;
  struct used_file *u = find_used(path);
  if (u) {
    if (!same_file(&u->id, &st))
      kc_info("plugin",
              "plugin path=%s isolation=process: the file changed since it was loaded, the new "
              "code runs in new children",
              path);
    u->id = id_of(&st);
    return 0;
  }
  size_t len = strlen(path) + 1;
  if (!(u = malloc(sizeof *u + len))) return -ENOMEM;
  memcpy(u->path, path, len);
  u->id = id_of(&st);
  u->next = used_files;
  used_files = u;
  return 0;
}

bool kc_plugin_file_changed(const char *path) {
  struct stat st;
  const kc_plugin *newest = NULL; /* the list is newest first */
  for (const kc_plugin *p = loaded; p && !newest; p = p->next)
    if (strcmp(p->path, path) == 0) newest = p;
  const struct used_file *u = find_used(path);
  if ((!newest && !u) || stat(path, &st) != 0) return false;
  return (newest && !same_file(&newest->id, &st)) || (u && !same_file(&u->id, &st));
}

int kc_plugin_builtin(const struct kctrld_plugin *table, kc_plugin **out, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  for (kc_plugin *p = loaded; p; p = p->next) {
    if (p->table == table) {
      *out = p;
      return 0;
    }
  }
  char path[128];
  snprintf(path, sizeof path, "builtin:%s", table && table->name ? table->name : "?");
  int rc = check_table(path, table, err, errlen);
  if (rc < 0) return rc;
  kc_plugin *p = calloc(1, sizeof *p);
  if (!p || !(p->path = strdup(path))) {
    free(p);
    fail(err, errlen, "out of memory registering plugin %s", path);
    return -ENOMEM;
  }
  p->table = table; /* handle NULL: nothing to dlclose */
  p->memfd = -1;
  p->next = loaded;
  loaded = p;
  *out = p;
  return 0;
}

const char *kc_plugin_name(const kc_plugin *p) { return p->table->name; }
const struct kctrld_plugin *kc_plugin_table(const kc_plugin *p) { return p->table; }
const kctrld_permission *kc_plugin_permissions(const kc_plugin *p) {
  return KCTRLD_PLUGIN_HAS(p->table, permissions) ? p->table->permissions : NULL;
}

void kc_plugin_host_unload_all(void) {
  while (used_files) {
    struct used_file *u = used_files;
    used_files = u->next;
    free(u);
  }
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
    if (p->handle) dlclose(p->handle); /* built-in ones have none */
    free(p->load_err);
    free(p->path);
    free(p);
  }
}

/* ---- instances and calls ---- */

/* The ctx of one call into inst (hostapi.h). */
static void ctx_for(kctrld_ctx *ctx, kc_plugin_instance *inst, const char *key,
                    kc_reconcile_result *res) {
  kc_hostapi_ctx_init(ctx, inst->env.ops ? &inst->env : NULL, inst->controller, inst->exp, key, res);
  ctx->sync = inst->sync;
  if (key) ctx->writes = inst->writes;
}

static void instance_free_mem(kc_plugin_instance *inst) {
  kc_plugin *p = inst->plugin;
  kc_expectations_free(inst->exp);
  kc_desired_spec_free(inst->sync);
  kc_ownwrites_unref(inst->writes);
  if (inst->env.ops && inst->env.ops->release) inst->env.ops->release(inst->env.ud);
  free(inst->controller);
  free(inst->log_ctx);
  free(inst);
  atomic_fetch_sub(&p->live_instances, 1); /* last: p may be freed right after */
}

int kc_plugin_instance_new(kc_plugin *p, const char *controller, const kc_host_env *env,
                           kc_plugin_instance **out, char *err, size_t errlen) {
  return kc_plugin_instance_new_arg(p, controller, env, NULL, out, err, errlen);
}

int kc_plugin_instance_new_arg(kc_plugin *p, const char *controller, const kc_host_env *env,
                               void *init_arg, kc_plugin_instance **out, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  kc_plugin_instance *inst = calloc(1, sizeof *inst);
  if (!inst) return -ENOMEM;
  inst->plugin = p;
  atomic_fetch_add(&p->live_instances, 1);
  if (env) {
    inst->env = *env;
    if (env->ops && env->ops->retain) env->ops->retain(env->ud);
  }
  inst->controller = strdup(controller ? controller : "");
  size_t n = strlen(inst->controller ? inst->controller : "") + strlen(p->table->name) + 2;
  inst->log_ctx = malloc(n);
  inst->exp = kc_expectations_new(0);
  bool sync_ok = !env || !env->spec || (inst->sync = kc_desired_spec_new(env->spec)) != NULL;
  if (!inst->controller || !inst->log_ctx || !inst->exp || !sync_ok) {
    instance_free_mem(inst);
    fail(err, errlen, "out of memory creating controller %s", controller ? controller : "");
    return -ENOMEM;
  }
  snprintf(inst->log_ctx, n, "%s/%s", inst->controller, p->table->name);
  kctrld_ctx ctx;
  ctx_for(&ctx, inst, NULL, NULL);
  kc_settings_used used = {.root = inst->env.settings};
  ctx.used = &used; /* what init reads of its settings */
  kctrld_ctx *saved = kc_hostapi_enter(&ctx);
  const char *saved_log = kc_log_get_context();
  kc_log_set_context(inst->log_ctx);
  inst->instance = init_arg;
  int rc = p->table->init(&ctx, kc_hostapi_settings(inst->env.settings), &inst->instance);
  kc_log_set_context(saved_log);
  kc_hostapi_leave(saved);
  /* plugin.h: the daemon warns about settings keys the plugin did not read.
   * After a failed init too: a misspelt required key is the likely cause. */
  if (p->handle)
    kc_hostapi_settings_warn_unread(&used, inst->controller, p->table->name);
  else /* a built-in: the settings are those of what runs behind it (isolate.h: the child warns) */
    free(used.nodes);
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
    kctrld_ctx ctx;
    ctx_for(&ctx, inst, NULL, NULL);
    kctrld_ctx *saved = kc_hostapi_enter(&ctx);
    const char *saved_log = kc_log_get_context();
    kc_log_set_context(inst->log_ctx);
    inst->plugin->table->fini(inst->instance);
    kc_log_set_context(saved_log);
    kc_hostapi_leave(saved);
  }
  if (inst->on_free) inst->on_free(inst->on_free_arg);
  instance_free_mem(inst);
}

void kc_plugin_instance_on_free(kc_plugin_instance *inst, void (*fn)(void *arg), void *arg) {
  inst->on_free = fn;
  inst->on_free_arg = arg;
}

/* The message of an error made terminal by a failed call: the plugin's
 * text, then the host's reason unless the plugin's text carries it already
 * (it passed ctx_api_error on). */
static void with_reason(kc_reconcile_result *res, const char *reason) {
  size_t n = strlen(res->message);
  if (!n) {
    snprintf(res->message, sizeof res->message, "%s", reason);
    return;
  }
  if (strstr(res->message, reason)) return;
  snprintf(res->message + n, sizeof res->message - n, ": %s", reason);
}

void kc_plugin_reconcile(void *ud, const char *key, kc_reconcile_result *res) {
  kc_plugin_instance *inst = ud;
  kctrld_ctx ctx;
  ctx_for(&ctx, inst, key, res);
  res->kind = KC_RESULT_DONE;
  res->after_ms = 0;
  res->message[0] = '\0';
  res->held = false;
  res->has_priority = false;
  res->priority = 0;
  kctrld_ctx *saved = kc_hostapi_enter(&ctx);
  const char *saved_log = kc_log_get_context();
  kc_log_set_context(inst->log_ctx);
  const struct kctrld_host_api *h = kc_hostapi_table();
  int rc;
  /* The controller's finalizer (desired.h) is the host's, around the call. */
  if (kc_desired_finalize_before(h, &ctx, &rc)) {
    rc = inst->plugin->table->reconcile(inst->instance, &ctx, key);
    rc = kc_desired_finalize_after(h, &ctx, rc);
  }
  kc_desired_ctx_done(&ctx);
  kc_log_set_context(saved_log);
  kc_hostapi_leave(saved);
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
    if (ctx.terminal[0]) { /* plugin.h "Terminal errors" */
      res->kind = KC_RESULT_TERMINAL;
      with_reason(res, ctx.terminal);
    }
    if (!res->message[0]) snprintf(res->message, sizeof res->message, "error (no message)");
    break;
  case KCTRLD_RESULT_TERMINAL:
    res->kind = KC_RESULT_TERMINAL;
    if (!res->message[0]) with_reason(res, ctx.terminal[0] ? ctx.terminal : "terminal error (no message)");
    break;
  default:
    res->kind = KC_RESULT_ERROR;
    snprintf(res->message, sizeof res->message, "plugin %s returned invalid result %d",
             inst->plugin->table->name, rc);
    break;
  }
}

kc_expectations *kc_plugin_instance_expectations(kc_plugin_instance *inst) { return inst->exp; }

void kc_plugin_instance_set_writes(kc_plugin_instance *inst, kc_ownwrites *w) {
  if (w) kc_ownwrites_ref(w);
  kc_ownwrites_unref(inst->writes);
  inst->writes = w;
}
const char *kc_plugin_instance_controller(const kc_plugin_instance *inst) { return inst->controller; }

