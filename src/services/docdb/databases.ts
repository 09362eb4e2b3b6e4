import { isForeignKeyViolation } from '../../store/sql-work.ts';
import { addStoredOwner, ownersLikePattern, parseOwners, removeStoredOwner, type DeleteOwnerResult } from '../../core/owners.ts';
import { sql, type Generated, type Kysely } from 'kysely';
import { isUuidV4, newId, rfc3339 } from '../../core/ids.ts';
import type { SqlConnection } from '../../store/db.ts';

type DatabaseTables = {
  docdb_databases: { seq: Generated<number>; id: string; name: string; created_at: string; owners: string };
  docdb_api_keys: { seq: Generated<number>; key: string; database_id: string; name: string; secret_hash: string; created_at: string };
};

/** A database as the API returns it (docdb.md §3.1). */
export interface DatabaseRecord {
  id: string;
  name: string;
  creation_date: string;
  /** User ids: the creator first, then in the order added. */
  owners: string[];
  /** The public `key` of each API key, in creation order (never secrets). */
  api_keys: string[];
  owners_length: number;
}

/** A database API key as stored: the public key, its database and the bcrypt hash of its secret. */
export interface DatabaseKey {
  key: string;
  databaseId: string;
  secretHash: string;
}

export interface NewDatabaseKey {
  key: string;
  databaseId: string;
  name: string;
  secretHash: string;
  createdAt: string;
}

/** The outcome of `deleteOwner`: the owners after the change, or why nothing changed. */
export type { DeleteOwnerResult } from '../../core/owners.ts';

interface DatabaseRow {
  id: string;
  name: string;
  created_at: string;
  owners: string;
  key: string | null;
}

function toRecord(row: Omit<DatabaseRow, 'key'>, owners: string[], keys: string[]): DatabaseRecord {
  return { id: row.id, name: row.name, creation_date: row.created_at, owners, api_keys: keys, owners_length: owners.length };
}

/** Groups joined database × key rows (ordered by database, then key) into records. */
function groupRecords(rows: readonly DatabaseRow[]): DatabaseRecord[] {
  const records: DatabaseRecord[] = [];
  let current: DatabaseRecord | undefined;
  for (const row of rows) {
    if (current?.id !== row.id) {
      current = toRecord(row, parseOwners(row.owners), []);
      records.push(current);
    }
    if (row.key !== null) current.api_keys.push(row.key);
  }
  return records;
}

/**
 * The databases and their API keys (docdb.md §3.1, §4): the service's only door to those two
 * tables. Database ids and keys are UUID v4 generated here, so anything else is unknown without
 * a query (and never reaches PostgreSQL, which refuses NUL in text). Owners are a JSON text array;
 * every change to it is a read-modify-write in one transaction (the row held `FOR UPDATE` on
 * PostgreSQL; Kysely's single SQLite connection serializes transactions), so concurrent owner
 * changes all land.
 */
export class DatabaseRepository {
  private readonly db: Kysely<DatabaseTables>;

  constructor(private readonly connection: SqlConnection) {
    this.db = connection.db.withTables<DatabaseTables>();
  }

  private selectRecords() {
    return this.db
      .selectFrom('docdb_databases as d')
      .leftJoin('docdb_api_keys as k', 'k.database_id', 'd.id')
      .select(['d.id', 'd.name', 'd.created_at', 'd.owners', 'k.key']);
  }

  async get(id: string): Promise<DatabaseRecord | null> {
    if (!isUuidV4(id)) return null;
    // Read on every database-scoped request: synchronous on SQLite when the connection is free.
    type Row = { id: string; name: string; created_at: string; owners: string; key: string | null };
    const direct = this.connection.direct?.run(
      (prepare) => prepare('select d.id, d.name, d.created_at, d.owners, k.key from docdb_databases d left join docdb_api_keys k on k.database_id = d.id where d.id = ? order by k.seq').all(id) as Row[],
    );
    const rows = direct ? direct.value : await this.selectRecords().where('d.id', '=', id).orderBy('k.seq').execute();
    return groupRecords(rows)[0] ?? null;
  }

  /** Every database `userId` owns, in creation order. */
  async listOwnedBy(userId: string): Promise<DatabaseRecord[]> {
    // The owners text holds each id JSON-encoded; LIKE narrows the scan (it may over-match, for
    // example across two neighbouring ids, or case-insensitively on SQLite) and the exact test
    // runs on the parsed array. No JSON functions: PostgreSQL's refuse some valid JSON text.
    const rows = await this.selectRecords()
      .where(sql<boolean>`${sql.ref('d.owners')} like ${ownersLikePattern(userId)} escape '!'`)
      .orderBy('d.seq')
      .orderBy('k.seq')
      .execute();
    return groupRecords(rows).filter((record) => record.owners.includes(userId));
  }

  /** A new database with `owner` as its sole owner and no keys. */
  async create(name: string, owner: string): Promise<DatabaseRecord> {
    const record: DatabaseRecord = { id: newId(), name, creation_date: rfc3339(), owners: [owner], api_keys: [], owners_length: 1 };
    await this.db
      .insertInto('docdb_databases')
      .values({ id: record.id, name, created_at: record.creation_date, owners: JSON.stringify(record.owners) })
      .execute();
    return record;
  }

  /** Renames the database; null when it does not exist. */
  async rename(id: string, name: string): Promise<DatabaseRecord | null> {
    if (!isUuidV4(id)) return null;
    const result = await this.db.updateTable('docdb_databases').set({ name }).where('id', '=', id).executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return null;
    return this.get(id);
  }

  /**
   * Deletes the database; its keys, collections, documents and indexes go with it (foreign keys
   * cascade). Returns what the delete endpoint answers, or null when it did not exist.
   */
  async delete(id: string): Promise<{ id: string; name: string; creation_date: string } | null> {
    if (!isUuidV4(id)) return null;
    const row = await this.db.deleteFrom('docdb_databases').where('id', '=', id).returning(['id', 'name', 'created_at']).executeTakeFirst();
    return row ? { id: row.id, name: row.name, creation_date: row.created_at } : null;
  }

  /** Stores a key (the secret already hashed); false when the database no longer exists. */
  async createKey(key: NewDatabaseKey): Promise<boolean> {
    try {
      await this.db
        .insertInto('docdb_api_keys')
        .values({ key: key.key, database_id: key.databaseId, name: key.name, secret_hash: key.secretHash, created_at: key.createdAt })
        .execute();
      return true;
    } catch (error) {
      if (isForeignKeyViolation(error)) return false;
      throw error;
    }
  }

  /** Deletes a key of this database; false when the database has no such key. */
  async deleteKey(databaseId: string, key: string): Promise<boolean> {
    if (!isUuidV4(databaseId) || !isUuidV4(key)) return false;
    const result = await this.db.deleteFrom('docdb_api_keys').where('key', '=', key).where('database_id', '=', databaseId).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** A key with its database and secret hash; null when unknown. */
  async findKey(key: string): Promise<DatabaseKey | null> {
    if (!isUuidV4(key)) return null;
    const row = await this.db.selectFrom('docdb_api_keys').select(['key', 'database_id', 'secret_hash']).where('key', '=', key).executeTakeFirst();
    return row ? { key: row.key, databaseId: row.database_id, secretHash: row.secret_hash } : null;
  }

  /** Appends `owner` unless it is one already; the owners after the call, or null when the database does not exist. */
  async addOwner(id: string, owner: string): Promise<string[] | null> {
    return isUuidV4(id) ? addStoredOwner(this.connection, 'docdb_databases', id, owner) : null;
  }

  /** Removes `owner`; never the last one (a database always keeps an owner). */
  async deleteOwner(id: string, owner: string): Promise<DeleteOwnerResult> {
    return isUuidV4(id) ? removeStoredOwner(this.connection, 'docdb_databases', id, owner) : { status: 'not_found' };
  }
}
