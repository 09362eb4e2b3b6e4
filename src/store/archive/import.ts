import { createHash } from 'node:crypto';
import { mkdir, open, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { keyFingerprint, SEALING_KEY_BYTES, SECRETS_KEY_FILE } from '../../core/sealing.ts';
import { VERSION } from '../../core/version.ts';
import { openSqlite } from '../db.ts';
import { openStore, type StoreSettings } from '../index.ts';
import { migrate, type MigrationSet } from '../migrate.ts';
import { all } from '../sql-work.ts';
import { loadOrder, quoteIdentifier, type LoadTarget } from './database.ts';
import { currentSecretsKey } from './export.ts';
import {
  ArchiveError,
  blobEntry,
  blobOfEntry,
  BLOB_REFS_TABLE,
  decodeRow,
  encodeValue,
  MANIFEST_FILE,
  parseManifest,
  SECRETS_KEY_ENTRY,
  type ArchiveManifest,
  type ArchiveTable,
  type ArchiveValue,
} from './format.ts';
import { openPostgresTarget } from './postgres.ts';
import { openArchiveReader, type ArchiveReader } from './reader.ts';
import { openSqliteTarget } from './sqlite.ts';

export interface ImportOptions {
  /** Where the store is, read as `stratus serve` reads it (DATA_DIR, DATABASE_URL). */
  readonly settings: StoreSettings & { readonly lambdaSecretsKey: Buffer | undefined };
  /** A directory archive or a tar file. */
  readonly from: string;
  /** Every migration set of this build: the archive's must be the same, owner by owner. */
  readonly migrationSets: readonly MigrationSet[];
}

export interface ImportSummary {
  readonly manifest: ArchiveManifest;
  readonly rows: number;
  /** What the person importing should act on (a secrets key that does not match). */
  readonly warnings: readonly string[];
  /** What the import did besides loading (the key file it wrote). */
  readonly notes: readonly string[];
}

// Rows per insert, and about the most text they may hold (a logs chunk can weigh megabytes).
const INSERT_BATCH = 500;
const INSERT_BATCH_BYTES = 8 * 1024 * 1024;

/** The lines of a file, each as text, hashing its bytes as they pass. Pieces of a long line are joined once. */
async function* lines(stream: Readable, hash: { update(bytes: Uint8Array): unknown }): AsyncGenerator<string> {
  let pieces: Buffer[] = [];
  for await (const data of stream) {
    const chunk = data as Buffer;
    hash.update(chunk);
    let start = 0;
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      pieces.push(chunk.subarray(start, end));
      yield Buffer.concat(pieces).toString('utf8');
      pieces = [];
      start = end + 1;
    }
    if (start < chunk.length) pieces.push(chunk.subarray(start));
  }
  if (pieces.length > 0) yield Buffer.concat(pieces).toString('utf8');
}

/** Refuses an archive whose migrations are not exactly this build's, owner by owner. */
export function checkSchema(manifest: ArchiveManifest, sets: readonly MigrationSet[]): void {
  const build = new Map(sets.map((set) => [set.owner, set.migrations.map((migration) => migration.name).sort()]));
  const differences: string[] = [];
  for (const [owner, names] of Object.entries(manifest.migrations)) {
    const ours = build.get(owner);
    if (!ours) {
      differences.push(`${owner}: not part of this build`);
      continue;
    }
    const unknown = names.filter((name) => !ours.includes(name));
    const missing = ours.filter((name) => !names.includes(name));
    if (unknown.length > 0) differences.push(`${owner}: the archive has ${unknown.join(', ')}, unknown to this build`);
    if (missing.length > 0)
      differences.push(`${owner}: this build has ${missing.join(', ')}, which the source had not applied`);
  }
  if (differences.length > 0)
    throw new ArchiveError(
      `the archive's schema differs from this build's (the archive is from Stratus ${manifest.stratusVersion}, this is ${VERSION}):\n` +
        differences.map((difference) => `  ${difference}\n`).join('') +
        'Import it with the Stratus version that exported it, or bring the source up to date (stratus migrate) and export again.',
    );
}

async function sha256Of(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Reads every file of the archive once and refuses it at the first thing that does not match the
 * manifest: a missing or unexpected file, a table file's SHA-256, row count, size or a row that
 * does not decode, a blob whose content does not hash to its name, a referenced blob that is
 * missing, blob totals, the secrets key. Nothing is written before this has passed.
 */
async function verify(reader: ArchiveReader, manifest: ArchiveManifest): Promise<Map<string, number>> {
  const expected = new Set([MANIFEST_FILE]);
  for (const table of manifest.tables) {
    expected.add(table.file);
    if (!reader.files.has(table.file)) throw new ArchiveError(`the archive is missing ${table.file}`);
  }
  const blobs = new Map<string, number>();
  for (const [name, { size }] of reader.files) {
    const sha256 = blobOfEntry(name);
    if (sha256) {
      expected.add(name);
      blobs.set(sha256, size);
    }
  }
  if (manifest.secretsKey.included) {
    expected.add(SECRETS_KEY_ENTRY);
    if (!reader.files.has(SECRETS_KEY_ENTRY)) throw new ArchiveError(`the archive is missing ${SECRETS_KEY_ENTRY}`);
  }
  const unexpected = [...reader.files.keys()].filter((name) => !expected.has(name));
  if (unexpected.length > 0)
    throw new ArchiveError(`the archive holds files its manifest does not name: ${unexpected.slice(0, 5).join(', ')}`);

  const referenced = new Set<string>();
  for (const table of manifest.tables) {
    const columns = table.columns.map((column) => column.name);
    const hash = createHash('sha256');
    let rows = 0;
    for await (const line of lines(reader.open(table.file), hash)) {
      rows++;
      let values: ArchiveValue[];
      try {
        values = decodeRow(line, columns);
      } catch (error) {
        throw new ArchiveError(`${table.file} is damaged: line ${rows}: ${(error as Error).message}`);
      }
      if (table.name === BLOB_REFS_TABLE) referenced.add(String(values[columns.indexOf('sha256')]));
    }
    const sha256 = hash.digest('hex');
    if (sha256 !== table.sha256)
      throw new ArchiveError(`${table.file} is damaged: its SHA-256 is ${sha256}, the manifest says ${table.sha256}`);
    if (rows !== table.rows)
      throw new ArchiveError(`${table.file} holds ${rows} rows; the manifest says ${table.rows}`);
    const bytes = reader.files.get(table.file)!.size;
    if (bytes !== table.bytes)
      throw new ArchiveError(`${table.file} holds ${bytes} bytes; the manifest says ${table.bytes}`);
  }

  for (const sha256 of referenced)
    if (!blobs.has(sha256))
      throw new ArchiveError(`the archive is missing ${blobEntry(sha256)}, a blob that ${BLOB_REFS_TABLE} references`);
  for (const sha256 of blobs.keys())
    if (!referenced.has(sha256))
      throw new ArchiveError(`${blobEntry(sha256)} is in the archive, but nothing references it`);
  const bytes = [...blobs.values()].reduce((sum, size) => sum + size, 0);
  if (blobs.size !== manifest.blobs.count || bytes !== manifest.blobs.bytes)
    throw new ArchiveError(
      `the archive holds ${blobs.size} blobs of ${bytes} bytes; the manifest says ${manifest.blobs.count} of ${manifest.blobs.bytes}`,
    );
  for (const sha256 of blobs.keys()) {
    const actual = await sha256Of(reader.open(blobEntry(sha256)));
    if (actual !== sha256) throw new ArchiveError(`${blobEntry(sha256)} is damaged: its content hashes to ${actual}`);
  }

  if (manifest.secretsKey.included) {
    const key = await readBytes(reader.open(SECRETS_KEY_ENTRY));
    if (key.length !== SEALING_KEY_BYTES || keyFingerprint(key) !== manifest.secretsKey.fingerprint)
      throw new ArchiveError(`${SECRETS_KEY_ENTRY} is damaged: it is not the key the manifest names`);
  }
  return blobs;
}

async function readBytes(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A row as comparable text: its columns by name, values as archived. */
function rowText(row: Record<string, unknown>): string {
  return JSON.stringify(
    Object.keys(row)
      .sort()
      .map((column) => [column, encodeValue(row[column])]),
  );
}

/** The rows each table holds right after migrating an empty database (`kv_meta`'s, say). */
async function seededRows(sets: readonly MigrationSet[]): Promise<Map<string, string[]>> {
  const scratch = openSqlite(':memory:');
  try {
    await migrate(scratch.database, sets);
    const tables = await scratch.database.read(() =>
      all<{ name: string }>(
        "select name from sqlite_master where type = 'table' and name not like 'sqlite\\_%' escape '\\'",
      ),
    );
    const seeded = new Map<string, string[]>();
    for (const { name } of tables) {
      const rows = await scratch.database.read(() => all(`select * from ${quoteIdentifier(name)}`));
      if (rows.length > 0 && name !== 'stratus_migrations') seeded.set(name, rows.map(rowText).sort());
    }
    return seeded;
  } finally {
    await scratch.close();
  }
}

/**
 * The tables holding anything but what their migration inserts. Empty means a new store: never
 * migrated, only migrated (`stratus migrate`), or left by an import that failed.
 */
async function nonEmptyTables(target: LoadTarget, seeded: Map<string, string[]>): Promise<string[]> {
  const found: string[] = [];
  for (const table of await target.tables()) {
    if (table.name === 'stratus_migrations') continue;
    const count = await target.count(table);
    if (count === 0) continue;
    const seeds = seeded.get(table.name) ?? [];
    const same =
      count === seeds.length &&
      (await target.rows(table, count))
        .map(rowText)
        .sort()
        .every((row, i) => row === seeds[i]);
    if (!same) found.push(`${table.name} (${count} ${count === 1 ? 'row' : 'rows'})`);
  }
  return found;
}

interface KeyPlan {
  write?: { path: string; key: Buffer };
  warning?: string;
}

/**
 * What the archive's secrets key means here. A key it carries must be the one this store would
 * use, or become it (a new key file); without one, a source key other than this store's is a
 * warning: the sealed values (lambda secrets, webhook secrets) will not open here.
 */
async function planSecretsKey(
  reader: ArchiveReader,
  manifest: ArchiveManifest,
  settings: ImportOptions['settings'],
): Promise<KeyPlan> {
  const source = manifest.secretsKey.fingerprint;
  if (source === null) return {};
  const path = join(resolve(settings.dataDir), SECRETS_KEY_FILE);
  const current = currentSecretsKey(settings);
  const here = current ? keyFingerprint(current) : null;
  if (manifest.secretsKey.included) {
    if (here === source) return {};
    if (settings.lambdaSecretsKey)
      throw new ArchiveError(
        `the archive carries its secrets key (fingerprint ${source}), but LAMBDA_SECRETS_KEY is another key (${here}): ` +
          'unset it to use the archive’s key, or set it to that key',
      );
    if (current) throw new ArchiveError(`${path} holds another secrets key (${here}) than the archive’s (${source})`);
    return { write: { path, key: await readBytes(reader.open(SECRETS_KEY_ENTRY)) } };
  }
  if (here === source) return {};
  return {
    warning:
      `values sealed at the source (lambda secrets, scheduler webhook secrets) use the secrets key ${source}, ` +
      `and ${here ? `this store's key is ${here}` : 'this store has no key yet'}: they will not open here. ` +
      `Give this store the source's key (LAMBDA_SECRETS_KEY, or the source's ${SECRETS_KEY_FILE} in DATA_DIR) before serving, ` +
      'or export again with --include-secrets-key.',
  };
}

async function writeKeyFile(path: string, key: Buffer): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const handle = await open(path, 'wx', 0o600);
  try {
    await handle.write(key);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Loads one table file into the transaction, in batches, hashing it again on the way: the file
 * must still be the one verified (a changed file fails the load, so the transaction rolls back).
 */
async function loadTable(
  reader: ArchiveReader,
  table: ArchiveTable,
  insert: (rows: ArchiveValue[][]) => Promise<void>,
): Promise<number> {
  const columns = table.columns.map((column) => column.name);
  const hash = createHash('sha256');
  let batch: ArchiveValue[][] = [];
  let batchBytes = 0;
  let rows = 0;
  for await (const line of lines(reader.open(table.file), hash)) {
    batch.push(decodeRow(line, columns));
    batchBytes += line.length;
    rows++;
    if (batch.length >= INSERT_BATCH || batchBytes >= INSERT_BATCH_BYTES) {
      await insert(batch);
      batch = [];
      batchBytes = 0;
    }
  }
  if (batch.length > 0) await insert(batch);
  if (hash.digest('hex') !== table.sha256) throw new ArchiveError(`${table.file} changed during the import`);
  return rows;
}

/**
 * Loads an archive into an empty store. In order: the manifest and the schema check, every file
 * verified, the target checked empty and its secrets key, the migrations (of the archive's owners),
 * the blobs, then every table in one transaction with the serial counters set. A failure before the
 * transaction commits leaves no row; blobs put by this import are deleted again (the store is
 * content-addressed, so one left behind by a crash is harmless and unreferenced), and so is a key
 * file it wrote. Only the schema stays, which a second import accepts as empty.
 */
export async function importArchive(options: ImportOptions): Promise<ImportSummary> {
  const { settings } = options;
  const reader = await openArchiveReader(options.from);
  if (!reader.files.has(MANIFEST_FILE))
    throw new ArchiveError(`${options.from} has no ${MANIFEST_FILE}: it is not an archive, or an incomplete one`);
  const manifest = parseManifest(await reader.text(MANIFEST_FILE));
  checkSchema(manifest, options.migrationSets);
  const blobs = await verify(reader, manifest);
  const keyPlan = await planSecretsKey(reader, manifest, settings);
  const owners = options.migrationSets.filter((set) => Object.hasOwn(manifest.migrations, set.owner));
  const seeded = await seededRows(options.migrationSets);

  const store = await openStore(settings);
  let target: LoadTarget | undefined;
  const putBlobs: string[] = [];
  let wroteKey: string | undefined;
  let committed = false;
  try {
    target = settings.databaseUrl
      ? await openPostgresTarget(settings.databaseUrl)
      : openSqliteTarget(join(resolve(settings.dataDir), 'stratus.db'));
    const applied = await target.migrations();
    for (const [owner, names] of Object.entries(applied)) {
      const archived = manifest.migrations[owner];
      if (archived && names.some((name) => !archived.includes(name)))
        throw new ArchiveError(
          `the target store has migrations of ${owner} the archive lacks: it is from a newer build`,
        );
    }
    const occupied = await nonEmptyTables(target, seeded);
    if (occupied.length > 0)
      throw new ArchiveError(
        `the target store is not empty: ${occupied.join(', ')}. ` +
          'Import into a new store: an empty DATA_DIR, or an empty PostgreSQL database or schema (DATABASE_URL).',
      );

    await migrate(store.sql.database, owners);
    const shapes = new Map((await target.tables()).map((shape) => [shape.name, shape]));
    for (const table of manifest.tables) {
      const shape = shapes.get(table.name);
      const wanted = table.columns.map((column) => column.name).sort();
      const have = shape?.columns.map((column) => column.name).sort();
      if (!have || have.join() !== wanted.join())
        throw new ArchiveError(
          `table ${table.name} of the archive ${have ? `has the columns ${wanted.join(', ')}, here ${have.join(', ')}` : 'does not exist here'}`,
        );
    }

    if (keyPlan.write) {
      await writeKeyFile(keyPlan.write.path, keyPlan.write.key);
      wroteKey = keyPlan.write.path;
    }
    for (const [sha256, size] of [...blobs].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (await store.blobs.stat(sha256)) continue;
      await store.blobs.put(reader.open(blobEntry(sha256)), { expectedSha256: sha256, sizeHint: size });
      putBlobs.push(sha256);
    }

    let rows = 0;
    const byName = new Map(manifest.tables.map((table) => [table.name, table]));
    const order = loadOrder(manifest.tables.map((table) => shapes.get(table.name)!));
    await target.transaction(async (loader) => {
      for (const shape of order) {
        const table = byName.get(shape.name)!;
        const columns = table.columns.map((column) => column.name);
        if (seeded.has(shape.name)) await loader.clear(shape);
        try {
          rows += await loadTable(reader, table, (batch) => loader.insert(shape, columns, batch));
        } catch (error) {
          if (error instanceof ArchiveError) throw error;
          throw new ArchiveError(`loading ${table.name} failed: ${(error as Error).message}`);
        }
      }
      // Every serial counter, including those of tables the archive has no counter for: rows
      // came with their numbers, and the next one given must be past them.
      for (const shape of order)
        if (shape.serialColumn) await loader.setNextSerial(shape, byName.get(shape.name)!.serial?.next ?? 1);
    });
    committed = true;
    // PostgreSQL's autovacuum would notice the new rows only later: plan with them from the start.
    await store.sql.database.analyze(order.map((shape) => shape.name)).catch(() => {});
    const notes: string[] = [];
    if (wroteKey) {
      notes.push(`wrote the archive's secrets key to ${wroteKey}`);
      if (settings.databaseUrl)
        notes.push(
          'every instance serving this PostgreSQL store needs that key: set LAMBDA_SECRETS_KEY to its base64 on each of them',
        );
    }
    return { manifest, rows, warnings: keyPlan.warning ? [keyPlan.warning] : [], notes };
  } catch (error) {
    // Undone only while the target is seen to hold no rows: a commit whose answer was lost (the
    // connection dropped) may have happened, and its rows need their blobs and key.
    const unloaded =
      !committed &&
      target !== undefined &&
      (await nonEmptyTables(target, seeded).then(
        (t) => t.length === 0,
        () => false,
      ));
    if (unloaded) {
      for (const sha256 of putBlobs) await store.blobs.delete(sha256).catch(() => false);
      if (wroteKey) await rm(wroteKey, { force: true }).catch(() => {});
    }
    throw error;
  } finally {
    await target?.close();
    await store.close();
  }
}
