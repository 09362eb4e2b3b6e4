import { sql, type Generated, type Kysely } from 'kysely';
import type { SqlConnection } from '../../store/db.ts';
import { mergeEntries, parseEntries, type Entries } from './entries.ts';

type ConfigTables = {
  config_objects: { seq: Generated<number>; id: string; entries: string };
  config_user_entries: { user_id: string; entries: string };
};

export interface ConfigObject {
  id: string;
  entries: Entries;
}

/** The config service's only door to storage. */
export class ConfigRepository {
  private readonly db: Kysely<ConfigTables>;
  private readonly postgres: boolean;

  constructor(connection: SqlConnection) {
    this.db = connection.db.withTables<ConfigTables>();
    this.postgres = connection.dialect === 'postgres';
  }

  async list(): Promise<ConfigObject[]> {
    const rows = await this.db.selectFrom('config_objects').select(['id', 'entries']).orderBy('seq').execute();
    return rows.map((row) => ({ id: row.id, entries: parseEntries(row.entries) }));
  }

  async get(id: string): Promise<ConfigObject | null> {
    const row = await this.db.selectFrom('config_objects').select(['id', 'entries']).where('id', '=', id).executeTakeFirst();
    return row ? { id: row.id, entries: parseEntries(row.entries) } : null;
  }

  /** Inserts the object; false when the id is already taken. */
  async create(object: ConfigObject): Promise<boolean> {
    const result = await this.db
      .insertInto('config_objects')
      .values({ id: object.id, entries: JSON.stringify(object.entries) })
      .onConflict((oc) => oc.column('id').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async delete(id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('config_objects').where('id', '=', id).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /**
   * Merges a patch into an object in one transaction, the row locked on PostgreSQL (SQLite's
   * single connection already serializes), so concurrent patches of different keys all survive.
   * Null when the object does not exist.
   */
  async patch(id: string, patch: Entries): Promise<ConfigObject | null> {
    return this.db.transaction().execute(async (trx) => {
      let query = trx.selectFrom('config_objects').select(['entries']).where('id', '=', id);
      if (this.postgres) query = query.forUpdate();
      const row = await query.executeTakeFirst();
      if (!row) return null;
      const entries = mergeEntries(parseEntries(row.entries), patch);
      if (Object.keys(patch).length > 0) {
        await trx.updateTable('config_objects').set({ entries: JSON.stringify(entries) }).where('id', '=', id).execute();
      }
      return { id, entries };
    });
  }

  async userEntries(userId: string): Promise<Entries> {
    const row = await this.db.selectFrom('config_user_entries').select(['entries']).where('user_id', '=', userId).executeTakeFirst();
    return row ? parseEntries(row.entries) : {};
  }

  /** Merges a patch into the user's map, creating it when needed; serialized per user. */
  async patchUserEntries(userId: string, patch: Entries): Promise<Entries> {
    return this.db.transaction().execute(async (trx) => {
      if (this.postgres) {
        // Make sure a row exists to lock, so two first-time patches of one user serialize too.
        await sql`insert into config_user_entries (user_id, entries) values (${userId}, '{}') on conflict (user_id) do nothing`.execute(trx);
      }
      let query = trx.selectFrom('config_user_entries').select(['entries']).where('user_id', '=', userId);
      if (this.postgres) query = query.forUpdate();
      const row = await query.executeTakeFirst();
      const entries = mergeEntries(row ? parseEntries(row.entries) : {}, patch);
      if (Object.keys(patch).length > 0) {
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
