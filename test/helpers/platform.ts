import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import type { Settings } from '../../src/config.ts';
import { startPlatform, type RunningPlatform } from '../../src/platform.ts';
import type { SqlConnection } from '../../src/store/db.ts';
import { all } from '../../src/store/sql-work.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { request, type HttpResponse } from './http.ts';
import { testSettings } from './service.ts';

type CallOptions = {
  method?: string;
  path?: string;
  host?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
};

export interface TestPlatform {
  readonly platform: RunningPlatform;
  readonly database: TestDatabase;
  readonly settings: Settings;
  /** A request to the public port. */
  call(options: CallOptions): Promise<HttpResponse>;
  /** A request to the internal (trusted) port. */
  callInternal(options: CallOptions): Promise<HttpResponse>;
  close(): Promise<void>;
}

/**
 * The whole platform in this process (every service, the gateway on both ports) on an isolated
 * test database, listening on ephemeral loopback ports. `close()` stops it and drops the database.
 * Its log goes nowhere unless a `logger` is given.
 */
export async function startTestPlatform(
  overrides: Partial<Settings> = {},
  logger: FastifyBaseLogger = pino({ level: 'silent' }),
): Promise<TestPlatform> {
  const database = await createTestDatabase();
  const settings = testSettings(database, {
    port: 0,
    host: '127.0.0.1',
    internalPort: 0,
    internalHost: '127.0.0.1',
    schedulerApiKeys: ['test-scheduler-key'],
    ...overrides,
  });
  const platform = await startPlatform(settings, logger);
  return {
    platform,
    database,
    settings,
    call: (options) => request(platform.publicPort, options),
    callInternal: (options) => request(platform.internalPort, options),
    async close() {
      await platform.close();
      await database.cleanup();
    },
  };
}

/**
 * The instance registry's heartbeats and traffic counters (src/instances/README.md): every request,
 * refused or not, is counted, so they are never part of "nothing changed".
 */
const OPERATIONAL_TABLES = ['stratus_instances', 'stratus_instance_counters'];

/**
 * A digest per table of everything the SQL store holds (rows in a stable order), to show that a
 * request changed nothing. Tables named in `ignore.tables` and columns named in `ignore.columns`
 * are left out.
 */
export async function storeDigest(
  connection: SqlConnection,
  ignore: { tables?: readonly string[]; columns?: readonly string[] } = {},
): Promise<Record<string, string>> {
  const tables = await connection.database.read(() =>
    all<{ name: string }>(
      connection.dialect === 'sqlite'
        ? "select name from sqlite_master where type = 'table' and name not like 'sqlite_%' order by name"
        : 'select table_name as name from information_schema.tables where table_schema = current_schema() order by table_name',
    ),
  );
  const digest: Record<string, string> = {};
  for (const { name } of tables) {
    if (ignore.tables?.includes(name) || OPERATIONAL_TABLES.includes(name)) continue;
    const rows = await connection.database.read(() => all(`select * from "${name.replaceAll('"', '""')}"`));
    const lines = rows
      .map((row) =>
        JSON.stringify(row, (key, value: unknown) =>
          ignore.columns?.includes(key)
            ? undefined
            : typeof value === 'bigint'
              ? value.toString()
              : Buffer.isBuffer(value)
                ? value.toString('hex')
                : value,
        ),
      )
      .sort();
    digest[name] = `${lines.length}:${createHash('sha256').update(lines.join('\n')).digest('hex').slice(0, 16)}`;
  }
  return digest;
}
