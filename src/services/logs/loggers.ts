import { isForeignKeyViolation } from '../../store/sql-work.ts';
import { addStoredOwner, ownersLikePattern, parseOwners, removeStoredOwner, type DeleteOwnerResult } from '../../core/owners.ts';
import { sql, type Generated, type Kysely } from 'kysely';
import { isUuidV4, newId, rfc3339 } from '../../core/ids.ts';
import type { SqlConnection } from '../../store/db.ts';

type LogsTables = {
  logs_loggers: {
    seq: Generated<number>;
    id: string;
    name: string;
    created_at: string;
    owners: string;
    retained_bytes: Generated<number | string>;
    raw_lines: Generated<number | string>;
    event_lines: Generated<number | string>;
  };
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

/** Oldest chunks read per query while PostgreSQL works out a retention cut. */
const RETENTION_PAGE = 256;

const LOGGER_COLUMNS = ['id', 'name', 'created_at', 'owners', 'retained_bytes', 'raw_lines', 'event_lines'] as const;
type LoggerRow = { id: string; name: string; created_at: string; owners: string; retained_bytes: number | string; raw_lines: number | string; event_lines: number | string };

/** How much one retention cut removes: the last chunk id it drops and what those chunks held. */
interface RetentionCut {
  cutoff: number;
  bytes: number;
  rawLines: number;
  eventLines: number;
}

/** The oldest chunks to drop so that `retained` fits in `maxBytes`; never the chunk `keepId`. */
function retentionCut(oldestFirst: Iterable<{ id: number | string; bytes: number | string; lines: number | string; kind: string }>, retained: number, maxBytes: number, keepId: number): RetentionCut | null {
  let excess = retained - maxBytes;
  const cut: RetentionCut = { cutoff: 0, bytes: 0, rawLines: 0, eventLines: 0 };
  for (const chunk of oldestFirst) {
    if (excess <= 0 || Number(chunk.id) === keepId) break;
    const bytes = Number(chunk.bytes);
    excess -= bytes;
    cut.cutoff = Number(chunk.id);
    cut.bytes += bytes;
    if (chunk.kind === 'raw') cut.rawLines += Number(chunk.lines);
    else cut.eventLines += Number(chunk.lines);
  }
  return cut.cutoff > 0 ? cut : null;
}

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

  constructor(private readonly connection: SqlConnection) {
    this.db = connection.db.withTables<LogsTables>();
  }

  private async records(rows: LoggerRow[]): Promise<LoggerRecord[]> {
    if (rows.length === 0) return [];
    const keys = await this.db
      .selectFrom('logs_api_keys')
      .select(['id', 'name', 'created_at', 'logger_id'])
      .where(
        'logger_id',
        'in',
        rows.map((row) => row.id),
      )
      .orderBy('seq')
      .execute();
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      owners: parseOwners(row.owners),
      api_keys: keys.filter((k) => k.logger_id === row.id).map(({ id, name, created_at }) => ({ id, name, created_at })),
      usage: { bytes: Number(row.retained_bytes), lines: Number(row.raw_lines) + Number(row.event_lines) },
      created_at: row.created_at,
    }));
  }

  async get(id: string): Promise<LoggerRecord | null> {
    if (!isUuidV4(id)) return null;
    const rows = await this.db.selectFrom('logs_loggers').select(LOGGER_COLUMNS).where('id', '=', id).execute();
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
      .select(LOGGER_COLUMNS)
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

  /** Appends `owner` unless it is one already; the owners after the call, or null when the logger does not exist. */
  async addOwner(id: string, owner: string): Promise<string[] | null> {
    return isUuidV4(id) ? addStoredOwner(this.connection, 'logs_loggers', id, owner) : null;
  }

  /** Removes `owner`; never the last one (a logger always keeps an owner). */
  async deleteOwner(id: string, owner: string): Promise<DeleteOwnerResult> {
    return isUuidV4(id) ? removeStoredOwner(this.connection, 'logs_loggers', id, owner) : { status: 'not_found' };
  }

  /**
   * Appends one chunk and enforces retention in the same transaction: while the logger holds
   * more than `maxBytes`, its oldest chunks go (whole chunks, so whole lines; the new one always
   * stays). The logger row's totals move with them. Updating that row first also serializes a
   * logger's appends on PostgreSQL, so its chunk ids are assigned in commit order and a follower
   * reading "after id N" can never miss a chunk that commits late. Returns the new chunk's id, or
   * null when the logger no longer exists.
   */
  async append(loggerId: string, kind: 'raw' | 'event', data: Buffer, lines: number, maxBytes: number): Promise<number | null> {
    if (!isUuidV4(loggerId)) return null;
    const rawLines = kind === 'raw' ? lines : 0;
    const eventLines = kind === 'event' ? lines : 0;
    const direct = this.connection.direct;
    if (direct) {
      // SQLite: the group commit, one fsync for a burst of concurrent ingests.
      return direct.write((prepare) => {
        const row = prepare('update logs_loggers set retained_bytes = retained_bytes + ?, raw_lines = raw_lines + ?, event_lines = event_lines + ? where id = ? returning retained_bytes').get(data.length, rawLines, eventLines, loggerId) as
          | { retained_bytes: number }
          | undefined;
        if (row === undefined) return null;
        const id = Number(prepare('insert into logs_chunks (logger_id, kind, data, bytes, lines) values (?, ?, ?, ?, ?)').run(loggerId, kind, data, data.length, lines).lastInsertRowid);
        if (row.retained_bytes > maxBytes) {
          const oldest = prepare('select id, bytes, lines, kind from logs_chunks where logger_id = ? order by id').iterate(loggerId) as IterableIterator<{ id: number; bytes: number; lines: number; kind: string }>;
          const cut = retentionCut(oldest, row.retained_bytes, maxBytes, id);
          oldest.return?.();
          if (cut) {
            prepare('delete from logs_chunks where logger_id = ? and id <= ?').run(loggerId, cut.cutoff);
            prepare('update logs_loggers set retained_bytes = retained_bytes - ?, raw_lines = raw_lines - ?, event_lines = event_lines - ? where id = ?').run(cut.bytes, cut.rawLines, cut.eventLines, loggerId);
          }
        }
        return id;
      });
    }
    return this.db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('logs_loggers')
        .set({
          retained_bytes: sql`retained_bytes + ${data.length}`,
          raw_lines: sql`raw_lines + ${rawLines}`,
          event_lines: sql`event_lines + ${eventLines}`,
        })
        .where('id', '=', loggerId)
        .returning(['retained_bytes'])
        .executeTakeFirst();
      if (!row) return null;
      const inserted = await trx.insertInto('logs_chunks').values({ logger_id: loggerId, kind, data, bytes: data.length, lines }).returning(['id']).executeTakeFirstOrThrow();
      const id = Number(inserted.id);
      const retained = Number(row.retained_bytes);
      if (retained > maxBytes) {
        // Read only as many of the oldest chunks as the cut can need, a page at a time.
        let cut: RetentionCut | null = null;
        let after = 0;
        let excess = retained - maxBytes;
        const total: RetentionCut = { cutoff: 0, bytes: 0, rawLines: 0, eventLines: 0 };
        while (excess > 0) {
          const page = await trx.selectFrom('logs_chunks').select(['id', 'bytes', 'lines', 'kind']).where('logger_id', '=', loggerId).where('id', '>', after).where('id', '<', id).orderBy('id').limit(RETENTION_PAGE).execute();
          if (page.length === 0) break;
          const part = retentionCut(page, excess + maxBytes, maxBytes, id);
          if (!part) break;
          excess -= part.bytes;
          total.cutoff = part.cutoff;
          total.bytes += part.bytes;
          total.rawLines += part.rawLines;
          total.eventLines += part.eventLines;
          cut = total;
          after = Number(page[page.length - 1]!.id);
          if (part.cutoff !== after) break;
        }
        if (cut) {
          await trx.deleteFrom('logs_chunks').where('logger_id', '=', loggerId).where('id', '<=', cut.cutoff).execute();
          await trx
            .updateTable('logs_loggers')
            .set({
              retained_bytes: sql`retained_bytes - ${cut.bytes}`,
              raw_lines: sql`raw_lines - ${cut.rawLines}`,
              event_lines: sql`event_lines - ${cut.eventLines}`,
            })
            .where('id', '=', loggerId)
            .execute();
        }
      }
      return id;
    });
  }

  /** Retained bytes (lines and events together), raw lines and events: the logger row's totals. */
  async usageByKind(loggerId: string): Promise<{ bytes: number; rawLines: number; events: number }> {
    const row = isUuidV4(loggerId)
      ? await this.db.selectFrom('logs_loggers').select(['retained_bytes', 'raw_lines', 'event_lines']).where('id', '=', loggerId).executeTakeFirst()
      : undefined;
    return { bytes: Number(row?.retained_bytes ?? 0), rawLines: Number(row?.raw_lines ?? 0), events: Number(row?.event_lines ?? 0) };
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
    // Both drivers return a Buffer already; copying a 64 MiB chunk again would cost the event loop.
    return rows.map((row) => ({ id: Number(row.id), data: Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data), bytes: Number(row.bytes), lines: Number(row.lines) }));
  }
}
