import {
  addStoredOwner,
  ownersLikePattern,
  parseOwners,
  removeStoredOwner,
  type DeleteOwnerResult,
} from '../owners.ts';
import { isUuidV4, newId, rfc3339 } from '../../core/ids.ts';
import type { SqlConnection } from '../../store/db.ts';
import { all, first, run, type Work } from '../../store/sql-work.ts';
import type { SqlColumn, SqlDatabase } from '../../store/sql/types.ts';

export interface LoggerKeyView {
  id: string;
  name: string;
  created_at: string;
}

/** A logger as the API returns it (README: loggers, keys and owners). */
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

export type { DeleteOwnerResult } from '../owners.ts';

/**
 * Oldest chunks read by the first query of a retention cut. An append at the bound usually drops
 * one or two chunks, so the first page is small; each further page is twice the last, up to
 * RETENTION_PAGE_MAX, so a cut across many small chunks takes few queries.
 */
const RETENTION_PAGE_FIRST = 16;
const RETENTION_PAGE_MAX = 4096;

const LOGGER_COLUMNS = 'id, name, created_at, owners, retained_bytes, raw_lines, event_lines';
type LoggerRow = {
  id: string;
  name: string;
  created_at: string;
  owners: string;
  retained_bytes: number;
  raw_lines: number;
  event_lines: number;
};
type KeyRow = { id: string; name: string; created_at: string; logger_id: string };

/** One stored chunk: the lines of one ingest request, each ending in `\n`. */
export interface Chunk {
  id: number;
  data: Buffer;
  bytes: number;
  lines: number;
}

/** The API records of `rows`, with their keys in creation order. */
function* records(rows: LoggerRow[]): Work<LoggerRecord[]> {
  if (rows.length === 0) return [];
  const placeholders = rows.map(() => '?').join(', ');
  const keys = yield* all<KeyRow>(
    `select id, name, created_at, logger_id from logs_api_keys where logger_id in (${placeholders}) order by seq`,
    ...rows.map((row) => row.id),
  );
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    owners: parseOwners(row.owners),
    api_keys: keys.filter((k) => k.logger_id === row.id).map(({ id, name, created_at }) => ({ id, name, created_at })),
    usage: { bytes: Number(row.retained_bytes), lines: Number(row.raw_lines) + Number(row.event_lines) },
    created_at: row.created_at,
  }));
}

/**
 * Retention (see the service README): drops the logger's oldest chunks, whole, until `excess`
 * bytes are gone, never the chunk `keepId` (the one just appended) or a newer one, and takes what
 * they held off the logger row's totals. The cut is found on the index `(logger_id, id, bytes)`
 * alone, so the blobs are not read to find it; only the dropped chunks' rows are read, to count
 * their lines by kind, and deleted. The chunks need no lock of their own on PostgreSQL: only
 * another append of this logger (excluded by the logger row `append` updated first) or the
 * logger's deletion (which waits for that row too) could remove them meanwhile.
 */
function* dropOldest(loggerId: string, keepId: number, excess: number): Work<void> {
  let cutoff = 0;
  let bytes = 0;
  let after = 0;
  let page = RETENTION_PAGE_FIRST;
  while (bytes < excess) {
    const oldest = yield* all<{ id: number; bytes: number }>(
      'select id, bytes from logs_chunks where logger_id = ? and id > ? and id < ? order by id limit ?',
      loggerId,
      after,
      keepId,
      page,
    );
    for (const chunk of oldest) {
      if (bytes >= excess) break;
      cutoff = Number(chunk.id);
      bytes += Number(chunk.bytes);
    }
    if (oldest.length < page) break;
    after = Number(oldest[oldest.length - 1]!.id);
    page = Math.min(page * 2, RETENTION_PAGE_MAX);
  }
  if (cutoff === 0) return;
  const lines = yield* first<{ raw_lines: number; event_lines: number }>(
    "select sum(case when kind = 'raw' then lines else 0 end) as raw_lines, sum(case when kind = 'raw' then 0 else lines end) as event_lines from logs_chunks where logger_id = ? and id <= ?",
    loggerId,
    cutoff,
  );
  yield* run('delete from logs_chunks where logger_id = ? and id <= ?', loggerId, cutoff);
  yield* run(
    'update logs_loggers set retained_bytes = retained_bytes - ?, raw_lines = raw_lines - ?, event_lines = event_lines - ? where id = ?',
    bytes,
    Number(lines?.raw_lines ?? 0),
    Number(lines?.event_lines ?? 0),
    loggerId,
  );
}

/**
 * Loggers, their keys and their stored chunks: the service's only door to its tables. Ids are
 * UUID v4 generated here, so anything else is unknown without a query. Owner changes are one
 * read-modify-write transaction (row locked on PostgreSQL), as in docdb's repository.
 */
export class LoggerRepository {
  private readonly sql: SqlDatabase;

  constructor(private readonly connection: SqlConnection) {
    this.sql = connection.database;
  }

  async get(id: string): Promise<LoggerRecord | null> {
    if (!isUuidV4(id)) return null;
    const found = await this.sql.read(function* () {
      const row = yield* first<LoggerRow>(`select ${LOGGER_COLUMNS} from logs_loggers where id = ?`, id);
      return row ? yield* records([row]) : [];
    });
    return found[0] ?? null;
  }

  /** Owners and key ids of a logger, without usage figures: the access check's read. */
  async owners(id: string): Promise<string[] | null> {
    if (!isUuidV4(id)) return null;
    const row = await this.sql.read(() =>
      first<{ owners: string }>('select owners from logs_loggers where id = ?', id),
    );
    return row ? parseOwners(row.owners) : null;
  }

  async listOwnedBy(userId: string): Promise<LoggerRecord[]> {
    return this.sql.read(function* () {
      // LIKE narrows the scan; the exact test runs on the parsed array (as in docdb).
      const rows = yield* all<LoggerRow>(
        `select ${LOGGER_COLUMNS} from logs_loggers where owners like ? escape '!' order by seq`,
        ownersLikePattern(userId),
      );
      return yield* records(rows.filter((row) => parseOwners(row.owners).includes(userId)));
    });
  }

  async create(name: string, owner: string): Promise<LoggerRecord> {
    const record: LoggerRecord = {
      id: newId(),
      name,
      owners: [owner],
      api_keys: [],
      usage: { bytes: 0, lines: 0 },
      created_at: rfc3339(),
    };
    await this.sql.write(() =>
      run(
        'insert into logs_loggers (id, name, created_at, owners) values (?, ?, ?, ?)',
        record.id,
        name,
        record.created_at,
        JSON.stringify(record.owners),
      ),
    );
    return record;
  }

  /** Deletes the logger; keys and chunks cascade. False when it did not exist. */
  async delete(id: string): Promise<boolean> {
    if (!isUuidV4(id)) return false;
    return (await this.sql.write(() => run('delete from logs_loggers where id = ?', id))) > 0;
  }

  async createKey(loggerId: string, name: string, key: string, secretHash: string): Promise<LoggerKeyView | null> {
    const view = { id: newId(), name, created_at: rfc3339() };
    try {
      await this.sql.write(() =>
        run(
          'insert into logs_api_keys (id, key, logger_id, name, secret_hash, created_at) values (?, ?, ?, ?, ?, ?)',
          view.id,
          key,
          loggerId,
          name,
          secretHash,
          view.created_at,
        ),
      );
      return view;
    } catch (error) {
      if (this.sql.isForeignKeyViolation(error)) return null;
      throw error;
    }
  }

  /** Deletes a key (by its id) of this logger; the deleted key's public value, or null. */
  async deleteKey(loggerId: string, keyId: string): Promise<string | null> {
    if (!isUuidV4(loggerId) || !isUuidV4(keyId)) return null;
    const row = await this.sql.write(() =>
      first<{ key: string }>('delete from logs_api_keys where id = ? and logger_id = ? returning key', keyId, loggerId),
    );
    return row?.key ?? null;
  }

  async findKey(key: string): Promise<StoredKey | null> {
    if (!isUuidV4(key)) return null;
    const row = await this.sql.read(() =>
      first<{ id: string; key: string; logger_id: string; secret_hash: string }>(
        'select id, key, logger_id, secret_hash from logs_api_keys where key = ?',
        key,
      ),
    );
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
   * reading "after id N" can never miss a chunk that commits late. On SQLite the write joins the
   * group commit, so a burst of concurrent ingests costs one commit (one fsync); the answer waits
   * for it. Returns the new chunk's id, or null when the logger no longer exists.
   */
  async append(
    loggerId: string,
    kind: 'raw' | 'event',
    data: Buffer,
    lines: number,
    maxBytes: number,
  ): Promise<number | null> {
    if (!isUuidV4(loggerId)) return null;
    const rawLines = kind === 'raw' ? lines : 0;
    const eventLines = kind === 'event' ? lines : 0;
    return this.sql.write(function* () {
      const row = yield* first<{ retained_bytes: number }>(
        'update logs_loggers set retained_bytes = retained_bytes + ?, raw_lines = raw_lines + ?, event_lines = event_lines + ? where id = ? returning retained_bytes',
        data.length,
        rawLines,
        eventLines,
        loggerId,
      );
      if (!row) return null;
      const inserted = yield* first<{ id: number }>(
        'insert into logs_chunks (logger_id, kind, data, bytes, lines) values (?, ?, ?, ?, ?) returning id',
        loggerId,
        kind,
        data,
        data.length,
        lines,
      );
      const id = Number(inserted!.id);
      const excess = Number(row.retained_bytes) - maxBytes;
      if (excess > 0) yield* dropOldest(loggerId, id, excess);
      return id;
    });
  }

  /** Retained bytes (lines and events together), raw lines and events: the logger row's totals. */
  async usageByKind(loggerId: string): Promise<{ bytes: number; rawLines: number; events: number }> {
    const row = isUuidV4(loggerId)
      ? await this.sql.read(() =>
          first<{ retained_bytes: number; raw_lines: number; event_lines: number }>(
            'select retained_bytes, raw_lines, event_lines from logs_loggers where id = ?',
            loggerId,
          ),
        )
      : undefined;
    return {
      bytes: Number(row?.retained_bytes ?? 0),
      rawLines: Number(row?.raw_lines ?? 0),
      events: Number(row?.event_lines ?? 0),
    };
  }

  /**
   * The next chunks of a stream after `afterId`, in id order, and whether more may follow. On
   * SQLite two chunks (a read copies its chunks on the event loop, and one chunk can be a whole
   * 64 MiB ingest); on PostgreSQL as many as fit in `BATCH_BYTES` (at least one): one query each
   * costs a round trip and a COPY, so 1 MiB chunks two at a time ran at half the rate of sixteen.
   */
  async nextChunks(loggerId: string, kind: 'raw' | 'event', afterId: number): Promise<ChunkBatch> {
    if (this.sql.queriesBlockTheProcess) {
      const chunks = await this.chunksAfter(loggerId, kind, afterId, 2);
      return { chunks, more: chunks.length === 2 };
    }
    // The sizes first, from the index alone; then the chunks that fit, in one read.
    const sizes = await this.sql.read(() =>
      all<{ id: number | string; bytes: number | string }>(
        'select id, bytes from logs_chunks where logger_id = ? and kind = ? and id > ? order by id limit ?',
        loggerId,
        kind,
        afterId,
        SIZES_PER_BATCH,
      ),
    );
    if (sizes.length === 0) return { chunks: [], more: false };
    let last = 0;
    let total = 0;
    for (const [i, row] of sizes.entries()) {
      total += Number(row.bytes);
      if (i > 0 && total > BATCH_BYTES) break;
      last = i;
    }
    const chunks = await this.readChunks(
      'select id, data, bytes, lines from logs_chunks where logger_id = ? and kind = ? and id > ? and id <= ? order by id',
      [loggerId, kind, afterId, Number(sizes[last]!.id)],
    );
    return { chunks, more: last < sizes.length - 1 || sizes.length === SIZES_PER_BATCH };
  }

  /** The logger's chunks of `kind` after `afterId`, in order, at most `limit` of them. */
  async chunksAfter(loggerId: string, kind: 'raw' | 'event', afterId: number, limit: number): Promise<Chunk[]> {
    return this.readChunks(
      'select id, data, bytes, lines from logs_chunks where logger_id = ? and kind = ? and id > ? order by id limit ?',
      [loggerId, kind, afterId, limit],
    );
  }

  private async readChunks(select: string, params: (string | number)[]): Promise<Chunk[]> {
    // Chunks are up to 64 MiB each: `readLarge` brings them in as bytes (see SqlDatabase).
    const rows = await this.sql.readLarge<{ id: number; data: Uint8Array; bytes: number; lines: number }>(
      select,
      params,
      CHUNK_COLUMNS,
    );
    // Both drivers return a Buffer already; copying a 64 MiB chunk again would cost the event loop.
    return rows.map((row) => ({
      id: Number(row.id),
      data: Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data),
      bytes: Number(row.bytes),
      lines: Number(row.lines),
    }));
  }

  /** Whether the logger has a chunk of `kind` after `afterId`: one index row, no blob read. */
  async hasChunkAfter(loggerId: string, kind: 'raw' | 'event', afterId: number): Promise<boolean> {
    const row = await this.sql.read(() =>
      first<{ id: number }>(
        'select id from logs_chunks where logger_id = ? and kind = ? and id > ? order by id limit 1',
        loggerId,
        kind,
        afterId,
      ),
    );
    return row !== undefined;
  }

  /** Whether a stream should read its next batch while it matches the one it has (see `nextChunks`). */
  get readsAhead(): boolean {
    return !this.sql.queriesBlockTheProcess;
  }
}

const CHUNK_COLUMNS: readonly SqlColumn[] = [
  { name: 'id', type: 'bigint' },
  { name: 'data', type: 'blob' },
  { name: 'bytes', type: 'bigint' },
  { name: 'lines', type: 'bigint' },
];

/** What `nextChunks` reads at most in one batch on PostgreSQL (a single larger chunk is read alone). */
const BATCH_BYTES = 32 * 1024 * 1024;
/** Chunk sizes looked at per batch. */
const SIZES_PER_BATCH = 64;

export interface ChunkBatch {
  chunks: Chunk[];
  /** False when the batch reached the end of what is stored. */
  more: boolean;
}
