#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# keycount.sh: the keycount hook (keycount.py) in bash with the shell helper
# (plugins/hooks/helpers/hook.sh, packaged as /usr/share/kctrld/hook.sh;
# KCTRLD_HOOK_SH overrides where it is): labels every ConfigMap with
# kctrld.io/keys = the number of its data and binaryData keys and records a
# Counted Event; an annotation keycount.kctrld.io/fail=TEXT answers an error
# result. Works in both exec modes. Needs bash and jq.
. "${KCTRLD_HOOK_SH:-/usr/share/kctrld/hook.sh}"

reconcile() {
  [ "$(kctrld_req '.object != null')" = true ] || return 0 # deleted: done
  local fail n
  fail=$(kctrld_req '.object.metadata.annotations["keycount.kctrld.io/fail"] // ""')
  if [ -n "$fail" ]; then
    kctrld_result error "$fail"
    return
  fi
  n=$(kctrld_req '(.object.data // {} | length) + (.object.binaryData // {} | length) | tostring')
  [ "$(kctrld_req '.object.metadata.labels["kctrld.io/keys"] // ""')" != "$n" ] || return 0
  echo "counting $(kctrld_req .key): $n keys" # to the daemon's log
  kctrld_patch_object "$(jq -cn --arg rv "$(kctrld_req .object.metadata.resourceVersion)" --arg n "$n" \
    '{metadata: {resourceVersion: $rv, labels: {"kctrld.io/keys": $n}}}')"
  kctrld_event Counted "kctrld.io/keys=$n"
}

kctrld_run reconcile
