import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { listen, type Listener } from '../../../src/gateway/server.ts';
import type { TestService } from '../../helpers/service.ts';
import { as, assertError, call, createLogger, startLogs } from './helpers.ts';

// Resuming a stream (README: Reconnecting): the x-logs-cursor trailer and ?after=.

/** A whole GET: body text and trailers. */
function get(port: number, path: string, headers: Record<string, string>) {
  return new Promise<{ status: number; text: string; trailers: NodeJS.Dict<string> }>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, trailers: res.trailers }));
        res.on('aborted', () => reject(new Error('cut')));
      })
      .on('error', reject);
  });
}

describe('logs: resuming streams', () => {
  let service: TestService;
  let listener: Listener;
  before(async () => {
    service = await startLogs();
    listener = await listen((req, res) => service.app.routing(req, res), 0, '127.0.0.1');
  });
  after(async () => {
    await listener.close(0);
    await service.close();
  });

  const ingest = (id: string, body: string) => call(service, 'POST', `/v1/loggers/${id}/ingest`, as('u'), body);

  it('a finished stream carries its cursor; ?after= sends only what came after it, raw and events alike', async () => {
    const logger = await createLogger(service, 'u');
    assert.equal((await ingest(logger.id, 'one\ntwo\n')).statusCode, 200);
    const first = await get(listener.port, `/v1/loggers/${logger.id}/filter`, as('u'));
    assert.equal(first.text, 'one\ntwo\n');
    const cursor = first.trailers['x-logs-cursor'];
    assert.match(cursor ?? '', /^[1-9][0-9]*$/);
    assert.equal((await ingest(logger.id, 'three\n')).statusCode, 200);
    const resumed = await get(listener.port, `/v1/loggers/${logger.id}/filter?after=${cursor}&regex=e`, as('u'));
    assert.equal(resumed.text, 'three\n');
    assert.ok(Number(resumed.trailers['x-logs-cursor']) > Number(cursor));
    const none = await get(listener.port, `/v1/loggers/${logger.id}/events?after=${cursor}`, as('u'));
    assert.equal(none.status, 200);
    assert.equal(none.text, '');
    assert.equal(none.trailers['x-logs-cursor'], cursor, 'nothing read: the cursor stays');
  });

  it('a bad cursor is 400 validation_error, nothing streamed', async () => {
    const logger = await createLogger(service, 'u');
    for (const bad of ['-1', 'abc', '1.5', '1234567890123456']) {
      const response = await call(service, 'GET', `/v1/loggers/${logger.id}/filter?after=${bad}`, as('u'));
      assertError(response, 400, 'validation_error');
    }
  });

  it('a draining instance ends a follow stream with its cursor; resuming loses nothing', async () => {
    const own = await startLogs();
    const port = await listen((req, res) => own.app.routing(req, res), 0, '127.0.0.1');
    try {
      const logger = jsonLogger(await call(own, 'POST', '/v1/loggers', as('u'), { name: 'drained' }));
      await call(own, 'POST', `/v1/loggers/${logger}/ingest`, as('u'), 'before\n');
      const follow = get(port.port, `/v1/loggers/${logger}/filter?follow`, as('u'));
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      const closing = port.close(5_000);
      const ended = await follow;
      assert.ok(Date.now() - started < 1_500, 'ended at once, not at the timeout');
      assert.equal(ended.text, 'before\n');
      assert.equal(await closing, 0);
      await call(own, 'POST', `/v1/loggers/${logger}/ingest`, as('u'), 'during\n');
      const again = await listen((req, res) => own.app.routing(req, res), 0, '127.0.0.1');
      const resumed = await get(
        again.port,
        `/v1/loggers/${logger}/filter?after=${ended.trailers['x-logs-cursor']}`,
        as('u'),
      );
      assert.equal(resumed.text, 'during\n');
      await again.close(0);
    } finally {
      await own.close();
    }
  });
});

function jsonLogger(response: { statusCode: number; json<T>(): T }): string {
  assert.equal(response.statusCode, 201);
  return response.json<{ id: string }>().id;
}
