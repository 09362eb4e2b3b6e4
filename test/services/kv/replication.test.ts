import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AUTH, dataDirs, eventually, startNode, type KvNodeHandle } from './helpers.ts';

const dirs = dataDirs();
const running = new Set<KvNodeHandle>();
after(async () => {
  for (const node of running) await node.stop();
  await dirs.cleanup();
});

async function start(options: Parameters<typeof startNode>[0]): Promise<KvNodeHandle> {
  const node = await startNode(options);
  running.add(node);
  return node;
}

async function stop(node: KvNodeHandle): Promise<void> {
  running.delete(node);
  await node.stop();
}

async function call(
  node: KvNodeHandle,
  method: string,
  path: string,
  body?: object,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${node.url}${path}`, {
    method,
    headers: { ...AUTH, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function valueAt(node: KvNodeHandle, collection: string, key: string): Promise<unknown> {
  const got = await call(node, 'GET', `/v1/collections/${collection}/keys/${key}`);
  return got.status === 200 ? got.json.value : undefined;
}

async function ready(node: KvNodeHandle): Promise<boolean> {
  return (await fetch(`${node.url}/readyz`)).status === 200;
}

/** Every key of a collection on a node, as key → [value, version]. */
async function contents(node: KvNodeHandle, collection: string): Promise<Record<string, unknown>> {
  const got = await call(node, 'GET', `/v1/collections/${collection}/keys?limit=1000`);
  if (got.status !== 200) return { missing: got.status };
  return Object.fromEntries(
    (got.json.items as { key: string; value: unknown; version: number }[]).map((i) => [i.key, [i.value, i.version]]),
  );
}

describe('a replica without a complete baseline', () => {
  it('refuses subscriptions with 503 while it has none (a three-node chain shows it serving once it has)', async () => {
    // Its parent is not there yet: the replica has no baseline to pass on.
    const parent = await start({ dataDir: dirs.make(), name: 'late-parent' });
    const parentUrl = parent.url;
    await stop(parent);
    const replica = await start({ dataDir: dirs.make(), name: 'orphan', parentUrl });
    const refused = await fetch(`${replica.url}/v1/replicate`, { method: 'POST', headers: AUTH });
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'service_unavailable');
  });
});

describe('a three-node chain', () => {
  it('starts from a baseline, converges on writes made at any node, and forwards replica writes up', async () => {
    const root = await start({ dataDir: dirs.make(), name: 'root' });
    await call(root, 'POST', '/v1/collections', { name: 'users' });
    await call(root, 'POST', '/v1/collections', { name: 'empty' });
    await call(root, 'POST', '/v1/collections/users/keys/before', { value: { n: 1 } });
    await call(root, 'POST', '/v1/collections/users/keys/gone', { value: 0 });
    await call(root, 'DELETE', '/v1/collections/users/keys/gone');

    const child = await start({ dataDir: dirs.make(), name: 'child', parentUrl: root.url });
    const grandchild = await start({ dataDir: dirs.make(), name: 'grandchild', parentUrl: child.url });
    await eventually(async () => (await ready(child)) && (await ready(grandchild)), 5_000, 'both replicas ready');
    assert.deepEqual(await contents(grandchild, 'users'), { before: [{ n: 1 }, 1] });
    assert.deepEqual((await call(grandchild, 'GET', '/v1/collections')).json, { collections: ['users', 'empty'] });

    // A write at the grandchild goes up to the root, which assigns seq and version.
    const viaLeaf = await call(grandchild, 'POST', '/v1/collections/users/keys/from-leaf', { value: 'leaf' });
    assert.equal(viaLeaf.status, 200);
    assert.equal(viaLeaf.json.version, 1);
    assert.equal(await valueAt(grandchild, 'users', 'from-leaf'), 'leaf', 'read-your-writes on the node that took it');
    await call(child, 'POST', '/v1/collections/users/keys/from-middle', { value: 'middle' });
    await call(root, 'POST', '/v1/collections/users/keys/from-root', { value: 'root' });
    await call(child, 'POST', '/v1/collections', { name: 'made-below' });
    await call(grandchild, 'DELETE', '/v1/collections/users/keys/before');
    await call(root, 'DELETE', '/v1/collections/empty');

    const expected = { 'from-leaf': ['leaf', 1], 'from-middle': ['middle', 1], 'from-root': ['root', 1] };
    for (const node of [root, child, grandchild]) {
      await eventually(
        async () => JSON.stringify(await contents(node, 'users')) === JSON.stringify(expected),
        5_000,
        `${node.url} converged`,
      );
      await eventually(
        async () =>
          JSON.stringify((await call(node, 'GET', '/v1/collections')).json) ===
          JSON.stringify({ collections: ['users', 'made-below'] }),
        5_000,
        'collections converged',
      );
    }
    const seqs = await Promise.all(
      [root, child, grandchild].map(
        async (node) => ((await call(node, 'GET', '/v1/status')).json.replication as { last_seq: number }).last_seq,
      ),
    );
    assert.equal(new Set(seqs).size, 1, `every node at the same seq: ${seqs.join(', ')}`);

    // Replica-side validation happens before forwarding; a parent's 4xx is passed through.
    assert.equal(
      (await call(grandchild, 'POST', '/v1/collections/nope/keys/x', { value: 1 })).json.error !== undefined,
      true,
    );
    assert.equal((await call(grandchild, 'POST', '/v1/collections/nope/keys/x', { value: 1 })).status, 404);
    assert.equal((await call(grandchild, 'DELETE', '/v1/collections/users/keys/never')).status, 404);

    const status = (await call(child, 'GET', '/v1/status')).json;
    assert.equal(status.role, 'replica');
    assert.equal(status.parent, root.url);
    assert.equal(status.children, 1);
    const metrics = (await call(child, 'GET', '/v1/metrics')).json;
    assert.ok((metrics.replication_commands_received_total as number) > 0);
    assert.ok((metrics.replication_commands_sent_total as number) > 0);
    assert.equal(metrics.parent_connected, true);
    for (const node of [grandchild, child, root]) await stop(node);
  });
});

describe('a parent that goes away', () => {
  it('the child keeps serving reads, is not ready, answers 502 to writes, and resumes without a baseline', async () => {
    const rootDir = dirs.make();
    let root = await start({ dataDir: rootDir, name: 'root' });
    const port = root.port;
    await call(root, 'POST', '/v1/collections', { name: 'c' });
    for (let i = 0; i < 20; i++) await call(root, 'POST', `/v1/collections/c/keys/k${i}`, { value: i });
    const child = await start({ dataDir: dirs.make(), name: 'child', parentUrl: root.url });
    await eventually(() => ready(child), 5_000, 'child ready');
    const receivedAtFirst = (await call(child, 'GET', '/v1/metrics')).json
      .replication_commands_received_total as number;

    await stop(root);
    await eventually(async () => !(await ready(child)), 5_000, 'child not ready once the parent is gone');
    assert.equal(await valueAt(child, 'c', 'k7'), 7, 'reads still served from the local copy');
    const refused = await call(child, 'POST', '/v1/collections/c/keys/k1', { value: 'x' });
    assert.equal(refused.status, 502);
    assert.equal((refused.json.error as { code: string }).code, 'parent_unavailable');
    assert.equal(await valueAt(child, 'c', 'k1'), 1, 'nothing applied');

    root = await start({ dataDir: rootDir, name: 'root', port });
    await call(root, 'POST', '/v1/collections/c/keys/after-restart', { value: 'new' });
    await eventually(
      async () => (await valueAt(child, 'c', 'after-restart')) === 'new',
      5_000,
      'the new write reached the child',
    );
    assert.ok(await ready(child));
    // Resumed from its last seq: only the one new command came down, not 20 baseline keys again.
    const received = (await call(child, 'GET', '/v1/metrics')).json.replication_commands_received_total as number;
    assert.equal(received - receivedAtFirst, 1);
    await stop(child);
    await stop(root);
  });

  it('a child behind the trimmed log, or restarted, catches up with a fresh baseline', async () => {
    const root = await start({ dataDir: dirs.make(), name: 'root', logKeep: 5, trimIntervalMs: 50 });
    await call(root, 'POST', '/v1/collections', { name: 'c' });
    const childDir = dirs.make();
    let child = await start({ dataDir: childDir, name: 'child', parentUrl: root.url });
    await eventually(() => ready(child), 5_000, 'child ready');
    await stop(child);
    for (let i = 0; i < 50; i++) await call(root, 'POST', `/v1/collections/c/keys/k${i}`, { value: i });
    for (let i = 0; i < 40; i++) await call(root, 'DELETE', `/v1/collections/c/keys/k${i}`);
    // The root trims its log to ~5 entries; wait for a trim.
    await new Promise((resolve) => setTimeout(resolve, 200));
    child = await start({ dataDir: childDir, name: 'child', parentUrl: root.url });
    assert.equal(
      (await call(child, 'GET', '/v1/collections')).json.collections !== undefined,
      true,
      'the persisted copy is served at once',
    );
    await eventually(() => ready(child), 5_000, 'child ready again');
    const got = await contents(child, 'c');
    assert.deepEqual(Object.keys(got), ['k40', 'k41', 'k42', 'k43', 'k44', 'k45', 'k46', 'k47', 'k48', 'k49']);
    assert.deepEqual(got.k49, [49, 1]);
    // A baseline (two markers and ten keys), not the 90 commands since the child left.
    const received = (await call(child, 'GET', '/v1/metrics')).json.replication_commands_received_total as number;
    assert.equal(received, 12);
    await stop(child);
    await stop(root);
  });
});
