import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { GroupCommit, togetherThenAlone, type Settled } from '../group-commit.ts';
import { reachable } from '../unreachable.ts';
import { streamDigest } from './digest.ts';
import {
  BlobDigestMismatchError,
  BlobNotFoundError,
  BlobTooLargeError,
  checkPutOptions,
  isSha256,
  readSource,
  resolveRange,
  type BlobInfo,
  type BlobPutOptions,
  type BlobRange,
  type BlobStore,
} from './types.ts';

export interface PostgresBlobStoreOptions {
  /** Bytes per stored chunk for new blobs (existing blobs keep the size they were written with). */
  chunkSize?: number;
  /** Chunks fetched per query when reading. */
  readBatch?: number;
  /** Told of each batch of small puts written together (metrics; see GroupCommitOptions.observe). */
  observe?: (calls: number, seconds: number) => void;
}

const DEFAULT_CHUNK_SIZE = 256 * 1024;
const DEFAULT_READ_BATCH = 4;
/** Temp keys cannot collide with a blob: a blob key is 64 hex characters, never with a colon. */
const UPLOAD_KEY_PREFIX = 'upload:';
/** An upload this old was abandoned by a crashed process; its chunks are swept. */
const STALE_UPLOAD_MS = 24 * 60 * 60 * 1000;

/**
 * Blobs in PostgreSQL (tables from `blobMigrations`), so that every instance sees every blob.
 * Content is written in fixed-size chunks as it streams in. The hash is known only at the end, so
 * chunks are first written under a temporary upload key and then, in one statement, either renamed
 * to the hash (new blob) or dropped (already stored); a blob that fits in one chunk skips the
 * temporary key and is claimed and stored by one statement. Each chunk is its own short query: a slow
 * upload never holds a pooled connection or a transaction open while it waits on the network.
 */
/** Claims a hash: inserts its row unless it is stored already; `$1..$4` the row. */
const CLAIM =
  'insert into stratus_blobs (sha256, size, chunk_size, created_at) values ($1, $2, $3, $4) on conflict (sha256) do nothing returning sha256';
/**
 * After `claimed`: pins a newly claimed blob (`BlobPutOptions.candidateDueAt` as `$7`, null for
 * none) unless a tombstone names its hash (a sweeper that died between deleting the old content
 * and clearing its tombstone: `BlobRefs.pin` then waits it out), and answers the candidate's id.
 */
const PIN = `, pinned as (
    insert into stratus_blob_candidates (sha256, due_at)
    select sha256, cast($7 as bigint) from claimed
    where cast($7 as bigint) is not null and not exists (select 1 from stratus_blob_doomed d where d.sha256 = claimed.sha256)
    returning id
  )
  select (select id from pinned) as candidate`;

function withCandidate(info: BlobInfo, candidate: string | number | null | undefined): BlobInfo {
  return candidate === null || candidate === undefined ? info : { ...info, candidate: Number(candidate) };
}

/** A blob of at most one chunk, ready to be written (`dueAt`: its pin's due time, null for none). */
interface SmallPut {
  sha256: string;
  size: number;
  data: Buffer;
  dueAt: number | null;
}
/** Small puts written by one statement at most (each at most one chunk, 256 KiB by default). */
const SMALL_PUTS_PER_BATCH = 32;

export function createPostgresBlobStore(pool: pg.Pool, options: PostgresBlobStoreOptions = {}): BlobStore {
  const chunkSize = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
  const readBatch = options.readBatch ?? DEFAULT_READ_BATCH;
  if (!Number.isSafeInteger(chunkSize) || chunkSize < 1) throw new TypeError('chunkSize must be a positive integer');
  if (!Number.isSafeInteger(readBatch) || readBatch < 1) throw new TypeError('readBatch must be a positive integer');
  let swept: Promise<void> | undefined;

  /**
   * Small blobs (distinct hashes) in one statement: each hash claimed and, if it was free, its one
   * chunk stored and pinned; the candidate of each (null: stored already, or no pin asked). In hash
   * order, so that two batches claiming the same hashes wait on each other in one direction only
   * (ON CONFLICT waits for a concurrent claim of the same hash, as below).
   */
  const putSmall = async (puts: readonly SmallPut[]): Promise<(number | null)[]> => {
    const sorted = [...puts].sort((a, b) => (a.sha256 < b.sha256 ? -1 : 1));
    const result = await pool.query<{ sha256: string; id: string | number }>(
      `with v as (
         select * from unnest(cast($1 as text[]), cast($2 as bigint[]), cast($3 as bytea[]), cast($4 as bigint[]))
         with ordinality as v (sha256, size, data, due, n)
       ),
       claimed as (
         insert into stratus_blobs (sha256, size, chunk_size, created_at)
         select sha256, size, $5, $6 from v order by n
         on conflict (sha256) do nothing returning sha256
       ),
       stored as (
         insert into stratus_blob_chunks (sha256, seq, data)
         select v.sha256, 0, v.data from v join claimed c on c.sha256 = v.sha256 where length(v.data) > 0
       ),
       pinned as (
         insert into stratus_blob_candidates (sha256, due_at)
         select v.sha256, v.due from v join claimed c on c.sha256 = v.sha256
         where v.due is not null and not exists (select 1 from stratus_blob_doomed d where d.sha256 = v.sha256)
         returning sha256, id
       )
       select sha256, id from pinned`,
      [
        sorted.map((put) => put.sha256),
        sorted.map((put) => put.size),
        sorted.map((put) => put.data),
        sorted.map((put) => put.dueAt),
        chunkSize,
        new Date().toISOString(),
      ],
    );
    const pinned = new Map(result.rows.map((row) => [row.sha256, Number(row.id)]));
    return puts.map((put) => pinned.get(put.sha256) ?? null);
  };
  /**
   * Small blobs that end together are written by one statement (see GroupCommit): each of a small
   * upload's statements costs about as much as its bytes. A hash repeated in the batch, and every
   * put of a batch that fails whole (two batches can still deadlock), goes alone after.
   */
  const putMany = (puts: readonly SmallPut[]): Promise<Settled<number | null>[]> =>
    togetherThenAlone(puts, {
      key: (put) => put.sha256,
      together: putSmall,
      alone: async (put) => (await putSmall([put]))[0]!,
    });
  const smallPuts = new GroupCommit(putMany, {
    maxBatch: SMALL_PUTS_PER_BATCH,
    maxInFlight: 2,
    ...(options.observe ? { observe: options.observe } : {}),
  });

  const store: BlobStore = {
    async put(source, putOptions: BlobPutOptions = {}): Promise<BlobInfo> {
      checkPutOptions(putOptions);
      const { maxBytes, expectedSha256, signal } = putOptions;
      signal?.throwIfAborted();
      swept ??= sweepStaleUploads(pool);
      await swept;

      const dueAt = putOptions.candidateDueAt ?? null;
      const uploadId = randomUUID();
      const tempKey = UPLOAD_KEY_PREFIX + uploadId;
      // The upload is registered (for the sweeper of abandoned ones) only when a first chunk must
      // be written before the end is known: a blob that fits in one chunk is stored by one
      // statement below, one commit instead of three.
      let registered = false;
      let committed = false;
      const hash = streamDigest('sha256');
      try {
        let size = 0;
        let seq = 0;
        // One reusable chunk buffer: the query has sent its parameters by the time it resolves.
        const buffer = Buffer.allocUnsafe(chunkSize);
        let filled = 0;
        const flush = async (bytes: Buffer) => {
          if (!registered) {
            await pool.query('insert into stratus_blob_uploads (id, created_at) values ($1, $2)', [
              uploadId,
              new Date().toISOString(),
            ]);
            registered = true;
          }
          await pool.query('insert into stratus_blob_chunks (sha256, seq, data) values ($1, $2, $3)', [
            tempKey,
            seq,
            bytes,
          ]);
          seq += 1;
        };

        for await (const chunk of readSource(source, signal)) {
          size += chunk.byteLength;
          if (maxBytes !== undefined && size > maxBytes) throw new BlobTooLargeError(maxBytes);
          const behind = hash.update(chunk);
          if (behind) await behind;
          let offset = 0;
          while (offset < chunk.byteLength) {
            const n = Math.min(chunkSize - filled, chunk.byteLength - offset);
            buffer.set(chunk.subarray(offset, offset + n), filled);
            filled += n;
            offset += n;
            if (filled === chunkSize) {
              await flush(buffer);
              filled = 0;
            }
          }
        }
        if (seq === 0) {
          const sha256 = await hash.digest();
          if (expectedSha256 !== undefined && sha256 !== expectedSha256) {
            throw new BlobDigestMismatchError(expectedSha256, sha256);
          }
          signal?.throwIfAborted();
          // Claimed, stored and pinned by one statement, shared with the puts that end meanwhile.
          const candidate = await smallPuts.submit({ sha256, size, data: buffer.subarray(0, filled), dueAt });
          committed = true;
          return withCandidate({ sha256, size }, candidate);
        }
        if (filled > 0) await flush(buffer.subarray(0, filled));

        const sha256 = await hash.digest();
        if (expectedSha256 !== undefined && sha256 !== expectedSha256) {
          throw new BlobDigestMismatchError(expectedSha256, sha256);
        }
        signal?.throwIfAborted();
        // One statement, hence atomic: claim the hash; if it was free, the temp chunks become the
        // blob's, otherwise (already stored, or a concurrent identical upload won) they are dropped.
        // ON CONFLICT waits for a concurrent claim of the same hash to commit or roll back.
        const result = await pool.query<{ candidate: string | number | null }>(
          `with claimed as (${CLAIM}),
           moved as (
             update stratus_blob_chunks set sha256 = $1
             where sha256 = $5 and exists (select 1 from claimed)
           ),
           dropped as (
             delete from stratus_blob_chunks where sha256 = $5 and not exists (select 1 from claimed)
           ),
           done as (
             delete from stratus_blob_uploads where id = $6
           )
           ${PIN}`,
          [sha256, size, chunkSize, new Date().toISOString(), tempKey, uploadId, dueAt],
        );
        committed = true;
        return withCandidate({ sha256, size }, result.rows[0]?.candidate);
      } finally {
        hash.dispose();
        if (!committed && registered) await discardUpload(pool, uploadId).catch(() => {});
      }
    },

    async stat(sha256) {
      if (!isSha256(sha256)) return null;
      const result = await pool.query<{ size: number | string }>('select size from stratus_blobs where sha256 = $1', [
        sha256,
      ]);
      const row = result.rows[0];
      return row ? { sha256, size: Number(row.size) } : null;
    },

    async get(sha256, range?: BlobRange) {
      if (!isSha256(sha256)) return null;
      // A blob of one chunk comes with its row: one round trip for the whole read.
      const result = await pool.query<{ size: number | string; chunk_size: number; data: Buffer | null }>(
        `select b.size, b.chunk_size, c.data from stratus_blobs b
         left join stratus_blob_chunks c on c.sha256 = b.sha256 and c.seq = 0 and b.size <= b.chunk_size
         where b.sha256 = $1`,
        [sha256],
      );
      const row = result.rows[0];
      if (!row) return null;
      const bytes = resolveRange(range, Number(row.size));
      if (bytes === null) return Readable.from([]);
      if (row.data !== null)
        return Readable.from([row.data.subarray(bytes.start, bytes.end + 1)], { objectMode: false });
      // Bytes, not objects: the stream buffers about one chunk ahead of its reader.
      return Readable.from(readChunks(pool, sha256, row.chunk_size, bytes, readBatch), {
        objectMode: false,
        highWaterMark: row.chunk_size,
      });
    },

    async delete(sha256) {
      if (!isSha256(sha256)) return false;
      // One statement removes the row and the content atomically.
      const result = await pool.query<{ n: number | string }>(
        `with removed as (delete from stratus_blobs where sha256 = $1 returning sha256),
              content as (delete from stratus_blob_chunks where sha256 = $1)
         select count(*) as n from removed`,
        [sha256],
      );
      return Number(result.rows[0]?.n ?? 0) > 0;
    },
  };
  // What fails because the database is away leaves as a StoreUnreachableError (503).
  return {
    put: (source, putOptions) => reachable(store.put(source, putOptions)),
    stat: (sha256) => reachable(store.stat(sha256)),
    get: (sha256, range) => reachable(store.get(sha256, range)),
    delete: (sha256) => reachable(store.delete(sha256)),
  };
}

/** Yields the bytes of `range`, fetching only the chunks that overlap it, `batch` per query. */
async function* readChunks(
  pool: pg.Pool,
  sha256: string,
  chunkSize: number,
  range: BlobRange,
  batch: number,
): AsyncGenerator<Buffer, void, undefined> {
  const first = Math.floor(range.start / chunkSize);
  const last = Math.floor(range.end / chunkSize);
  for (let from = first; from <= last; from += batch) {
    const to = Math.min(from + batch - 1, last);
    const result = await pool.query<{ seq: number; data: Buffer }>(
      'select seq, data from stratus_blob_chunks where sha256 = $1 and seq between $2 and $3 order by seq',
      [sha256, from, to],
    );
    // Missing chunks mean the blob was deleted while it was being read.
    if (result.rows.length !== to - from + 1) throw new BlobNotFoundError(sha256);
    for (const [i, row] of result.rows.entries()) {
      if (row.seq !== from + i) throw new BlobNotFoundError(sha256);
      const base = row.seq * chunkSize;
      const start = Math.max(range.start - base, 0);
      const end = Math.min(range.end - base + 1, row.data.length);
      yield row.data.subarray(start, end);
    }
  }
}

async function discardUpload(pool: pg.Pool, uploadId: string): Promise<void> {
  await pool.query(
    `with upload as (delete from stratus_blob_uploads where id = $1)
     delete from stratus_blob_chunks where sha256 = $2`,
    [uploadId, UPLOAD_KEY_PREFIX + uploadId],
  );
}

/** Best effort, once per store: removes chunks of uploads abandoned by a crash long ago. */
async function sweepStaleUploads(pool: pg.Pool): Promise<void> {
  try {
    await pool.query(
      `with stale as (delete from stratus_blob_uploads where created_at < $1 returning id)
       delete from stratus_blob_chunks where sha256 in (select $2 || id from stale)`,
      [new Date(Date.now() - STALE_UPLOAD_MS).toISOString(), UPLOAD_KEY_PREFIX],
    );
  } catch {
    // A sweep failure must never fail an upload.
  }
}
