import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestSchema } from './database.ts';

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
  let drop: (() => Promise<void>) | undefined;
  if (dialect === 'postgres') {
    const baseUrl = process.env.DATABASE_URL;
    if (!baseUrl) throw new Error('a PostgreSQL store needs DATABASE_URL');
    ({ databaseUrl, drop } = await createTestSchema(baseUrl));
  }
  return {
    dialect,
    dataDir,
    databaseUrl,
    env: { DATA_DIR: dataDir, DATABASE_URL: databaseUrl },
    settings: { dataDir, databaseUrl, sqliteSynchronous: 'FULL', lambdaSecretsKey: undefined },
    async cleanup() {
      await drop?.();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
