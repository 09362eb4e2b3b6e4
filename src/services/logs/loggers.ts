import { isForeignKeyViolation } from '../../store/sql-work.ts';
import { addOwner as addOwnerTo, ownersLikePattern, parseOwners, removeOwner, type DeleteOwnerResult } from '../../core/owners.ts';
import { sql, type Generated, type Kysely } from 'kysely';
import { isUuidV4, newId, rfc3339 } from '../../core/ids.ts';
import type { SqlConnection, SqlDialect } from '../../store/db.ts';

type LogsTables = {
  logs_loggers: { seq: Generated<number>; id: string; name: string; created_at: string; owners: string };
  logs_api_keys: { seq: Generated<number>; id: string; key: string; logger_id: string; name: string; secret_hash: string; created_at: string };
  logs_chunks: { id: Generated<number>; logger_id: string; kind: string; data: Uint8Array; bytes: number; lines: number };
};

export interface LoggerKeyView {
  id: string;
  name: string;
  created_at: string;
}

/** A logger as the API returns it (logs.md §3). */
export interface LoggerRecord {
  id: string;
  name: string;
  owners: string[];
  api_keys: LoggerKeyView[];
  usage: { bytes: number; lines: number };
  created_at: string;
}

/** A logger key as stored: never leaves the service. */
export interface StoredKey {
  id: string;
  key: string;
  loggerId: string;
  secretHash: string;
}

export type { DeleteOwnerResult } from '../../core/owners.ts';

/** One stored chunk: the lines of one ingest request, each ending in `\n`. */
export interface Chunk {
  id: number;
  data: Buffer;
  bytes: number;
  lines: number;
}

/**
 * Loggers, their keys and their stored chunks: the service's only door to its tables. Ids are
 * UUID v4 generated here, so anything else is unknown without a query. Owner changes are one
 * read-modify-write transaction (row locked on PostgreSQL), as in docdb's repository.
 */
export class LoggerRepository {
  private readonly db: Kysely<LogsTables>;
  private readonly dialect: SqlDialect;

  constructor(private readonly connection: SqlConnection) {
    this.db = connection.db.withTables<LogsTables>();
    this.dialect = connection.dialect;
  }

  private async records(rows: { id: string; name: string; created_at: string; owners: string }[]): Promise<LoggerRecord[]> {
    if (rows.length === 0) return [];
    const ids = rows.map((row) => row.id);
    const keys = await this.db
      .selectFrom('logs_api_keys')
      .select(['id', 'name', 'created_at', 'logger_id'])
      .where('logger_id', 'in', ids)
      .orderBy('seq')
      .execute();
    const usage = await this.db
      .selectFrom('logs_chunks')
      .select(['logger_id', sql<string | number>`coalesce(sum(bytes), 0)`.as('bytes'), sql<string | number>`coalesce(sum(lines), 0)`.as('lines')])
      .where('logger_id', 'in', ids)
      .groupBy('logger_id')
      .execute();
    return rows.map((row) => {
      const used = usage.find((u) => u.logger_id === row.id);
      return {
        id: row.id,
        name: row.name,
        owners: parseOwners(row.owners),
        api_keys: keys.filter((k) => k.logger_id === row.id).map(({ id, name, created_at }) => ({ id, name, created_at })),
        usage: { bytes: Number(used?.bytes ?? 0), lines: Number(used?.lines ?? 0) },
        created_at: row.created_at,
      };
    });
  }

  async get(id: string): Promise<LoggerRecord | null> {
    if (!isUuidV4(id)) return null;
    const rows = await this.db.selectFrom('logs_loggers').select(['id', 'name', 'created_at', 'owners']).where('id', '=', id).execute();
    return (await this.records(rows))[0] ?? null;
  }

  /** Owners and key ids of a logger, without usage figures: the access check's read. */
  async owners(id: string): Promise<string[] | null> {
    if (!isUuidV4(id)) return null;
    const row = await this.db.selectFrom('logs_loggers').select(['owners']).where('id', '=', id).executeTakeFirst();
    return row ? parseOwners(row.owners) : null;
  }

  async listOwnedBy(userId: string): Promise<LoggerRecord[]> {
    // LIKE narrows the scan; the exact test runs on the parsed array (as in docdb).
    const rows = await this.db
      .selectFrom('logs_loggers')
      .select(['id', 'name', 'created_at', 'owners'])
      .where(sql<boolean>`owners like ${ownersLikePattern(userId)} escape '!'`)
      .orderBy('seq')
      .execute();
    return this.records(rows.filter((row) => parseOwners(row.owners).includes(userId)));
  }

  async create(name: string, owner: string): Promise<LoggerRecord> {
    const record: LoggerRecord = { id: newId(), name, owners: [owner], api_keys: [], usage: { bytes: 0, lines: 0 }, created_at: rfc3339() };
    await this.db.insertInto('logs_loggers').values({ id: record.id, name, created_at: record.created_at, owners: JSON.stringify(record.owners) }).execute();
    return record;
  }

  /** Deletes the logger; keys and chunks cascade. False when it did not exist. */
  async delete(id: string): Promise<boolean> {
    if (!isUuidV4(id)) return false;
    const result = await this.db.deleteFrom('logs_loggers').where('id', '=', id).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async createKey(loggerId: string, name: string, key: string, secretHash: string): Promise<LoggerKeyView | null> {
    const view = { id: newId(), name, created_at: rfc3339() };
    try {
      await this.db
        .insertInto('logs_api_keys')
        .values({ id: view.id, key, logger_id: loggerId, name, secret_hash: secretHash, created_at: view.created_at })
        .execute();
      return view;
    } catch (error) {
      if (isForeignKeyViolation(error)) return null;
      throw error;
    }
  }

  /** Deletes a key (by its id) of this logger; the deleted key's public value, or null. */
  async deleteKey(loggerId: string, keyId: string): Promise<string | null> {
    if (!isUuidV4(loggerId) || !isUuidV4(keyId)) return null;
    const row = await this.db.deleteFrom('logs_api_keys').where('id', '=', keyId).where('logger_id', '=', loggerId).returning(['key']).executeTakeFirst();
    return row?.key ?? null;
  }

  async findKey(key: string): Promise<StoredKey | null> {
    if (!isUuidV4(key)) return null;
    const row = await this.db.selectFrom('logs_api_keys').select(['id', 'key', 'logger_id', 'secret_hash']).where('key', '=', key).executeTakeFirst();
    return row ? { id: row.id, key: row.key, loggerId: row.logger_id, secretHash: row.secret_hash } : null;
  }

  async addOwner(id: string, owner: string): Promise<string[] | null> {
    const result = await this.changeOwners(id, (owners) => addOwnerTo(owners, owner));
    return result ?? null;
  }

  async deleteOwner(id: string, owner: string): Promise<DeleteOwnerResult> {
    const result = await this.changeOwners(id, (owners) => removeOwner(owners, owner));
    return result ?? { status: 'not_found' };
  }

  private async changeOwners<T>(id: string, change: (owners: string[]) => { result: T; owners?: string[] }): Promise<T | undefined> {
    if (!isUuidV4(id)) return undefined;
    return this.db.transaction().execute(async (trx) => {
      let query = trx.selectFrom('logs_loggers').select(['owners']).where('id', '=', id);
      if (this.dialect === 'postgres') query = query.forUpdate();
      const row = await query.executeTakeFirst();
      if (!row) return undefined;
      const outcome = change(parseOwners(row.owners));
      if (outcome.owners) await trx.updateTable('logs_loggers').set({ owners: JSON.stringify(outcome.owners) }).where('id', '=', id).execute();
      return outcome.result;
    });
  }

  /**
   * Appends one chunk and enforces retention in the same transaction: while the logger holds
   * more than `maxBytes`, its oldest chunks go (whole chunks, so whole lines). Returns the new
   * chunk's id, or null when the logger no longer exists.
   */
  async append(loggerId: string, kind: 'raw' | 'event', data: Buffer, lines: number, maxBytes: number): Promise<number | null> {
    const direct = this.connection.direct;
    if (direct) {
      // SQLite: the group commit, one fsync for a burst of concurrent ingests.
      return direct.write((prepare) => {
        if (prepare('select 1 from logs_loggers where id = ?').get(loggerId) === undefined) return null;
        const id = Number(prepare('insert into logs_chunks (logger_id, kind, data, bytes, lines) values (?, ?, ?, ?, ?)').run(loggerId, kind, data, data.length, lines).lastInsertRowid);
        const total = Number((prepare('select coalesce(sum(bytes), 0) as total from logs_chunks where logger_id = ?').get(loggerId) as { total: number }).total);
        if (total > maxBytes) {
          const sizes = prepare('select id, bytes from logs_chunks where logger_id = ? and id < ? order by id').iterate(loggerId, id) as IterableIterator<{ id: number; bytes: number }>;
          let excess = total - maxBytes;
          let cutoff = 0;
          for (const size of sizes) {
            if (excess <= 0) break;
            excess -= size.bytes;
            cutoff = size.id;
          }
          if (cutoff > 0) prepare('delete from logs_chunks where logger_id = ? and id <= ?').run(loggerId, cutoff);
        }
        return id;
      });
    }
    try {
      return await this.db.transaction().execute(async (trx) => {
        const inserted = await trx
          .insertInto('logs_chunks')
          .values({ logger_id: loggerId, kind, data, bytes: data.length, lines })
          .returning(['id'])
          .executeTakeFirstOrThrow();
        const sizes = await trx.selectFrom('logs_chunks').select(['id', 'bytes']).where('logger_id', '=', loggerId).orderBy('id', 'desc').execute();
        let total = 0;
        let cutoff: number | null = null;
        for (const size of sizes) {
          total += Number(size.bytes);
          // The newest chunk always stays, even when it alone exceeds the bound.
          if (total > maxBytes && Number(size.id) !== Number(inserted.id)) {
            cutoff = Number(size.id);
            break;
          }
        }
        if (cutoff !== null) await trx.deleteFrom('logs_chunks').where('logger_id', '=', loggerId).where('id', '<=', cutoff).execute();
        return Number(inserted.id);
      });
    } catch (error) {
      if (isForeignKeyViolation(error)) return null;
      throw error;
    }
  }

  /** Retained bytes (lines and events together), raw lines and events. */
  async usageByKind(loggerId: string): Promise<{ bytes: number; rawLines: number; events: number }> {
    const rows = await this.db
      .selectFrom('logs_chunks')
      .select(['kind', sql<string | number>`sum(bytes)`.as('bytes'), sql<string | number>`sum(lines)`.as('lines')])
      .where('logger_id', '=', loggerId)
      .groupBy('kind')
      .execute();
    const raw = rows.find((row) => row.kind === 'raw');
    const events = rows.find((row) => row.kind === 'event');
    return {
      bytes: rows.reduce((sum, row) => sum + Number(row.bytes), 0),
      rawLines: Number(raw?.lines ?? 0),
      events: Number(events?.lines ?? 0),
    };
  }

  /** The logger's chunks of `kind` after `afterId`, in order, at most `limit` of them. */
  async chunksAfter(loggerId: string, kind: 'raw' | 'event', afterId: number, limit: number): Promise<Chunk[]> {
    const rows = await this.db
      .selectFrom('logs_chunks')
      .select(['id', 'data', 'bytes', 'lines'])
      .where('logger_id', '=', loggerId)
      .where('kind', '=', kind)
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map((row) => ({ id: Number(row.id), data: Buffer.from(row.data), bytes: Number(row.bytes), lines: Number(row.lines) }));
  }
}
