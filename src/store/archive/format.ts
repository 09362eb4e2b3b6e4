import type { SqlDialect } from '../sql/types.ts';

/**
 * The archive `stratus export` writes and `stratus import` reads (README.md in this folder): one
 * NDJSON file per table, the blobs those tables reference, and `manifest.json` describing both.
 */

export const ARCHIVE_FORMAT = 'stratus-archive';
export const ARCHIVE_FORMAT_VERSION = 1;
export const MANIFEST_FILE = 'manifest.json';
/** The secrets key, present only when the export was asked for it (`--include-secrets-key`). */
export const SECRETS_KEY_ENTRY = 'secrets/lambda-secrets.key';

export function tableEntry(table: string): string {
  return `tables/${table}.ndjson`;
}

/** Sharded by the first two hex digits, so a directory archive keeps its directories small. */
export function blobEntry(sha256: string): string {
  return `blobs/${sha256.slice(0, 2)}/${sha256}`;
}

const BLOB_ENTRY = /^blobs\/([0-9a-f]{2})\/([0-9a-f]{64})$/;

/** The hash a blob entry's name gives, or null when the name is not a blob entry's. */
export function blobOfEntry(name: string): string | null {
  const match = BLOB_ENTRY.exec(name);
  return match && match[2]!.startsWith(match[1]!) ? match[2]! : null;
}

/**
 * Tables whose rows never travel, and why. They belong to the running processes of one platform
 * (registrations, leases, locks in flight), to short-lived security windows, to schema state the
 * import rebuilds, or to the blob store itself (blobs travel as files). The import leaves them as
 * its migrations make them: empty, or holding the row a migration inserts (`kv_follower`).
 */
export const EXCLUDED_TABLES: ReadonlyMap<string, string> = new Map([
  ['stratus_migrations', 'schema state: listed as `migrations` in the manifest; the import applies them itself'],
  ['stratus_blobs', "the PostgreSQL blob store's own rows: blobs travel as files under blobs/"],
  ['stratus_blob_chunks', "the PostgreSQL blob store's content: blobs travel as files under blobs/"],
  ['stratus_blob_uploads', 'blob uploads in progress in the source process'],
  [
    'stratus_blob_candidates',
    'pins of writes in flight and deletions pending: only referenced blobs travel, with their references',
  ],
  ['stratus_blob_doomed', 'tombstones of blob deletions in progress'],
  ['stratus_instances', "the instance registry: heartbeats of the source's running processes"],
  ['stratus_instance_counters', 'statistics counters of running processes; they go with their instance'],
  ['lambda_ongoing', "invocations running in the source's processes, under their leases"],
  ['auth_sso_states', 'single sign-on logins in flight (minutes long)'],
  ['auth_sso_codes', 'one-time single sign-on hand-over codes (60 seconds long)'],
  ['auth_login_failures', 'failed-login throttling windows (minutes long)'],
  ['auth_credential_failures', 'failed API-key throttling windows (minutes long)'],
  ['kv_follower', 'the lease of the instance following a parent node; the import keeps the row its migration makes'],
]);

/** The blob store's reference table: the blobs an archive holds are exactly those it names. */
export const BLOB_REFS_TABLE = 'stratus_blob_refs';

export interface ArchiveColumn {
  readonly name: string;
  /** Its declared type in the source database, for readers of the manifest. */
  readonly type: string;
}

export interface ArchiveTable {
  readonly name: string;
  readonly file: string;
  readonly rows: number;
  readonly bytes: number;
  readonly sha256: string;
  readonly columns: readonly ArchiveColumn[];
  /**
   * The auto-numbered column (SQLite autoincrement, PostgreSQL serial) and the next number its
   * counter would have given, so that numbers of deleted rows are not given out again.
   */
  readonly serial?: { readonly column: string; readonly next: number };
}

export interface ArchiveManifest {
  readonly format: typeof ARCHIVE_FORMAT;
  readonly formatVersion: typeof ARCHIVE_FORMAT_VERSION;
  readonly stratusVersion: string;
  readonly createdAt: string;
  readonly source: { readonly dialect: SqlDialect };
  /** The migrations the source had applied, by owner, names sorted. */
  readonly migrations: Readonly<Record<string, readonly string[]>>;
  /** In load order: a table comes after the tables its foreign keys reference. */
  readonly tables: readonly ArchiveTable[];
  /** Tables the source holds whose rows were left out (EXCLUDED_TABLES), with why. */
  readonly excludedTables: readonly { readonly name: string; readonly reason: string }[];
  readonly blobs: { readonly count: number; readonly bytes: number };
  readonly secretsKey: {
    /** `keyFingerprint` of the source's secrets key; null when it had none. */
    readonly fingerprint: string | null;
    readonly included: boolean;
  };
}

/** A refused archive or store, with a message meant for the person running the command. */
export class ArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArchiveError';
  }
}

/** What a column holds once read from an archive (before a dialect binds it). */
export type ArchiveValue = null | string | number | boolean | bigint | Buffer;

type JsonScalar = null | string | number | boolean;
export type EncodedValue = JsonScalar | { $base64: string } | { $bigint: string } | { $float: string };

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * A database value as JSON. Scalars are themselves; what JSON cannot carry is an object with one
 * marker key: bytes `{"$base64": …}`, integers beyond ±2^53 `{"$bigint": "<decimal>"}`, and NaN and
 * the infinities `{"$float": "NaN"}`. A column never holds an object, so objects are always markers.
 */
export function encodeValue(value: unknown): EncodedValue {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : { $float: String(value) };
    case 'bigint':
      return value >= MIN_SAFE && value <= MAX_SAFE ? Number(value) : { $bigint: value.toString() };
  }
  if (value instanceof Uint8Array)
    return { $base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  throw new TypeError(`a value of type ${typeof value} cannot be archived`);
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const INTEGER = /^-?[0-9]+$/;
const FLOATS: Record<string, number> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity };

/** The value `encodeValue` gave; throws a plain Error naming what is wrong. */
export function decodeValue(json: unknown): ArchiveValue {
  if (json === null || typeof json === 'string' || typeof json === 'boolean') return json;
  if (typeof json === 'number') return json;
  if (typeof json === 'object' && !Array.isArray(json)) {
    const keys = Object.keys(json);
    const marker = (json as Record<string, unknown>)[keys[0] ?? ''];
    if (keys.length === 1 && typeof marker === 'string') {
      if (keys[0] === '$base64' && BASE64.test(marker) && marker.length % 4 === 0) return Buffer.from(marker, 'base64');
      if (keys[0] === '$bigint' && INTEGER.test(marker)) return BigInt(marker);
      if (keys[0] === '$float' && Object.hasOwn(FLOATS, marker)) return FLOATS[marker]!;
    }
  }
  throw new Error(`not an archived value: ${JSON.stringify(json).slice(0, 80)}`);
}

/** One NDJSON line of `table`: a JSON object with exactly the table's columns. */
export function decodeRow(line: string, columns: readonly string[]): ArchiveValue[] {
  const parsed: unknown = JSON.parse(line);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('a row is not an object');
  const row = parsed as Record<string, unknown>;
  const keys = Object.keys(row);
  if (keys.length !== columns.length || columns.some((column) => !Object.hasOwn(row, column)))
    throw new Error(`a row has the columns ${keys.join(', ')}; the table has ${columns.join(', ')}`);
  return columns.map((column) => decodeValue(row[column]));
}

const SHA256_HEX = /^[0-9a-f]{64}$/;
const NAME = /^[a-z_][a-z0-9_]*$/;

function fail(problem: string): never {
  throw new ArchiveError(`${MANIFEST_FILE} is not a Stratus archive manifest: ${problem}`);
}

function count(value: unknown, what: string): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) fail(`${what} is not a count`);
  return value as number;
}

/**
 * The manifest, checked field by field: an archive from elsewhere (or damaged) is refused here,
 * before anything reads its other files by the names it gives.
 */
export function parseManifest(text: string): ArchiveManifest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    fail(`not JSON (${(error as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null) fail('not an object');
  const m = parsed as Record<string, unknown>;
  if (m.format !== ARCHIVE_FORMAT) fail(`format is ${JSON.stringify(m.format)}, not "${ARCHIVE_FORMAT}"`);
  if (m.formatVersion !== ARCHIVE_FORMAT_VERSION)
    throw new ArchiveError(
      `the archive is in format version ${String(m.formatVersion)}; this build reads version ${ARCHIVE_FORMAT_VERSION}`,
    );
  if (typeof m.stratusVersion !== 'string' || typeof m.createdAt !== 'string') fail('no Stratus version or date');
  const source = m.source as { dialect?: unknown } | undefined;
  if (source?.dialect !== 'sqlite' && source?.dialect !== 'postgres') fail('the source dialect is unknown');
  const migrations: Record<string, string[]> = {};
  if (typeof m.migrations !== 'object' || m.migrations === null) fail('no migrations');
  for (const [owner, names] of Object.entries(m.migrations)) {
    if (!Array.isArray(names) || names.some((name) => typeof name !== 'string')) fail(`migrations of ${owner}`);
    migrations[owner] = names as string[];
  }
  if (!Array.isArray(m.tables)) fail('no tables');
  const seen = new Set<string>();
  const tables = (m.tables as unknown[]).map((value): ArchiveTable => {
    const t = value as Record<string, unknown>;
    if (typeof t.name !== 'string' || !NAME.test(t.name) || seen.has(t.name)) fail('a table name');
    seen.add(t.name);
    if (t.file !== tableEntry(t.name)) fail(`the file of table ${t.name}`);
    if (typeof t.sha256 !== 'string' || !SHA256_HEX.test(t.sha256)) fail(`the sha256 of table ${t.name}`);
    if (!Array.isArray(t.columns) || t.columns.length === 0) fail(`the columns of table ${t.name}`);
    const columns = (t.columns as unknown[]).map((c) => {
      const column = c as { name?: unknown; type?: unknown };
      if (typeof column.name !== 'string' || typeof column.type !== 'string') fail(`a column of table ${t.name}`);
      return { name: column.name, type: column.type };
    });
    let serial: ArchiveTable['serial'];
    if (t.serial !== undefined) {
      const s = t.serial as { column?: unknown; next?: unknown };
      if (typeof s.column !== 'string' || !columns.some((c) => c.name === s.column))
        fail(`the serial column of table ${t.name}`);
      serial = { column: s.column, next: count(s.next, `the serial counter of table ${t.name}`) };
    }
    return {
      name: t.name,
      file: t.file,
      rows: count(t.rows, `the row count of table ${t.name}`),
      bytes: count(t.bytes, `the size of table ${t.name}`),
      sha256: t.sha256,
      columns,
      ...(serial ? { serial } : {}),
    };
  });
  const blobs = m.blobs as { count?: unknown; bytes?: unknown } | undefined;
  const key = m.secretsKey as { fingerprint?: unknown; included?: unknown } | undefined;
  if (typeof key?.included !== 'boolean' || (key.fingerprint !== null && typeof key.fingerprint !== 'string'))
    fail('secretsKey');
  if (key.included && key.fingerprint === null) fail('secretsKey is included without a fingerprint');
  const excluded = Array.isArray(m.excludedTables) ? (m.excludedTables as { name: string; reason: string }[]) : [];
  return {
    format: ARCHIVE_FORMAT,
    formatVersion: ARCHIVE_FORMAT_VERSION,
    stratusVersion: m.stratusVersion,
    createdAt: m.createdAt,
    source: { dialect: source.dialect },
    migrations,
    tables,
    excludedTables: excluded,
    blobs: { count: count(blobs?.count, 'the blob count'), bytes: count(blobs?.bytes, 'the blob bytes') },
    secretsKey: { fingerprint: key.fingerprint, included: key.included },
  };
}
