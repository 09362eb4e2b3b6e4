import type { SqlConnection } from '../../store/db.ts';
import { TextCache } from '../../store/cache.ts';
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

/** The part of the store's notifier the cache needs (the store's `Notifier` satisfies it). */
export interface ChangeFeed {
  publish(topic: string, message: string): Promise<void>;
  subscribe(topic: string, handler: (message: string) => void): () => void;
  onResync(handler: () => void): () => void;
}

/**
 * The config service's only door to storage.
 *
 * Reads of single objects are served from a bounded in-memory cache of their JSON text (README:
 * Caching). Where this process is the database's only writer (the embedded store) the cache is
 * updated after every committed write. Where other instances write too (PostgreSQL), a write
 * drops the local copy and, before it is answered, publishes the object's id on the notifier so
 * every other instance drops its copy as well; a lost notifier connection clears the whole cache
 * when it comes back (messages may have been missed).
 */
export class ConfigRepository {
  private readonly database: SqlDatabase;
  private readonly cache = new TextCache(READ_CACHE_CHARS);
  /**
   * Bumped by every write here and every change announced by another instance, so that a read
   * that raced one does not cache what it read.
   */
  private changes = 0;
  private readonly feed: ChangeFeed | null;
  private readonly unsubscribe: (() => void)[] = [];

  /** `feed` is required where the process is not the database's only writer. */
  constructor(connection: SqlConnection, feed?: ChangeFeed) {
    this.database = connection.database;
    this.feed = this.database.soleWriter ? null : (feed ?? null);
    if (!this.database.soleWriter && !feed)
      throw new Error('a shared database needs a change feed for the config cache');
    if (this.feed) {
      this.unsubscribe.push(
        this.feed.subscribe(CONFIG_CHANGED_TOPIC, (id) => {
          this.changes++;
          this.cache.delete(id);
        }),
        this.feed.onResync(() => {
          this.changes++;
          this.cache.clear();
        }),
      );
    }
  }

  /** Stops listening for other instances' changes. */
  close(): void {
    for (const stop of this.unsubscribe.splice(0)) stop();
  }

  /** The object as JSON text (`{"id":…,"entries":…}`), or null when it does not exist. */
  async getJson(id: string): Promise<string | null> {
    const cached = this.cache.get(id);
    if (cached !== undefined) return cached;
    const changesBefore = this.changes;
    const row = await this.database.read(() =>
      first<{ entries: string }>('select entries from config_objects where id = ?', id),
    );
    if (!row) return null;
    const json = objectJson(id, row.entries);
    if (this.changes === changesBefore) this.cache.set(id, json);
    return json;
  }

  /** After a committed write of `id` (entries null: deleted). */
  private async written(id: string, entries: Entries | null): Promise<void> {
    this.changes++;
    if (!this.feed) {
      if (entries === null) this.cache.delete(id);
      else this.cache.set(id, objectJson(id, JSON.stringify(entries)));
      return;
    }
    // Another instance's write of the same id may be announced before this one's promise settles,
    // so the local copy is dropped rather than replaced: the next read fetches the newest.
    this.cache.delete(id);
    await this.feed.publish(CONFIG_CHANGED_TOPIC, id);
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
    // Before the write starts: a read racing it must not cache the old text after it commits.
    this.changes++;
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
