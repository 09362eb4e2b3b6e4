import { createHash } from 'node:crypto';
import { HttpError } from '../../../core/errors.ts';
import type { SqlConnection } from '../../../store/db.ts';
import { caughtUp, type Notifier } from '../../../store/notifier/types.ts';
import { BODY_LIMIT } from '../body.ts';
import { DocdbErrors } from '../errors.ts';
import { applyDefaults, unixNanoNow, usesAuto } from '../query/defaults.ts';
import {
  MAX_NESTING,
  nestedDeeperThan,
  parseJson,
  stringifyJson,
  isJsonObject,
  type JsonObject,
  type JsonValue,
} from '../../../core/json.ts';
import { encodeKey } from '../query/order.ts';
import { all, first, run, type Work } from '../../../store/sql-work.ts';
import { FindAnswers, type CollectionAnswers } from './answers.ts';
import type { SqlColumn, SqlDatabase, SqlSyntax } from '../../../store/sql/types.ts';

export interface IndexRecord {
  name: string;
  type: 'map' | 'btree';
  field?: string;
  fields?: string[];
  sparse: boolean;
  unique: boolean;
}

export interface IndexInfo {
  id: number;
  name: string;
  type: 'map' | 'btree';
  /** map: the field; btree: the fields as given (`-` included). */
  fields: string[];
  /** Field names without `-`. */
  keyFields: string[];
  descending: boolean[];
  sparse: boolean;
  unique: boolean;
}

export interface CollectionInfo {
  id: number;
  databaseId: string;
  name: string;
  defaults: JsonObject | null;
  indexes: IndexInfo[];
}

export interface CollectionRecord {
  name: string;
  total: number;
  indexes: number;
  defaults: JsonObject | null;
}

export interface StoredDocument {
  seq: number;
  body: string;
}

export type Source =
  | { kind: 'scan' }
  | { kind: 'map'; index: IndexInfo; key: Buffer }
  | { kind: 'btree'; index: IndexInfo; from: Buffer | null; to: Buffer | null; reverse: boolean };

/** The outcome of one document of a write batch: its stored text, or why it was rejected. */
export type WriteOutcome = { ok: true; text: string; seq: number; changed: boolean } | { ok: false; error: HttpError };

export const DEFAULT_DEFAULTS: JsonObject = { id: 'uuid()' };
/** Largest stored document, in bytes of JSON (the per-document limit of the insert endpoints). */
const DOCUMENT_LIMIT = BODY_LIMIT;
const COLLECTIONS_CHANGED_TOPIC = 'docdb.collections.changed';
const MAX_CACHED_COLLECTIONS = 10_000;
const collectionKey = (databaseId: string, name: string) => `${databaseId}/${name}`;
const READ_BATCH = 1000;

/** Documents a collection gains (through one instance) before the planner's statistics are refreshed. */
const STATISTICS_AFTER_ROWS = 10_000;
/**
 * Bodies up to this many bytes come with their batch; a larger one is read on its own when the
 * traversal reaches it, so a batch holds at most READ_BATCH × INLINE_BODY_BYTES of documents.
 */
const INLINE_BODY_BYTES = 16 * 1024;
/** Batches of at most this many rows read their bodies sized without asking the collection's size. */
const SIZED_AT_ONCE_ROWS = 16;

function entryTable(index: IndexInfo): string {
  return index.unique ? 'docdb_unique_entries' : 'docdb_index_entries';
}

export function indexRecord(index: IndexInfo): IndexRecord {
  return index.type === 'map'
    ? { field: index.fields[0]!, name: index.name, sparse: index.sparse, type: 'map', unique: index.unique }
    : { fields: index.fields, name: index.name, sparse: index.sparse, type: 'btree', unique: index.unique };
}

function keyText(value: JsonValue): string {
  return typeof value === 'string' ? value : stringifyJson(value);
}

/*
 * Index entries are rows of a database index, which PostgreSQL limits to about 2.7 KB per entry
 * (an incompressible longer key is an error there). A map key only needs equality, so a long one
 * is stored as its first MAP_KEY_INLINE bytes plus its SHA-256: longer than any inline key, so the
 * two forms never meet, and as distinct as the values. A btree key must keep its order, so it
 * cannot be shortened; one longer than BTREE_KEY_MAX is refused (on both databases alike).
 */
const MAP_KEY_INLINE = 1024;
const BTREE_KEY_MAX = 2048;

/** The form a map key is stored and looked up in. */
export function mapStoredKey(key: Buffer): Buffer {
  if (key.length <= MAP_KEY_INLINE) return key;
  return Buffer.concat([key.subarray(0, MAP_KEY_INLINE), createHash('sha256').update(key).digest()]);
}

/** Why a document cannot enter an index; the prefix (`index add '<name>': `) is added by the caller. */
class IndexRejection {
  constructor(
    readonly reason: string,
    /** Unique conflicts read differently from missing or unsupported values. */
    readonly kind: 'value' | 'conflict',
  ) {}
}

/** The index keys of one document: none when a sparse index skips it. */
export function indexKeys(index: IndexInfo, document: JsonObject): Buffer[] | IndexRejection {
  if (index.type === 'map') {
    const field = index.keyFields[0]!;
    const value = Object.hasOwn(document, field) ? document[field] : undefined;
    if (value === undefined || (value === null && index.sparse)) {
      return index.sparse ? [] : new IndexRejection(`field \`${field}\` is indexed and mandatory`, 'value');
    }
    if (typeof value === 'string') return [mapStoredKey(encodeKey([value], [false]))];
    if (Array.isArray(value) && value.every((element) => typeof element === 'string')) {
      return [...new Set(value as string[])].map((element) => mapStoredKey(encodeKey([element], [false])));
    }
    return new IndexRejection('type not supported', 'value');
  }
  const values: JsonValue[] = [];
  for (const field of index.keyFields) {
    if (!Object.hasOwn(document, field))
      return index.sparse ? [] : new IndexRejection(`field '${field}' not defined`, 'value');
    values.push(document[field]!);
  }
  const key = encodeKey(values, index.descending);
  if (key.length > BTREE_KEY_MAX) return new IndexRejection(`key too long (more than ${BTREE_KEY_MAX} bytes)`, 'value');
  return [key];
}

/** `keyNumber`: which of the document's keys conflicts (a multi-key map entry names its element). */
function conflictReason(index: IndexInfo, document: JsonObject, keyNumber = 0): string {
  if (index.type === 'map') {
    const field = index.keyFields[0]!;
    const value = document[field] ?? null;
    const key = Array.isArray(value) ? ([...new Set(value)][keyNumber] ?? null) : value;
    return `index conflict: field '${field}' with value '${keyText(key)}'`;
  }
  const parts = index.fields.map((field, i) => `${field}:${keyText(document[index.keyFields[i]!] ?? null)}`);
  return `key (${parts.join(',')}) already exists`;
}

/** A value of an insert batch as it would be stored, with what can be known of it without the database. */
interface Candidate {
  /** The document with its defaults; null when the value is not a storable object (`refused` says why). */
  document: JsonObject | null;
  /** Its keys in each index, in index order, up to the index that refuses it (all when none does). */
  keys: Buffer[][];
  /**
   * The same keys as strings for unique indexes (null for the others), made once: the batch's
   * unique checks look each key up three times (what is held, judge, hold).
   */
  keyTexts: (string[] | null)[];
  /** Why it cannot be stored, known without the database: not an object, too deep, a value an index refuses. */
  refused: HttpError | null;
}

/**
 * The batch's values with their defaults and keys, the `auto()` counter numbering them from
 * `counter + 1` in order; with `stopOnError`, none after the first refused one.
 */
function prepareDocuments(
  values: readonly JsonValue[],
  defaults: JsonObject | null,
  indexes: readonly IndexInfo[],
  counter: number,
  stopOnError: boolean,
): Candidate[] {
  const candidates: Candidate[] = [];
  // One sources object for the batch (applyDefaults calls `auto` synchronously), not a closure
  // per document: under the loader every closure made also costs a property definition.
  let current = 0;
  const sources = { auto: () => current, now: unixNanoNow };
  for (const [i, value] of values.entries()) {
    if (!isJsonObject(value) || nestedDeeperThan(value, MAX_NESTING)) {
      const refused = isJsonObject(value) ? DocdbErrors.documentTooDeep(MAX_NESTING) : DocdbErrors.documentNotObject();
      candidates.push({ document: null, keys: [], keyTexts: [], refused });
      if (stopOnError) break;
      continue;
    }
    current = counter + i + 1;
    const document = defaults === null ? value : applyDefaults(value, defaults, sources);
    const keys: Buffer[][] = [];
    const keyTexts: (string[] | null)[] = [];
    let refused: HttpError | null = null;
    for (const index of indexes) {
      const indexed = indexKeys(index, document);
      if (indexed instanceof IndexRejection) {
        refused = DocdbErrors.indexRejectsDocument(index.name, indexed.reason);
        break;
      }
      keys.push(indexed);
      keyTexts.push(index.unique ? indexed.map(keyString) : null);
    }
    candidates.push({ document, keys, keyTexts, refused });
    if (refused && stopOnError) break;
  }
  return candidates;
}

/** A key as a string for sets (each byte one character). */
const keyString = (key: Buffer) => key.toString('latin1');

/** For each unique index (by id), which of the candidates' keys stored documents hold already. */
function* heldUniqueKeys(
  syntax: SqlSyntax,
  indexes: readonly IndexInfo[],
  candidates: readonly Candidate[],
): Work<Map<number, Set<string>>> {
  const held = new Map<number, Set<string>>();
  for (const [i, index] of indexes.entries()) {
    if (!index.unique) continue;
    const taken = new Set<string>();
    held.set(index.id, taken);
    const wanted = new Map<string, Buffer>();
    for (const candidate of candidates) {
      const keys = candidate.keys[i];
      if (keys === undefined) continue;
      const texts = candidate.keyTexts[i]!;
      for (let k = 0; k < keys.length; k++) wanted.set(texts[k]!, keys[k]!);
    }
    const keys = [...wanted.values()].map((key) => [key]);
    for (const { source, params } of syntax.rowSources([KEY_COLUMN], keys)) {
      // One primary-key probe per key, whatever the size of the index: written as a subquery per
      // key, which PostgreSQL cannot turn into a join (as a join, a batch of keys against a
      // mid-sized table got a scan of the whole table).
      const rows = yield* all<{ key: Buffer }>(
        `select v.key from ${source} where (select 1 from docdb_unique_entries e where e.index_id = ? and e.key = v.key) is not null`,
        ...params,
        index.id,
      );
      for (const row of rows) taken.add(keyString(row.key));
    }
  }
  return held;
}

/**
 * Why `candidate` cannot be stored, checked in the order of inserting it alone: index by index,
 * a unique key already held (`held`: by stored documents and the batch's accepted ones), then a
 * value the next index refuses. Null when it can.
 */
function judge(indexes: readonly IndexInfo[], candidate: Candidate, held: Map<number, Set<string>>): HttpError | null {
  const document = candidate.document;
  if (document === null) return candidate.refused;
  for (let i = 0; i < candidate.keys.length; i++) {
    const texts = candidate.keyTexts[i];
    if (!texts) continue;
    const index = indexes[i]!;
    const taken = held.get(index.id)!;
    for (let keyNumber = 0; keyNumber < texts.length; keyNumber++)
      if (taken.has(texts[keyNumber]!))
        return DocdbErrors.indexRejectsDocument(index.name, conflictReason(index, document, keyNumber));
  }
  return candidate.refused;
}

/** Marks an accepted candidate's unique keys as held, for the documents after it. */
function hold(indexes: readonly IndexInfo[], candidate: Candidate, held: Map<number, Set<string>>): void {
  for (let i = 0; i < candidate.keys.length; i++) {
    const texts = candidate.keyTexts[i];
    if (texts) for (const text of texts) held.get(indexes[i]!.id)!.add(text);
  }
}

const KEY_COLUMN: SqlColumn = { name: 'key', type: 'blob' };
const BODY_COLUMNS: readonly SqlColumn[] = [
  { name: 'n', type: 'bigint' },
  { name: 'body', type: 'text' },
];
const ENTRY_COLUMNS: readonly SqlColumn[] = [
  { name: 'index_id', type: 'bigint' },
  KEY_COLUMN,
  { name: 'seq', type: 'bigint' },
];

/** Inserts the bodies in order; their seqs, in the same order. */
function* insertDocuments(syntax: SqlSyntax, collectionId: number, texts: readonly string[]): Work<number[]> {
  const seqs: number[] = [];
  const sources = syntax.rowSources(
    BODY_COLUMNS,
    texts.map((text, n) => [n, text]),
  );
  for (const { source, params } of sources) {
    // Each row takes the next number as it is inserted, in the order the select gives them;
    // `returning` promises no order, so the numbers are sorted back into it.
    const rows = yield* all<{ seq: number }>(
      `insert into docdb_documents (collection_id, body) select ?, v.body from ${source} order by v.n returning seq`,
      collectionId,
      ...params,
    );
    seqs.push(...rows.map((row) => Number(row.seq)).sort((a, b) => a - b));
  }
  return seqs;
}

/** Inserts the index entries of documents (`keys[d][i]`: document d's keys in index i) stored under `seqs`. */
function* insertEntries(
  syntax: SqlSyntax,
  indexes: readonly IndexInfo[],
  keys: readonly Buffer[][][],
  seqs: readonly number[],
): Work<void> {
  for (const unique of [true, false]) {
    const rows: unknown[][] = [];
    for (const [d, documentKeys] of keys.entries())
      for (const [i, index] of indexes.entries())
        if (index.unique === unique) for (const key of documentKeys[i]!) rows.push([index.id, key, seqs[d]]);
    const table = unique ? 'docdb_unique_entries' : 'docdb_index_entries';
    for (const { source, params } of syntax.rowSources(ENTRY_COLUMNS, rows))
      yield* run(`insert into ${table} (index_id, key, seq) select v.index_id, v.key, v.seq from ${source}`, ...params);
  }
}

interface CollectionRow {
  id: number;
  database_id: string;
  name: string;
  defaults: string | null;
  auto_counter: number;
  document_count: number;
}

function parseDefinition(row: { id: number; name: string; definition: string }): IndexInfo {
  const definition = JSON.parse(row.definition) as {
    type: 'map' | 'btree';
    fields: string[];
    sparse: boolean;
    unique: boolean;
  };
  return {
    id: Number(row.id),
    name: row.name,
    type: definition.type,
    fields: definition.fields,
    keyFields: definition.fields.map((f) => (definition.type === 'btree' && f.startsWith('-') ? f.slice(1) : f)),
    descending: definition.fields.map((f) => definition.type === 'btree' && f.startsWith('-')),
    sparse: definition.sparse,
    unique: definition.unique,
  };
}

/**
 * Collections, indexes and documents on either database: the service's only door to those tables
 * (`docdb_collections`, `docdb_indexes`, `docdb_documents` and the two index entry tables). Writes
 * to one collection are serialized: on PostgreSQL each write transaction first locks the
 * collection row, which also makes the unique checks exact across instances (the entry tables'
 * keys stay the last guard); on SQLite the single connection serializes them.
 */
export class DocumentStore {
  readonly sql: SqlDatabase;
  /**
   * Collection definitions (id, defaults, indexes) by database and name, so a lookup costs no
   * query. Writes never trust it: they re-read defaults and indexes under the collection lock.
   * Every change drops the entry here and, through the notifier, on every other instance.
   */
  private readonly collections = new Map<string, CollectionInfo>();
  /** Documents inserted per collection through this instance: since the last analysis, and before it. */
  private readonly growth = new Map<number, { pending: number; known: number }>();
  private analyzing: Promise<void> | undefined;
  /** Bumped by every change and drop, so a load that raced one is not cached. */
  private collectionChanges = 0;
  private readonly unsubscribe: (() => void)[];
  /** Answers of small finds, dropped by every write to their collection (answers.ts). */
  readonly answers: FindAnswers;

  constructor(
    connection: SqlConnection,
    private readonly notifier: Notifier,
  ) {
    this.sql = connection.database;
    this.answers = FindAnswers.of(this.sql, notifier);
    this.unsubscribe = [
      notifier.subscribe(COLLECTIONS_CHANGED_TOPIC, (message) => {
        try {
          const { database, name } = JSON.parse(message) as { database: string; name: string };
          this.collectionChanges++;
          this.collections.delete(collectionKey(database, name));
        } catch {
          this.forgetCollections();
        }
      }),
      notifier.onResync(() => this.forgetCollections()),
    ];
  }

  close(): void {
    for (const stop of this.unsubscribe) stop();
    this.forgetCollections();
    FindAnswers.release(this.sql);
  }

  /** Runs a write to the collection: its cached find answers are dropped around it (answers.ts). */
  private changing<T>(databaseId: string, name: string, write: () => Promise<T>): Promise<T> {
    return this.answers.changing(collectionKey(databaseId, name), write);
  }

  private forgetCollections(): void {
    this.collectionChanges++;
    this.collections.clear();
  }

  /** After a change to a collection's definition: forget it here at once, and everywhere soon. */
  private async changed(databaseId: string, name: string): Promise<void> {
    this.collectionChanges++;
    this.collections.delete(collectionKey(databaseId, name));
    await this.notifier.publish(COLLECTIONS_CHANGED_TOPIC, JSON.stringify({ database: databaseId, name }));
  }

  private *lockCollection(collectionId: number): Work<CollectionRow | undefined> {
    const lock = this.sql.syntax.forUpdate;
    return yield* first<CollectionRow>(
      `select id, database_id, name, defaults, auto_counter, document_count from docdb_collections where id = ?${lock}`,
      collectionId,
    );
  }

  /** Locks the collection for a write (404 when it is gone) and reads its indexes under the lock. */
  private *lockedIndexes(collection: CollectionInfo): Work<IndexInfo[]> {
    if (!(yield* this.lockCollection(collection.id))) throw DocdbErrors.collectionNotFound();
    return yield* this.loadIndexes(collection.id);
  }

  private *documentRow(collection: CollectionInfo, seq: number): Work<{ body: string } | undefined> {
    return yield* first<{ body: string }>(
      'select body from docdb_documents where seq = ? and collection_id = ?',
      seq,
      collection.id,
    );
  }

  private *loadIndexes(collectionId: number): Work<IndexInfo[]> {
    const rows = yield* all<{ id: number; name: string; definition: string }>(
      'select id, name, definition from docdb_indexes where collection_id = ? order by id',
      collectionId,
    );
    return rows.map(parseDefinition);
  }

  private *loadCollection(databaseId: string, name: string): Work<CollectionInfo | null> {
    const row = yield* first<CollectionRow>(
      'select id, database_id, name, defaults from docdb_collections where database_id = ? and name = ?',
      databaseId,
      name,
    );
    if (!row) return null;
    return {
      id: Number(row.id),
      databaseId,
      name: row.name,
      defaults: row.defaults === null ? null : (parseJson(row.defaults) as JsonObject),
      indexes: yield* this.loadIndexes(Number(row.id)),
    };
  }

  async getCollection(databaseId: string, name: string): Promise<CollectionInfo | null> {
    const key = collectionKey(databaseId, name);
    if (this.collections.has(key)) {
      // Scaled out, a hit counts once the notifier has applied every change announced before it.
      const cached = (await caughtUp(this.notifier)) ? this.collections.get(key) : undefined;
      if (cached) return cached;
    }
    const before = this.collectionChanges;
    const loaded = await this.sql.read(() => this.loadCollection(databaseId, name));
    // A load that raced a change may have read the old definition: used once, not cached.
    if (loaded && before === this.collectionChanges) {
      if (this.collections.size >= MAX_CACHED_COLLECTIONS) this.collections.clear();
      this.collections.set(key, loaded);
    }
    return loaded;
  }

  /** The collection's cached find answers now (answers.ts). */
  findAnswers(databaseId: string, name: string): Promise<CollectionAnswers> {
    return this.answers.answers(collectionKey(databaseId, name));
  }

  async listCollections(databaseId: string): Promise<CollectionRecord[]> {
    return this.sql.read(function* () {
      const rows = yield* all<{ name: string; defaults: string | null; document_count: number; indexes: number }>(
        'select c.name, c.defaults, c.document_count, (select count(*) from docdb_indexes i where i.collection_id = c.id) as indexes from docdb_collections c where c.database_id = ? order by c.id',
        databaseId,
      );
      return rows.map((row) => ({
        name: row.name,
        total: Number(row.document_count),
        indexes: Number(row.indexes),
        defaults: row.defaults === null ? null : (parseJson(row.defaults) as JsonObject),
      }));
    });
  }

  async collectionRecord(databaseId: string, name: string): Promise<CollectionRecord | null> {
    const found = await this.sql.read(function* () {
      return yield* first<{ name: string; defaults: string | null; document_count: number; indexes: number }>(
        'select c.name, c.defaults, c.document_count, (select count(*) from docdb_indexes i where i.collection_id = c.id) as indexes from docdb_collections c where c.database_id = ? and c.name = ?',
        databaseId,
        name,
      );
    });
    return found
      ? {
          name: found.name,
          total: Number(found.document_count),
          indexes: Number(found.indexes),
          defaults: found.defaults === null ? null : (parseJson(found.defaults) as JsonObject),
        }
      : null;
  }

  private *insertCollection(databaseId: string, name: string, defaults: JsonObject | null): Work<boolean> {
    const inserted = yield* run(
      'insert into docdb_collections (database_id, name, defaults) values (?, ?, ?) on conflict (database_id, name) do nothing',
      databaseId,
      name,
      defaults === null ? null : stringifyJson(defaults),
    );
    return inserted > 0;
  }

  /** Creates a collection; false when the name is taken. */
  async createCollection(databaseId: string, name: string, defaults: JsonObject | null): Promise<boolean> {
    return this.sql.write(() => this.insertCollection(databaseId, name, defaults));
  }

  /** The collection, created first with `defaults` when missing. */
  async ensureCollection(databaseId: string, name: string, defaults: JsonObject | null): Promise<CollectionInfo> {
    const existing = await this.getCollection(databaseId, name);
    if (existing) return existing;
    await this.sql.write(() => this.insertCollection(databaseId, name, defaults));
    const created = await this.getCollection(databaseId, name);
    if (!created) throw DocdbErrors.collectionNotFound();
    return created;
  }

  async dropCollection(databaseId: string, name: string): Promise<boolean> {
    const dropped = await this.changing(databaseId, name, () =>
      this.sql.write(function* () {
        return (yield* run('delete from docdb_collections where database_id = ? and name = ?', databaseId, name)) > 0;
      }),
    );
    if (dropped) await this.changed(databaseId, name);
    return dropped;
  }

  /** Merges into the defaults (README: Collections), creating the collection first when missing. */
  async setDefaults(databaseId: string, name: string, patch: JsonObject): Promise<JsonObject | null> {
    const work = function* (this: DocumentStore) {
      yield* this.insertCollection(databaseId, name, DEFAULT_DEFAULTS);
      const lock = this.sql.syntax.forUpdate;
      const row = yield* first<{ id: number; defaults: string | null }>(
        `select id, defaults from docdb_collections where database_id = ? and name = ?${lock}`,
        databaseId,
        name,
      );
      const merged: JsonObject = { ...(row?.defaults ? (parseJson(row.defaults) as JsonObject) : {}), ...patch };
      for (const key of Object.keys(merged)) if (merged[key] === null) delete merged[key];
      const result = Object.keys(merged).length > 0 ? merged : null;
      yield* run(
        'update docdb_collections set defaults = ? where id = ?',
        result === null ? null : stringifyJson(result),
        row!.id,
      );
      return result;
    };
    const result = await this.sql.write(() => work.call(this));
    await this.changed(databaseId, name);
    return result;
  }

  async size(collection: CollectionInfo): Promise<Record<string, number>> {
    const { syntax } = this.sql;
    return this.sql.read(function* () {
      const row = yield* first<{ document_count: number; document_bytes: number }>(
        'select document_count, document_bytes from docdb_collections where id = ?',
        collection.id,
      );
      const memory = Number(row?.document_bytes ?? 0);
      // Each stored row costs its body plus a rowid, a collection id and row header (~24 bytes).
      const result: Record<string, number> = { memory, disk: memory + Number(row?.document_count ?? 0) * 24 };
      for (const index of collection.indexes) {
        const sizes = yield* first<{ bytes: number | null; entries: number }>(
          `select sum(${syntax.byteLength('key')}) as bytes, count(*) as entries from ${entryTable(index)} where index_id = ?`,
          index.id,
        );
        // Key bytes plus the document reference and row overhead of each entry.
        const bytes = Number(sizes?.bytes ?? 0) + Number(sizes?.entries ?? 0) * 16;
        result[`index.${index.name}`] = bytes;
        result.disk! += bytes;
      }
      return result;
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Indexes

  /** Creates an index and builds it over the existing documents; nothing is created on failure. */
  async createIndex(
    collection: CollectionInfo,
    definition: { name: string; type: 'map' | 'btree'; fields: string[]; sparse: boolean; unique: boolean },
  ): Promise<IndexInfo> {
    const work = function* (this: DocumentStore) {
      yield* this.lockCollection(collection.id);
      const taken = yield* first(
        'select id from docdb_indexes where collection_id = ? and name = ?',
        collection.id,
        definition.name,
      );
      if (taken) throw DocdbErrors.indexExists(definition.name);
      const stored = JSON.stringify({
        type: definition.type,
        fields: definition.fields,
        sparse: definition.sparse,
        unique: definition.unique,
      });
      const inserted = yield* all<{ id: number }>(
        'insert into docdb_indexes (collection_id, name, definition) values (?, ?, ?) returning id',
        collection.id,
        definition.name,
        stored,
      );
      const index = parseDefinition({ id: Number(inserted[0]!.id), name: definition.name, definition: stored });
      const table = entryTable(index);
      let after = 0;
      for (;;) {
        const batch = yield* all<{ seq: number; body: string }>(
          'select seq, body from docdb_documents where collection_id = ? and seq > ? order by seq limit ?',
          collection.id,
          after,
          READ_BATCH,
        );
        for (const row of batch) {
          const document = parseJson(row.body) as JsonObject;
          const keys = indexKeys(index, document);
          if (keys instanceof IndexRejection) throw DocdbErrors.indexBuildFails(keys.reason, row.body);
          for (const [keyNumber, key] of keys.entries()) {
            if (index.unique) {
              const holder = yield* first(
                'select seq from docdb_unique_entries where index_id = ? and key = ?',
                index.id,
                key,
              );
              if (holder) throw DocdbErrors.indexBuildFails(conflictReason(index, document, keyNumber), row.body);
            }
            yield* run(`insert into ${table} (index_id, key, seq) values (?, ?, ?)`, index.id, key, Number(row.seq));
          }
        }
        if (batch.length < READ_BATCH) break;
        after = Number(batch[batch.length - 1]!.seq);
      }
      return index;
    };
    const index = await this.sql.write(() => work.call(this));
    await this.changed(collection.databaseId, collection.name);
    return index;
  }

  async dropIndex(collection: CollectionInfo, name: string): Promise<boolean> {
    const dropped = await this.changing(collection.databaseId, collection.name, () =>
      this.sql.write(function* () {
        return (yield* run('delete from docdb_indexes where collection_id = ? and name = ?', collection.id, name)) > 0;
      }),
    );
    if (dropped) await this.changed(collection.databaseId, collection.name);
    return dropped;
  }

  // ---------------------------------------------------------------------------------------------
  // Writes

  /** Keys of `document` for every index, checked against the unique entries of other documents. */
  private *documentKeys(indexes: IndexInfo[], document: JsonObject, self: number | null): Work<Buffer[][] | HttpError> {
    const keysByIndex: Buffer[][] = [];
    for (const index of indexes) {
      const keys = indexKeys(index, document);
      if (keys instanceof IndexRejection) return DocdbErrors.indexRejectsDocument(index.name, keys.reason);
      if (index.unique) {
        for (const [keyNumber, key] of keys.entries()) {
          const holder = yield* first<{ seq: number }>(
            'select seq from docdb_unique_entries where index_id = ? and key = ?',
            index.id,
            key,
          );
          if (holder && Number(holder.seq) !== self)
            return DocdbErrors.indexRejectsDocument(index.name, conflictReason(index, document, keyNumber));
        }
      }
      keysByIndex.push(keys);
    }
    return keysByIndex;
  }

  private *addEntries(indexes: IndexInfo[], keysByIndex: Buffer[][], seq: number): Work<void> {
    for (const [i, index] of indexes.entries()) {
      const table = entryTable(index);
      for (const key of keysByIndex[i]!)
        yield* run(`insert into ${table} (index_id, key, seq) values (?, ?, ?)`, index.id, key, seq);
    }
  }

  private *removeEntries(indexes: IndexInfo[], seq: number): Work<void> {
    if (indexes.some((index) => index.unique)) yield* run('delete from docdb_unique_entries where seq = ?', seq);
    if (indexes.some((index) => !index.unique)) yield* run('delete from docdb_index_entries where seq = ?', seq);
  }

  /**
   * Inserts documents in order, each atomically with its index entries, in one transaction.
   * `stopOnError`: the first rejected document ends the batch (insert, insertFullduplex);
   * otherwise rejected documents are reported and the rest go on (insertStream).
   *
   * The batch costs a handful of statements, not a few per document (README: Storage): the
   * documents and their keys are worked out here, the unique keys already taken are read in one
   * query per unique index, each document is then judged in order exactly as if inserted one by
   * one (an earlier document of the batch holds its keys for the later ones), and the accepted
   * documents and their entries are written with multi-row inserts.
   */
  async insert(
    collection: CollectionInfo,
    documents: readonly JsonValue[],
    stopOnError: boolean,
  ): Promise<WriteOutcome[]> {
    const work = function* (this: DocumentStore) {
      const row = yield* this.lockCollection(collection.id);
      if (!row) throw DocdbErrors.collectionNotFound();
      const defaults = row.defaults === null ? null : (parseJson(row.defaults) as JsonObject);
      const indexes = yield* this.loadIndexes(collection.id);
      const generates = usesAuto(defaults);
      const start = Number(row.auto_counter);
      const candidates = prepareDocuments(documents, defaults, indexes, start, stopOnError);
      const held = yield* heldUniqueKeys(this.sql.syntax, indexes, candidates);
      const outcomes: (WriteOutcome | null)[] = [];
      const accepted: { candidate: Candidate; text: string; position: number }[] = [];
      // Every document the collection tries to insert takes a number (README: Defaults and generators).
      let tried = 0;
      for (const candidate of candidates) {
        tried++;
        const error = judge(indexes, candidate, held);
        if (error) {
          outcomes.push({ ok: false, error });
          if (stopOnError) break;
          continue;
        }
        hold(indexes, candidate, held);
        accepted.push({ candidate, text: stringifyJson(candidate.document!), position: outcomes.length });
        outcomes.push(null);
      }
      const seqs = yield* insertDocuments(
        this.sql.syntax,
        collection.id,
        accepted.map((a) => a.text),
      );
      yield* insertEntries(
        this.sql.syntax,
        indexes,
        accepted.map((a) => a.candidate.keys),
        seqs,
      );
      let bytes = 0;
      for (const [i, { text, position }] of accepted.entries()) {
        bytes += Buffer.byteLength(text);
        outcomes[position] = { ok: true, text, seq: seqs[i]!, changed: true };
      }
      if (accepted.length > 0 || generates || documents.length > 0) {
        yield* run(
          'update docdb_collections set auto_counter = ?, document_count = document_count + ?, document_bytes = document_bytes + ? where id = ?',
          start + tried,
          accepted.length,
          bytes,
          collection.id,
        );
      }
      return outcomes as WriteOutcome[];
    };
    const outcomes = await this.changing(collection.databaseId, collection.name, () =>
      this.sql.write(() => work.call(this)),
    );
    this.inserted(collection.id, outcomes.filter((outcome) => outcome.ok).length);
    return outcomes;
  }

  private inserted(collectionId: number, count: number): void {
    if (count === 0) return;
    const growth = this.growth.get(collectionId) ?? { pending: 0, known: 0 };
    growth.pending += count;
    this.growth.set(collectionId, growth);
  }

  /**
   * After an insert request: when this collection has grown by STATISTICS_AFTER_ROWS documents and
   * a tenth of its size at the last analysis, the planner's statistics are brought up to date before
   * the request ends (`SqlDatabase.analyze`). Shared tables hold every collection's documents and
   * entries, so a new collection's rows can be too few for autovacuum to look again, yet enough
   * for an ordered index read to be planned as a bitmap scan and a sort of every matching entry.
   */
  async insertsSettled(collectionId: number): Promise<void> {
    const growth = this.growth.get(collectionId);
    if (!growth || growth.pending < Math.max(STATISTICS_AFTER_ROWS, growth.known / 10)) return;
    // One analysis at a time: a request that finds one running waits for it, then looks again.
    while (this.analyzing) await this.analyzing;
    if (growth.pending < Math.max(STATISTICS_AFTER_ROWS, growth.known / 10)) return;
    const counted = growth.pending;
    let analyzed = false;
    // Only a help to the planner: a failure leaves the count as it was, to try again next time.
    this.analyzing = this.sql
      .analyze(['docdb_documents', 'docdb_index_entries', 'docdb_unique_entries'])
      .then(
        () => void (analyzed = true),
        () => undefined,
      )
      .finally(() => (this.analyzing = undefined));
    await this.analyzing;
    if (!analyzed) return;
    growth.known += counted;
    growth.pending -= counted;
  }

  /**
   * One write over the selected documents (by seq) that are still there, with the collection's
   * indexes locked: `each` writes one and gives its outcome and the bytes it adds to the
   * collection (a rejected outcome ends the batch); `total` then updates the collection's counters.
   */
  private async eachSelected(
    collection: CollectionInfo,
    seqs: readonly number[],
    each: (this: DocumentStore, indexes: IndexInfo[], seq: number, body: string) => Work<[WriteOutcome, number]>,
    total: (outcomes: WriteOutcome[], bytes: number) => Work<void>,
  ): Promise<WriteOutcome[]> {
    const work = function* (this: DocumentStore) {
      const indexes = yield* this.lockedIndexes(collection);
      const outcomes: WriteOutcome[] = [];
      let bytes = 0;
      for (const seq of seqs) {
        const row = yield* this.documentRow(collection, seq);
        if (!row) continue; // removed since it was selected
        const [outcome, added] = yield* each.call(this, indexes, seq, row.body);
        outcomes.push(outcome);
        if (!outcome.ok) break;
        bytes += added;
      }
      yield* total(outcomes, bytes);
      return outcomes;
    };
    return this.changing(collection.databaseId, collection.name, () => this.sql.write(() => work.call(this)));
  }

  /**
   * Applies `change` to each selected document (by seq), each atomically with its index entries;
   * the first rejected document ends the batch and is reported. `change` returns the new document
   * or null when it would not change.
   */
  async patch(
    collection: CollectionInfo,
    seqs: readonly number[],
    change: (document: JsonObject) => JsonObject | null,
  ): Promise<WriteOutcome[]> {
    return this.eachSelected(
      collection,
      seqs,
      function* (indexes, seq, body): Work<[WriteOutcome, number]> {
        const after = change(parseJson(body) as JsonObject);
        if (after === null) return [{ ok: true, text: body, seq, changed: false }, 0];
        const keys = yield* this.documentKeys(indexes, after, seq);
        if (keys instanceof HttpError) return [{ ok: false, error: keys }, 0];
        const text = stringifyJson(after);
        // The per-document limit of inserts holds for patched documents too.
        if (Buffer.byteLength(text) > DOCUMENT_LIMIT)
          return [{ ok: false, error: DocdbErrors.documentTooLarge(DOCUMENT_LIMIT) }, 0];
        yield* run('update docdb_documents set body = ? where seq = ?', text, seq);
        yield* this.removeEntries(indexes, seq);
        yield* this.addEntries(indexes, keys, seq);
        return [{ ok: true, text, seq, changed: true }, Buffer.byteLength(text) - Buffer.byteLength(body)];
      },
      function* (_outcomes, bytes) {
        if (bytes !== 0)
          yield* run(
            'update docdb_collections set document_bytes = document_bytes + ? where id = ?',
            bytes,
            collection.id,
          );
      },
    );
  }

  /** Removes the selected documents (by seq) with their index entries; returns what was removed. */
  async remove(collection: CollectionInfo, seqs: readonly number[]): Promise<WriteOutcome[]> {
    return this.eachSelected(
      collection,
      seqs,
      function* (indexes, seq, body): Work<[WriteOutcome, number]> {
        yield* this.removeEntries(indexes, seq);
        yield* run('delete from docdb_documents where seq = ?', seq);
        return [{ ok: true, text: body, seq, changed: true }, Buffer.byteLength(body)];
      },
      function* (outcomes, bytes) {
        if (outcomes.length > 0)
          yield* run(
            'update docdb_collections set document_count = document_count - ?, document_bytes = document_bytes - ? where id = ?',
            outcomes.length,
            bytes,
            collection.id,
          );
      },
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Reads

  /** The highest document seq now: traversals that write ignore documents inserted after it. */
  async lastSeq(): Promise<number> {
    const row = await this.sql.read(function* () {
      return yield* first<{ seq: number | null }>('select max(seq) as seq from docdb_documents');
    });
    return Number(row?.seq ?? 0);
  }

  /**
   * The source's candidates in traversal order, in batches read one short query at a time (no
   * transaction or cursor is held between batches). `firstBatch` sizes the first query, so a
   * `limit: 1` lookup reads one row.
   */
  async *traverse(
    collection: CollectionInfo,
    source: Source,
    firstBatch = READ_BATCH,
  ): AsyncGenerator<StoredDocument[], void, undefined> {
    let size = Math.max(1, Math.min(firstBatch, READ_BATCH));
    let afterSeq = 0;
    let afterKey: Buffer | null = null;
    const mapKey = source.kind === 'map' ? mapStoredKey(source.key) : null;
    // Large bodies stay behind (null) and are read one at a time (below). octet_length reads only
    // the stored size (SQLite's record header, PostgreSQL's TOAST pointer), not the text. A
    // collection holding less than a batch's worth of bytes cannot fill one, so it is not needed.
    const sizedBody = (column: string) =>
      `case when octet_length(${column}) <= ${INLINE_BODY_BYTES} then ${column} end as body`;
    const plainBody = (column: string) => `${column} as body`;
    for (;;) {
      const batchSize = size;
      const positionKey = afterKey;
      const positionSeq = afterSeq;
      const rows = await this.sql.read(function* () {
        // A small batch (a lookup) is read sized at once: one statement fewer than asking the
        // collection's size first, and a large body among so few rows costs one read more at most.
        const stored =
          batchSize <= SIZED_AT_ONCE_ROWS
            ? undefined
            : yield* first<{ bytes: number }>(
                'select document_bytes as bytes from docdb_collections where id = ?',
                collection.id,
              );
        const body =
          stored !== undefined && Number(stored.bytes ?? 0) <= READ_BATCH * INLINE_BODY_BYTES ? plainBody : sizedBody;
        if (source.kind === 'scan') {
          return yield* all<{ seq: number; body: string | null }>(
            `select seq, ${body('body')} from docdb_documents where collection_id = ? and seq > ? order by seq limit ?`,
            collection.id,
            positionSeq,
            batchSize,
          );
        }
        const table = entryTable(source.index);
        if (source.kind === 'map' && source.index.unique) {
          // One document at most: no ordering (it would cost SQLite a temporary b-tree per lookup).
          return yield* all<{ seq: number; body: string | null }>(
            `select e.seq, ${body('d.body')} from docdb_unique_entries e join docdb_documents d on d.seq = e.seq where e.index_id = ? and e.key = ?`,
            source.index.id,
            mapKey,
          );
        }
        if (source.kind === 'map') {
          return yield* all<{ seq: number; body: string | null }>(
            `select e.seq, ${body('d.body')} from ${table} e join docdb_documents d on d.seq = e.seq where e.index_id = ? and e.key = ? and e.seq > ? order by e.seq limit ?`,
            source.index.id,
            mapKey,
            positionSeq,
            batchSize,
          );
        }
        const conditions = ['e.index_id = ?'];
        const params: unknown[] = [source.index.id];
        if (positionKey !== null) {
          conditions.push(source.reverse ? '(e.key, e.seq) < (?, ?)' : '(e.key, e.seq) > (?, ?)');
          params.push(positionKey, positionSeq);
        }
        if (source.from) {
          conditions.push(source.reverse ? 'e.key > ?' : 'e.key >= ?');
          params.push(source.from);
        }
        if (source.to) {
          conditions.push(source.reverse ? 'e.key <= ?' : 'e.key < ?');
          params.push(source.to);
        }
        const direction = source.reverse ? 'desc' : 'asc';
        return yield* all<{ seq: number; body: string | null; key: Buffer }>(
          `select e.key, e.seq, ${body('d.body')} from ${table} e join docdb_documents d on d.seq = e.seq where ${conditions.join(' and ')} order by e.key ${direction}, e.seq ${direction} limit ?`,
          ...params,
          batchSize,
        );
      });
      if (rows.length === 0) return;
      const last = rows[rows.length - 1]!;
      afterSeq = Number(last.seq);
      if ('key' in last) afterKey = last.key as Buffer;
      let inline: StoredDocument[] = [];
      for (const row of rows) {
        if (row.body !== null) {
          inline.push({ seq: Number(row.seq), body: row.body });
          continue;
        }
        if (inline.length > 0) yield inline;
        inline = [];
        const seq = Number(row.seq);
        const large = await this.sql.read(function* () {
          return yield* first<{ body: string }>('select body from docdb_documents where seq = ?', seq);
        });
        // Removed since its batch was read: skipped, as if read a moment later.
        if (large) yield [{ seq, body: large.body }];
      }
      if (inline.length > 0) yield inline;
      // A unique map key has one document at most.
      if (rows.length < batchSize || (source.kind === 'map' && source.index.unique)) return;
      size = READ_BATCH;
    }
  }
}
