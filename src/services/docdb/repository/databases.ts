import {
  addStoredOwner,
  ownersLikePattern,
  parseOwners,
  removeStoredOwner,
  type DeleteOwnerResult,
} from '../../owners.ts';
import { isUuidV4, newId, rfc3339 } from '../../../core/ids.ts';
import { SizedCache } from '../../../store/cache.ts';
import type { SqlConnection } from '../../../store/db.ts';
import { PerStore, SharedCache, type ChangeFeed } from '../../../store/shared-cache.ts';
import { all, first, run } from '../../../store/sql-work.ts';
import type { SqlDatabase } from '../../../store/sql/types.ts';

/** A database as the API returns it (README: Databases). */
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
export type { DeleteOwnerResult } from '../../owners.ts';

interface DatabaseRow {
  id: string;
  name: string;
  created_at: string;
  owners: string;
  key: string | null;
}

function toRecord(row: Omit<DatabaseRow, 'key'>, owners: string[], keys: string[]): DatabaseRecord {
  return {
    id: row.id,
    name: row.name,
    creation_date: row.created_at,
    owners,
    api_keys: keys,
    owners_length: owners.length,
  };
}

/** Carries the id of a database whose record (name, owners, keys) changed, to every instance. */
const DATABASES_CHANGED_TOPIC = 'docdb.databases.changed';
/** Records cached, measured in characters of their ids, name and lists (a few hundred each). */
const RECORD_CACHE_CHARS = 4 * 1024 * 1024;

/** The record cache of each store, shared by the repositories on it. */
const recordCaches = new PerStore<SharedCache<DatabaseRecord>>((cache) => cache.close());

function recordSize(record: DatabaseRecord): number {
  let size = 64 + record.id.length + record.name.length + record.creation_date.length;
  for (const owner of record.owners) size += owner.length + 8;
  for (const key of record.api_keys) size += key.length + 8;
  return size;
}

/** Each database with its keys (a database without keys: one row, `key` null). */
const SELECT_RECORDS =
  'select d.id, d.name, d.created_at, d.owners, k.key from docdb_databases d left join docdb_api_keys k on k.database_id = d.id';

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
 * The databases and their API keys (README: Databases): the service's only door to those two
 * tables. Database ids and keys are UUID v4 generated here, so anything else is unknown without
 * a query (and never reaches PostgreSQL, which refuses NUL in text). Owners are a JSON text array;
 * every change to it is a read-modify-write in one write transaction (the row held `FOR UPDATE` on
 * PostgreSQL; SQLite runs one write at a time), so concurrent owner changes all land.
 */
export class DatabaseRepository {
  private readonly sql: SqlDatabase;
  /**
   * The record by id: it is read on every database-scoped request (access.ts), and every change
   * to a database, its owners or its keys goes through this class, which drops the entry here and,
   * where other instances write too, on every instance before a hit is trusted (SharedCache).
   * Repositories on one store share one cache, so a second app in the same process (tests build
   * two instances on one embedded store) sees the other's writes. Records handed out are frozen.
   */
  private readonly records: SharedCache<DatabaseRecord>;
  private closed = false;

  /** `feed` is required where the process is not the database's only writer. */
  constructor(
    private readonly connection: SqlConnection,
    feed?: ChangeFeed,
  ) {
    this.sql = connection.database;
    const { soleWriter } = this.sql;
    this.records = recordCaches.take(
      this.sql,
      () => new SharedCache(new SizedCache(RECORD_CACHE_CHARS, recordSize), DATABASES_CHANGED_TOPIC, soleWriter, feed),
    );
  }

  /** Releases the record cache (the last repository of the store stops listening for changes). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    recordCaches.release(this.sql);
  }

  async get(id: string): Promise<DatabaseRecord | null> {
    if (!isUuidV4(id)) return null;
    return this.records.read(id, async () => {
      const rows = await this.sql.read(() => all<DatabaseRow>(`${SELECT_RECORDS} where d.id = ? order by k.seq`, id));
      const record = groupRecords(rows)[0];
      return record ? frozen(record) : null;
    });
  }

  /** Runs a write that changes database `id`'s record; the cached record is dropped around it. */
  private changing<T>(id: string, write: () => Promise<T>): Promise<T> {
    return this.records.around(id, write);
  }

  /** Every database `userId` owns, in creation order. */
  async listOwnedBy(userId: string): Promise<DatabaseRecord[]> {
    // The owners text holds each id JSON-encoded; LIKE narrows the scan (it may over-match, for
    // example across two neighbouring ids, or case-insensitively on SQLite) and the exact test
    // runs on the parsed array. No JSON functions: PostgreSQL's refuse some valid JSON text.
    const rows = await this.sql.read(() =>
      all<DatabaseRow>(
        `${SELECT_RECORDS} where d.owners like ? escape '!' order by d.seq, k.seq`,
        ownersLikePattern(userId),
      ),
    );
    return groupRecords(rows).filter((record) => record.owners.includes(userId));
  }

  /** A new database with `owner` as its sole owner and no keys. */
  async create(name: string, owner: string): Promise<DatabaseRecord> {
    const record: DatabaseRecord = {
      id: newId(),
      name,
      creation_date: rfc3339(),
      owners: [owner],
      api_keys: [],
      owners_length: 1,
    };
    await this.sql.write(() =>
      run(
        'insert into docdb_databases (id, name, created_at, owners) values (?, ?, ?, ?)',
        record.id,
        name,
        record.creation_date,
        JSON.stringify(record.owners),
      ),
    );
    return record;
  }

  /** Renames the database; null when it does not exist. */
  async rename(id: string, name: string): Promise<DatabaseRecord | null> {
    if (!isUuidV4(id)) return null;
    const changed = await this.changing(id, () =>
      this.sql.write(() => run('update docdb_databases set name = ? where id = ?', name, id)),
    );
    if (changed === 0) return null;
    return this.get(id);
  }

  /**
   * Deletes the database; its keys, collections, documents and indexes go with it (foreign keys
   * cascade). Returns what the delete endpoint answers, or null when it did not exist.
   */
  async delete(id: string): Promise<{ id: string; name: string; creation_date: string } | null> {
    if (!isUuidV4(id)) return null;
    const row = await this.changing(id, () =>
      this.sql.write(() =>
        first<{ id: string; name: string; created_at: string }>(
          'delete from docdb_databases where id = ? returning id, name, created_at',
          id,
        ),
      ),
    );
    return row ? { id: row.id, name: row.name, creation_date: row.created_at } : null;
  }

  /** Stores a key (the secret already hashed); false when the database no longer exists. */
  async createKey(key: NewDatabaseKey): Promise<boolean> {
    try {
      await this.changing(key.databaseId, () =>
        this.sql.write(() =>
          run(
            'insert into docdb_api_keys (key, database_id, name, secret_hash, created_at) values (?, ?, ?, ?, ?)',
            key.key,
            key.databaseId,
            key.name,
            key.secretHash,
            key.createdAt,
          ),
        ),
      );
      return true;
    } catch (error) {
      if (this.sql.isForeignKeyViolation(error)) return false;
      throw error;
    }
  }

  /** Deletes a key of this database; false when the database has no such key. */
  async deleteKey(databaseId: string, key: string): Promise<boolean> {
    if (!isUuidV4(databaseId) || !isUuidV4(key)) return false;
    return (
      (await this.changing(databaseId, () =>
        this.sql.write(() => run('delete from docdb_api_keys where key = ? and database_id = ?', key, databaseId)),
      )) > 0
    );
  }

  /** A key with its database and secret hash; null when unknown. */
  async findKey(key: string): Promise<DatabaseKey | null> {
    if (!isUuidV4(key)) return null;
    const row = await this.sql.read(() =>
      first<{ key: string; database_id: string; secret_hash: string }>(
        'select key, database_id, secret_hash from docdb_api_keys where key = ?',
        key,
      ),
    );
    return row ? { key: row.key, databaseId: row.database_id, secretHash: row.secret_hash } : null;
  }

  /** Appends `owner` unless it is one already; the owners after the call, or null when the database does not exist. */
  async addOwner(id: string, owner: string): Promise<string[] | null> {
    return isUuidV4(id) ? this.changing(id, () => addStoredOwner(this.connection, 'docdb_databases', id, owner)) : null;
  }

  /** Removes `owner`; never the last one (a database always keeps an owner). */
  async deleteOwner(id: string, owner: string): Promise<DeleteOwnerResult> {
    return isUuidV4(id)
      ? this.changing(id, () => removeStoredOwner(this.connection, 'docdb_databases', id, owner))
      : { status: 'not_found' };
  }
}

/** A record shared by every caller of `get`: frozen, so none can change another's copy. */
function frozen(record: DatabaseRecord): DatabaseRecord {
  Object.freeze(record.owners);
  Object.freeze(record.api_keys);
  return Object.freeze(record);
}
