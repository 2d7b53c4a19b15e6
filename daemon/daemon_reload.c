/* SPDX-License-Identifier: Apache-2.0 */
/* daemon_reload: live reload on SIGHUP, validate-then-swap (daemon.c's top
 * comment): the new file is loaded and compared with the running one
 * (kc_config_compare), the controllers it removes or changes are drained,
 * then the new config is swapped in under the registry's write lock, keeping
 * informers with an unchanged scope and controllers that did not change.
 * Loop thread only.
 */
#include "daemon.h"
#include "daemon_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- reload ------------------------------------------------------------------- */

/* One log record per "file:line:col: message" line (log records are single
 * lines, so a multi-line text would run together). */
void daemon_log_config_errors(const char *err) {
  for (const char *p = err; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (n) kc_error("config", "%.*s", (int)n, p);
    p += n + (nl ? 1 : 0);
  }
}

static const kc_config_change *find_change(const kc_config_change *v, size_t n, bool by_old,
                                           size_t index) {
  for (size_t i = 0; i < n; i++)
    if ((by_old ? v[i].old_index : v[i].new_index) == (ssize_t)index) return &v[i];
  return NULL;
}

/* An old informer is kept when the new config has one with the same scope
 * and the same indexes (a store's indexes are fixed at creation). Returns
 * its index in the new config, or -ENOENT. */
static ssize_t kept_informer(kc_daemon *d, size_t old_index) {
  const kc_config_change *ch =
      find_change(d->reload_diff->informers, d->reload_diff->ninformers, true, old_index);
  if (ch && (ch->change == KC_CHANGE_REMOVED || (ch->fields & KC_INF_INDEXES))) return -ENOENT;
  ssize_t j = kc_config_find_informer(d->reload_cfg, d->cfg->informers[old_index].identity);
  return j < 0 ? -ENOENT : j;
}

static bool controller_kept(kc_daemon *d, size_t old_index) {
  const kc_controller_spec *s = &d->cfg->controllers[old_index];
  if (find_change(d->reload_diff->controllers, d->reload_diff->ncontrollers, true, old_index))
    return false;
  if (kc_plugin_file_changed(s->plugin)) return false; /* rebuilt: run the new code */
  if (kept_informer(d, s->for_.informer) < 0) return false;
  for (size_t i = 0; i < s->nowns; i++)
    if (kept_informer(d, s->owns[i].ref.informer) < 0) return false;
  for (size_t i = 0; i < s->nwatches; i++)
    if (kept_informer(d, s->watches[i].ref.informer) < 0) return false;
  return kc_config_find_controller(d->reload_cfg, s->name) >= 0;
}

static void apply_reload(kc_daemon *d) {
  kc_config *nc = d->reload_cfg;
  kind_slot **nk = calloc(nc->ninformers ? nc->ninformers : 1, sizeof *nk);
  ctl_slot *nctl = calloc(nc->ncontrollers ? nc->ncontrollers : 1, sizeof *nctl);
  struct config_hold *nh = daemon_hold_new(nc);
  if (!nk || !nctl || !nh) {
    free(nk), free(nctl), free(nh);
    kc_error("daemon", "reload: out of memory; keeping the old config");
    kc_config_free(nc);
    goto done;
  }
  /* Informers: keep equal scopes, close the rest (after the swap below),
   * new ones start on the tick. Worker threads read the slots under the
   * registry lock, so no slot is changed or freed before the write lock. */
  kind_slot **dead = calloc(d->nkinds ? d->nkinds : 1, sizeof *dead);
  if (!dead) {
    free(nk), free(nctl), free(nh);
    kc_error("daemon", "reload: out of memory; keeping the old config");
    kc_config_free(nc);
    goto done;
  }
  size_t ndead = 0;
  for (size_t i = 0; i < d->nkinds; i++) {
    ssize_t j = kept_informer(d, i);
    if (j >= 0 && !nk[j])
      nk[j] = d->kinds[i];
    else
      dead[ndead++] = d->kinds[i];
  }
  for (size_t j = 0; j < nc->ninformers; j++)
    if (!nk[j] && !(nk[j] = daemon_new_slot(d, &nc->informers[j])))
      kc_error("daemon", "reload: out of memory for informer %zu", j); /* retried below */
  /* Controllers: kept ones are rebound, the others are new. */
  for (size_t i = 0; i < d->nctls; i++) {
    ctl_slot *old = &d->ctls[i];
    ssize_t j = kc_config_find_controller(nc, old->spec->name);
    if (j >= 0) nctl[j].init_failures = old->init_failures; /* a counter survives reloads */
    if (j >= 0 && old->ctl) {
      nctl[j].ctl = old->ctl;
      nctl[j].spec = &nc->controllers[j];
      kc_controller_rebind(old->ctl, nctl[j].spec);
    } else {
      kc_plugin_instance_free(old->inst);
    }
  }
  pthread_rwlock_wrlock(&d->registry_lock);
  for (size_t j = 0; j < nc->ninformers; j++) {
    if (!nk[j] || nk[j]->spec == &nc->informers[j]) continue;
    nk[j]->spec = &nc->informers[j]; /* a kept slot (new ones point there already) */
    if (nk[j]->informer) kc_informer_rebind(nk[j]->informer, nk[j]->spec);
  }
  struct config_hold *old_hold = d->hold;
  free(d->kinds);
  free(d->ctls);
  d->kinds = nk;
  d->nkinds = nc->ninformers;
  d->ctls = nctl;
  d->nctls = nc->ncontrollers;
  d->cfg = nc;
  d->hold = nh;
  pthread_rwlock_unlock(&d->registry_lock);
  for (size_t i = 0; i < ndead; i++) daemon_release_slot(dead[i]); /* no thread can reach them now */
  free(dead);
  daemon_hold_unref(old_hold); /* freed now unless kept controllers' instances still hold it */
  daemon_pauses_retain(d);
  for (size_t j = 0; j < d->nkinds; j++) {
    if (!d->kinds[j]) { /* allocation failed above: the daemon cannot go on safely */
      kc_error("daemon", "reload: out of memory; stopping");
      raise(SIGTERM);
      break;
    }
  }
  for (size_t j = 0; j < d->nctls; j++) {
    if (!d->ctls[j].spec) d->ctls[j].spec = &nc->controllers[j];
    if (!d->ctls[j].ctl) daemon_instantiate(d, &d->ctls[j], true);
  }
  kc_log_set_level(d->opts.log_level ? d->opts.log_level : nc->log_level);
  kc_log_set_format(d->opts.log_format ? d->opts.log_format : nc->log_format);
  kc_info("daemon", "reload applied");
  kc_ops_reloaded(d->ops, "reload applied");
done:
  kc_config_diff_free(d->reload_diff);
  d->reload_diff = NULL;
  d->reload_cfg = NULL;
  daemon_arm_init_retry(d);
  daemon_on_tick(&d->tick);
}

static void on_reload_controller_stopped(void *ud) {
  kc_daemon *d = ud;
  d->controllers_alive--;
  if (--d->reload_waiting == 0 && !d->stopping) apply_reload(d);
}

/* Called only while no reload is in progress. Returns 0, setting *pending
 * when the reload was applied or is being applied (apply_reload reports the
 * outcome; unchanged config: not set), or a negative errno when it was
 * rejected (the reason is in d->reload_error). */
int daemon_reload(kc_daemon *d, bool *pending) {
  d->reload_error[0] = 0;
  char err[4096];
  kc_config *nc = NULL;
  int rc = kc_config_load_file(d->opts.config_path, &nc, err, sizeof err);
  if (rc < 0) {
    kc_error("config", "reload rejected, keeping the running config:");
    daemon_log_config_errors(err);
    snprintf(d->reload_error, sizeof d->reload_error, "reload rejected: %.400s", err);
    return rc;
  }
  kc_config_diff *diff = NULL;
  if ((rc = kc_config_compare(d->cfg, nc, &diff)) < 0) {
    kc_error("daemon", "reload: cannot compare configs (out of memory)");
    snprintf(d->reload_error, sizeof d->reload_error, "reload rejected: out of memory");
    kc_config_free(nc);
    return rc;
  }
  char summary[1024];
  kc_config_diff_summary(diff, d->cfg, nc, summary, sizeof summary);
  /* A plugin file rebuilt at the same path changes no config text, but its
   * controllers must be re-instantiated to run the new code. */
  size_t rebuilt = 0;
  for (size_t i = 0; i < d->nctls; i++) {
    const char *path = d->ctls[i].spec->plugin;
    if (!d->ctls[i].ctl || !kc_plugin_file_changed(path)) continue;
    size_t len = strlen(summary);
    snprintf(summary + len, sizeof summary - len, "%s%s", rebuilt++ ? ", " : "; plugin file changed: ", path);
  }
  if (kc_config_diff_empty(diff) && !rebuilt) {
    kc_info("daemon", "SIGHUP: config unchanged");
    kc_config_diff_free(diff);
    kc_config_free(nc);
    return 0;
  }
  kc_info("daemon", "SIGHUP: applying %s", summary);
  if (diff->global & (KC_GLOBAL_KUBECONFIG | KC_GLOBAL_LEADER_ELECTION | KC_GLOBAL_METRICS |
                      KC_GLOBAL_ADMIN_SOCKET))
    kc_warn("daemon", "reload: kubeconfig, leaderElection, metrics and adminSocket changes take "
                      "effect at the next restart");
  d->reload_cfg = nc;
  d->reload_diff = diff;
  d->reload_waiting = 0;
  for (size_t i = 0; i < d->nctls; i++) {
    ctl_slot *cs = &d->ctls[i];
    if (!cs->ctl || controller_kept(d, i)) continue;
    d->reload_waiting++;
    kc_controller_stop(cs->ctl, (uint64_t)d->cfg->shutdown_timeout_ms, on_reload_controller_stopped,
                       d);
    cs->ctl = NULL;
  }
  *pending = true;
  if (d->reload_waiting == 0) apply_reload(d);
  return 0;
}

