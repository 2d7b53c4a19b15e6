#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nsdefault: a kctrld exec hook (per-call mode, protocol kctrld.io/hook/v1,
# docs/hooks.md) that gives every Namespace a default ConfigMap.
#
# For each Namespace (controller `for: Namespace`, `owns: ConfigMap`), keeps
# a ConfigMap $NSDEFAULT_NAME (default kctrld-defaults) in it, owned by the
# Namespace, whose data is $NSDEFAULT_DATA (a JSON object, default {})
# merged with the Namespace's annotation nsdefault.kctrld.io/data (a JSON
# object, for per-namespace values). A Namespace labelled
# nsdefault.kctrld.io/skip=true, or being deleted, gets its ConfigMap
# deleted (guarded by the ConfigMap's uid). An annotation that is not a JSON
# object is an error result (retried with per-key backoff). Updates carry the
# cached resourceVersion: a stale cache gets a 409 and a requeue.
#
# The request comes on stdin, the response goes to stdout; one run per
# reconcile. Needs bash and jq.
set -euo pipefail
name=${NSDEFAULT_NAME:-kctrld-defaults}
defaults=${NSDEFAULT_DATA:-'{}'}
exec jq -c --arg name "$name" --argjson defaults "$defaults" '
  def owned_cm: [.owned[] | select(.kind == "ConfigMap" and .metadata.name == $name)] | first;
  def skipped: (.metadata.labels // {})["nsdefault.kctrld.io/skip"] == "true"
               or .metadata.deletionTimestamp != null;
  if .object == null then {result: "done"}   # gone: the ConfigMap goes with it (ownerReference)
  else
    .object as $ns | owned_cm as $cm | .expectationsSatisfied as $settled |
    if ($ns | skipped) then
      if $cm == null then {result: "done"}
      else {result: "done", actions: [
        {action: "delete", apiVersion: "v1", kind: "ConfigMap", namespace: $ns.metadata.name,
         name: $name, preconditions: {uid: $cm.metadata.uid}},
        {action: "event", reason: "DefaultsRemoved", message: "deleted ConfigMap \($name)"}]}
      end
    else
      (($ns.metadata.annotations // {})["nsdefault.kctrld.io/data"] // "{}") as $text |
      (try ($text | fromjson) catch null) as $extra |
      if ($extra | type) != "object" then
        {result: "error",
         message: "annotation nsdefault.kctrld.io/data of \($ns.metadata.name) is not a JSON object: \($text)"}
      else
        ($defaults + $extra | with_entries(.value |= tostring)) as $data |
        if $cm == null then
          if $settled | not then {result: "done"}   # our create is not in the cache yet
          else {result: "done", actions: [
            {action: "create", object: {apiVersion: "v1", kind: "ConfigMap",
              metadata: {name: $name, namespace: $ns.metadata.name,
                         ownerReferences: [{apiVersion: "v1", kind: "Namespace", name: $ns.metadata.name,
                                            uid: $ns.metadata.uid, controller: true}]},
              data: $data}},
            {action: "event", reason: "DefaultsCreated", message: "created ConfigMap \($name)"}]}
          end
        elif ($cm.data // {}) == $data then {result: "done"}
        else {result: "done", actions: [
          {action: "update", object: ($cm | .data = $data)}]}
        end
      end
    end
  end'
