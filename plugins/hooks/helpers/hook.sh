# SPDX-License-Identifier: Apache-2.0
# hook.sh: a kctrld hook (protocol kctrld.io/hook/v1, docs/hooks.md) written
# as one bash function. Needs bash and jq. Source it, define the function,
# hand it to kctrld_run:
#
#   #!/bin/bash
#   . /usr/share/kctrld/hook.sh
#   reconcile() {
#     [ "$(kctrld_req '.object != null')" = true ] || return 0   # deleted: done
#     kctrld_patch_object '{"metadata":{"labels":{"seen":"yes"}}}'
#     kctrld_event Seen "labelled $(kctrld_req .key)"
#   }
#   kctrld_run reconcile
#
# kctrld_run reads one request per line on stdin and writes one response
# line on stdout per request, so the same script works in both exec modes
# (persistent: request after request; per-call: one, then stdin closes).
# For each request it sets KCTRLD_REQUEST (the request's JSON), clears the
# actions and calls the function with the function's stdout sent to stderr
# (the daemon logs it with the key; nothing the function prints can break
# the response). The actions the function added run in order; the result
# is `done` unless the function set another with kctrld_result. A function
# that returns non-zero without a result answers `error` naming its status.
#
# Request:  kctrld_req FILTER       jq -r FILTER of the request (a string)
#           kctrld_req_json FILTER  jq -c FILTER of the request (JSON)
# Actions:  kctrld_create OBJECT_JSON
#           kctrld_update OBJECT_JSON            (conditional with metadata.resourceVersion)
#           kctrld_update_status OBJECT_JSON
#           kctrld_patch APIVERSION KIND NAMESPACE NAME PATCH_JSON [merge|json|strategic] [status]
#           kctrld_patch_object PATCH_JSON [merge|json|strategic] [status]   (the request's object)
#           kctrld_apply OBJECT_JSON [FIELD_MANAGER] [force]
#           kctrld_delete APIVERSION KIND NAMESPACE NAME [UID]
#           kctrld_event REASON MESSAGE [Normal|Warning]
#           kctrld_action ACTION_JSON            (any action of the protocol)
# Result:   kctrld_result done | requeue | requeueAfter DURATION [low|normal|high] | error MESSAGE
#                         | terminal MESSAGE
#
# Installed by the kctrld package as /usr/share/kctrld/hook.sh.

kctrld_req() { jq -r "$1" <<<"$KCTRLD_REQUEST"; }
kctrld_req_json() { jq -c "$1" <<<"$KCTRLD_REQUEST"; }

# Appends one action (checked to be a JSON object).
kctrld_action() {
  local a
  a=$(jq -ce 'if type == "object" and (.action | type) == "string" then . else error("not an action") end' \
      <<<"$1" 2>/dev/null) || { echo "kctrld_action: not an action object: $1" >&2; return 1; }
  KCTRLD_ACTIONS+=("$a")
}

kctrld_create() { kctrld_action "$(jq -c '{action: "create", object: .}' <<<"$1")"; }
kctrld_update() { kctrld_action "$(jq -c '{action: "update", object: .}' <<<"$1")"; }
kctrld_update_status() { kctrld_action "$(jq -c '{action: "updateStatus", object: .}' <<<"$1")"; }

kctrld_patch() {
  kctrld_action "$(jq -cn --arg av "$1" --arg kind "$2" --arg ns "$3" --arg name "$4" --argjson p "$5" \
    --arg type "${6:-merge}" --arg sub "${7:-}" \
    '{action: "patch", apiVersion: $av, kind: $kind, name: $name, patch: $p}
     + (if $ns != "" then {namespace: $ns} else {} end)
     + (if $type != "merge" then {patchType: $type} else {} end)
     + (if $sub != "" then {subresource: $sub} else {} end)')"
}

kctrld_patch_object() {
  local o
  o=$(jq -r '.object | [.apiVersion, .kind, (.metadata.namespace // ""), .metadata.name] | @tsv' \
      <<<"$KCTRLD_REQUEST") || return 1
  local av kind ns name
  IFS=$'\t' read -r av kind ns name <<<"$o"
  kctrld_patch "$av" "$kind" "$ns" "$name" "$1" "${2:-merge}" "${3:-}"
}

kctrld_apply() {
  kctrld_action "$(jq -c --arg fm "${2:-}" --arg force "${3:-}" \
    '{action: "apply", object: .} + (if $fm != "" then {fieldManager: $fm} else {} end)
     + (if $force == "force" then {force: true} else {} end)' <<<"$1")"
}

kctrld_delete() {
  kctrld_action "$(jq -cn --arg av "$1" --arg kind "$2" --arg ns "$3" --arg name "$4" --arg uid "${5:-}" \
    '{action: "delete", apiVersion: $av, kind: $kind, name: $name}
     + (if $ns != "" then {namespace: $ns} else {} end)
     + (if $uid != "" then {preconditions: {uid: $uid}} else {} end)')"
}

kctrld_event() {
  kctrld_action "$(jq -cn --arg r "$1" --arg m "$2" --arg t "${3:-Normal}" \
    '{action: "event", reason: $r, message: $m, type: $t}')"
}

kctrld_result() {
  case "$1" in
    done | requeue) KCTRLD_RESULT=$(jq -cn --arg r "$1" '{result: $r}') ;;
    requeueAfter) KCTRLD_RESULT=$(jq -cn --arg d "$2" --arg p "${3:-}" \
      '{result: "requeueAfter", requeueAfter: $d} + (if $p != "" then {priority: $p} else {} end)') ;;
    error | terminal) KCTRLD_RESULT=$(jq -cn --arg r "$1" --arg m "${2:-}" '{result: $r, message: $m}') ;;
    *) echo "kctrld_result: unknown result \"$1\"" >&2; return 1 ;;
  esac
}

# The response of the current request (one line).
kctrld_response_() {
  local result=${KCTRLD_RESULT:-'{"result":"done"}'}
  if [ ${#KCTRLD_ACTIONS[@]} -eq 0 ]; then
    printf '%s\n' "$result"
  else
    printf '%s\n' "${KCTRLD_ACTIONS[@]}" | jq -cs --argjson r "$result" '$r + {actions: .}'
  fi
}

kctrld_run() {
  local fn=$1 status
  while IFS= read -r KCTRLD_REQUEST || [ -n "$KCTRLD_REQUEST" ]; do
    [ -n "$KCTRLD_REQUEST" ] || continue
    KCTRLD_ACTIONS=()
    KCTRLD_RESULT=
    if ! jq -e 'type == "object"' <<<"$KCTRLD_REQUEST" >/dev/null 2>&1; then
      jq -cn '{result: "error", message: "request is not a JSON object"}'
      continue
    fi
    status=0
    "$fn" >&2 || status=$?
    if [ "$status" -ne 0 ] && [ -z "$KCTRLD_RESULT" ]; then
      KCTRLD_ACTIONS=()
      kctrld_result error "$fn returned status $status"
    fi
    kctrld_response_
  done
}
