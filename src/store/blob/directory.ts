import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, stat, unlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { streamDigest } from './digest.ts';
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
  withBlobFile,
} from './types.ts';

/** Uploads in progress live here, inside the store's own tree, so the final rename stays atomic. */
const TEMP_DIR = '.tmp';
/** Bytes gathered before a write: few, large writes. */
const WRITE_BATCH_BYTES = 1024 * 1024;
/**
 * Batches being written at once: a write waits for a thread of the pool and then for the kernel,
 * which on a busy machine is milliseconds each time; several under way hide that wait.
 */
const WRITES_IN_FLIGHT = 4;
/** A temp file this old belongs to a process that crashed mid-upload; safe to remove. */
const STALE_TEMP_MS = 24 * 60 * 60 * 1000;

/** Where the directory store keeps a blob, relative to its directory: `<aa>/<bb>/<sha256>`. */
export function blobFilePath(sha256: string): string {
  return join(sha256.slice(0, 2), sha256.slice(2, 4), sha256);
}

/**
 * Blobs as files at `<dir>/<aa>/<bb>/<sha256>`. Every write goes to a temp file that is fsynced and
 * renamed into place, so a blob visible under its name is always complete and survives power loss.
 * Several processes may share the directory: renames are atomic and identical content is harmless.
 */
export function createDirectoryBlobStore(dir: string): BlobStore {
  const tempDir = join(dir, TEMP_DIR);
  let swept: Promise<void> | undefined;

  // Only ever called with a validated hash, so the path cannot escape `dir`.
  const blobPath = (sha256: string) => join(dir, blobFilePath(sha256));

  return {
    async put(source, options: BlobPutOptions = {}): Promise<BlobInfo> {
      checkPutOptions(options);
      const { maxBytes, expectedSha256, signal, giveChunks = false } = options;
      signal?.throwIfAborted();
      await mkdir(tempDir, { recursive: true });
      swept ??= sweepStaleTemps(tempDir);
      await swept;

      const tempPath = join(tempDir, `${Date.now()}-${randomBytes(8).toString('hex')}`);
      let handle: FileHandle | undefined = await open(tempPath, 'wx', 0o644);
      let placed = false;
      // Writes under way, oldest first: each at its own offset, so they may run side by side.
      const writing: Promise<void>[] = [];
      const hash = streamDigest('sha256');
      try {
        let size = 0;
        // Chunks are gathered into batches written with one writev each (no chunk is copied to
        // be joined), a few batches under way while the next is read and hashed: the hashing
        // overlaps the writes instead of waiting for each.
        let batch: Uint8Array[] = [];
        let batchBytes = 0;
        let written = 0;
        const file = handle;
        // Given chunks are hashed once written (they are moved to the hashing thread), in order.
        let hashed: Promise<void> = Promise.resolve();
        const flush = async () => {
          // The oldest write ends before another starts past the bound.
          if (writing.length >= WRITES_IN_FLIGHT) await writing.shift();
          const parts = batch;
          let write = writeAllAt(file, parts, written);
          if (giveChunks) {
            const wrote = write;
            write = hashed = (async () => {
              await Promise.all([hashed, wrote]);
              for (const part of parts) await hash.give(part);
            })();
          }
          // Surfaced when awaited (here or at the end); not an unhandled rejection meanwhile.
          write.catch(() => {});
          writing.push(write);
          written += batchBytes;
          batch = [];
          batchBytes = 0;
        };
        for await (const chunk of readSource(source, signal)) {
          size += chunk.byteLength;
          if (maxBytes !== undefined && size > maxBytes) throw new BlobTooLargeError(maxBytes);
          if (!giveChunks) {
            const behind = hash.update(chunk);
            if (behind) await behind;
          }
          batch.push(chunk);
          batchBytes += chunk.byteLength;
          if (batchBytes >= WRITE_BATCH_BYTES) await flush();
        }
        if (batchBytes > 0) await flush();
        for (let write = writing.shift(); write; write = writing.shift()) await write;
        const sha256 = await hash.digest();
        if (expectedSha256 !== undefined && sha256 !== expectedSha256) {
          throw new BlobDigestMismatchError(expectedSha256, sha256);
        }
        signal?.throwIfAborted();
        await handle.sync();
        await handle.close();
        handle = undefined;

        const finalPath = blobPath(sha256);
        const shardDir = join(dir, sha256.slice(0, 2), sha256.slice(2, 4));
        if (await exists(finalPath)) return { sha256, size }; // dedupe: keep the existing file
        const created = await mkdir(shardDir, { recursive: true });
        await rename(tempPath, finalPath);
        placed = true;
        // The rename is durable only once the directory entry is; new shard directories likewise.
        await fsyncDir(shardDir);
        if (created !== undefined) {
          await fsyncDir(join(dir, sha256.slice(0, 2)));
          await fsyncDir(dir);
        }
        return { sha256, size };
      } finally {
        // A write still in flight (the put failed meanwhile) ends before the file is closed and removed.
        await Promise.allSettled(writing);
        hash.dispose();
        if (handle) await handle.close().catch(() => {});
        if (!placed) await unlink(tempPath).catch(() => {});
      }
    },

    async stat(sha256) {
      if (!isSha256(sha256)) return null;
      try {
        const info = await stat(blobPath(sha256));
        return info.isFile() ? { sha256, size: info.size } : null;
      } catch (error) {
        if (isNotFound(error)) return null;
        throw error;
      }
    },

    async get(sha256, range?: BlobRange) {
      if (!isSha256(sha256)) return null;
      let handle: FileHandle;
      try {
        // Opening first means a concurrent delete cannot cut the stream short: the open file lives on.
        handle = await open(blobPath(sha256), 'r');
      } catch (error) {
        if (isNotFound(error)) return null;
        throw error;
      }
      try {
        const { size } = await handle.stat();
        const bytes = resolveRange(range, size);
        if (bytes === null) {
          await handle.close();
          return Readable.from([]);
        }
        return withBlobFile(handle.createReadStream({ start: bytes.start, end: bytes.end, autoClose: true }), {
          handle,
          ...bytes,
        });
      } catch (error) {
        await handle.close().catch(() => {});
        throw error;
      }
    },

    async delete(sha256) {
      if (!isSha256(sha256)) return false;
      try {
        await unlink(blobPath(sha256));
      } catch (error) {
        if (isNotFound(error)) return false;
        throw error;
      }
      await fsyncDir(join(dir, sha256.slice(0, 2), sha256.slice(2, 4)));
      return true;
    },
  };
}

/** Writes `parts` at `position`, one writev at a time until all of them are written. */
async function writeAllAt(handle: FileHandle, parts: Uint8Array[], position: number): Promise<void> {
  let left = parts;
  while (left.length > 0) {
    const { bytesWritten } = await handle.writev(left, position);
    if (bytesWritten === 0) throw new Error('writev wrote nothing');
    position += bytesWritten;
    let skip = bytesWritten;
    let i = 0;
    while (i < left.length && skip >= left[i]!.byteLength) skip -= left[i++]!.byteLength;
    left = left.slice(i);
    if (skip > 0) left[0] = left[0]!.subarray(skip);
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}

async function fsyncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Best effort, once per store: removes temp files left by a crash long enough ago to be dead. */
async function sweepStaleTemps(tempDir: string): Promise<void> {
  try {
    const cutoff = Date.now() - STALE_TEMP_MS;
    for (const name of await readdir(tempDir)) {
      const path = join(tempDir, name);
      const info = await stat(path).catch(() => null);
      if (info?.isFile() && info.mtimeMs < cutoff) await unlink(path).catch(() => {});
    }
  } catch {
    // A sweep failure must never fail an upload.
  }
}

function isNotFound(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
