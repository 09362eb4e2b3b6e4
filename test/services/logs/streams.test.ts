import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type { TestService } from '../../helpers/service.ts';
import {
  as,
  assertError,
  call,
  createKey,
  createLogger,
  jsonOf,
  openStream,
  startLogs,
  withKey,
  type LoggerBody,
} from './helpers.ts';

let service: TestService;
let port: number;
before(async () => {
  service = await startLogs({ maxIngestBytes: 2 * 1024 * 1024 });
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  port = (service.app.server.address() as AddressInfo).port;
});
after(async () => {
  await service.close();
});

async function ingest(id: string, body: string | Buffer, headers = as('alice')): Promise<number> {
  return jsonOf<{ n: number }>(
    await call(
      service,
      'POST',
      `/v1/loggers/${id}/ingest`,
      { 'content-type': 'application/octet-stream', ...headers },
      body,
    ),
  ).n;
}

describe('raw ingest and filter', () => {
  test('ingest answers n; usage counts lines; a missing final newline is added', async () => {
    const logger = await createLogger(service, 'alice');
    assert.equal(await ingest(logger.id, 'hello\nerror line\n'), 17);
    assert.equal(await ingest(logger.id, ''), 0);
    assert.equal(await ingest(logger.id, 'tail\r'), 5);
    const got = jsonOf<LoggerBody>(await call(service, 'GET', `/v1/loggers/${logger.id}`, as('alice')));
    assert.deepEqual(got.usage, { bytes: 23, lines: 3 });
    const all = await call(service, 'GET', `/v1/loggers/${logger.id}/filter`, as('alice'));
    assert.equal(all.statusCode, 200);
    assert.equal(all.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(all.body, 'hello\nerror line\ntail\r\n');
  });

  test('ingest errors: 401, 403, 404, 413; JSON content type still taken as bytes', async () => {
    const logger = await createLogger(service, 'alice');
    assertError(await call(service, 'POST', `/v1/loggers/${logger.id}/ingest`, {}, 'x\n'), 401, 'unauthorized');
    assertError(await call(service, 'POST', `/v1/loggers/${logger.id}/ingest`, as('bob'), 'x\n'), 403, 'forbidden');
    assertError(
      await call(service, 'POST', `/v1/loggers/00000000-0000-4000-8000-000000000000/ingest`, as('alice'), 'x\n'),
      404,
      'not_found',
    );
    assertError(
      await call(service, 'POST', `/v1/loggers/${logger.id}/ingest`, as('alice'), Buffer.alloc(3 * 1024 * 1024, 97)),
      413,
      'payload_too_large',
    );
    assert.equal(
      await ingest(logger.id, '{"not":"parsed"', { ...as('alice'), 'content-type': 'application/json' }),
      15,
    );
    const key = await createKey(service, logger.id, 'alice');
    assert.equal(await ingest(logger.id, 'by key\n', withKey(key)), 7);
    assert.deepEqual(jsonOf<LoggerBody>(await call(service, 'GET', `/v1/loggers/${logger.id}`, as('alice'))).usage, {
      bytes: 23,
      lines: 2,
    });
  });

  test('several regexes must all match; a line is tested without its newline', async () => {
    const logger = await createLogger(service, 'alice');
    await ingest(logger.id, 'error disk full\nerror net down\nwarn disk slow\ninfo ok error\n');
    const both = await call(service, 'GET', `/v1/loggers/${logger.id}/filter?regex=error&regex=disk`, as('alice'));
    assert.equal(both.body, 'error disk full\n');
    const anchored = await call(
      service,
      'GET',
      `/v1/loggers/${logger.id}/filter?regex=${encodeURIComponent('error$')}`,
      as('alice'),
    );
    assert.equal(anchored.body, 'info ok error\n');
    const alternation = await call(
      service,
      'GET',
      `/v1/loggers/${logger.id}/filter?regex=${encodeURIComponent('^(warn|info) ')}`,
      as('alice'),
    );
    assert.equal(alternation.body, 'warn disk slow\ninfo ok error\n');
    // Literal alternatives take a fast path that must agree with the regex.
    const literals = await call(
      service,
      'GET',
      `/v1/loggers/${logger.id}/filter?regex=${encodeURIComponent('full|slow|absent')}`,
      as('alice'),
    );
    assert.equal(literals.body, 'error disk full\nwarn disk slow\n');
    const none = await call(
      service,
      'GET',
      `/v1/loggers/${logger.id}/filter?regex=${encodeURIComponent('absent|missing')}`,
      as('alice'),
    );
    assert.equal(none.body, '');
  });

  test('invalid regex → 400 before streaming', async () => {
    const logger = await createLogger(service, 'alice');
    const bad = await call(
      service,
      'GET',
      `/v1/loggers/${logger.id}/filter?regex=ok&regex=${encodeURIComponent('(unclosed')}`,
      as('alice'),
    );
    assert.match(assertError(bad, 400, 'invalid_regex'), /\(unclosed/);
    // Backreferences are not RE2.
    assertError(
      await call(service, 'GET', `/v1/loggers/${logger.id}/filter?regex=${encodeURIComponent('(a)\\1')}`, as('alice')),
      400,
      'invalid_regex',
    );
    assertError(
      await call(service, 'GET', `/v1/loggers/${logger.id}/filter?regex=${'a'.repeat(1025)}`, as('alice')),
      400,
      'invalid_regex',
    );
    assertError(await call(service, 'GET', `/v1/loggers/${logger.id}/filter`), 401, 'unauthorized');
    assertError(await call(service, 'GET', `/v1/loggers/${logger.id}/filter`, as('bob')), 403, 'forbidden');
  });

  // A backtracking engine needs seconds for (a+)+$ over 30 characters and would never finish over
  // 1 MB; RE2 takes well under a second. The bound is wide so that a loaded 2-core machine cannot
  // break it, and still far below what exponential matching would take.
  test('(a+)+$ over 1 MB of a finishes in linear time', async () => {
    const logger = await createLogger(service, 'alice');
    await ingest(logger.id, `${'a'.repeat(1024 * 1024)}b\n`);
    const started = performance.now();
    const response = await call(
      service,
      'GET',
      `/v1/loggers/${logger.id}/filter?regex=${encodeURIComponent('(a+)+$')}`,
      as('alice'),
    );
    const elapsed = performance.now() - started;
    assert.equal(response.statusCode, 200);
    assert.equal(response.body, '');
    assert.ok(elapsed < 10_000, `took ${elapsed} ms`);
  });

  test('follow delivers a line ingested after the stream opened; delete ends it', async () => {
    const logger = await createLogger(service, 'alice');
    await ingest(logger.id, 'old error\nold info\n');
    const stream = await openStream(port, `/v1/loggers/${logger.id}/filter?regex=error&follow`, as('alice'));
    assert.equal(stream.status, 200);
    assert.equal(stream.contentType, 'text/plain; charset=utf-8');
    await stream.waitFor((text) => text === 'old error\n');
    const started = performance.now();
    await ingest(logger.id, 'new info\nnew error\n');
    await stream.waitFor((text) => text === 'old error\nnew error\n', 2_000);
    assert.ok(performance.now() - started < 1000);
    const stats = jsonOf<{ concurrent_filters: number; last_regexps: string[] }>(
      await call(service, 'GET', `/v1/loggers/${logger.id}/stats`, as('alice')),
    );
    assert.equal(stats.concurrent_filters, 1);
    assert.deepEqual(stats.last_regexps, ['error']);
    assert.equal((await call(service, 'DELETE', `/v1/loggers/${logger.id}`, as('alice'))).statusCode, 204);
    // The open stream ends by itself, well before the 1 s safety re-check would notice.
    const deleted = performance.now();
    await stream.ended;
    assert.ok(performance.now() - deleted < 900, `ended after ${performance.now() - deleted} ms`);
  });

  test('a line follower sends nothing for events ingested meanwhile, then the next line', async () => {
    const logger = await createLogger(service, 'alice');
    const key = await createKey(service, logger.id, 'alice');
    const stream = await openStream(port, `/v1/loggers/${logger.id}/filter?follow`, as('alice'));
    assert.equal(stream.status, 200);
    // Events are chunks of the same logger: the follower's "is there more?" must only see lines.
    const ndjson = '{"project_id":"p1","message":"an event"}\n';
    assert.equal((await call(service, 'POST', '/v1/ingest/events', withKey(key), ndjson)).statusCode, 200);
    await ingest(logger.id, 'a line\n');
    await stream.waitFor((text) => text === 'a line\n', 2_000);
    stream.close();
  });

  test('a client that disconnects frees its stream, in catch-up and while following', async () => {
    const logger = await createLogger(service, 'alice');
    await ingest(logger.id, 'line\n'.repeat(100_000));
    const concurrent = async () =>
      jsonOf<{ concurrent_filters: number }>(await call(service, 'GET', `/v1/loggers/${logger.id}/stats`, as('alice')))
        .concurrent_filters;
    const following = await openStream(port, `/v1/loggers/${logger.id}/filter?regex=nomatch&follow`, as('alice'));
    const catchingUp = await openStream(port, `/v1/loggers/${logger.id}/filter?follow`, as('alice'));
    catchingUp.pause();
    await following.waitFor(() => true);
    assert.equal(await concurrent(), 2);
    following.close();
    catchingUp.close();
    const started = Date.now();
    while ((await concurrent()) !== 0) {
      assert.ok(Date.now() - started < 2_000, 'streams still counted 2 s after their clients left');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });

  test('a slow reader holds the stream back instead of being buffered for', async () => {
    const logger = await createLogger(service, 'alice');
    const chunk = `${'x'.repeat(99)}\n`.repeat(20_000); // 2 MB
    for (let i = 0; i < 16; i++) await ingest(logger.id, chunk); // 32 MB stored
    const stream = await openStream(port, `/v1/loggers/${logger.id}/filter`, as('alice'));
    stream.pause();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const sent = async () =>
      jsonOf<{ total_bytes_sent: number }>(await call(service, 'GET', `/v1/loggers/${logger.id}/stats`, as('alice')));
    const whilePaused = (await sent()).total_bytes_sent;
    // Socket buffers on both sides hold a few MB at most; the server must not run ahead further.
    assert.ok(whilePaused < 16 * 1024 * 1024, `sent ${whilePaused} bytes to a paused reader`);
    stream.resume();
    await stream.ended;
    assert.equal(stream.text().length, 32 * 1000 * 1000);
    assert.equal((await sent()).total_bytes_sent, 32 * 1000 * 1000);
  });

  test('stats counters', async () => {
    const logger = await createLogger(service, 'alice');
    await ingest(logger.id, 'a\nb\n');
    await call(service, 'GET', `/v1/loggers/${logger.id}/filter?regex=a&regex=.`, as('alice'));
    const stats = jsonOf<Record<string, unknown>>(
      await call(service, 'GET', `/v1/loggers/${logger.id}/stats`, as('alice')),
    );
    assert.deepEqual(stats, {
      total_bytes_sent: 2,
      total_bytes_received: 4,
      total_bytes_filtered: 4,
      last_regexps: ['a AND .'],
      concurrent_filters: 0,
      concurrent_ingests: 0,
      total_filters: 1,
      total_ingests: 1,
      block: { bytes: 4, lines: 2, events: 0, max_bytes: 1024 * 1024 * 1024 },
    });
    assertError(await call(service, 'GET', `/v1/loggers/${logger.id}/stats`, as('bob')), 403, 'forbidden');
  });
});

describe('events', () => {
  test('NDJSON and logframe ingest; events stream with regex on the message', async () => {
    const logger = await createLogger(service, 'alice');
    const key = await createKey(service, logger.id, 'alice');
    const ndjson =
      '{"project_id":"p1","message":"User logged in","service":"web"}\n{"project_id":"p2","message":"boom"}\n';
    assert.deepEqual(jsonOf(await call(service, 'POST', '/v1/ingest/events', withKey(key), ndjson)), {
      events: 2,
      bytes: Buffer.byteLength(ndjson),
    });
    const frame = '19:5:{"project_id":"p1"}hello\n19:5:{"project_id":"p3"}two\nl\n';
    assert.deepEqual(jsonOf(await call(service, 'POST', '/v1/ingest/events', withKey(key), frame)), {
      events: 2,
      bytes: Buffer.byteLength(frame),
    });
    const all = await call(service, 'GET', `/v1/loggers/${logger.id}/events`, as('alice'));
    assert.equal(all.headers['content-type'], 'application/x-ndjson');
    const events = all.body
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { ts: string; project_id: string; metadata: object; message: string });
    assert.deepEqual(
      events.map(({ project_id, metadata, message }) => ({ project_id, metadata, message })),
      [
        { project_id: 'p1', metadata: { service: 'web' }, message: 'User logged in' },
        { project_id: 'p2', metadata: {}, message: 'boom' },
        { project_id: 'p1', metadata: {}, message: 'hello' },
        { project_id: 'p3', metadata: {}, message: 'two\nl' },
      ],
    );
    assert.match(events[0]?.ts ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const filtered = await call(
      service,
      'GET',
      `/v1/loggers/${logger.id}/events?regex=${encodeURIComponent('^User')}`,
      as('alice'),
    );
    assert.equal(filtered.body.trimEnd().split('\n').length, 1);
    // Events and raw lines are separate.
    assert.equal((await call(service, 'GET', `/v1/loggers/${logger.id}/filter`, as('alice'))).body, '');
  });

  test('events errors: 401, project_id, message, malformed frames; all or nothing', async () => {
    const logger = await createLogger(service, 'alice');
    const key = await createKey(service, logger.id, 'alice');
    assertError(await call(service, 'POST', '/v1/ingest/events', {}, '{"project_id":"p"}'), 401, 'unauthorized');
    assertError(
      await call(service, 'POST', '/v1/ingest/events', as('alice'), '{"project_id":"p","message":"m"}'),
      401,
      'unauthorized',
    );
    assertError(
      await call(
        service,
        'POST',
        '/v1/ingest/events',
        withKey(key),
        '{"project_id":"p","message":"m"}\n{"message":"m"}\n',
      ),
      400,
      'validation_error',
    );
    assertError(
      await call(service, 'POST', '/v1/ingest/events', withKey(key), '{"project_id":"","message":"m"}'),
      400,
      'validation_error',
    );
    assertError(
      await call(service, 'POST', '/v1/ingest/events', withKey(key), '{"project_id":"p"}'),
      400,
      'validation_error',
    );
    assertError(
      await call(service, 'POST', '/v1/ingest/events', withKey(key), '{"project_id":"p",'),
      400,
      'invalid_json',
    );
    assertError(
      await call(service, 'POST', '/v1/ingest/events', withKey(key), '19:5:{"project_id":"p1"}hel'),
      400,
      'validation_error',
    );
    assertError(
      await call(service, 'POST', '/v1/ingest/events', withKey(key), '19:5:{"project_id":"p1"}helloX'),
      400,
      'validation_error',
    );
    assertError(await call(service, 'POST', '/v1/ingest/events', withKey(key), '2:1:[]x\n'), 400, 'validation_error');
    assertError(await call(service, 'POST', '/v1/ingest/events', withKey(key), 'x:1:\n'), 400, 'validation_error');
    assert.equal((await call(service, 'GET', `/v1/loggers/${logger.id}/events`, as('alice'))).body, '');
  });
});

describe('retention', () => {
  test('drops the oldest data first', async () => {
    const small = await startLogs({ maxBytes: 100 });
    try {
      const logger = jsonOf<LoggerBody>(
        await small.app.inject({ method: 'POST', url: '/v1/loggers', headers: as('alice'), payload: { name: 'r' } }),
        201,
      );
      for (let i = 0; i < 5; i++) {
        await small.app.inject({
          method: 'POST',
          url: `/v1/loggers/${logger.id}/ingest`,
          headers: as('alice'),
          payload: `${String(i).repeat(29)}\n${String(i).repeat(9)}\n`,
        });
      }
      const body = (
        await small.app.inject({ method: 'GET', url: `/v1/loggers/${logger.id}/filter`, headers: as('alice') })
      ).body;
      assert.equal(body, `${'3'.repeat(29)}\n${'3'.repeat(9)}\n${'4'.repeat(29)}\n${'4'.repeat(9)}\n`);
      assert.deepEqual(
        jsonOf<LoggerBody>(
          await small.app.inject({ method: 'GET', url: `/v1/loggers/${logger.id}`, headers: as('alice') }),
        ).usage,
        { bytes: 80, lines: 4 },
      );
    } finally {
      await small.close();
    }
  });

  test('a cut across hundreds of small chunks keeps the totals exact, lines and events apart', async () => {
    const small = await startLogs({ maxBytes: 10_000 });
    try {
      const logger = jsonOf<LoggerBody>(
        await small.app.inject({ method: 'POST', url: '/v1/loggers', headers: as('alice'), payload: { name: 'r' } }),
        201,
      );
      const key = jsonOf<{ key: string; secret: string }>(
        await small.app.inject({
          method: 'POST',
          url: `/v1/loggers/${logger.id}/apiKeys`,
          headers: as('alice'),
          payload: { name: 'k' },
        }),
        201,
      );
      const ingestRaw = (payload: string) =>
        small.app.inject({ method: 'POST', url: `/v1/loggers/${logger.id}/ingest`, headers: as('alice'), payload });
      for (let i = 0; i < 600; i++) assert.equal((await ingestRaw(`${String(i).padStart(9, '0')}\n`)).statusCode, 200);
      const event = jsonOf<{ events: number }>(
        await small.app.inject({
          method: 'POST',
          url: '/v1/ingest/events',
          headers: withKey(key),
          payload: '{"project_id":"p","message":"kept"}\n',
        }),
      );
      assert.equal(event.events, 1);
      const stats = async () =>
        jsonOf<{ block: { bytes: number; lines: number; events: number } }>(
          await small.app.inject({ method: 'GET', url: `/v1/loggers/${logger.id}/stats`, headers: as('alice') }),
        ).block;
      const before = await stats();
      assert.equal(before.lines, 600);
      assert.equal(before.events, 1);
      assert.ok(before.bytes > 6000, `retained ${before.bytes}`);
      // 9,000 new bytes: the oldest raw lines (over 500 chunks) must go in one cut; the newer event stays.
      assert.equal((await ingestRaw(`${'z'.repeat(8999)}\n`)).statusCode, 200);
      const afterCut = await stats();
      const kept = (
        await small.app.inject({ method: 'GET', url: `/v1/loggers/${logger.id}/filter`, headers: as('alice') })
      ).body
        .split('\n')
        .filter(Boolean);
      assert.equal(afterCut.lines, kept.length);
      assert.ok(afterCut.bytes <= 10_000 && afterCut.bytes > 10_000 - 10, `retained ${afterCut.bytes}`);
      assert.ok(kept.length < 100, `kept ${kept.length} lines`);
      // What stays is the newest lines, in order, ending with the big one.
      assert.equal(kept[kept.length - 1], 'z'.repeat(8999));
      assert.equal(Number(kept[0]), 600 - (kept.length - 1));
      const events = (
        await small.app.inject({ method: 'GET', url: `/v1/loggers/${logger.id}/events`, headers: as('alice') })
      ).body;
      assert.equal(afterCut.events, 1);
      assert.match(events, /"message":"kept"/);
      const record = jsonOf<LoggerBody>(
        await small.app.inject({ method: 'GET', url: `/v1/loggers/${logger.id}`, headers: as('alice') }),
      );
      assert.deepEqual(record.usage, { bytes: afterCut.bytes, lines: afterCut.lines + afterCut.events });
    } finally {
      await small.close();
    }
  });
});
