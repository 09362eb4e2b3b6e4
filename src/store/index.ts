import { join, resolve } from 'node:path';
import type { Settings } from '../config.ts';
import type { SqlDialect } from './sql/types.ts';
import { openPostgres, openSqlite, type SqlConnection } from './db.ts';
import { migrate, type MigrationSet } from './migrate.ts';
import type { BlobStore } from './blob/types.ts';
import { createDirectoryBlobStore } from './blob/directory.ts';
import { withInlineSmallBlobs } from './blob/inline.ts';
import { createPostgresBlobStore } from './blob/postgres.ts';
import { blobMigrations } from './blob/migrations.ts';
import type { Notifier } from './notifier/types.ts';
import { createMemoryNotifier } from './notifier/memory.ts';
import { createPostgresNotifier, notifierChannel } from './notifier/postgres.ts';

/** Everything a service may keep state in. Services reach it only through their repository. */
export interface Store {
  readonly sql: SqlConnection;
  readonly blobs: BlobStore;
  readonly notifier: Notifier;
  close(): Promise<void>;
}

export type StoreSettings = Pick<Settings, 'dataDir' | 'databaseUrl' | 'sqliteSynchronous'> &
  Partial<Pick<Settings, 'sqliteCacheBytes' | 'sqliteMmapBytes'>>;

/** The embedded store's layout under `dataDir` (also read by `stratus backup` and `restore`). */
export const SQLITE_FILE = 'stratus.db';
export const BLOB_DIR = 'blobs';
export const INLINE_BLOB_FILE = 'inline.db';

/** The store's own migrations (blob tables); services bring theirs. */
/** Which store the settings name, as people read it: `PostgreSQL`, or `SQLite in <dataDir>`. */
export function describeStore(settings: Pick<Settings, 'dataDir' | 'databaseUrl'>): string {
  return settings.databaseUrl ? 'PostgreSQL' : `SQLite in ${settings.dataDir}`;
}

/** A dialect's name as people read it. */
export function dialectName(dialect: SqlDialect): string {
  return dialect === 'postgres' ? 'PostgreSQL' : 'SQLite';
}

export const storeMigrations: MigrationSet = blobMigrations;

/**
 * SQLite file + blob directory (small blobs in `blobs/inline.db`) + in-process notifier under
 * `dataDir`, or, with `databaseUrl`, PostgreSQL for all three so that every instance sees the same
 * state (root README, "Running on PostgreSQL").
 */
export async function openStore(settings: StoreSettings): Promise<Store> {
  const dataDir = resolve(settings.dataDir);
  if (!settings.databaseUrl) {
    const sql = openSqlite(join(dataDir, SQLITE_FILE), {
      synchronous: settings.sqliteSynchronous,
      cacheBytes: settings.sqliteCacheBytes,
      mmapBytes: settings.sqliteMmapBytes,
    });
    const notifier = createMemoryNotifier();
    // Small blobs share a group commit instead of costing a file and its fsyncs each.
    const blobs = withInlineSmallBlobs(
      createDirectoryBlobStore(join(dataDir, BLOB_DIR)),
      join(dataDir, BLOB_DIR, INLINE_BLOB_FILE),
      // Small blobs only, each read once per download: a small cache does.
      { synchronous: settings.sqliteSynchronous, cacheBytes: 8 * 1024 ** 2 },
    );
    return {
      sql,
      blobs,
      notifier,
      async close() {
        await notifier.close();
        await blobs.close();
        await sql.close();
      },
    };
  }
  const sql = await openPostgres(settings.databaseUrl);
  if (!sql.pool || !sql.pgConfig) throw new Error('PostgreSQL connection without a pool');
  const notifier = await createPostgresNotifier(sql.pgConfig, { channel: notifierChannel(sql.schema) });
  return {
    sql,
    blobs: createPostgresBlobStore(sql.pool, {
      observe: (calls, seconds) => sql.database.commitObserver?.('blob_small_put', calls, seconds),
    }),
    notifier,
    async close() {
      await notifier.close();
      await sql.close();
    },
  };
}

export async function migrateStore(store: Store, sets: readonly MigrationSet[]): Promise<string[]> {
  return migrate(store.sql.database, [storeMigrations, ...sets]);
}
