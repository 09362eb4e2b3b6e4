import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import type { ServiceApp } from '../../../src/core/app.ts';
import { VERSION } from '../../../src/core/version.ts';
import { createLogsService } from '../../../src/services/logs/index.ts';
import { openStore, type Store } from '../../../src/store/index.ts';
import { testDialect } from '../../helpers/database.ts';
import type { TestService } from '../../helpers/service.ts';
import { as, createLogger, jsonOf, openStream, startLogs } from './helpers.ts';

// Two instances on one PostgreSQL database: ingest on one, follow on the other.
const skip = testDialect !== 'postgres' ? 'scale-out needs PostgreSQL (STRATUS_TEST_DB=postgres)' : false;

let first: TestService;
let secondStore: Store;
let second: ServiceApp;
let secondPort: number;

before(async () => {
  if (skip) return;
  first = await startLogs();
  secondStore = await openStore(first.settings);
  second = await createLogsService().build({ settings: first.settings, store: secondStore, logger: pino({ level: 'silent' }), version: VERSION });
  await second.listen({ port: 0, host: '127.0.0.1' });
  secondPort = (second.server.address() as AddressInfo).port;
});

after(async () => {
  if (skip) return;
  await second.close();
  await secondStore.close();
  await first.close();
});

test('a follower on one instance receives lines ingested on another within 200 ms', { skip }, async () => {
  const logger = await createLogger(first, 'alice');
  const stream = await openStream(secondPort, `/v1/loggers/${logger.id}/filter?follow=false&regex=hit`, as('alice'));
  assert.equal(stream.status, 200);
  // Let the stream finish its catch-up and start waiting.
  await new Promise((resolve) => setTimeout(resolve, 100));
  const latencies: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    const n = jsonOf<{ n: number }>(await first.app.inject({ method: 'POST', url: `/v1/loggers/${logger.id}/ingest`, headers: as('alice'), payload: `miss ${i}\nhit ${i}\n` })).n;
    assert.equal(n, 13);
    await stream.waitFor((text) => text.endsWith(`hit ${i}\n`), 2_000);
    latencies.push(performance.now() - started);
  }
  assert.equal(stream.text(), 'hit 0\nhit 1\nhit 2\nhit 3\nhit 4\n');
  assert.ok(Math.max(...latencies) < 200, `latencies ${latencies.join(', ')}`);
  stream.close();
});
