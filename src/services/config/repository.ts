import type { SqlConnection } from '../../store/db.ts';
import { TextCache } from '../../store/cache.ts';
import { SharedCache, type ChangeFeed } from '../../store/shared-cache.ts';
import { all, first, run } from '../../store/sql-work.ts';
import type { SqlDatabase } from '../../store/sql/types.ts';
import { mergeEntries, parseEntries, type Entries } from './entries.ts';

export interface ConfigObject {
  id: string;
  entries: Entries;
}

/** The JSON text of a config object, built from the stored entries text without re-parsing it. */
function objectJson(id: string, entriesText: string): string {
  return `{"id":${JSON.stringify(id)},"entries":${entriesText}}`;
}

const READ_CACHE_CHARS = 64 * 1024 * 1024;

/** Tries of an unlocked patch before it takes the row lock (each failure means another patch landed). */
const OPTIMISTIC_ATTEMPTS = 8;

/** The notifier topic a write publishes its object's id on, so other instances drop their copy. */
export const CONFIG_CHANGED_TOPIC = 'config.objects';

/**
 * The config service's only door to storage. Reads of single objects are served from a bounded
 * in-memory cache of their JSON text (README: Caching), kept right across instances by the
 * store's SharedCache.
 */
export class ConfigRepository {
  private readonly database: SqlDatabase;
  private readonly cache: SharedCache<string>;

  /** `feed` is required where the process is not the database's only writer. */
  constructor(connection: SqlConnection, feed?: ChangeFeed) {
    this.database = connection.database;
    this.cache = new SharedCache(new TextCache(READ_CACHE_CHARS), CONFIG_CHANGED_TOPIC, this.database.soleWriter, feed);
  }

  /** Stops listening for other instances' changes. */
  close(): void {
    this.cache.close();
  }

  /** The object as JSON text (`{"id":…,"entries":…}`), or null when it does not exist. */
  getJson(id: string): Promise<string | null> {
    return this.cache.read(id, async () => {
      const row = await this.database.read(() =>
        first<{ entries: string }>('select entries from config_objects where id = ?', id),
      );
      return row ? objectJson(id, row.entries) : null;
    });
  }

  /** After a committed write of `id` (entries null: deleted). */
  private written(id: string, entries: Entries | null): Promise<void> {
    return this.cache.written(id, entries === null ? null : objectJson(id, JSON.stringify(entries)));
  }

  async list(): Promise<ConfigObject[]> {
    const rows = await this.database.read(() =>
      all<{ id: string; entries: string }>('select id, entries from config_objects order by seq'),
    );
    return rows.map((row) => ({ id: row.id, entries: parseEntries(row.entries) }));
  }

  /** Inserts the object; false when the id is already taken. */
  async create(object: ConfigObject): Promise<boolean> {
    const entries = JSON.stringify(object.entries);
    const created =
      (await this.database.write(() =>
        run('insert into config_objects (id, entries) values (?, ?) on conflict (id) do nothing', object.id, entries),
      )) > 0;
    if (created) await this.written(object.id, object.entries);
    return created;
  }

  async delete(id: string): Promise<boolean> {
    const deleted = await this.database.write(() => run('delete from config_objects where id = ?', id));
    if (deleted > 0) await this.written(id, null);
    return deleted > 0;
  }

  /**
   * Merges a patch into an object atomically, so concurrent patches of different keys all
   * survive. Null when the object does not exist. On SQLite one write transaction reads the row and
   * stores the merge (the single writer serializes them). On PostgreSQL the merge is stored only if
   * the row still holds what was read, else it is read and merged again: two round trips where a
   * locking transaction takes four (begin, select for update, update, commit).
   */
  async patch(id: string, patch: Entries): Promise<ConfigObject | null> {
    this.cache.writing(id);
    const changes = Object.keys(patch).length > 0;
    const entries = changes && !this.database.soleWriter ? await this.patchIfUnchanged(id, patch) : null;
    const merged = entries ?? (await this.patchLocked(id, patch, changes));
    if (!merged) return null;
    if (changes) await this.written(id, merged);
    return { id, entries: merged };
  }

  /** The merge in one transaction holding the row; null when the object does not exist. */
  private patchLocked(id: string, patch: Entries, changes: boolean): Promise<Entries | null> {
    const { forUpdate } = this.database.syntax;
    return this.database.write(function* () {
      const row = yield* first<{ entries: string }>(`select entries from config_objects where id = ?${forUpdate}`, id);
      if (!row) return null;
      const merged = mergeEntries(parseEntries(row.entries), patch);
      if (changes) yield* run('update config_objects set entries = ? where id = ?', JSON.stringify(merged), id);
      return merged;
    });
  }

  /**
   * Read, merge, store if unchanged; again when another patch came first. Null when the object
   * does not exist, or (left to `patchLocked`) when it kept changing under this patch.
   */
  private async patchIfUnchanged(id: string, patch: Entries): Promise<Entries | null> {
    for (let attempt = 0; attempt < OPTIMISTIC_ATTEMPTS; attempt++) {
      const row = await this.database.read(() =>
        first<{ entries: string }>('select entries from config_objects where id = ?', id),
      );
      if (!row) return null;
      const merged = mergeEntries(parseEntries(row.entries), patch);
      const stored = await this.database.writeEach(() =>
        run(
          'update config_objects set entries = ? where id = ? and entries = ?',
          JSON.stringify(merged),
          id,
          row.entries,
        ),
      );
      if (stored > 0) return merged;
    }
    return null;
  }

  async userEntries(userId: string): Promise<Entries> {
    const row = await this.database.read(() =>
      first<{ entries: string }>('select entries from config_user_entries where user_id = ?', userId),
    );
    return row ? parseEntries(row.entries) : {};
  }

  /** Merges a patch into the user's map, creating it when needed; serialized per user as above. */
  async patchUserEntries(userId: string, patch: Entries): Promise<Entries> {
    const changes = Object.keys(patch).length > 0;
    const { forUpdate } = this.database.syntax;
    return this.database.write(function* () {
      // Make sure a row exists to lock, so two first-time patches of one user serialize too.
      if (changes)
        yield* run(
          `insert into config_user_entries (user_id, entries) values (?, '{}') on conflict (user_id) do nothing`,
          userId,
        );
      const row = yield* first<{ entries: string }>(
        `select entries from config_user_entries where user_id = ?${forUpdate}`,
        userId,
      );
      const entries = mergeEntries(row ? parseEntries(row.entries) : {}, patch);
      if (changes)
        yield* run('update config_user_entries set entries = ? where user_id = ?', JSON.stringify(entries), userId);
      return entries;
    });
  }
}
