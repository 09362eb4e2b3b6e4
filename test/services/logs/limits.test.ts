import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { MAX_PATTERN_PROGRAM, MAX_PATTERNS, MAX_TOTAL_PROGRAM } from '../../../src/services/logs/patterns.ts';
import { WorkerPool, WorkerTimeLimitError } from '../../../src/core/worker-pool.ts';
import type { TestService } from '../../helpers/service.ts';
import {
  as,
  assertError,
  call,
  createKey,
  createLogger,
  jsonOf,
  startLogs,
  withKey,
  type LoggerBody,
} from './helpers.ts';

// Issue 17: what one request may ask of the matcher is bounded (number, length and compiled size
// of its patterns), and large work runs in worker threads with the same answers.

let service: TestService;
before(async () => {
  service = await startLogs({ maxIngestBytes: 16 * 1024 * 1024 });
});
after(async () => {
  await service.close();
});

const query = (patterns: string[]) => patterns.map((p) => `regex=${encodeURIComponent(p)}`).join('&');
const filter = (id: string, patterns: string[], kind = 'filter') =>
  call(service, 'GET', `/v1/loggers/${id}/${kind}?${query(patterns)}`, as('alice'));
const ingest = async (id: string, body: string | Buffer) =>
  jsonOf<{ n: number }>(
    await call(
      service,
      'POST',
      `/v1/loggers/${id}/ingest`,
      { ...as('alice'), 'content-type': 'application/octet-stream' },
      body,
    ),
  ).n;
const stats = async (id: string) =>
  jsonOf<{ total_filters: number; last_regexps: string[]; total_bytes_sent: number }>(
    await call(service, 'GET', `/v1/loggers/${id}/stats`, as('alice')),
  );

describe('pattern caps', () => {
  test(`more than ${MAX_PATTERNS} patterns, or too much compiled program together, are a 400 validation_error; nothing is streamed or counted`, async () => {
    const logger = await createLogger(service, 'alice');
    await ingest(logger.id, 'a line\n');
    const before = await stats(logger.id);
    const tooMany = await filter(
      logger.id,
      Array.from({ length: MAX_PATTERNS + 1 }, (_, i) => `line|${i}`),
    );
    assert.match(assertError(tooMany, 400, 'validation_error'), new RegExp(`at most ${MAX_PATTERNS} regex parameters`));
    // Each within the per-pattern cap, too large together.
    const heavy = Array.from({ length: Math.floor(MAX_TOTAL_PROGRAM / 1800) + 1 }, (_, i) => `[a-z]{1,899}${i}`);
    assert.match(
      assertError(await filter(logger.id, heavy), 400, 'validation_error'),
      new RegExp(`at most ${MAX_TOTAL_PROGRAM} are allowed`),
    );
    assertError(await filter(logger.id, heavy, 'events'), 400, 'validation_error');
    assert.deepEqual(await stats(logger.id), before);
    // At the count cap, patterns are accepted.
    const most = await filter(
      logger.id,
      Array.from({ length: MAX_PATTERNS }, (_, i) => (i === 0 ? '^a' : `line|${i}`)),
    );
    assert.equal(most.statusCode, 200);
    assert.equal(most.body, 'a line\n');
  });

  test('one pattern too long or compiling to too large a program is a 400 invalid_regex naming it', async () => {
    const logger = await createLogger(service, 'alice');
    const before = await stats(logger.id);
    const complex = await filter(logger.id, ['ok', 'x{1000}y{1000}']);
    assert.match(
      assertError(complex, 400, 'invalid_regex'),
      new RegExp(`"x\\{1000\\}y\\{1000\\}" is too complex: .* at most ${MAX_PATTERN_PROGRAM}`),
    );
    assert.match(
      assertError(await filter(logger.id, ['z'.repeat(1025)]), 400, 'invalid_regex'),
      /longer than 1024 characters/,
    );
    assert.deepEqual(await stats(logger.id), before);
    // Just under: a 1 KiB literal and a long repetition are fine.
    assert.equal((await filter(logger.id, ['q'.repeat(1024), '[a-z]{1,990}'])).statusCode, 200);
  });
});

describe('large work runs in worker threads with the same answers', () => {
  test('filter and events streams over megabytes (UTF-8 and not)', async () => {
    const logger = await createLogger(service, 'alice');
    const lines: string[] = [];
    for (let i = 0; i < 60_000; i++)
      lines.push(`${i} ${i % 7 === 0 ? 'ERROR' : 'info'} é ${'x'.repeat(i % 50)} user=${(i * 7919) % 1000}`);
    const text = `${lines.join('\n')}\n`;
    await ingest(logger.id, text);
    // A chunk that is not UTF-8: matched on a decoded copy, sent as stored.
    const latin = Buffer.concat([Buffer.from('ERROR caf'), Buffer.from([0xe9]), Buffer.from(' user=7\nplain\n')]);
    await ingest(logger.id, latin);
    const patterns = ['ERR[O]R', 'user=[0-9]*7$'];
    const expected = lines.filter((line) => /ERROR/.test(line) && /user=[0-9]*7$/.test(line));
    const response = await filter(logger.id, patterns);
    assert.equal(response.statusCode, 200);
    const raw = response.rawPayload;
    assert.ok(
      raw.subarray(raw.length - latin.indexOf(10) - 1).equals(latin.subarray(0, latin.indexOf(10) + 1)),
      `the latin-1 line comes back as stored: ${JSON.stringify(raw.subarray(-60).toString('latin1'))}`,
    );
    assert.equal(
      raw.subarray(0, raw.length - latin.indexOf(10) - 1).toString('utf8'),
      expected.map((line) => `${line}\n`).join(''),
    );
    assert.ok(expected.length > 500);

    // Events: a body over the inline size is parsed in a worker, stored and matched alike.
    const key = await createKey(service, logger.id, 'alice');
    const events = Array.from({ length: 20_000 }, (_, i) =>
      JSON.stringify({ project_id: 'p', message: `event ${i} ${i % 3 === 0 ? 'slow' : 'fast'}`, n: i }),
    );
    const ingested = jsonOf<{ events: number; bytes: number }>(
      await call(service, 'POST', '/v1/ingest/events', withKey(key), events.join('\n')),
    );
    assert.deepEqual(ingested, { events: 20_000, bytes: Buffer.byteLength(events.join('\n')) });
    const slow = await filter(logger.id, ['slow$', '^event [0-9]*5 '], 'events');
    const got = slow.body
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { message: string; metadata: { n: number } }).metadata.n);
    assert.deepEqual(
      got,
      range(20_000).filter((i) => i % 3 === 0 && i % 10 === 5),
    );
  });

  test('literal patterns pick exactly the lines holding them, in order, raw lines and events alike', async () => {
    const logger = await createLogger(service, 'alice');
    const lines = Array.from({ length: 40_000 }, (_, i) =>
      i % 97 === 0
        ? `${i} WARN x WARN`
        : i % 89 === 0
          ? `${i} ERROR y`
          : i % 83 === 0
            ? `${i} say "hi" \\ there`
            : `${i} info`,
    );
    await ingest(logger.id, `${lines.join('\n')}\n`);
    const expect = (keep: (line: string) => boolean) =>
      lines
        .filter(keep)
        .map((line) => `${line}\n`)
        .join('');
    assert.equal(
      (await filter(logger.id, ['WARN'])).body,
      expect((line) => line.includes('WARN')),
    );
    assert.equal(
      (await filter(logger.id, ['ERROR|WARN'])).body,
      expect((line) => line.includes('WARN') || line.includes('ERROR')),
    );
    assert.equal(
      (await filter(logger.id, ['WARN|ERROR', '^[0-9]*7 '])).body,
      expect((line) => (line.includes('WARN') || line.includes('ERROR')) && /^[0-9]*7 /.test(line)),
    );
    assert.equal(
      (await filter(logger.id, ['say "hi"'])).body,
      expect((line) => line.includes('say "hi"')),
    );
    // In events the message sits inside JSON, where quotes and backslashes are escaped.
    const key = await createKey(service, logger.id, 'alice');
    const events = lines.map((message) => JSON.stringify({ project_id: 'p', message }));
    assert.equal(
      jsonOf<{ events: number }>(await call(service, 'POST', '/v1/ingest/events', withKey(key), events.join('\n')))
        .events,
      lines.length,
    );
    const messages = async (patterns: string[]) =>
      (await filter(logger.id, patterns, 'events')).body
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { message: string }).message);
    assert.deepEqual(
      await messages(['say "hi"']),
      lines.filter((line) => line.includes('say "hi"')),
    );
    assert.deepEqual(
      await messages(['\\\\ there']),
      lines.filter((line) => line.includes('\\ there')),
    );
    assert.deepEqual(
      await messages(['WARN|ERROR']),
      lines.filter((line) => line.includes('WARN') || line.includes('ERROR')),
    );
  });

  test('a large events body is still all or nothing, naming the bad line', async () => {
    const logger = await createLogger(service, 'alice');
    const key = await createKey(service, logger.id, 'alice');
    const events = Array.from({ length: 20_000 }, (_, i) => JSON.stringify({ project_id: 'p', message: `m${i}` }));
    events[15_000] = '{"message":"no project"}';
    assert.match(
      assertError(
        await call(service, 'POST', '/v1/ingest/events', withKey(key), events.join('\n')),
        400,
        'validation_error',
      ),
      /line 15001/,
    );
    assert.deepEqual(jsonOf<LoggerBody>(await call(service, 'GET', `/v1/loggers/${logger.id}`, as('alice'))).usage, {
      bytes: 0,
      lines: 0,
    });
  });

  test('a body of nothing but newlines is counted line by line', async () => {
    const logger = await createLogger(service, 'alice');
    assert.equal(await ingest(logger.id, Buffer.alloc(4 * 1024 * 1024, 10)), 4 * 1024 * 1024);
    assert.deepEqual(jsonOf<LoggerBody>(await call(service, 'GET', `/v1/loggers/${logger.id}`, as('alice'))).usage, {
      bytes: 4 * 1024 * 1024,
      lines: 4 * 1024 * 1024,
    });
  });
});

function range(length: number): number[] {
  return Array.from({ length }, (_, i) => i);
}

describe('worker pool', () => {
  test('a job past its time limit stops its worker; the next job gets a fresh one', async () => {
    const code = `const { parentPort } = require('node:worker_threads');
      parentPort.on('message', (m) => { if (m === 'spin') for (;;); parentPort.postMessage(m * 2); });`;
    let started = 0;
    const pool = new WorkerPool(() => {
      started++;
      return new Worker(code, { eval: true });
    }, 1);
    try {
      assert.equal(await pool.run<number>(21, [], 5_000), 42);
      const began = performance.now();
      await assert.rejects(pool.run('spin', [], 300), WorkerTimeLimitError);
      assert.ok(performance.now() - began < 3_000);
      assert.equal(await pool.run<number>(2, [], 5_000), 4);
      assert.equal(started, 2);
    } finally {
      await pool.close();
    }
    await assert.rejects(pool.run(1, [], 1_000), /closed/);
  });
});
