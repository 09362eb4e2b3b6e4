import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, existsSync, readFileSync, type WriteStream } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { keyFingerprint, SEALING_KEY_BYTES, SECRETS_KEY_FILE } from '../../core/sealing.ts';
import { VERSION } from '../../core/version.ts';
import type { BlobStore } from '../blob/types.ts';
import { openStore, type StoreSettings } from '../index.ts';
import { loadOrder, type Snapshot, type TableShape } from './database.ts';
import {
  ARCHIVE_FORMAT,
  ARCHIVE_FORMAT_VERSION,
  ArchiveError,
  blobEntry,
  BLOB_REFS_TABLE,
  encodeValue,
  EXCLUDED_TABLES,
  MANIFEST_FILE,
  SECRETS_KEY_ENTRY,
  tableEntry,
  type ArchiveManifest,
  type ArchiveTable,
} from './format.ts';
import { openPostgresSnapshot } from './postgres.ts';
import { openSqliteSnapshot } from './sqlite.ts';
import { TarWriter } from './tar.ts';

export interface ExportOptions {
  /** Where the store is, read as `stratus serve` reads it (DATA_DIR, DATABASE_URL). */
  readonly settings: StoreSettings & { readonly lambdaSecretsKey: Buffer | undefined };
  /** A directory (new or empty), a file ending in `.tar`, or `-` for a tar stream on `stdout`. */
  readonly to: string;
  readonly stdout?: Writable;
  /** Puts the secrets key in the archive (`secrets/lambda-secrets.key`). */
  readonly includeSecretsKey?: boolean;
  /** Told of what a reader of the command should know (a missing key, say). */
  readonly warn?: (message: string) => void;
}

export interface ExportSummary {
  readonly manifest: ArchiveManifest;
  /** Where the archive went: a path, or `-`. */
  readonly where: string;
}

type Output = { kind: 'directory'; path: string } | { kind: 'tar'; path: string } | { kind: 'stdout' };

function outputOf(to: string): Output {
  if (to === '-') return { kind: 'stdout' };
  if (to.endsWith('.tar')) return { kind: 'tar', path: resolve(to) };
  return { kind: 'directory', path: resolve(to) };
}

/** The key the platform seals secrets with, as `stratus serve` finds it; never made here. */
export function currentSecretsKey(settings: {
  readonly lambdaSecretsKey: Buffer | undefined;
  readonly dataDir: string;
}): Buffer | null {
  if (settings.lambdaSecretsKey) return settings.lambdaSecretsKey;
  const path = join(resolve(settings.dataDir), SECRETS_KEY_FILE);
  let key: Buffer;
  try {
    key = readFileSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  if (key.length !== SEALING_KEY_BYTES)
    throw new ArchiveError(`${path} must hold exactly ${SEALING_KEY_BYTES} bytes; it holds ${key.length}`);
  return key;
}

async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.byteLength;) at += (await handle.write(bytes, at, bytes.byteLength - at)).bytesWritten;
}

const FLUSH_BYTES = 256 * 1024;

/**
 * One table's rows as NDJSON into `path`: one object per row, its columns in table order, each
 * value as `encodeValue` writes it. Collects the blob hashes when it is the reference table.
 */
async function writeTable(
  snapshot: Snapshot,
  table: TableShape,
  path: string,
  referenced: Map<string, string>,
): Promise<Omit<ArchiveTable, 'serial'>> {
  const handle = await open(path, 'wx', 0o600);
  const hash = createHash('sha256');
  let rows = 0;
  let bytes = 0;
  let pending: string[] = [];
  let pendingLength = 0;
  const flush = async () => {
    const chunk = Buffer.from(pending.join(''), 'utf8');
    pending = [];
    pendingLength = 0;
    hash.update(chunk);
    bytes += chunk.byteLength;
    await writeAll(handle, chunk);
  };
  // Keys written once, quoted as JSON; a row is then one string concatenation.
  const keys = table.columns.map((column) => `${JSON.stringify(column.name)}:`);
  const names = table.columns.map((column) => column.name);
  const isRefs = table.name === BLOB_REFS_TABLE;
  try {
    for await (const row of snapshot.rows(table)) {
      let line = '{';
      for (let i = 0; i < names.length; i++)
        line += `${i > 0 ? ',' : ''}${keys[i]}${JSON.stringify(encodeValue(row[names[i]!]))}`;
      line += '}\n';
      pending.push(line);
      pendingLength += line.length;
      rows++;
      if (isRefs && !referenced.has(row.sha256 as string)) referenced.set(row.sha256 as string, row.holder as string);
      if (pendingLength >= FLUSH_BYTES) await flush();
    }
    await flush();
    await handle.sync();
  } finally {
    await handle.close();
  }
  return {
    name: table.name,
    file: tableEntry(table.name),
    rows,
    bytes,
    sha256: hash.digest('hex'),
    columns: table.columns,
  };
}

/**
 * A blob's content from the store, checked against its name and size as it goes: a store that
 * answers other bytes fails the export instead of writing an archive the import would refuse.
 */
async function* verifiedBlob(blobs: BlobStore, sha256: string, size: number): AsyncGenerator<Uint8Array> {
  const stream = await blobs.get(sha256);
  if (!stream) throw new ArchiveError(goneMessage(sha256));
  const hash = createHash('sha256');
  let seen = 0;
  for await (const chunk of stream as AsyncIterable<Uint8Array | string>) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    hash.update(bytes);
    seen += bytes.byteLength;
    yield bytes;
  }
  const actual = hash.digest('hex');
  if (actual !== sha256 || seen !== size)
    throw new ArchiveError(`blob ${sha256} in the store is damaged: its content (${seen} bytes) hashes to ${actual}`);
}

function goneMessage(sha256: string, holder?: string): string {
  return (
    `blob ${sha256}${holder ? ` (held by ${holder})` : ''} is referenced in the snapshot but no longer in the blob store. ` +
    'Blobs stay at least the grace period (10 minutes) after their last reference goes, so the export took longer than that, ' +
    'or the blob store is damaged. Run the export again.'
  );
}

/** Writes `content` to a new file at `path` and makes it durable. */
async function writeFileFrom(path: string, content: AsyncIterable<Uint8Array> | Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const handle = await open(path, 'wx', 0o600);
  try {
    for await (const chunk of content instanceof Uint8Array ? [content] : content) await writeAll(handle, chunk);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function isEmptyDirectory(path: string): Promise<boolean | null> {
  const info = await stat(path).catch(() => null);
  if (!info) return null;
  if (!info.isDirectory()) return false;
  return (await readdir(path)).length === 0;
}

/**
 * Exports the whole store into an archive, while the platform keeps serving: every table's rows
 * from one snapshot (one read transaction), then the blobs the snapshot's references name, which
 * are immutable and stay at least the grace period after their last reference goes.
 */
export async function exportArchive(options: ExportOptions): Promise<ExportSummary> {
  const { settings } = options;
  const output = outputOf(options.to);
  if (output.kind === 'directory' && (await isEmptyDirectory(output.path)) === false)
    throw new ArchiveError(`${output.path} exists and is not an empty directory`);
  if (output.kind === 'tar' && existsSync(output.path)) throw new ArchiveError(`${output.path} exists already`);
  if (output.kind === 'tar' && !existsSync(dirname(output.path)))
    throw new ArchiveError(`${dirname(output.path)} does not exist`);
  if (output.kind === 'stdout' && !options.stdout) throw new ArchiveError('no output stream for "-"');
  const sqliteFile = join(resolve(settings.dataDir), 'stratus.db');
  // Opening would make an empty database where there is none.
  if (!settings.databaseUrl && !existsSync(sqliteFile))
    throw new ArchiveError(`there is no Stratus store in ${resolve(settings.dataDir)} (no stratus.db)`);
  const key = currentSecretsKey(settings);
  if (options.includeSecretsKey && !key)
    options.warn?.(
      `there is no secrets key to include (LAMBDA_SECRETS_KEY is unset and ${join(resolve(settings.dataDir), SECRETS_KEY_FILE)} does not exist): nothing was ever sealed`,
    );

  const store = await openStore(settings);
  // Table files are written here first: into the directory itself, or beside the tar file (a tar
  // entry's header needs its size before its content).
  let spool: string | undefined;
  let createdDirectory = false;
  let partial: string | undefined;
  let file: WriteStream | undefined;
  try {
    if (output.kind === 'directory') {
      createdDirectory = (await isEmptyDirectory(output.path)) === null;
      await mkdir(output.path, { recursive: true, mode: 0o700 });
      spool = output.path;
    } else {
      const near = output.kind === 'tar' ? dirname(output.path) : tmpdir();
      spool = await mkdtemp(join(near, '.stratus-export-'));
    }
    await mkdir(join(spool, 'tables'));

    const snapshot = settings.databaseUrl
      ? await openPostgresSnapshot(settings.databaseUrl)
      : openSqliteSnapshot(sqliteFile);
    const referenced = new Map<string, string>();
    let migrations: Record<string, string[]>;
    const tables: ArchiveTable[] = [];
    const excludedTables: { name: string; reason: string }[] = [];
    try {
      migrations = await snapshot.migrations();
      if (Object.keys(migrations).length === 0)
        throw new ArchiveError('the store has no Stratus schema: it was never migrated or served');
      const all = await snapshot.tables();
      for (const table of all) {
        const reason = EXCLUDED_TABLES.get(table.name);
        if (reason) excludedTables.push({ name: table.name, reason });
      }
      for (const table of loadOrder(all.filter((t) => !EXCLUDED_TABLES.has(t.name)))) {
        const written = await writeTable(snapshot, table, join(spool, tableEntry(table.name)), referenced);
        tables.push(
          table.serialColumn
            ? { ...written, serial: { column: table.serialColumn, next: await snapshot.nextSerial(table) } }
            : written,
        );
      }
    } finally {
      await snapshot.close();
    }

    const blobs: { sha256: string; size: number }[] = [];
    for (const [sha256, holder] of [...referenced].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const info = await store.blobs.stat(sha256);
      if (!info) throw new ArchiveError(goneMessage(sha256, holder));
      blobs.push({ sha256, size: info.size });
    }
    const included = Boolean(options.includeSecretsKey && key);
    const manifest: ArchiveManifest = {
      format: ARCHIVE_FORMAT,
      formatVersion: ARCHIVE_FORMAT_VERSION,
      stratusVersion: VERSION,
      createdAt: new Date().toISOString(),
      source: { dialect: settings.databaseUrl ? 'postgres' : 'sqlite' },
      migrations,
      tables,
      excludedTables,
      blobs: { count: blobs.length, bytes: blobs.reduce((sum, blob) => sum + blob.size, 0) },
      secretsKey: { fingerprint: key ? keyFingerprint(key) : null, included },
    };
    const manifestBytes = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);

    if (output.kind === 'directory') {
      for (const { sha256, size } of blobs)
        await writeFileFrom(join(output.path, blobEntry(sha256)), verifiedBlob(store.blobs, sha256, size));
      if (included) await writeFileFrom(join(output.path, SECRETS_KEY_ENTRY), key!);
      // Last, through a rename: a directory with a manifest is a complete archive.
      await writeFileFrom(join(output.path, `${MANIFEST_FILE}.partial`), manifestBytes);
      await rename(join(output.path, `${MANIFEST_FILE}.partial`), join(output.path, MANIFEST_FILE));
      return { manifest, where: output.path };
    }

    if (output.kind === 'tar') {
      partial = `${output.path}.partial`;
      file = createWriteStream(partial, { flags: 'wx', mode: 0o600 });
    }
    const out = file ?? options.stdout!;
    const tar = new TarWriter(out);
    await tar.add(MANIFEST_FILE, manifestBytes.byteLength, manifestBytes);
    for (const table of tables) {
      const handle = await open(join(spool, table.file), 'r');
      try {
        await tar.add(table.file, table.bytes, handle.createReadStream({ autoClose: false }));
      } finally {
        await handle.close();
      }
    }
    for (const { sha256, size } of blobs)
      await tar.add(blobEntry(sha256), size, verifiedBlob(store.blobs, sha256, size));
    if (included) await tar.add(SECRETS_KEY_ENTRY, key!.byteLength, key!);
    await tar.end();
    if (file && output.kind === 'tar') {
      const closed = once(file, 'close');
      file.end();
      await closed;
      file = undefined;
      // Durable before it takes its name: a file called FILE.tar is a complete archive.
      const handle = await open(partial!, 'r');
      await handle.sync().finally(() => handle.close());
      await rename(partial!, output.path);
      partial = undefined;
    }
    return { manifest, where: output.kind === 'tar' ? output.path : '-' };
  } catch (error) {
    // Nothing half-written stays: the directory's content (the directory too when made here),
    // or the partial tar file.
    if (output.kind === 'directory' && spool) {
      if (createdDirectory) await rm(output.path, { recursive: true, force: true }).catch(() => {});
      else
        for (const name of await readdir(output.path).catch(() => []))
          await rm(join(output.path, name), { recursive: true, force: true }).catch(() => {});
    }
    file?.destroy();
    if (partial) await rm(partial, { force: true }).catch(() => {});
    throw error;
  } finally {
    if (spool && output.kind !== 'directory') await rm(spool, { recursive: true, force: true }).catch(() => {});
    await store.close();
  }
}
