import { sql, type Generated, type Kysely } from 'kysely';
import type { Statement } from 'better-sqlite3';
import type { DirectSqlite, SqlConnection } from '../../store/db.ts';
import { TextCache } from '../../store/cache.ts';
import { mergeEntries, parseEntries, type Entries } from './entries.ts';

type ConfigTables = {
  config_objects: { seq: Generated<number>; id: string; entries: string };
  config_user_entries: { user_id: string; entries: string };
};

export interface ConfigObject {
  id: string;
  entries: Entries;
}

/** The JSON text of a config object, built from the stored entries text without re-parsing it. */
function objectJson(id: string, entriesText: string): string {
  return `{"id":${JSON.stringify(id)},"entries":${entriesText}}`;
}

const READ_CACHE_CHARS = 64 * 1024 * 1024;

/**
 * The config service's only door to storage.
 *
 * On the embedded store this process is the only writer, so reads of single objects are served
 * from a bounded in-memory cache of their JSON text, updated after every committed write. On
 * PostgreSQL other instances write too and a write must be visible everywhere at once, so every
 * read goes to the database.
 */
export class ConfigRepository {
  private readonly db: Kysely<ConfigTables>;
  private readonly cache: TextCache | null;
  private readonly direct: DirectSqlite | undefined;
  /** Bumped by every write, so that a read that raced a write does not cache what it read. */
  private writes = 0;

  constructor(connection: SqlConnection) {
    this.db = connection.db.withTables<ConfigTables>();
    this.cache = connection.database.soleWriter ? new TextCache(READ_CACHE_CHARS) : null;
    this.direct = connection.direct;
  }

  /** The object as JSON text (`{"id":…,"entries":…}`), or null when it does not exist. */
  async getJson(id: string): Promise<string | null> {
    const cached = this.cache?.get(id);
    if (cached !== undefined) return cached;
    const writesBefore = this.writes;
    const direct = this.direct?.run((prepare) => prepare('select entries from config_objects where id = ?').get(id) as { entries: string } | undefined);
    const row = direct ? direct.value : await this.db.selectFrom('config_objects').select(['entries']).where('id', '=', id).executeTakeFirst();
    if (!row) return null;
    const json = objectJson(id, row.entries);
    if (this.cache && this.writes === writesBefore) this.cache.set(id, json);
    return json;
  }

  private written(id: string, entries: Entries | null): void {
    this.writes++;
    if (!this.cache) return;
    if (entries === null) this.cache.delete(id);
    else this.cache.set(id, objectJson(id, JSON.stringify(entries)));
  }

  async list(): Promise<ConfigObject[]> {
    const rows = await this.db.selectFrom('config_objects').select(['id', 'entries']).orderBy('seq').execute();
    return rows.map((row) => ({ id: row.id, entries: parseEntries(row.entries) }));
  }

  /** Inserts the object; false when the id is already taken. */
  async create(object: ConfigObject): Promise<boolean> {
    const result = await this.db
      .insertInto('config_objects')
      .values({ id: object.id, entries: JSON.stringify(object.entries) })
      .onConflict((oc) => oc.column('id').doNothing())
      .executeTakeFirst();
    const created = Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
    if (created) this.written(object.id, object.entries);
    return created;
  }

  async delete(id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('config_objects').where('id', '=', id).executeTakeFirst();
    this.written(id, null);
    return Number(result.numDeletedRows) > 0;
  }

  /**
   * Merges a patch into an object atomically, so concurrent patches of different keys all
   * survive: on SQLite as one group-committed write (the single writer serializes them), on
   * PostgreSQL in a transaction holding the row `FOR UPDATE`. Null when the object does not exist.
   */
  async patch(id: string, patch: Entries): Promise<ConfigObject | null> {
    this.writes++;
    const changes = Object.keys(patch).length > 0;
    const merge = (current: string | undefined) => (current === undefined ? null : mergeEntries(parseEntries(current), patch));
    const sqliteWrite = (prepare: (sql: string) => Statement) => {
      const entries = merge((prepare('select entries from config_objects where id = ?').get(id) as { entries: string } | undefined)?.entries);
      if (entries && changes) prepare('update config_objects set entries = ? where id = ?').run(JSON.stringify(entries), id);
      return entries;
    };
    const entries = this.direct
      ? await this.direct.write(sqliteWrite)
      : await this.db.transaction().execute(async (trx) => {
          const row = await trx.selectFrom('config_objects').select(['entries']).where('id', '=', id).forUpdate().executeTakeFirst();
          const merged = merge(row?.entries);
          if (merged && changes) await trx.updateTable('config_objects').set({ entries: JSON.stringify(merged) }).where('id', '=', id).execute();
          return merged;
        });
    if (!entries) return null;
    if (changes) this.written(id, entries);
    return { id, entries };
  }

  async userEntries(userId: string): Promise<Entries> {
    const direct = this.direct?.run((prepare) => prepare('select entries from config_user_entries where user_id = ?').get(userId) as { entries: string } | undefined);
    const row = direct ? direct.value : await this.db.selectFrom('config_user_entries').select(['entries']).where('user_id', '=', userId).executeTakeFirst();
    return row ? parseEntries(row.entries) : {};
  }

  /** Merges a patch into the user's map, creating it when needed; serialized per user as above. */
  async patchUserEntries(userId: string, patch: Entries): Promise<Entries> {
    const changes = Object.keys(patch).length > 0;
    if (this.direct) {
      return this.direct.write((prepare) => {
        const row = prepare('select entries from config_user_entries where user_id = ?').get(userId) as { entries: string } | undefined;
        const entries = mergeEntries(row ? parseEntries(row.entries) : {}, patch);
        if (changes) {
          prepare('insert into config_user_entries (user_id, entries) values (?, ?) on conflict (user_id) do update set entries = excluded.entries').run(userId, JSON.stringify(entries));
        }
        return entries;
      });
    }
    return this.db.transaction().execute(async (trx) => {
      // Make sure a row exists to lock, so two first-time patches of one user serialize too.
      await sql`insert into config_user_entries (user_id, entries) values (${userId}, '{}') on conflict (user_id) do nothing`.execute(trx);
      const row = await trx.selectFrom('config_user_entries').select(['entries']).where('user_id', '=', userId).forUpdate().executeTakeFirst();
      const entries = mergeEntries(row ? parseEntries(row.entries) : {}, patch);
      if (changes) {
        await trx
          .insertInto('config_user_entries')
          .values({ user_id: userId, entries: JSON.stringify(entries) })
          .onConflict((oc) => oc.column('user_id').doUpdateSet({ entries: JSON.stringify(entries) }))
          .execute();
      }
      return entries;
    });
  }
}
