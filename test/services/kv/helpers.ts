import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { loadSettings } from '../../../src/config.ts';
import type { ServiceApp } from '../../../src/core/app.ts';
import { VERSION } from '../../../src/core/version.ts';
import { createKvService, type KvOptions } from '../../../src/services/kv/index.ts';
import { kvMigrations } from '../../../src/services/kv/migrations.ts';
import { migrateStore, openStore } from '../../../src/store/index.ts';
import { createTestDatabase, testDialect, type TestDatabase } from '../../helpers/database.ts';

export const AUTH = { 'x-gateway-authentication': JSON.stringify({ user: { id: 'kv-tester' } }) };

export interface KvNodeHandle {
  app: ServiceApp;
  dataDir: string;
  port: number;
  url: string;
  /** Stops the node; its data stays for a restart. */
  stop(): Promise<void>;
}

/**
 * Node identities for a test file: `make` names a fresh node by its data directory; on PostgreSQL
 * each node gets its own schema the first time it starts, and the same one when it restarts.
 * `cleanup` removes them all.
 */
export function dataDirs(): { make(): string; cleanup(): Promise<void> } {
  const root = mkdtempSync(join(tmpdir(), 'stratus-kv-'));
  let n = 0;
  return {
    make: () => join(root, `node-${n++}`),
    async cleanup() {
      for (const [dataDir, database] of nodeDatabases) {
        if (!dataDir.startsWith(root)) continue;
        nodeDatabases.delete(dataDir);
        await database.cleanup();
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

const nodeDatabases = new Map<string, TestDatabase>();

/** The PostgreSQL schema of a node (by data directory), or none on SQLite. */
async function databaseUrlOf(dataDir: string): Promise<string | undefined> {
  if (testDialect === 'sqlite') return undefined;
  let database = nodeDatabases.get(dataDir);
  if (!database) {
    database = await createTestDatabase();
    nodeDatabases.set(dataDir, database);
  }
  return database.databaseUrl;
}

/**
 * One key-value node in this process, listening on 127.0.0.1 (port 0 = a free one), on a platform
 * store of its own: the SQLite file in its data directory, or its own PostgreSQL schema.
 */
export async function startNode(
  options: { dataDir: string; name: string; parentUrl?: string; port?: number; listen?: boolean } & KvOptions,
): Promise<KvNodeHandle> {
  const databaseUrl = await databaseUrlOf(options.dataDir);
  const settings = {
    ...loadSettings({}, {}, options.dataDir),
    dataDir: options.dataDir,
    databaseUrl,
    kvNodeName: options.name,
    kvParentUrl: options.parentUrl,
    logLevel: 'silent' as const,
  };
  const store = await openStore(settings);
  await migrateStore(store, [kvMigrations]);
  const app = await createKvService({ backoffMs: 50, maxBackoffMs: 200, silenceMs: 3_000, ...options }).build({
    settings,
    store,
    logger: pino({ level: 'silent' }),
    version: VERSION,
  });
  const stop = async () => {
    await app.close();
    await store.close();
  };
  if (options.listen === false) {
    await app.ready();
    return { app, dataDir: options.dataDir, port: 0, url: '', stop };
  }
  await app.listen({ host: '127.0.0.1', port: options.port ?? 0 });
  const port = (app.server.address() as AddressInfo).port;
  return { app, dataDir: options.dataDir, port, url: `http://127.0.0.1:${port}`, stop };
}

/** Polls until `check` holds (or fails after `timeoutMs`). */
export async function eventually(
  check: () => Promise<boolean> | boolean,
  timeoutMs = 5_000,
  what = 'condition',
): Promise<void> {
  const started = Date.now();
  for (;;) {
    if (await check()) return;
    if (Date.now() - started > timeoutMs) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
