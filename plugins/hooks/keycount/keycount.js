#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// keycount.js: the keycount hook (keycount.py) in Node.js, without a helper:
// labels every ConfigMap with kctrld.io/keys = the number of its data and
// binaryData keys and records a Counted Event; an annotation
// keycount.kctrld.io/fail=TEXT answers an error result. One request per line
// on stdin, one response per line on stdout: either exec mode.
//
// Node's JIT needs memory that is writable and then executable, which the
// packaged unit's MemoryDenyWriteExecute=yes refuses (node aborts at
// start): run it with `node --jitless`, or see docs/deploy.md "Hooks that
// need a JIT" for the other ways.
'use strict';
const readline = require('readline');

const LABEL = 'kctrld.io/keys';

function reconcile(req) {
  const cm = req.object;
  if (cm === null) return { result: 'done' }; // deleted
  const md = cm.metadata;
  const fail = (md.annotations || {})['keycount.kctrld.io/fail'];
  if (fail) return { result: 'error', message: fail };
  const n = String(Object.keys(cm.data || {}).length + Object.keys(cm.binaryData || {}).length);
  if ((md.labels || {})[LABEL] === n) return { result: 'done' };
  return {
    result: 'done',
    actions: [
      { action: 'patch', apiVersion: 'v1', kind: 'ConfigMap', namespace: md.namespace, name: md.name,
        patch: { metadata: { resourceVersion: md.resourceVersion, labels: { [LABEL]: n } } } },
      { action: 'event', reason: 'Counted', message: `${LABEL}=${n}` },
    ],
  };
}

const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on('line', (line) => {
  if (!line.trim()) return;
  let resp;
  try {
    resp = reconcile(JSON.parse(line));
  } catch (e) {
    console.error(e.stack);
    resp = { result: 'error', message: String(e) };
  }
  process.stdout.write(JSON.stringify(resp) + '\n');
});
