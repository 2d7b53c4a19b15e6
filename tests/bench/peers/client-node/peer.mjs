// SPDX-License-Identifier: Apache-2.0
// @kubernetes/client-node peer: makeInformer on all Pods, handlers put the key
// into a dedup Set, one "worker" (setImmediate loop) drains it and reads the
// object back from the informer cache. Same stdout protocol as clientgo-peer:
// SYNCED <unix_s> <events> <processed>; DONE <unix_s> <updates>; STAT ...
// Usage: CLIENT_NODE_DIR=DIR node peer.mjs KUBECONFIG   (DIR: where tests/bench/bench-deps
// installed package.json with npm, BUILD/bench/client-node)
import path from 'node:path';
const dir = process.env.CLIENT_NODE_DIR;
const k8s = await import(path.join(dir, 'node_modules/@kubernetes/client-node/dist/index.js'));
const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
// client-node 1.x refuses plain http:// servers unless skipTLSVerify is set
kc.clusters = kc.clusters.map((c) => ({ ...c, skipTLSVerify: true }));
const api = kc.makeApiClient(k8s.CoreV1Api);
const target = parseInt(process.env.WATCH_TARGET || '0', 10);
const statMs = parseInt(process.env.STAT_MS || '1000', 10);
let events = 0, processed = 0, updates = 0, synced = false, done = false;
const now = () => Date.now() / 1000;
let listed = false;
const informer = k8s.makeInformer(kc, '/api/v1/pods', async () => {
  const r = await api.listPodForAllNamespaces();
  listed = true;
  return r;
});
const queue = new Set();
let scheduled = false;
function work() {
  scheduled = false;
  for (const key of queue) {
    queue.delete(key);
    const i = key.indexOf('/');
    informer.get(key.slice(i + 1), key.slice(0, i));
    processed++;
  }
}
function enqueue(obj) {
  events++;
  queue.add((obj.metadata.namespace || '') + '/' + obj.metadata.name);
  if (!scheduled) { scheduled = true; setImmediate(work); }
}
informer.on('add', enqueue);
informer.on('update', (obj) => {
  enqueue(obj);
  if (synced) {
    updates++;
    if (target > 0 && updates % target === 0) { console.log(`DONE ${now().toFixed(6)} ${updates}`); }
  }
});
informer.on('delete', enqueue);
informer.on('error', (err) => {
  console.error('informer error', err && (err.message || err));
  if (synced) setTimeout(() => informer.start().catch((e) => console.error('restart failed', e)), 1000);
});
for (;;) { // start() resolves after the list (and the watch request); list errors go to 'error'
  await informer.start();
  if (listed) break;
  await new Promise((r) => setTimeout(r, 1000));
}
synced = true;
console.log(`SYNCED ${now().toFixed(6)} ${events} ${processed}`);
setInterval(() => console.log(`STAT ${now().toFixed(6)} ${events} ${processed} ${updates}`), statMs);
