import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadSettings } from '../../../src/config.ts';
import type { ServiceApp } from '../../../src/core/app.ts';
import { VERSION } from '../../../src/core/version.ts';
import { createKvService, type KvOptions } from '../../../src/services/kv/index.ts';
import type { Store } from '../../../src/store/index.ts';

export const AUTH = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'kv-tester' } }) };

export interface KvNodeHandle {
  app: ServiceApp;
  dataDir: string;
  port: number;
  url: string;
  /** Stops the node; its data stays for a restart. */
  stop(): Promise<void>;
}

/** A fresh data directory, removed by `cleanup`. */
export function dataDirs(): { make(): string; cleanup(): void } {
  const root = mkdtempSync(join(tmpdir(), 'stratus-kv-'));
  let n = 0;
  return { make: () => join(root, `node-${n++}`), cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/**
 * One key-value node in this process, listening on 127.0.0.1 (port 0 = a free one). The node keeps
 * no platform tables, so it gets no platform store.
 */
export async function startNode(options: { dataDir: string; name: string; parentUrl?: string; port?: number; listen?: boolean } & KvOptions): Promise<KvNodeHandle> {
  const settings = { ...loadSettings({}, {}, options.dataDir), dataDir: options.dataDir, kvNodeName: options.name, kvParentUrl: options.parentUrl, logLevel: 'silent' as const };
  const app = await createKvService({ backoffMs: 50, maxBackoffMs: 200, silenceMs: 3_000, ...options }).build({ settings, store: {} as Store, logger: pino({ level: 'silent' }), version: VERSION });
  if (options.listen === false) {
    await app.ready();
    return { app, dataDir: options.dataDir, port: 0, url: '', stop: () => app.close() };
  }
  await app.listen({ host: '127.0.0.1', port: options.port ?? 0 });
  const port = (app.server.address() as AddressInfo).port;
  return { app, dataDir: options.dataDir, port, url: `http://127.0.0.1:${port}`, stop: () => app.close() };
}

/** Polls until `check` holds (or fails after `timeoutMs`). */
export async function eventually(check: () => Promise<boolean> | boolean, timeoutMs = 5_000, what = 'condition'): Promise<void> {
  const started = Date.now();
  for (;;) {
    if (await check()) return;
    if (Date.now() - started > timeoutMs) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
