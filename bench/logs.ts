import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadSettings } from '../src/config.ts';
import { VERSION } from '../src/core/version.ts';
import { benchDatabaseUrl } from './lib.ts';
import { createLogsService } from '../src/services/logs/index.ts';
import { migrateStore, openStore } from '../src/store/index.ts';

// `npm run bench -- logs`. The service runs in this process (it is not registered in the CLI yet).
const STORED_MB = Number(process.env.BENCH_LOGS_MB ?? 1024);
const BODY_BYTES = 1024 * 1024;
const LINE = `${'x'.repeat(60)} level=info some log text 0123\n`.slice(-100);
const CONCURRENCY = 8;
const FOLLOW_SAMPLES = 200;
const AUTH = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'bench' } }) };

function body(): Buffer {
  const lines = Math.floor(BODY_BYTES / 100);
  const chunk = Buffer.alloc(lines * 100);
  for (let i = 0; i < lines; i++) {
    chunk.write(LINE, i * 100);
    if (i % 1000 === 0) chunk.write('ERROR', i * 100);
  }
  return chunk;
}

function send(port: number, method: string, path: string, payload?: Buffer | string): Promise<{ status: number; text: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { ...AUTH, 'content-type': 'application/json' } }, (res) => {
      let text = '';
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (text.length < 4096) text += chunk.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, bytes }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

export async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-logs-'));
  // A schema of its own on PostgreSQL, dropped afterwards.
  const database = await benchDatabaseUrl();
  const settings = { ...loadSettings({}, {}, dir), dataDir: dir, databaseUrl: database.url, logLevel: 'silent' as const };
  const store = await openStore(settings);
  await migrateStore(store, [createLogsService().migrations]);
  const app = await createLogsService({ maxBytes: (STORED_MB + 64) * 1024 * 1024 }).build({ settings, store, logger: pino({ level: 'silent' }), version: VERSION });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  try {
    const payload = body();
    const requests = Math.ceil((STORED_MB * 1024 * 1024) / payload.length);

    // Baseline: the same bytes appended to a file, one fsync per body.
    const file = openSync(join(dir, 'baseline.log'), 'a');
    let started = performance.now();
    for (let i = 0; i < requests; i++) {
      writeSync(file, payload);
      fsyncSync(file);
    }
    const baselineMBs = (requests * payload.length) / 1e6 / ((performance.now() - started) / 1000);
    closeSync(file);
    rmSync(join(dir, 'baseline.log'));

    const logger = JSON.parse((await send(port, 'POST', '/v1/loggers', JSON.stringify({ name: 'bench' }))).text) as { id: string };
    let next = 0;
    started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < requests) {
          next++;
          const answer = await send(port, 'POST', `/v1/loggers/${logger.id}/ingest`, payload);
          if (answer.status !== 200) throw new Error(`ingest answered ${answer.status}: ${answer.text}`);
        }
      }),
    );
    const ingestMBs = (requests * payload.length) / 1e6 / ((performance.now() - started) / 1000);

    const filterRate = async (pattern: string) => {
      const begun = performance.now();
      const answer = await send(port, 'GET', `/v1/loggers/${logger.id}/filter?regex=${encodeURIComponent(pattern)}`);
      if (answer.status !== 200) throw new Error(`filter answered ${answer.status}`);
      return { rate: (requests * payload.length) / 1e6 / ((performance.now() - begun) / 1000), sent: answer.bytes };
    };
    const literal = await filterRate('ERROR');
    const alternation = await filterRate('ERROR|WARN|FATAL');

    // Follow latency: one line at a time, timed from before the ingest to its arrival.
    const latencies: number[] = [];
    await new Promise<void>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: `/v1/loggers/${logger.id}/filter?follow&regex=${encodeURIComponent('^probe ')}`, headers: AUTH }, (res) => {
        let pendingStart = 0;
        let i = 0;
        const fire = () => {
          pendingStart = performance.now();
          void send(port, 'POST', `/v1/loggers/${logger.id}/ingest`, `probe ${i}\n`);
        };
        res.on('data', () => {
          latencies.push(performance.now() - pendingStart);
          i++;
          if (i >= FOLLOW_SAMPLES) {
            req.destroy();
            resolve();
          } else setTimeout(fire, 5);
        });
        setTimeout(fire, 200);
      });
      req.on('error', (error) => (latencies.length >= FOLLOW_SAMPLES ? resolve() : reject(error)));
    });
    latencies.sort((a, b) => a - b);
    const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN;

    console.log(`\nlogs benchmark (${settings.databaseUrl ? 'PostgreSQL' : 'SQLite'}): ${(requests * payload.length / 1e6).toFixed(0)} MB of 100-byte lines, ${CONCURRENCY} concurrent 1 MiB ingests`);
    console.table([
      { scenario: 'ingest (MB/s)', value: ingestMBs.toFixed(1), baseline: baselineMBs.toFixed(1), note: 'baseline: append + fsync of the same bodies to a file' },
      { scenario: 'filter, literal "ERROR" (MB/s)', value: literal.rate.toFixed(1), baseline: '', note: `${literal.sent} bytes matched` },
      { scenario: 'filter, alternation "ERROR|WARN|FATAL" (MB/s)', value: alternation.rate.toFixed(1), baseline: '', note: `${alternation.sent} bytes matched` },
      { scenario: 'follow latency p50 (ms)', value: pct(50).toFixed(1), baseline: '', note: `${latencies.length} samples` },
      { scenario: 'follow latency p99 (ms)', value: pct(99).toFixed(1), baseline: '', note: '' },
    ]);
  } finally {
    await app.close();
    await store.close();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
