import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/**
 * A fresh store of a chosen dialect, whatever the suite runs on (test/helpers/database.ts follows
 * STRATUS_TEST_DB): for tests that move data from one dialect to the other. PostgreSQL needs
 * DATABASE_URL; each store is a schema of its own there.
 */
export interface FreshStore {
  readonly dialect: 'sqlite' | 'postgres';
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /** DATA_DIR and DATABASE_URL for `stratus` child processes (DATABASE_URL unset for SQLite). */
  readonly env: Record<string, string | undefined>;
  /** What export and import take. */
  readonly settings: {
    dataDir: string;
    databaseUrl: string | undefined;
    sqliteSynchronous: 'FULL';
    lambdaSecretsKey: Buffer | undefined;
  };
  cleanup(): Promise<void>;
}

export async function createStore(dialect: 'sqlite' | 'postgres'): Promise<FreshStore> {
  const dataDir = mkdtempSync(join(tmpdir(), `stratus-${dialect}-`));
  let databaseUrl: string | undefined;
  let schema: string | undefined;
  const baseUrl = process.env.DATABASE_URL;
  if (dialect === 'postgres') {
    if (!baseUrl) throw new Error('a PostgreSQL store needs DATABASE_URL');
    schema = `t_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: baseUrl });
    await admin.connect();
    await admin.query(`create schema ${schema}`);
    await admin.end();
    const url = new URL(baseUrl);
    url.searchParams.set('options', `-c search_path=${schema}`);
    databaseUrl = url.toString();
  }
  return {
    dialect,
    dataDir,
    databaseUrl,
    env: { DATA_DIR: dataDir, DATABASE_URL: databaseUrl },
    settings: { dataDir, databaseUrl, sqliteSynchronous: 'FULL', lambdaSecretsKey: undefined },
    async cleanup() {
      if (schema) {
        const client = new pg.Client({ connectionString: baseUrl });
        await client.connect();
        await client.query(`drop schema if exists ${schema} cascade`);
        await client.end();
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
