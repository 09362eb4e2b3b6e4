import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openPostgres, openSqlite, type SqlConnection } from '../../src/store/db.ts';

/** Which database the suite runs on: `npm test` → sqlite, `npm run test:pg` → postgres. */
export const testDialect: 'sqlite' | 'postgres' = process.env.STRATUS_TEST_DB === 'postgres' ? 'postgres' : 'sqlite';

export interface TestDatabase {
  /** A fresh data directory (always; blobs and the SQLite file live there). */
  readonly dataDir: string;
  /** PostgreSQL only: a URL whose search_path is this test's own schema. */
  readonly databaseUrl?: string;
  /** Opens another connection to the same database (as a second instance would). */
  connect(): Promise<SqlConnection>;
  /** Drops the schema (PostgreSQL) and removes the data directory. */
  cleanup(): Promise<void>;
}

/**
 * An isolated database for one test file: a temp directory with a SQLite file, or a fresh
 * PostgreSQL schema named in the URL's search_path, so test files can run in parallel.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stratus-test-'));
  if (testDialect === 'sqlite') {
    return {
      dataDir,
      async connect() {
        return openSqlite(join(dataDir, 'stratus.db'));
      },
      async cleanup() {
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  const baseUrl = process.env.DATABASE_URL;
  if (!baseUrl) throw new Error('STRATUS_TEST_DB=postgres needs DATABASE_URL');
  const { databaseUrl, drop } = await createTestSchema(baseUrl);
  return {
    dataDir,
    databaseUrl,
    async connect() {
      return openPostgres(databaseUrl, 5);
    },
    async cleanup() {
      await drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A fresh schema in the database of `baseUrl`, and a URL whose search_path is that schema. */
export async function createTestSchema(baseUrl: string): Promise<{ databaseUrl: string; drop(): Promise<void> }> {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  const url = new URL(baseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    databaseUrl: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: baseUrl });
      await client.connect();
      await client.query(`drop schema if exists ${schema} cascade`);
      await client.end();
    },
  };
}
