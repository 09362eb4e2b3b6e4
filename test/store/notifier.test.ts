import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { pgConfigFromUrl, schemaFromUrl } from '../../src/store/db.ts';
import { createMemoryNotifier } from '../../src/store/notifier/memory.ts';
import { createPostgresNotifier, notifierChannel } from '../../src/store/notifier/postgres.ts';
import type { Notifier } from '../../src/store/notifier/types.ts';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';
import { record, runNotifierContract, uniqueTopic, waitFor } from './notifier-contract.ts';

runNotifierContract('memory', async (options) => {
  const notifier = createMemoryNotifier(options);
  return { notifier, cleanup: () => notifier.close() };
});

describe('notifierChannel', () => {
  it('names the channel after the schema', () => {
    assert.equal(notifierChannel('public'), 'stratus');
    assert.equal(notifierChannel('t_0123456789ab'), 'stratus_t_0123456789ab');
  });

  it('keeps long schema names within 63 bytes and distinct', () => {
    const a = notifierChannel(`${'s'.repeat(60)}_a`);
    const b = notifierChannel(`${'s'.repeat(60)}_b`);
    assert.ok(Buffer.byteLength(a) <= 63 && Buffer.byteLength(b) <= 63);
    assert.notEqual(a, b);
    assert.match(a, /^stratus_/);
  });
});

async function waitForAsync(predicate: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

if (testDialect === 'postgres') {
  describe('postgres notifier', () => {
    let database: TestDatabase;
    let url: string;
    let channel: string;
    let admin: pg.Client;
    const open: Notifier[] = [];

    /** A notifier on this file's channel (or another), with its own connections like a separate process. */
    const connect = async (options: { channel?: string; applicationName?: string; reconnectDelayMs?: number } = {}) => {
      const config: pg.PoolConfig = {
        ...pgConfigFromUrl(url, 2),
        application_name: options.applicationName ?? 'stratus-test',
      };
      const notifier = await createPostgresNotifier(config, {
        channel: options.channel ?? channel,
        reconnectDelayMs: options.reconnectDelayMs ?? 50,
      });
      open.push(notifier);
      return notifier;
    };

    before(async () => {
      database = await createTestDatabase();
      assert.ok(database.databaseUrl);
      url = database.databaseUrl;
      channel = notifierChannel(schemaFromUrl(url));
      admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await admin.connect();
    });
    after(async () => {
      for (const notifier of open) await notifier.close();
      await admin.end();
      await database.cleanup();
    });

    runNotifierContract('postgres', async (options) => {
      const notifier = await createPostgresNotifier(pgConfigFromUrl(url, 2), { channel, ...options });
      return { notifier, cleanup: () => notifier.close() };
    });

    it('delivers between two instances, in both directions and to the publisher itself', async () => {
      const one = await connect();
      const two = await connect();
      const topic = uniqueTopic('cross');
      const atOne = record(one, topic);
      const atTwo = record(two, topic);
      await one.publish(topic, 'from one');
      await two.publish(topic, 'from two');
      await waitFor(() => atOne.messages.length === 2 && atTwo.messages.length === 2, 5000, 'cross-instance delivery');
      assert.deepEqual(atOne.messages, ['from one', 'from two']);
      assert.deepEqual(atTwo.messages, ['from one', 'from two']);
    });

    it('publishes made at once go out together, and each settles once its message is sent', async () => {
      const one = await connect();
      const two = await connect();
      const topic = uniqueTopic('batched');
      const atTwo = record(two, topic);
      const messages = Array.from({ length: 300 }, (_, i) => `m${i}`);
      await Promise.all(messages.map((message) => one.publish(topic, message)));
      await two.fence();
      assert.deepEqual([...atTwo.messages].sort(), [...messages].sort(), 'every distinct message arrives');
      // PostgreSQL delivers identical messages of one transaction once: 300 identical publishes
      // sent one by one would arrive 300 times; gathered into a few statements, a few times.
      const same = uniqueTopic('batched-same');
      const sameAtTwo = record(two, same);
      await Promise.all(Array.from({ length: 300 }, () => one.publish(same, 'changed')));
      await two.fence();
      assert.ok(
        sameAtTwo.messages.length >= 1 && sameAtTwo.messages.length < 30,
        `${sameAtTwo.messages.length} deliveries`,
      );
    });

    it('fence: what another instance published before is delivered here once the fence resolves', async () => {
      const one = await connect();
      const two = await connect();
      assert.equal(two.crossInstance, true);
      const topic = uniqueTopic('fence-cross');
      const atTwo = record(two, topic);
      for (let n = 1; n <= Number(process.env.FENCE_ROUNDS ?? 30); n++) {
        // Published by one (the publisher's pool), or straight into the channel by another session.
        if (n % 2 === 0) await one.publish(topic, `n${n}`);
        else await admin.query('select pg_notify($1, $2)', [channel, JSON.stringify({ t: topic, m: `n${n}` })]);
        await two.fence();
        assert.equal(atTwo.messages.at(-1), `n${n}`, `delivered before fence ${n} resolved`);
      }
    });

    it('fence: rejects while the listening connection is re-established, then works again', async () => {
      const applicationName = `stratus-fence-${randomBytes(4).toString('hex')}`;
      const notifier = await connect({ applicationName, reconnectDelayMs: 1_000 });
      await notifier.fence();
      let resyncs = 0;
      notifier.onResync(() => resyncs++);
      const backend = await admin.query<{ pid: number }>(
        `select pid from pg_stat_activity where application_name = $1 and backend_type = 'client backend' and query = ';'`,
        [applicationName],
      );
      assert.equal(backend.rows.length, 1, 'exactly one listening backend (its last statement was the fence)');
      const pid = backend.rows[0]?.pid;
      await admin.query('select pg_terminate_backend($1)', [pid]);
      await waitForAsync(
        async () => (await admin.query('select 1 from pg_stat_activity where pid = $1', [pid])).rows.length === 0,
        'the backend to exit',
      );
      // Messages sent now could be missed: nothing may be trusted until the listener is back.
      await assert.rejects(notifier.fence(), /connection|reconnecting|terminated/i);
      await waitFor(() => resyncs === 1, 5000, 'onResync');
      await notifier.fence();
    });

    it('does not deliver across channels (other schemas)', async () => {
      const here = await connect();
      const elsewhere = await connect({ channel: `${channel}_other` });
      const topic = uniqueTopic('isolated');
      const atElsewhere = record(elsewhere, topic);
      const atHere = record(here, topic);
      await here.publish(topic, 'private');
      await elsewhere.publish(topic, 'sentinel');
      await waitFor(() => atElsewhere.messages.length === 1 && atHere.messages.length === 1, 5000, 'sentinel');
      assert.deepEqual(atElsewhere.messages, ['sentinel']);
      assert.deepEqual(atHere.messages, ['private']);
    });

    it('ignores malformed payloads on its channel', async () => {
      const notifier = await connect();
      const topic = uniqueTopic('malformed');
      const inbox = record(notifier, topic);
      for (const payload of [
        'not json',
        '42',
        'null',
        JSON.stringify({ t: topic }),
        JSON.stringify({ t: topic, m: 5 }),
      ]) {
        await admin.query('select pg_notify($1, $2)', [channel, payload]);
      }
      await notifier.publish(topic, 'valid');
      await waitFor(() => inbox.messages.length >= 1, 5000, 'valid message');
      assert.deepEqual(inbox.messages, ['valid']);
    });

    it('reconnects after its connection is killed, calls onResync, and delivers again', async () => {
      const applicationName = `stratus-resync-${randomBytes(4).toString('hex')}`;
      const publisher = await connect();
      const listener = await connect({ applicationName });
      const topic = uniqueTopic('resync');
      const inbox = record(listener, topic);
      let resyncs = 0;
      listener.onResync(() => {
        resyncs += 1;
      });
      await publisher.publish(topic, 'before');
      await waitFor(() => inbox.messages.length === 1, 5000, 'delivery before the drop');

      const killed = await admin.query<{ pid: number }>(
        `select pid from pg_stat_activity where application_name = $1 and query ilike 'LISTEN%'`,
        [applicationName],
      );
      assert.equal(killed.rows.length, 1, 'exactly one listening backend');
      await admin.query('select pg_terminate_backend($1)', [killed.rows[0]?.pid]);

      await waitFor(() => resyncs === 1, 5000, 'onResync');
      const listening = await admin.query<{ pid: number }>(
        `select pid from pg_stat_activity where application_name = $1 and query ilike 'LISTEN%'`,
        [applicationName],
      );
      assert.equal(listening.rows.length, 1, 'listening again');
      assert.notEqual(listening.rows[0]?.pid, killed.rows[0]?.pid);

      await publisher.publish(topic, 'after');
      await waitFor(() => inbox.messages.length === 2, 5000, 'delivery after the resync');
      assert.deepEqual(inbox.messages, ['before', 'after']);
      // Publishing from the instance that lost its listener works too (separate connection).
      await listener.publish(topic, 'own');
      await waitFor(() => inbox.messages.length === 3, 5000, 'own delivery');
      assert.equal(resyncs, 1);
    });

    it('keeps retrying with backoff while the database is unreachable, then resyncs once', async () => {
      // A TCP proxy in front of PostgreSQL: while "down" it cuts every connection (dropping the
      // listener's and refusing new ones), and it counts connection attempts.
      const target = new URL(process.env.DATABASE_URL ?? '');
      const sockets = new Set<Socket>();
      let down = false;
      let attempts = 0;
      const track = (socket: Socket) => {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
        socket.on('error', () => {});
      };
      const proxy: Server = createServer((downstream) => {
        attempts += 1;
        track(downstream);
        if (down) {
          downstream.destroy();
          return;
        }
        const upstream = tcpConnect(Number(target.port || 5432), target.hostname);
        track(upstream);
        downstream.pipe(upstream).pipe(downstream);
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      try {
        const address = proxy.address();
        assert.ok(address && typeof address === 'object');
        const proxied = new URL(url);
        proxied.hostname = '127.0.0.1';
        proxied.port = String(address.port);
        const notifier = await createPostgresNotifier(pgConfigFromUrl(proxied.toString(), 2), {
          channel,
          reconnectDelayMs: 20,
          maxReconnectDelayMs: 100,
        });
        open.push(notifier);
        const direct = await connect();
        const topic = uniqueTopic('outage');
        const inbox = record(notifier, topic);
        let resyncs = 0;
        notifier.onResync(() => {
          resyncs += 1;
        });

        down = true;
        attempts = 0;
        for (const socket of sockets) socket.destroy();
        // Attempts after 20, 40, 80, then every 100 ms: about 7 in 700 ms; a hot loop would make hundreds.
        await new Promise((resolve) => setTimeout(resolve, 700));
        assert.equal(resyncs, 0);
        assert.ok(attempts >= 4 && attempts <= 12, `expected backoff, got ${attempts} attempts`);
        down = false;
        await waitFor(() => resyncs === 1, 5000, 'onResync after the outage');
        await direct.publish(topic, 'back');
        await waitFor(() => inbox.messages.length === 1, 5000, 'delivery after the outage');
        assert.deepEqual(inbox.messages, ['back']);
        await notifier.close();
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => proxy.close(() => resolve()));
      }
    });

    it('closes promptly while reconnecting and never resyncs afterwards', async () => {
      const applicationName = `stratus-close-${randomBytes(4).toString('hex')}`;
      const notifier = await createPostgresNotifier(
        { ...pgConfigFromUrl(url, 2), application_name: applicationName },
        { channel, reconnectDelayMs: 200 },
      );
      let resyncs = 0;
      notifier.onResync(() => {
        resyncs += 1;
      });
      await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1`, [
        applicationName,
      ]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const started = Date.now();
      await notifier.close();
      assert.ok(Date.now() - started < 1000, 'close should not wait for the reconnect');
      await new Promise((resolve) => setTimeout(resolve, 400));
      assert.equal(resyncs, 0);
      const left = await admin.query(`select pid from pg_stat_activity where application_name = $1`, [applicationName]);
      assert.equal(left.rows.length, 0, 'no connection left open');
    });

    it('rejects creation when the database cannot be reached', async () => {
      await assert.rejects(
        createPostgresNotifier(
          { host: '127.0.0.1', port: 1, user: 'postgres', password: 'postgres', database: 'x' },
          { channel: 'stratus_unreachable' },
        ),
      );
    });

    it('rejects channel names PostgreSQL cannot carry', async () => {
      await assert.rejects(createPostgresNotifier(pgConfigFromUrl(url, 2), { channel: 'c'.repeat(64) }), TypeError);
      await assert.rejects(createPostgresNotifier(pgConfigFromUrl(url, 2), { channel: '' }), TypeError);
    });

    it('quotes the channel: mixed case and quotes round-trip', async () => {
      const odd = `Stratus "Odd" ${randomBytes(3).toString('hex')}`;
      const one = await connect({ channel: odd });
      const two = await connect({ channel: odd });
      const topic = uniqueTopic('quoted');
      const inbox = record(two, topic);
      await one.publish(topic, 'ok');
      await waitFor(() => inbox.messages.length === 1, 5000, 'delivery on a quoted channel');
    });
  });
}
