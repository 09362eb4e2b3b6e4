import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { openSqlite, type SqlConnection } from '../db.ts';
import { first, run } from '../sql-work.ts';
import {
  BlobDigestMismatchError,
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

/** Blobs up to this size live in the SQLite file; larger ones in the wrapped store. */
export const DEFAULT_INLINE_MAX_BYTES = 64 * 1024;

/** The one table of the inline file (also made by `stratus backup`). */
export const INLINE_BLOBS_TABLE =
  'create table if not exists inline_blobs (sha256 text primary key, data blob not null) without rowid';

export interface InlineBlobOptions {
  maxInlineBytes?: number;
  synchronous?: 'FULL' | 'NORMAL';
  /** The file's SQLite page cache in bytes (openSqlite's default when unset). */
  cacheBytes?: number;
}

/**
 * Small blobs inside a SQLite file of their own, larger ones in `large` (the blob directory).
 * A file costs a temp file, its fsync, a rename and a directory fsync per blob, each its own
 * flush; a small blob here is one write of the file's SQL port, which on SQLite joins the group
 * commit, so a burst of small uploads shares one fsync. The file is separate from the platform
 * database on purpose: blob bytes stay out of its pages, WAL and checkpoints, and its group commit
 * is not held up by a burst of blob writes (nor the other way round).
 * Durable once `put` resolves, like every blob store.
 */
export function withInlineSmallBlobs(
  large: BlobStore,
  file: string,
  options: InlineBlobOptions = {},
): BlobStore & { close(): Promise<void> } {
  const maxInline = options.maxInlineBytes ?? DEFAULT_INLINE_MAX_BYTES;
  const connection: SqlConnection = openSqlite(file, {
    synchronous: options.synchronous ?? 'FULL',
    cacheBytes: options.cacheBytes,
  });
  const database = connection.database;
  // Every operation waits for the table (at once after the first commit); a failure to create it
  // fails each of them.
  const ready = database.write(() => run(INLINE_BLOBS_TABLE));
  ready.catch(() => {});

  const inlineData = async (sha256: string): Promise<Buffer | null> => {
    await ready;
    const row = await database.read(() =>
      first<{ data: Buffer }>('select data from inline_blobs where sha256 = ?', sha256),
    );
    return row?.data ?? null;
  };

  return {
    async put(source, putOptions: BlobPutOptions = {}): Promise<BlobInfo> {
      checkPutOptions(putOptions);
      const { maxBytes, expectedSha256, signal, sizeHint } = putOptions;
      signal?.throwIfAborted();
      // Known to be large: straight to the wrapped store, nothing read here.
      if (sizeHint !== undefined && sizeHint > maxInline) return large.put(source, putOptions);
      // Read up to one byte past the inline limit: a source that ends before it is stored here.
      const iterator = readSource(source, signal)[Symbol.asyncIterator]();
      const head: Uint8Array[] = [];
      let headSize = 0;
      let ended = false;
      try {
        while (headSize <= maxInline) {
          const next = await iterator.next();
          if (next.done) {
            ended = true;
            break;
          }
          head.push(next.value);
          headSize += next.value.byteLength;
          if (maxBytes !== undefined && headSize > maxBytes) throw new BlobTooLargeError(maxBytes);
        }
      } catch (error) {
        await iterator.return?.();
        throw error;
      }
      if (!ended) {
        // Too big for here: the wrapped store gets what was read and the rest of the source.
        // `yield*` hands an early stop of the wrapped store (too large, aborted) on to the source:
        // a loop over `iterator.next()` left it unreturned, and a request body half-read.
        async function* rest(): AsyncGenerator<Uint8Array> {
          yield* head;
          yield* { [Symbol.asyncIterator]: () => iterator };
        }
        return large.put(rest(), putOptions);
      }
      const data = Buffer.concat(head, headSize);
      const sha256 = createHash('sha256').update(data).digest('hex');
      if (expectedSha256 !== undefined && sha256 !== expectedSha256)
        throw new BlobDigestMismatchError(expectedSha256, sha256);
      signal?.throwIfAborted();
      await ready;
      await database.write(() =>
        run('insert into inline_blobs (sha256, data) values (?, ?) on conflict (sha256) do nothing', sha256, data),
      );
      return { sha256, size: data.length };
    },

    async stat(sha256) {
      if (!isSha256(sha256)) return null;
      const data = await inlineData(sha256);
      return data ? { sha256, size: data.length } : large.stat(sha256);
    },

    async get(sha256, range?: BlobRange) {
      if (!isSha256(sha256)) return null;
      const data = await inlineData(sha256);
      if (!data) return large.get(sha256, range);
      const bytes = resolveRange(range, data.length);
      return Readable.from(bytes === null ? [] : [data.subarray(bytes.start, bytes.end + 1)]);
    },

    async delete(sha256) {
      if (!isSha256(sha256)) return false;
      await ready;
      const removed = await database.write(() => run('delete from inline_blobs where sha256 = ?', sha256));
      // A blob written before it would have fit here may also be a file: remove that too.
      const removedFile = await large.delete(sha256);
      return removed > 0 || removedFile;
    },

    async close() {
      await ready.catch(() => {});
      await connection.close();
    },
  };
}
