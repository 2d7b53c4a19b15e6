/* SPDX-License-Identifier: Apache-2.0 */
/* config: the kctrld configuration file, parsed from a yamltree into plain C
 * structs and validated completely (schema in docs/config.md,
 * docs/api-contract.md 15.3; user-facing key names are fixed).
 *
 * What it owns: the kc_config of one loaded file, including the YAML tree it
 * was read from (the controllers' `settings:` subtrees point into it), the
 * final deduplicated list of informer specs (explicit ones plus a default
 * informer for every kind a controller uses that `informers:` does not list),
 * and the bindings from each controller's for/owns/watches to an informer of
 * that list. It also compares two configs for live reload (kc_config_compare).
 *
 * Validation is table-driven (docs/api-contract.md 16.6): each section
 * has a table of known keys; unknown keys, wrong types, bad durations,
 * impossible lease timings, bad selectors, duplicate names and dangling
 * references are errors. Every error is one line `file:line:col: message`.
 * Loading does not stop at the first error: up to KC_CONFIG_MAX_ERRORS lines
 * are collected, separated by '\n', so `--check-config` shows them all.
 *
 * Threads: loading, diffing and freeing touch no shared state; any thread may
 * do it. A loaded kc_config is immutable and may be read by any thread.
 *
 * Errors: 0 or a negative errno; -EINVAL when the file is invalid (message(s)
 * in err), -ENOMEM, or -errno from reading the file.
 *
 * Ownership: every pointer inside a kc_config (strings, arrays, YAML nodes)
 * is owned by that kc_config and valid until kc_config_free. Nothing in it
 * may be modified.
 */
#ifndef KC_CONFIG_H
#define KC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kctrld/plugin.h"
#include "base/log.h"
#include "json/yamltree.h"

#define KC_CONFIG_MAX_ERRORS 20

/* Defaults (docs/config.md). */
#define KC_DEFAULT_LEASE_DURATION_MS 15000
#define KC_DEFAULT_RENEW_DEADLINE_MS 10000
#define KC_DEFAULT_RETRY_PERIOD_MS 2000
#define KC_DEFAULT_METRICS_BIND "127.0.0.1:8080" /* controller-runtime's port */
/* kubebuilder's scaffold: secure metrics on every address, port 8443. */
#define KC_DEFAULT_SECURE_METRICS_BIND ":8443"
#define KC_DEFAULT_METRICS_CERT_NAME "tls.crt"
#define KC_DEFAULT_METRICS_CERT_KEY "tls.key"
#define KC_DEFAULT_PAGE_SIZE 500
#define KC_DEFAULT_WATCH_TIMEOUT_MS (5 * 60 * 1000)
#define KC_DEFAULT_WATCH_INACTIVITY_MS (5 * 60 * 1000)
#define KC_DEFAULT_CONSISTENCY_CHECK_MS (30 * 60 * 1000) /* informers[].consistencyCheck */
#define KC_DEFAULT_WORKERS 1
#define KC_DEFAULT_RECONCILE_TIMEOUT_MS (60 * 1000)
#define KC_DEFAULT_BASE_DELAY_MS 5
#define KC_DEFAULT_MAX_DELAY_MS (1000 * 1000)
#define KC_DEFAULT_QPS 10.0
#define KC_DEFAULT_BURST 100
#define KC_DEFAULT_SHUTDOWN_TIMEOUT_MS (30 * 1000)
#define KC_DEFAULT_AUTH_FAILURE_READINESS_MS (30 * 1000)
#define KC_DEFAULT_SNAPSHOT_MAX_AGE_MS (60 * 60 * 1000)

enum kc_streaming_list {
  KC_STREAMING_AUTO = 0, /* use sendInitialEvents when the server supports it */
  KC_STREAMING_ON,       /* require it (an error from the server is an error) */
  KC_STREAMING_OFF,      /* always paginated LIST then WATCH */
};

/* `indexes: {NAME: path}` or `{NAME: [path, ...]}`: one index whose values
 * are the union of the values at its paths (store.h). */
#define KC_CONFIG_MAX_INDEX_PATHS 32
typedef struct kc_index_spec {
  const char *name;         /* [A-Za-z0-9_.-]+, unique per informer */
  const char *path;         /* the first path (paths[0]); kc_obj_get syntax, may contain [] */
  const char *const *paths; /* every path in file order, unique; 1..KC_CONFIG_MAX_INDEX_PATHS.
                             * Specs built by hand may leave paths NULL and npaths 0:
                             * then `path` is the only one (as in kc_store_index_spec). */
  size_t npaths;
} kc_index_spec;

/* One watched scope = one reflector. */
typedef struct kc_informer_spec {
  const char *name;           /* optional `name:`; NULL when not given */
  const char *api_version;    /* "v1", "apps/v1", "demo.kctrld.io/v1" */
  const char *kind;           /* "Pod" */
  const char *group;          /* "" for the core group, else the part before '/' */
  const char *const *namespaces; /* sorted, unique; nnamespaces == 0 means all */
  size_t nnamespaces;
  const char *label_selector; /* canonical (selector.h) text; "" = everything */
  const char *field_selector; /* canonical (selector.h) text; "" = everything */
  const char *const *drop;    /* transform.drop paths, sorted, unique */
  size_t ndrop;
  bool metadata_only;
  int64_t resync_ms;          /* 0 = no resync */
  int64_t consistency_check_ms; /* compare the cache with a metadata LIST this often; 0 = off */
  const kc_index_spec *indexes; /* in file order */
  size_t nindexes;
  int64_t page_size;          /* LIST limit; 0 = unpaginated */
  int64_t watch_timeout_ms;   /* WATCH timeoutSeconds base (jittered by the reflector) */
  int64_t watch_inactivity_ms; /* restart a watch silent this long; 0 = never */
  enum kc_streaming_list streaming_list;
  bool implicit;              /* added because a controller uses the kind */
  /* Stable identity of the watched scope: apiVersion, kind, namespaces,
   * selectors, transform and metadataOnly in a canonical, escaped form.
   * Equal identity = the same reflector and cache may be kept on reload. */
  const char *identity;
  const kc_yaml_node *at;     /* the informers[] entry; NULL when implicit */
} kc_informer_spec;

/* A reference from a controller to a kind, bound to one informer. */
typedef struct kc_kind_ref {
  const char *api_version;
  const char *kind;
  const char *informer_name;  /* optional `informer:`; NULL when not given */
  size_t informer;            /* index into kc_config.informers */
  const kc_yaml_node *at;
} kc_kind_ref;

enum kc_predicate {
  KC_PRED_GENERATION_CHANGED = 1u << 0,
  KC_PRED_LABELS_CHANGED = 1u << 1,
  KC_PRED_ANNOTATIONS_CHANGED = 1u << 2,
  KC_PRED_RESOURCE_VERSION_CHANGED = 1u << 3,
  KC_PRED_DELETION_STARTED = 1u << 4, /* metadata.deletionTimestamp became set */
  KC_PRED_OWNER_REFERENCES_CHANGED = 1u << 5,
  KC_PRED_FINALIZERS_CHANGED = 1u << 6,
};

/* How an event on a watched kind becomes keys of the controller's `for`
 * kind (docs/config.md "watches"). */
enum kc_watch_mapping {
  KC_MAP_LABEL = 1,   /* label KEY's value is the for-object name, same namespace */
  KC_MAP_ANNOTATION,  /* annotation KEY: "name" (same namespace) or "namespace/name" */
  KC_MAP_FIELD,       /* value(s) at PATH of the watched object are for-object names */
  KC_MAP_INDEX,       /* for-objects whose index NAME holds the watched object's name */
};

typedef struct kc_watch_spec {
  kc_kind_ref ref;
  enum kc_watch_mapping mapping;
  const char *key;            /* label/annotation key, field path or index name */
  unsigned predicates;        /* kc_predicate bits; 0 = every update */
} kc_watch_spec;

/* How a desired child (desired-state controllers, docs/hooks.md) is
 * updated: `updateStrategy:` of an `owns` item, else of the controller. */
enum kc_update_strategy {
  KC_UPDATE_IN_PLACE = 0, /* server-side apply; an immutable field is an error */
  KC_UPDATE_RECREATE,     /* apply; refused as immutable: delete, create next time */
};

typedef struct kc_owns_spec {
  kc_kind_ref ref;
  unsigned predicates;        /* kc_predicate bits; 0 = every update */
  enum kc_update_strategy update_strategy; /* the item's, else the controller's */
} kc_owns_spec;

typedef struct kc_rate_limit {
  int64_t base_delay_ms;
  int64_t max_delay_ms;
  double qps;
  int64_t burst;
} kc_rate_limit;

/* `hook: {exec: {...}}` of a controller (docs/hooks.md). */
enum kc_hook_exec_mode {
  KC_HOOK_MODE_PERSISTENT = 0, /* one long-running child per worker slot, JSON lines */
  KC_HOOK_MODE_PER_CALL,       /* one run per reconcile: request on stdin, response on stdout */
};

#define KC_DEFAULT_HOOK_TIMEOUT_MS (30 * 1000)
#define KC_DEFAULT_HOOK_STOP_GRACE_MS (5 * 1000)
#define KC_DEFAULT_HOOK_MAX_RESPONSE (4 << 20)

typedef struct kc_hook_exec_spec {
  const char *const *command; /* argv, >= 1; command[0] with a '/' resolved against the
                                 config's directory, without one looked up in PATH */
  size_t ncommand;
  const char *const *env;     /* "NAME=value" in file order */
  size_t nenv;
  int64_t timeout_ms;
  enum kc_hook_exec_mode mode;
  int64_t max_response_bytes;
  int64_t stop_grace_ms;
} kc_hook_exec_spec;

/* `hook: {webhook: {...}}` (docs/hooks.md): the request is POSTed to url. */
#define KC_DEFAULT_WEBHOOK_TIMEOUT_MS (10 * 1000)

typedef struct kc_hook_webhook_spec {
  const char *url;              /* http:// or https://, no userinfo, no fragment; http:// only
                                   to a loopback host unless allow_insecure_http */
  const char *ca_file;          /* NULL: the system CA store; paths resolved against the
                                   config's directory */
  const char *client_cert_file; /* both or neither */
  const char *client_key_file;
  int64_t timeout_ms;           /* one POST, connect included */
  bool insecure_skip_tls_verify;
  bool allow_insecure_http;
  int64_t max_response_bytes;
} kc_hook_webhook_spec;

/* `hook.style:` what a hook answers (docs/hooks.md). */
enum kc_hook_style {
  KC_HOOK_STYLE_ACTIONS = 0, /* a list of API actions the daemon performs */
  KC_HOOK_STYLE_DESIRED,     /* the desired children and status; the daemon applies and prunes */
};

typedef struct kc_hook_spec {
  enum kc_hook_style style;
  const kc_hook_exec_spec *exec;       /* exactly one of exec and webhook */
  const kc_hook_webhook_spec *webhook;
  const kc_yaml_node *at;              /* the `hook:` node (reload compares it) */
  /* `permissions:` (what the hook's actions write, for `kctrld rbac`), in
   * the plugin table's form: verbs comma-separated, ending with
   * KCTRLD_PERMISSIONS_END; NULL when the hook declares none. */
  const kctrld_permission *permissions;
} kc_hook_spec;

/* `sharding:` (docs/config.md "sharding"), globally and per controller (a
 * controller starts from the global one and overrides what it writes). */
enum kc_shard_key {
  KC_SHARD_KEY_UID = 0,   /* metadata.uid of the `for` object */
  KC_SHARD_KEY_NAMESPACE, /* metadata.namespace of the key */
};

#define KC_MAX_SHARDS 1024

typedef struct kc_sharding_spec {
  int64_t shards;               /* 0: not sharded */
  enum kc_shard_key key;
  const char *lease_namespace;  /* default: leaderElection.namespace */
  const char *lease_prefix;     /* global: NULL unless written; a controller's is
                                   always set (default "kctrld-<name>", lowered) */
  int64_t lease_duration_ms;
  int64_t renew_deadline_ms;
  int64_t retry_period_ms;
  const kc_yaml_node *at;       /* the `sharding:` node that applies last; NULL */
} kc_sharding_spec;

/* `isolation:` of a controller with a plugin (docs/config.md). */
enum kc_isolation {
  KC_ISOLATION_IN_PROCESS = 0, /* the .so runs in the daemon (default) */
  KC_ISOLATION_PROCESS,        /* in a supervised child process (isolate.h) */
};

typedef struct kc_controller_spec {
  const char *name;
  const char *plugin;         /* absolute or as written if absolute; relative
                                 paths resolved against the config's directory;
                                 "" when the controller has a hook */
  const kc_hook_spec *hook;   /* NULL when it has a plugin (exactly one of the two) */
  enum kc_isolation isolation; /* plugins only */
  kc_kind_ref for_;
  const kc_owns_spec *owns;
  size_t nowns;
  const kc_watch_spec *watches;
  size_t nwatches;
  int64_t workers;
  int64_t reconcile_timeout_ms;
  /* readYourOwnWrites (default true): a key waits until the informers have
   * observed the writes of its last reconcile (docs/design.md). */
  bool read_your_own_writes;
  kc_rate_limit rate_limit;
  unsigned predicates;        /* for the `for` kind; 0 = every update */
  kc_sharding_spec sharding;  /* shards == 0: every key is reconciled here */
  /* dryRun: writes go out with dryRun=All (host/dryrun.h); the controller's
   * own key when given, else the top-level dryRun. */
  bool dry_run;
  const kc_yaml_node *settings; /* NULL when absent; any YAML type */
  const char *finalizer;      /* `finalizer:` the daemon keeps on reconciled objects; NULL: none */
  enum kc_update_strategy update_strategy; /* default of the `owns` items */
  const kc_yaml_node *at;
} kc_controller_spec;

typedef struct kc_leader_election {
  bool enabled;
  const char *namespace_;
  const char *name;
  const char *identity;       /* NULL: hostname + unique suffix (chosen at start) */
  int64_t lease_duration_ms;
  int64_t renew_deadline_ms;
  int64_t retry_period_ms;
} kc_leader_election;

/* The longest socket path (a sockaddr_un's sun_path less its NUL). */
#define KC_CONFIG_SOCKET_PATH_MAX 107
/* The longest adminSocketGroup name. */
#define KC_CONFIG_GROUP_NAME_MAX 64

typedef struct kc_config {
  const char *file;           /* as given to the loader */
  const char *dir;            /* directory relative paths resolve against */
  const char *kubeconfig;     /* NULL when absent (then KUBECONFIG, in-cluster) */
  kc_leader_election leader_election;
  kc_sharding_spec sharding;  /* the global default controllers inherit */
  const char *metrics_bind;   /* "host:port"; "0" disables the listener */
  bool metrics_bind_set;      /* metrics.bindAddress given (else the default follows secure) */
  /* metrics.secure: TLS and TokenReview/SubjectAccessReview on the metrics
   * listener (ops.h); its default address is then KC_DEFAULT_SECURE_METRICS_BIND. */
  bool metrics_secure;
  const char *metrics_cert_path; /* certPath: a directory with the pair; NULL: self-signed */
  const char *metrics_cert_name; /* certName: default tls.crt */
  const char *metrics_cert_key;  /* certKey: default tls.key */
  bool metrics_debug_queues;  /* metrics.debugQueues: /debug/queues, /debug/keys, /debug/trace */
  /* adminSocket: the `kctrld ctl` socket (an absolute path, or "0": none);
   * NULL: $RUNTIME_DIRECTORY/admin.sock under systemd, else none. */
  const char *admin_socket;
  /* adminSocketGroup: the group of a 0660 admin socket; NULL: mode 0600.
   * Only its syntax is checked here: the group is looked up at start and by
   * check-config (ops/adminsock.h). */
  const char *admin_socket_group;
  enum kc_log_level log_level;
  enum kc_log_format log_format; /* logFormat: text (default) or json */
  bool dry_run;               /* dryRun: the default of every controller's dryRun */
  int64_t shutdown_timeout_ms;
  int64_t decode_threads;     /* decodeThreads: -1 = one per core beyond the loop's; 0 = decode
                                 on the loop thread */
  /* authFailureReadinessTimeout: /readyz fails once every API request has
   * got 401/403 (or no answer) for this long; 0 = never. */
  int64_t auth_failure_readiness_ms;
  /* stateDirectory: where informers keep their snapshots for warm restarts
   * (docs/operations.md "State directory"); NULL: off. snapshotMaxAge: an
   * older snapshot is not used (0 = no bound). */
  const char *state_directory;
  int64_t snapshot_max_age_ms;
  const kc_informer_spec *informers; /* explicit ones in file order, then implicit */
  size_t ninformers;
  const kc_controller_spec *controllers;
  size_t ncontrollers;
  kc_yaml_doc *doc;           /* owned; settings point into it */
} kc_config;

/* Loads and validates the file at `path`.
 * Returns: 0 with *out set (free with kc_config_free), -EINVAL with one
 * error per line in err, -EPERM when the file (or its directory) is
 * writable by group/others (fileperm.h; the message names it), -ENOMEM, or
 * -errno of open/read.
 * Context: any thread. */
int kc_config_load_file(const char *path, kc_config **out, char *err, size_t errlen);

/* kc_config_free(NULL) is a no-op. Zeroes the YAML tree (kubeconfig paths and
 * plugin settings may be sensitive). */
void kc_config_free(kc_config *cfg);

/* Index of the informer with this identity, or -1. */
ssize_t kc_config_find_informer(const kc_config *cfg, const char *identity);
/* Index of the controller with this name, or -1. */
ssize_t kc_config_find_controller(const kc_config *cfg, const char *name);

/* ---- reload diff ---------------------------------------------------------- */

enum kc_change {
  KC_CHANGE_ADDED = 1,
  KC_CHANGE_REMOVED,
  KC_CHANGE_CHANGED,
};

/* What changed in an informer whose identity (scope) is unchanged: these can
 * be applied without dropping the cache. A changed scope is reported as the
 * old informer removed and the new one added. */
enum kc_informer_field {
  KC_INF_NAME = 1u << 0,
  KC_INF_RESYNC = 1u << 1,
  KC_INF_INDEXES = 1u << 2,
  KC_INF_WATCH_OPTIONS = 1u << 3, /* pageSize, watchTimeout, inactivity, streamingList */
  KC_INF_IMPLICIT = 1u << 4,      /* became (or stopped being) a default informer */
};

enum kc_controller_field {
  KC_CTL_PLUGIN = 1u << 0,      /* plugin path: reload the plugin */
  KC_CTL_SETTINGS = 1u << 1,    /* settings subtree: re-init the plugin */
  KC_CTL_FOR = 1u << 2,
  KC_CTL_OWNS = 1u << 3,
  KC_CTL_WATCHES = 1u << 4,
  KC_CTL_WORKERS = 1u << 5,
  KC_CTL_TIMEOUT = 1u << 6,
  KC_CTL_RATE_LIMIT = 1u << 7,
  KC_CTL_PREDICATES = 1u << 8,
  KC_CTL_INFORMERS = 1u << 9,   /* an informer it is bound to changed scope */
  KC_CTL_HOOK = 1u << 10,       /* the hook: subtree: restart the hook */
  KC_CTL_SHARDING = 1u << 11,   /* effective sharding settings */
  KC_CTL_DRY_RUN = 1u << 12,    /* effective dryRun: a new instance */
  KC_CTL_CHILDREN = 1u << 13,   /* finalizer or updateStrategy */
  KC_CTL_READ_OWN_WRITES = 1u << 14, /* readYourOwnWrites */
};

enum kc_global_field {
  KC_GLOBAL_KUBECONFIG = 1u << 0,
  KC_GLOBAL_LEADER_ELECTION = 1u << 1,
  KC_GLOBAL_METRICS = 1u << 2,
  KC_GLOBAL_LOG_LEVEL = 1u << 3,
  KC_GLOBAL_SHUTDOWN_TIMEOUT = 1u << 4,
  KC_GLOBAL_DECODE_THREADS = 1u << 5,
  KC_GLOBAL_LOG_FORMAT = 1u << 6,
  KC_GLOBAL_AUTH_READINESS = 1u << 7,
  KC_GLOBAL_STATE_DIRECTORY = 1u << 8, /* stateDirectory or snapshotMaxAge */
  KC_GLOBAL_ADMIN_SOCKET = 1u << 9, /* adminSocket or adminSocketGroup */
};

typedef struct kc_config_change {
  enum kc_change change;
  ssize_t old_index;          /* -1 when added */
  ssize_t new_index;          /* -1 when removed */
  unsigned fields;            /* kc_informer_field or kc_controller_field bits */
} kc_config_change;

typedef struct kc_config_diff {
  kc_config_change *informers;  /* removed (old order), then changed/added (new order) */
  size_t ninformers;
  kc_config_change *controllers;
  size_t ncontrollers;
  unsigned global;            /* kc_global_field bits */
} kc_config_diff;

/* Compares two valid configs. Informers are matched by identity, controllers
 * by name; unchanged entries are not listed. Returns 0 with *out (free with
 * kc_config_diff_free) or -ENOMEM. Context: any thread. */
int kc_config_compare(const kc_config *old_cfg, const kc_config *new_cfg, kc_config_diff **out);
void kc_config_diff_free(kc_config_diff *diff);
/* True when nothing differs. */
bool kc_config_diff_empty(const kc_config_diff *diff);
/* One-line human summary for the reload log line, e.g.
 * "informers: +1 -0 ~1; controllers: +0 -1 ~1 (podset: settings)".
 * Returns the length or -ENOSPC (truncated, NUL-terminated). */
int kc_config_diff_summary(const kc_config_diff *diff, const kc_config *old_cfg,
                           const kc_config *new_cfg, char *buf, size_t cap);

/* --- Test seam: for tests only, not called by the daemon --- */
/* kc_config_load_file from memory; `name` is used in positions, `dir`
 * (may be NULL = the current directory) resolves relative paths. */
int kc_config_load_buffer(const char *name, const char *dir, const char *buf, size_t len,
                          kc_config **out, char *err, size_t errlen);

/* A group name adminSocketGroup and --admin-socket-group accept (its
 * syntax; whether the group exists is checked where it is used). */
bool kc_config_group_name_ok(const char *name);

#endif
