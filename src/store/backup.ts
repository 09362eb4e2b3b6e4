import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { link, mkdir, mkdtemp, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { Settings } from '../config.ts';
import { SECRETS_KEY_FILE } from '../core/sealing.ts';
import { VERSION } from '../core/version.ts';
import { blobFilePath } from './blob/directory.ts';
import { INLINE_BLOBS_TABLE } from './blob/inline.ts';
import { DEFAULT_BLOB_GRACE_MS } from './blob/refs.ts';
import { isSha256 } from './blob/types.ts';
import { BLOB_DIR, INLINE_BLOB_FILE, SQLITE_FILE } from './index.ts';

/**
 * `stratus backup` and `stratus restore` of the embedded store (README.md: Backup and restore).
 *
 * A backup is a data directory of its own plus `backup.json`: the database (a `VACUUM INTO`
 * snapshot), exactly the blobs that snapshot references (small ones in `blobs/inline.db`, the
 * rest as files, hard-linked where the file system allows), and the secrets key file. It is taken
 * while a platform serves: the snapshot is one read transaction, and a blob it references cannot
 * be swept until the grace period after its last reference went (`blob/refs.ts`), so every blob
 * the snapshot names is still there while the blobs are copied; blobs are immutable, so a copy
 * made later is the same bytes. Blob files need no checksum list: their name is their SHA-256.
 */

export const BACKUP_MANIFEST = 'backup.json';
const FORMAT = 'stratus-backup';
const FORMAT_VERSION = 1;
const INLINE_PATH = join(BLOB_DIR, INLINE_BLOB_FILE);
/** The files a backup may hold besides blob files: each with its checksum in the manifest. */
const KNOWN_FILES: readonly string[] = [SQLITE_FILE, INLINE_PATH, SECRETS_KEY_FILE];
const REQUIRED_FILES: readonly string[] = [SQLITE_FILE, INLINE_PATH];
const REFS_PAGE = 1000;
const COPY_CONCURRENCY = 8;
const COPY_BUFFER_BYTES = 1024 * 1024;

export interface BackupFile {
  /** Relative to the backup (and to the data directory), `/`-separated. */
  path: string;
  bytes: number;
  sha256: string;
}

export interface BlobCount {
  count: number;
  bytes: number;
}

export interface BackupManifest {
  format: typeof FORMAT;
  formatVersion: number;
  stratusVersion: string;
  /** When the database snapshot began: the backup holds the platform's state as of then. */
  snapshotAt: string;
  createdAt: string;
  /** The data directory backed up. */
  source: string;
  database: string;
  files: BackupFile[];
  blobs: BlobCount & { inline: BlobCount; files: BlobCount };
  /** Where the key sealing lambda and scheduler secrets came from: `setting` is not in the backup. */
  secretsKey: 'file' | 'setting' | 'none';
}

export interface BackupReport {
  manifest: BackupManifest;
  /** Blob files hard-linked rather than copied. */
  linked: number;
  elapsedMs: number;
}

/** A refusal or a failed check, said plainly (the CLI prints the message without a stack). */
export class BackupError extends Error {
  override readonly name = 'BackupError';
}

export const POSTGRES_REFUSAL =
  'DATABASE_URL is set: this platform keeps its state in PostgreSQL, which stratus backup does not copy. ' +
  'Back it up with pg_dump (pg_dump -Fc -f stratus.dump "$DATABASE_URL") and restore with pg_restore, ' +
  'or use stratus export for a portable copy; keep LAMBDA_SECRETS_KEY with it (README.md: Backup and restore)';

/**
 * Backs up the embedded store in `dataDir` into `to` (absent or empty), while a platform may be
 * serving on it. Nothing is left in `to` when it fails; `backup.json` is written last, so a
 * directory without it is not a backup.
 */
export async function createBackup(options: {
  dataDir: string;
  to: string;
  /** `LAMBDA_SECRETS_KEY` is set: secrets are sealed with it, not with the key file. */
  secretsKeySetting?: boolean;
}): Promise<BackupReport> {
  const started = Date.now();
  const dataDir = resolve(options.dataDir);
  const to = resolve(options.to);
  const databasePath = join(dataDir, SQLITE_FILE);
  if (!(await isFile(databasePath)))
    throw new BackupError(`no embedded store in ${dataDir} (no ${SQLITE_FILE}): is --data-dir / DATA_DIR right?`);
  const inside = relative(dataDir, to);
  if (inside === '' || (inside !== '..' && !inside.startsWith(`..${sep}`) && !isAbsolute(inside)))
    throw new BackupError(`${to} is inside the data directory ${dataDir}: back up to a directory outside it`);
  const existed = (await emptyOrAbsent(to, 'backup')) === 'empty';
  await mkdir(to, { recursive: true });
  try {
    return await writeBackup(dataDir, to, started, options.secretsKeySetting === true);
  } catch (error) {
    // Everything in `to` is ours: it was empty or absent.
    if (existed) for (const name of await readdir(to)) await rm(join(to, name), { recursive: true, force: true });
    else await rm(to, { recursive: true, force: true });
    throw error;
  }
}

async function writeBackup(
  dataDir: string,
  to: string,
  started: number,
  secretsKeySetting: boolean,
): Promise<BackupReport> {
  // 1. The database, first: one read transaction of a consistent state (WAL lets the platform
  // write on meanwhile). Every blob it references is kept from here for at least the grace period.
  const snapshotAt = Date.now();
  const source = new Database(join(dataDir, SQLITE_FILE), { fileMustExist: true });
  try {
    source.pragma('busy_timeout = 5000');
    source.prepare('vacuum into ?').run(join(to, SQLITE_FILE));
  } finally {
    source.close();
  }
  await fsyncPath(join(to, SQLITE_FILE));

  // 2. The blobs the snapshot references, from the live store.
  await mkdir(join(to, BLOB_DIR));
  const snapshot = new Database(join(to, SQLITE_FILE), { readonly: true, fileMustExist: true });
  const liveInline = await openLiveInline(join(dataDir, INLINE_PATH));
  const inlineOut = new Database(join(to, INLINE_PATH));
  const counts = { inline: { count: 0, bytes: 0 }, files: { count: 0, bytes: 0 } };
  const copier = new BlobCopier(join(dataDir, BLOB_DIR), join(to, BLOB_DIR), snapshotAt);
  try {
    if (!snapshot.prepare("select 1 from sqlite_master where type = 'table' and name = 'stratus_blob_refs'").get())
      throw new BackupError(
        `${join(dataDir, SQLITE_FILE)} has no blob reference table: start the platform (or stratus migrate) once first`,
      );
    inlineOut.exec(INLINE_BLOBS_TABLE);
    const insert = inlineOut.prepare('insert into inline_blobs (sha256, data) values (?, ?)');
    const insertAll = inlineOut.transaction((rows: { sha256: string; data: Buffer }[]) => {
      for (const row of rows) insert.run(row.sha256, row.data);
    });
    const page = snapshot.prepare<[string, number], string>(
      'select distinct sha256 from stratus_blob_refs where sha256 > ? order by sha256 limit ?',
    );
    page.pluck();
    for (let after = ''; ;) {
      const shas = page.all(after, REFS_PAGE);
      if (shas.length === 0) break;
      after = shas[shas.length - 1]!;
      const inline: { sha256: string; data: Buffer }[] = [];
      const files: string[] = [];
      for (const sha256 of shas) {
        if (!isSha256(sha256)) throw new BackupError(`the database references a malformed blob hash ${String(sha256)}`);
        const data = liveInline?.(sha256);
        if (data === undefined) {
          files.push(sha256);
          continue;
        }
        const actual = sha256Of(data);
        if (actual !== sha256)
          throw new BackupError(`blob ${sha256} in ${join(dataDir, INLINE_PATH)} is damaged (its sha256 is ${actual})`);
        inline.push({ sha256, data });
        counts.inline.count++;
        counts.inline.bytes += data.length;
      }
      insertAll(inline);
      await eachLimit(files, COPY_CONCURRENCY, async (sha256) => {
        const bytes = await copier.place(sha256);
        counts.files.bytes += bytes;
        counts.files.count++;
      });
    }
  } finally {
    snapshot.close();
    liveInline?.close();
    inlineOut.close();
  }
  await fsyncPath(join(to, INLINE_PATH));
  await copier.syncDirectories();

  // 3. The key file: sealed secrets in the database are unreadable without it.
  const files: BackupFile[] = [];
  for (const path of [SQLITE_FILE, INLINE_PATH]) files.push({ path, ...(await hashFile(join(to, path))) });
  let secretsKey: BackupManifest['secretsKey'] = secretsKeySetting ? 'setting' : 'none';
  if (await isFile(join(dataDir, SECRETS_KEY_FILE))) {
    const copied = await copyHashed(join(dataDir, SECRETS_KEY_FILE), join(to, SECRETS_KEY_FILE), 0o600);
    files.push({ path: SECRETS_KEY_FILE, ...copied });
    if (!secretsKeySetting) secretsKey = 'file';
  }
  await fsyncPath(join(to, BLOB_DIR));

  // 4. The manifest, last: its presence marks a complete backup.
  const manifest: BackupManifest = {
    format: FORMAT,
    formatVersion: FORMAT_VERSION,
    stratusVersion: VERSION,
    snapshotAt: new Date(snapshotAt).toISOString(),
    createdAt: new Date().toISOString(),
    source: dataDir,
    database: SQLITE_FILE,
    files,
    blobs: {
      count: counts.inline.count + counts.files.count,
      bytes: counts.inline.bytes + counts.files.bytes,
      ...counts,
    },
    secretsKey,
  };
  await writeDurably(join(to, BACKUP_MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  return { manifest, linked: copier.linked, elapsedMs: Date.now() - started };
}

/** A lookup of small blobs in the live `blobs/inline.db` (undefined: not there), or null without one. */
async function openLiveInline(
  path: string,
): Promise<(((sha256: string) => Buffer | undefined) & { close(): void }) | null> {
  if (!(await isFile(path))) return null;
  const database = new Database(path, { fileMustExist: true });
  database.pragma('busy_timeout = 5000');
  if (!database.prepare("select 1 from sqlite_master where type = 'table' and name = 'inline_blobs'").get()) {
    database.close();
    return null;
  }
  const select = database.prepare<[string], Buffer>('select data from inline_blobs where sha256 = ?').pluck();
  return Object.assign((sha256: string) => select.get(sha256), { close: () => database.close() });
}

/** Places blob files of the live store into the backup: a hard link where it can, else a copy. */
class BlobCopier {
  linked = 0;
  private canLink = true;
  private readonly directories = new Set<string>();

  constructor(
    private readonly from: string,
    private readonly to: string,
    private readonly snapshotAt: number,
  ) {}

  /** Places one blob and checks its content; answers its size. */
  async place(sha256: string): Promise<number> {
    const source = join(this.from, blobFilePath(sha256));
    const target = join(this.to, blobFilePath(sha256));
    await this.directory(dirname(target));
    let placed: { sha256: string; bytes: number } | undefined;
    if (this.canLink) {
      try {
        await link(source, target);
        this.linked++;
        placed = await hashFile(target);
      } catch (error) {
        const code = errorCode(error);
        if (code === 'ENOENT') throw this.missing(sha256);
        // Another file system, or one without hard links: copy from now on.
        if (code === 'EXDEV' || code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP') this.canLink = false;
        else if (code !== 'EMLINK') throw error;
      }
    }
    if (!placed) {
      try {
        placed = await copyHashed(source, target);
      } catch (error) {
        if (errorCode(error) === 'ENOENT') throw this.missing(sha256);
        throw error;
      }
    }
    if (placed.sha256 !== sha256)
      throw new BackupError(`blob ${source} is damaged: its content's sha256 is ${placed.sha256}`);
    return placed.bytes;
  }

  private missing(sha256: string): BackupError {
    const seconds = Math.round((Date.now() - this.snapshotAt) / 1000);
    const why =
      Date.now() - this.snapshotAt < DEFAULT_BLOB_GRACE_MS
        ? 'a referenced blob is never deleted, so the data directory is damaged'
        : `the backup took longer than the ${DEFAULT_BLOB_GRACE_MS / 60_000} minutes an unreferenced blob is kept, so it may have been swept: run the backup again`;
    return new BackupError(
      `blob ${sha256}, referenced in the database snapshot, is not in ${this.from} (${seconds} s after the snapshot): ${why}`,
    );
  }

  private async directory(path: string): Promise<void> {
    if (this.directories.has(path)) return;
    await mkdir(path, { recursive: true });
    this.directories.add(path);
    this.directories.add(dirname(path));
  }

  /** Links and new files are durable once their directories are. */
  async syncDirectories(): Promise<void> {
    for (const path of this.directories) await fsyncPath(path);
  }
}

/**
 * Restores a backup into `dataDir`, which must be absent or empty. The backup is copied into a
 * staging directory and every checksum is checked there (the manifest's files, each blob's content
 * against its name, every referenced blob present); only then does it move into place, so a
 * failure leaves nothing behind. An absent `dataDir` is the staging directory (made beside it)
 * renamed; an existing empty one is kept (it may be a mount point, or owned and permissioned for
 * the platform's user) and the staged entries are renamed into it, the database last.
 */
export async function restoreBackup(options: { from: string; dataDir: string }): Promise<BackupManifest> {
  const from = resolve(options.from);
  const target = resolve(options.dataDir);
  const manifest = await readManifest(from);
  const existed = (await emptyOrAbsent(target, 'restore')) === 'empty';
  const parent = dirname(target);
  if (!existed) await mkdir(parent, { recursive: true });
  const staging = existed
    ? await mkdtemp(join(target, '.restore-'))
    : await mkdtemp(join(parent, `.${basename(target)}.restore-`));
  const moved: string[] = [];
  try {
    for (const file of manifest.files) {
      const path = join(staging, file.path);
      await mkdir(dirname(path), { recursive: true });
      const copied = await copyHashed(join(from, file.path), path, file.path === SECRETS_KEY_FILE ? 0o600 : 0o644);
      if (copied.bytes !== file.bytes || copied.sha256 !== file.sha256)
        throw new BackupError(`${join(from, file.path)} does not match its checksum in ${BACKUP_MANIFEST}: damaged`);
    }
    const files = await restoreBlobFiles(join(from, BLOB_DIR), join(staging, BLOB_DIR));
    const inline = inlineContent(join(staging, INLINE_PATH));
    for (const [kind, found] of [
      ['files', files],
      ['inline', inline],
    ] as const) {
      const expected = manifest.blobs[kind];
      if (found.count !== expected.count || found.bytes !== expected.bytes)
        throw new BackupError(
          `the backup holds ${found.count} ${kind === 'inline' ? 'inline blobs' : 'blob files'} (${found.bytes} bytes); ` +
            `${BACKUP_MANIFEST} says ${expected.count} (${expected.bytes} bytes): blobs are missing or were added`,
        );
    }
    await checkReferences(staging, files.count + inline.count);
    await fsyncPath(join(staging, BLOB_DIR));
    await fsyncPath(staging);
    if (!existed) {
      await rename(staging, target);
      await fsyncPath(parent);
      return manifest;
    }
    const others = (await readdir(target)).filter((name) => name !== basename(staging));
    if (others.length > 0) throw new BackupError(`${target} is no longer empty (${others.join(', ')} appeared in it)`);
    // The database last: a data directory without it holds no platform yet.
    const names = (await readdir(staging)).sort((a, b) => Number(a === SQLITE_FILE) - Number(b === SQLITE_FILE));
    for (const name of names) {
      await rename(join(staging, name), join(target, name));
      moved.push(name);
    }
    await rm(staging, { recursive: true });
    await fsyncPath(target);
    return manifest;
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    // The directory was empty: whatever was moved into it is ours to take back out.
    for (const name of moved) await rm(join(target, name), { recursive: true, force: true });
    throw error;
  }
}

/** Copies the blob files of a backup, each checked against its name; answers their count and bytes. */
async function restoreBlobFiles(from: string, to: string): Promise<BlobCount> {
  const found = { count: 0, bytes: 0 };
  const unexpected = (path: string) => new BackupError(`${path} does not belong in a backup's blob directory`);
  for (const first of await readdir(from, { withFileTypes: true })) {
    if (first.name === INLINE_BLOB_FILE && first.isFile()) continue;
    if (!/^[0-9a-f]{2}$/.test(first.name) || !first.isDirectory()) throw unexpected(join(from, first.name));
    for (const second of await readdir(join(from, first.name), { withFileTypes: true })) {
      const shard = join(first.name, second.name);
      if (!/^[0-9a-f]{2}$/.test(second.name) || !second.isDirectory()) throw unexpected(join(from, shard));
      await mkdir(join(to, shard), { recursive: true });
      const names = await readdir(join(from, shard), { withFileTypes: true });
      await eachLimit(names, COPY_CONCURRENCY, async (entry) => {
        const sha256 = entry.name;
        if (!isSha256(sha256) || !entry.isFile() || blobFilePath(sha256) !== join(shard, sha256))
          throw unexpected(join(from, shard, sha256));
        const copied = await copyHashed(join(from, shard, sha256), join(to, shard, sha256));
        if (copied.sha256 !== sha256)
          throw new BackupError(
            `blob ${join(from, shard, sha256)} is damaged: its content's sha256 is ${copied.sha256}`,
          );
        found.count++;
        found.bytes += copied.bytes;
      });
      await fsyncPath(join(to, shard));
      await fsyncPath(join(to, first.name));
    }
  }
  return found;
}

/** Checks each small blob of an inline file against its key; answers their count and bytes. */
function inlineContent(path: string): BlobCount {
  const database = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const found = { count: 0, bytes: 0 };
    for (const row of database
      .prepare<[], { sha256: string; data: Buffer }>('select sha256, data from inline_blobs')
      .iterate()) {
      if (sha256Of(row.data) !== row.sha256) throw new BackupError(`inline blob ${row.sha256} is damaged`);
      found.count++;
      found.bytes += row.data.length;
    }
    return found;
  } finally {
    database.close();
  }
}

/** Every blob the restored database references is there, and nothing else: as the backup took them. */
async function checkReferences(dataDir: string, blobs: number): Promise<void> {
  const database = new Database(join(dataDir, SQLITE_FILE), { readonly: true, fileMustExist: true });
  const inline = new Database(join(dataDir, INLINE_PATH), { readonly: true, fileMustExist: true });
  try {
    const page = database
      .prepare<[string, number], string>(
        'select distinct sha256 from stratus_blob_refs where sha256 > ? order by sha256 limit ?',
      )
      .pluck();
    const inlineHas = inline.prepare<[string], number>('select 1 from inline_blobs where sha256 = ?').pluck();
    let referenced = 0;
    for (let after = ''; ;) {
      const shas = page.all(after, REFS_PAGE);
      if (shas.length === 0) break;
      after = shas[shas.length - 1]!;
      for (const sha256 of shas) {
        referenced++;
        if (inlineHas.get(sha256) !== undefined) continue;
        if (!isSha256(sha256) || !(await isFile(join(dataDir, BLOB_DIR, blobFilePath(sha256)))))
          throw new BackupError(`the backup is incomplete: blob ${sha256}, referenced by its database, is missing`);
      }
    }
    if (referenced !== blobs)
      throw new BackupError(`the backup holds ${blobs} blobs but its database references ${referenced}`);
  } finally {
    database.close();
    inline.close();
  }
}

async function readManifest(from: string): Promise<BackupManifest> {
  const path = join(from, BACKUP_MANIFEST);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR')
      throw new BackupError(
        `${from} is not a Stratus backup: it has no ${BACKUP_MANIFEST} (an interrupted backup has none)`,
      );
    throw error;
  }
  const invalid = (why: string) => new BackupError(`${path} is not a valid backup manifest: ${why}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalid('not JSON');
  }
  const manifest = value as Partial<BackupManifest> | null;
  if (typeof manifest !== 'object' || manifest === null || manifest.format !== FORMAT)
    throw invalid(`no "format": "${FORMAT}"`);
  if (manifest.formatVersion !== FORMAT_VERSION)
    throw invalid(
      `format version ${String(manifest.formatVersion)}; this Stratus (${VERSION}) reads version ${FORMAT_VERSION}`,
    );
  const isCount = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= 0;
  const isBlobCount = (c: unknown): c is BlobCount =>
    typeof c === 'object' && c !== null && isCount((c as BlobCount).count) && isCount((c as BlobCount).bytes);
  if (!isBlobCount(manifest.blobs?.inline) || !isBlobCount(manifest.blobs.files)) throw invalid('bad "blobs" counts');
  if (!Array.isArray(manifest.files)) throw invalid('no "files" list');
  const paths = new Set<string>();
  for (const file of manifest.files as unknown[]) {
    const { path: name, bytes, sha256 } = (file ?? {}) as Partial<BackupFile>;
    if (typeof name !== 'string' || !KNOWN_FILES.includes(name) || paths.has(name))
      throw invalid(`unexpected file ${JSON.stringify(name)}`);
    if (!isCount(bytes) || !isSha256(sha256)) throw invalid(`bad size or checksum for ${name}`);
    paths.add(name);
  }
  for (const name of REQUIRED_FILES) if (!paths.has(name)) throw invalid(`${name} is not listed`);
  return manifest as BackupManifest;
}

/** Whether `dir` may receive a backup or a restore: absent, or an empty directory. */
async function emptyOrAbsent(dir: string, command: 'backup' | 'restore'): Promise<'empty' | 'absent'> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return 'absent';
    if (errorCode(error) === 'ENOTDIR') throw new BackupError(`${dir} is not a directory`);
    throw error;
  }
  if (names.length === 0) return 'empty';
  throw new BackupError(
    command === 'backup'
      ? `${dir} is not empty: back up into a new or empty directory`
      : `${dir} is not empty: restore only into a new or empty data directory (stop the platform, move the old data directory aside, then restore)`,
  );
}

/** Copies `from` to a new file `to`, fsynced, hashing what it writes; answers the hash and size. */
async function copyHashed(from: string, to: string, mode = 0o644): Promise<{ sha256: string; bytes: number }> {
  // Opened before anything else: a blob deleted meanwhile still reads whole from an open file.
  const input = await open(from, 'r');
  try {
    const output = await open(to, 'wx', mode);
    try {
      const hash = createHash('sha256');
      const buffer = Buffer.allocUnsafe(COPY_BUFFER_BYTES);
      let bytes = 0;
      for (;;) {
        const { bytesRead } = await input.read(buffer, 0, buffer.length);
        if (bytesRead === 0) break;
        const chunk = buffer.subarray(0, bytesRead);
        hash.update(chunk);
        for (let at = 0; at < bytesRead;) at += (await output.write(chunk, at, bytesRead - at)).bytesWritten;
        bytes += bytesRead;
      }
      // The umask may have narrowed the mode; a key file must be exactly 0600.
      await output.chmod(mode);
      await output.sync();
      return { sha256: hash.digest('hex'), bytes };
    } finally {
      await output.close();
    }
  } finally {
    await input.close();
  }
}

async function hashFile(path: string): Promise<{ sha256: string; bytes: number }> {
  const handle = await open(path, 'r');
  try {
    const hash = createHash('sha256');
    const buffer = Buffer.allocUnsafe(COPY_BUFFER_BYTES);
    let bytes = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
      bytes += bytesRead;
    }
    return { sha256: hash.digest('hex'), bytes };
  } finally {
    await handle.close();
  }
}

function sha256Of(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Writes a file through a temporary name and a rename, fsynced, so it is there whole or not at all. */
async function writeDurably(path: string, content: string): Promise<void> {
  const temporary = `${path}.tmp`;
  await writeFile(temporary, content, { flag: 'wx' });
  await fsyncPath(temporary);
  await rename(temporary, path);
  await fsyncPath(dirname(path));
}

/** fsync of a file or a directory (a directory's entries are durable once it is synced). */
async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return false;
    throw error;
  }
}

function errorCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

/** Runs `work` over `items`, at most `limit` at once; the first failure stops the rest and is thrown. */
async function eachLimit<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (next < items.length && !failure) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.error;
}

/** The options `stratus backup` and `stratus restore` take besides the settings' flags. */
export const BACKUP_OPTIONS = { to: { type: 'string' }, from: { type: 'string' } } as const;

const mib = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;

/** `stratus backup --to DIR` and `stratus restore --from DIR`: prints what was done, answers the exit code. */
export async function runBackupCommand(
  command: 'backup' | 'restore',
  values: { to?: string; from?: string },
  settings: Pick<Settings, 'dataDir' | 'databaseUrl' | 'lambdaSecretsKey'>,
): Promise<number> {
  const fail = (message: string, code = 1) => {
    process.stderr.write(`stratus ${command}: ${message}\n`);
    return code;
  };
  const path = command === 'backup' ? values.to : values.from;
  if (!path) return fail(command === 'backup' ? 'needs --to DIR' : 'needs --from DIR', 2);
  if (settings.databaseUrl)
    return fail(
      command === 'backup'
        ? POSTGRES_REFUSAL
        : 'DATABASE_URL is set: restore writes an embedded data directory, which a platform on PostgreSQL does not read; ' +
            'restore a PostgreSQL platform with pg_restore (or stratus import), and unset DATABASE_URL to restore a backup of the embedded store',
    );
  try {
    if (command === 'backup') {
      const { manifest, linked, elapsedMs } = await createBackup({
        dataDir: settings.dataDir,
        to: path,
        secretsKeySetting: settings.lambdaSecretsKey !== undefined,
      });
      const database = manifest.files.find((f) => f.path === SQLITE_FILE)!;
      const { blobs } = manifest;
      process.stdout.write(
        `backup of ${manifest.source} written to ${resolve(path)} in ${(elapsedMs / 1000).toFixed(1)} s ` +
          `(the state as of ${manifest.snapshotAt}):\n` +
          `  database  ${SQLITE_FILE}, ${mib(database.bytes)}\n` +
          `  blobs     ${blobs.count}, ${mib(blobs.bytes)}: ${blobs.inline.count} in ${INLINE_PATH}, ` +
          `${blobs.files.count} files (${linked} hard-linked to the data directory's)\n` +
          `  key       ${
            manifest.files.some((f) => f.path === SECRETS_KEY_FILE)
              ? `${SECRETS_KEY_FILE} (mode 0600): the backup opens sealed secrets, keep it as private as the data`
              : 'no key file'
          }\n` +
          (manifest.secretsKey === 'setting'
            ? '  note      secrets are sealed with LAMBDA_SECRETS_KEY, which is not in the backup: keep that key with it\n'
            : ''),
      );
    } else {
      const target = resolve(settings.dataDir);
      const manifest = await restoreBackup({ from: path, dataDir: target });
      process.stdout.write(
        `restored ${resolve(path)} (Stratus ${manifest.stratusVersion}, the state as of ${manifest.snapshotAt}) into ${target}: ` +
          `database, ${manifest.blobs.count} blobs${manifest.files.some((f) => f.path === SECRETS_KEY_FILE) ? ', key file' : ''}; ` +
          `start the platform with DATA_DIR=${target}\n` +
          (manifest.secretsKey === 'setting'
            ? 'its secrets were sealed with LAMBDA_SECRETS_KEY: start with the same key\n'
            : ''),
      );
    }
    return 0;
  } catch (error) {
    if (error instanceof BackupError) return fail(error.message);
    throw error;
  }
}
