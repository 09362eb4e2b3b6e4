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
   * survive: one write transaction that reads the row (held `FOR UPDATE` on PostgreSQL; on SQLite
   * the single writer serializes them) and stores the merge. Null when the object does not exist.
   */
  async patch(id: string, patch: Entries): Promise<ConfigObject | null> {
    this.cache.writing();
    const changes = Object.keys(patch).length > 0;
    const { forUpdate } = this.database.syntax;
    const entries = await this.database.write(function* () {
      const row = yield* first<{ entries: string }>(`select entries from config_objects where id = ?${forUpdate}`, id);
      if (!row) return null;
      const merged = mergeEntries(parseEntries(row.entries), patch);
      if (changes) yield* run('update config_objects set entries = ? where id = ?', JSON.stringify(merged), id);
      return merged;
    });
    if (!entries) return null;
    if (changes) await this.written(id, entries);
    return { id, entries };
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
