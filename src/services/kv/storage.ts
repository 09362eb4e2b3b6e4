import type Database from 'better-sqlite3';
import { openSqlite, type DirectSqlite, type SqlConnection } from '../../store/db.ts';
import { encodeLine, type Command } from './commands.ts';

/**
 * The key-value node's own durable state, in a SQLite file of its own (`<DATA_DIR>/kv/kv.db`)
 * even when the platform runs on PostgreSQL: a node's copy is node-local by design, and the
 * replication tree, not a shared database, keeps nodes in step (kv.md §7).
 *
 * Every write runs through the store's group commit (`synchronous=FULL`): it is in SQLite's
 * write-ahead log, fsynced, before it is acknowledged, and one fsync serves a burst of writes.
 * SQLite checkpoints that log into the database file by itself (bounded growth, readers never
 * blocked in WAL mode). The replication log (`kv_log`), which lets a child resume from its last
 * `seq`, is trimmed to its newest entries by `trimLog`.
 */

const SCHEMA = [
  `create table if not exists kv_collections (ord integer primary key autoincrement, project text not null, name text not null, mark integer not null default 0, unique (project, name))`,
  // value null = the key is deleted; its row keeps the version and seq (kv.md §3: versions continue).
  `create table if not exists kv_keys (project text not null, collection text not null, key text not null, value text, version integer not null, seq integer not null, updated_at integer not null, mark integer not null default 0, primary key (project, collection, key)) without rowid`,
  `create table if not exists kv_log (id integer primary key autoincrement, seq integer, line text not null)`,
  `create index if not exists kv_log_seq on kv_log (seq) where seq is not null`,
  `create table if not exists kv_meta (name text primary key, value integer not null)`,
];

type Prepare = (sql: string) => Database.Statement;

export interface KeyEntry {
  key: string;
  /** Exact JSON text. */
  value: string;
  version: number;
  seq: number;
  /** Unix seconds of the last set. */
  updatedAt: number;
}

export type WriteOutcome = { seq: number; version: number; logId: number; command: Command };
export type Logged = { logId: number; command: Command };

interface KeyRow {
  value: string | null;
  version: number;
  seq: number;
}

/** The smallest string above every string that starts with `prefix` (code-point order), or null. */
export function prefixUpperBound(prefix: string): string | null {
  const points = [...prefix];
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!;
    if (last < 0x10ffff) {
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
      return points.join('') + String.fromCodePoint(next);
    }
  }
  return null;
}

export class KvStorage {
  private readonly direct: DirectSqlite;
  private lastSeqCache: number;
  /** The highest log id trimmed away by this process (a reader behind it has a gap). */
  trimmedThrough = 0;

  private constructor(private readonly connection: SqlConnection) {
    this.direct = connection.direct!;
    this.lastSeqCache = this.meta('last_seq');
  }

  /** Opens (creating) the node's database file and loads its state. */
  static open(file: string, synchronous: 'FULL' | 'NORMAL'): KvStorage {
    const connection = openSqlite(file, { synchronous });
    const direct = connection.direct!;
    direct.run((prepare) => {
      for (const statement of SCHEMA) prepare(statement).run();
    }, { transaction: true });
    return new KvStorage(connection);
  }

  close(): Promise<void> {
    return this.connection.close();
  }

  /** Synchronous read; the node's connection is never held by Kysely, so it always runs. */
  private read<T>(work: (prepare: Prepare) => T): T {
    const result = this.direct.run(work);
    if (!result) throw new Error('kv storage busy');
    return result.value;
  }

  private meta(name: string): number {
    return this.read((prepare) => (prepare('select value from kv_meta where name = ?').get(name) as { value: number } | undefined)?.value ?? 0);
  }

  private static setMeta(prepare: Prepare, name: string, value: number): void {
    prepare('insert into kv_meta (name, value) values (?, ?) on conflict (name) do update set value = excluded.value').run(name, value);
  }

  /** The last key-write `seq` this node has (assigned as primary, or received from its parent). */
  get lastSeq(): number {
    return this.lastSeqCache;
  }

  /** The log holds every command after the one with this seq: a child at or above it can resume. */
  get logFloor(): number {
    return this.meta('log_floor');
  }

  /** True once this node's copy came from a complete baseline (or it is a primary with data). */
  get hasBaseline(): boolean {
    return this.meta('has_baseline') === 1;
  }

  get lastLogId(): number {
    return this.read((prepare) => (prepare('select coalesce(max(id), 0) as id from kv_log').get() as { id: number }).id);
  }

  // ---- reads -------------------------------------------------------------------------------

  collections(project: string): string[] {
    return this.read((prepare) => (prepare('select name from kv_collections where project = ? order by ord').all(project) as { name: string }[]).map((row) => row.name));
  }

  /** Every collection of every project, in creation order (the baseline's order). */
  allCollections(): { project: string; name: string }[] {
    return this.read((prepare) => prepare('select project, name from kv_collections order by ord').all() as { project: string; name: string }[]);
  }

  hasCollection(project: string, name: string): boolean {
    return this.read((prepare) => prepare('select 1 from kv_collections where project = ? and name = ?').get(project, name) !== undefined);
  }

  get(project: string, collection: string, key: string): KeyEntry | null {
    return this.read((prepare) => {
      const row = prepare('select value, version, seq, updated_at from kv_keys where project = ? and collection = ? and key = ? and value is not null').get(project, collection, key) as
        | { value: string; version: number; seq: number; updated_at: number }
        | undefined;
      return row ? { key, value: row.value, version: row.version, seq: row.seq, updatedAt: row.updated_at } : null;
    });
  }

  /** Live keys in code-point order (SQLite's BINARY collation compares UTF-8 bytes, the same order). */
  list(project: string, collection: string, options: { prefix: string; after?: string; limit: number }): KeyEntry[] {
    const { prefix, after, limit } = options;
    const from = after !== undefined && after >= prefix ? after : prefix;
    const inclusive = !(after !== undefined && after >= prefix);
    const upper = prefixUpperBound(prefix);
    return this.read((prepare) => {
      const rows = prepare(
        `select key, value, version, seq, updated_at from kv_keys where project = ? and collection = ? and value is not null and key ${inclusive ? '>=' : '>'} ?${upper === null ? '' : ' and key < ?'} order by key limit ?`,
      ).all(...(upper === null ? [project, collection, from, limit] : [project, collection, from, upper, limit])) as { key: string; value: string; version: number; seq: number; updated_at: number }[];
      return rows.filter((row) => row.key.startsWith(prefix)).map((row) => ({ key: row.key, value: row.value, version: row.version, seq: row.seq, updatedAt: row.updated_at }));
    });
  }

  /** Up to `limit` live keys of a collection after `afterKey`, for a baseline. */
  baselineBatch(project: string, collection: string, afterKey: string | null, limit: number): KeyEntry[] {
    return this.list(project, collection, afterKey === null ? { prefix: '', limit } : { prefix: '', after: afterKey, limit });
  }

  /** Per collection of `project`: live keys and the highest seq of its keys. */
  collectionStats(project: string): Record<string, { keys: number; lastSeq: number }> {
    return this.read((prepare) => {
      const stats: Record<string, { keys: number; lastSeq: number }> = {};
      for (const name of (prepare('select name from kv_collections where project = ? order by ord').all(project) as { name: string }[]).map((r) => r.name)) {
        const row = prepare('select count(value) as keys, coalesce(max(seq), 0) as last_seq from kv_keys where project = ? and collection = ?').get(project, name) as { keys: number; last_seq: number };
        stats[name] = { keys: row.keys, lastSeq: row.last_seq };
      }
      return stats;
    });
  }

  totals(): { collections: number; keys: number } {
    return this.read((prepare) => ({
      collections: (prepare('select count(*) as n from kv_collections').get() as { n: number }).n,
      keys: (prepare('select count(*) as n from kv_keys where value is not null').get() as { n: number }).n,
    }));
  }

  /**
   * Where a child that holds everything up to `since` can continue: the log id to read after, or
   * null when the log no longer (or never) holds what it misses, and it needs a baseline.
   */
  resumePoint(since: number, isReplica: boolean): number | null {
    // A replica's log only means something once a baseline gave it a starting point.
    if (isReplica && !this.hasBaseline) return null;
    const floor = this.logFloor;
    if (since < floor || since > this.lastSeq) return null;
    // At the floor: everything the log still holds (after what this process trimmed away).
    if (since === floor) return this.trimmedThrough;
    return this.read((prepare) => (prepare('select id from kv_log where seq = ?').get(since) as { id: number } | undefined)?.id ?? null);
  }

  /** Log entries after `afterId`, in order. */
  logAfter(afterId: number, limit: number): { id: number; line: string }[] {
    return this.read((prepare) => prepare('select id, line from kv_log where id > ? order by id limit ?').all(afterId, limit) as { id: number; line: string }[]);
  }

  // ---- writes as the primary (assigning seq and version) -------------------------------------

  createCollection(project: string, name: string, timestamp: number): Promise<Logged | null> {
    return this.direct.write((prepare) => {
      if (prepare('select 1 from kv_collections where project = ? and name = ?').get(project, name) !== undefined) return null;
      const command: Command = { type: 'CREATE_COLLECTION', project, collection: name, timestamp };
      KvStorage.applyState(prepare, command);
      return { logId: this.log(prepare, command), command };
    });
  }

  dropCollection(project: string, name: string, timestamp: number): Promise<Logged | null> {
    return this.direct.write((prepare) => {
      if (prepare('select 1 from kv_collections where project = ? and name = ?').get(project, name) === undefined) return null;
      const command: Command = { type: 'DROP_COLLECTION', project, collection: name, timestamp };
      KvStorage.applyState(prepare, command);
      return { logId: this.log(prepare, command), command };
    });
  }

  set(project: string, collection: string, key: string, value: string, timestamp: number): Promise<WriteOutcome | 'missing_collection'> {
    return this.direct.write((prepare) => {
      if (prepare('select 1 from kv_collections where project = ? and name = ?').get(project, collection) === undefined) return 'missing_collection';
      const row = prepare('select value, version, seq from kv_keys where project = ? and collection = ? and key = ?').get(project, collection, key) as KeyRow | undefined;
      const seq = this.nextSeq(prepare);
      const command: Command = { type: 'SET', project, collection, seq, key, value, version: (row?.version ?? 0) + 1, timestamp };
      KvStorage.applyState(prepare, command);
      return { seq, version: command.version, logId: this.log(prepare, command), command };
    });
  }

  delete(project: string, collection: string, key: string, timestamp: number): Promise<WriteOutcome | 'missing_collection' | 'not_found'> {
    return this.direct.write((prepare) => {
      if (prepare('select 1 from kv_collections where project = ? and name = ?').get(project, collection) === undefined) return 'missing_collection';
      const row = prepare('select value, version, seq from kv_keys where project = ? and collection = ? and key = ?').get(project, collection, key) as KeyRow | undefined;
      if (!row || row.value === null) return 'not_found';
      const seq = this.nextSeq(prepare);
      const command: Command = { type: 'DELETE', project, collection, seq, key, version: row.version + 1, timestamp };
      KvStorage.applyState(prepare, command);
      return { seq, version: command.version, logId: this.log(prepare, command), command };
    });
  }

  private nextSeq(prepare: Prepare): number {
    const seq = this.lastSeqCache + 1;
    KvStorage.setMeta(prepare, 'last_seq', seq);
    KvStorage.setMeta(prepare, 'has_baseline', 1);
    this.lastSeqCache = seq;
    return seq;
  }

  private log(prepare: Prepare, command: Command): number {
    const seq = command.type === 'SET' || command.type === 'DELETE' ? command.seq : null;
    return Number(prepare('insert into kv_log (seq, line) values (?, ?)').run(seq, encodeLine(command)).lastInsertRowid);
  }

  // ---- writes as a replica (seq and version come from the parent) ----------------------------

  /**
   * A live command from the parent's stream: applied when newer than what the key has (and its
   * collection exists), and always logged, so this node's children receive the stream unbroken.
   */
  applyFromParent(command: Command): Promise<number> {
    return this.direct.write((prepare) => {
      KvStorage.applyState(prepare, command);
      if ((command.type === 'SET' || command.type === 'DELETE') && command.seq > this.lastSeqCache) {
        KvStorage.setMeta(prepare, 'last_seq', command.seq);
        this.lastSeqCache = command.seq;
      }
      return this.log(prepare, command);
    });
  }

  /** A write this replica forwarded and its parent accepted: seen here at once, not logged (the stream brings it). */
  applyForwarded(command: Command): Promise<void> {
    return this.direct.write((prepare) => {
      KvStorage.applyState(prepare, command);
    });
  }

  private static applyState(prepare: Prepare, command: Command): void {
    const { project, collection } = command;
    switch (command.type) {
      case 'CREATE_COLLECTION':
        prepare('insert into kv_collections (project, name) values (?, ?) on conflict (project, name) do nothing').run(project, collection);
        return;
      case 'DROP_COLLECTION':
        prepare('delete from kv_keys where project = ? and collection = ?').run(project, collection);
        prepare('delete from kv_collections where project = ? and name = ?').run(project, collection);
        return;
      case 'SET':
      case 'DELETE': {
        if (prepare('select 1 from kv_collections where project = ? and name = ?').get(project, collection) === undefined) return;
        const value = command.type === 'SET' ? command.value : null;
        // Only a newer write (higher seq) changes a key; replays and late duplicates change nothing.
        prepare(
          `insert into kv_keys (project, collection, key, value, version, seq, updated_at) values (?, ?, ?, ?, ?, ?, ?)
           on conflict (project, collection, key) do update set value = excluded.value, version = excluded.version, seq = excluded.seq,
             updated_at = case when excluded.value is null then kv_keys.updated_at else excluded.updated_at end
           where excluded.seq > kv_keys.seq`,
        ).run(project, collection, command.key, value, command.version, command.seq, command.timestamp);
        return;
      }
    }
  }

  // ---- baselines from the parent ---------------------------------------------------------------

  /** Starts receiving a baseline: returns its mark, which every collection and key it holds gets. */
  async beginBaseline(): Promise<number> {
    return this.direct.write((prepare) => {
      const mark = ((prepare('select value from kv_meta where name = ?').get('baseline_mark') as { value: number } | undefined)?.value ?? 0) + 1;
      KvStorage.setMeta(prepare, 'baseline_mark', mark);
      return mark;
    });
  }

  baselineCollection(project: string, name: string, mark: number): Promise<void> {
    return this.direct.write((prepare) => {
      prepare('insert into kv_collections (project, name, mark) values (?, ?, ?) on conflict (project, name) do update set mark = excluded.mark').run(project, name, mark);
    });
  }

  /** A baseline key: its state at the snapshot, unless this node already holds a newer write. */
  baselineKey(command: Extract<Command, { type: 'SET' }>, mark: number): Promise<void> {
    return this.direct.write((prepare) => {
      prepare(
        `insert into kv_keys (project, collection, key, value, version, seq, updated_at, mark) values (?, ?, ?, ?, ?, ?, ?, ?)
         on conflict (project, collection, key) do update set
           value = case when excluded.seq >= kv_keys.seq then excluded.value else kv_keys.value end,
           version = case when excluded.seq >= kv_keys.seq then excluded.version else kv_keys.version end,
           updated_at = case when excluded.seq >= kv_keys.seq then excluded.updated_at else kv_keys.updated_at end,
           seq = max(excluded.seq, kv_keys.seq), mark = excluded.mark`,
      ).run(command.project, command.collection, command.key, command.value, command.version, command.seq, command.timestamp, mark);
    });
  }

  /** `BASELINE_END`: keys of the collection that were not in its baseline go. */
  endBaselineCollection(project: string, name: string, mark: number): Promise<void> {
    return this.direct.write((prepare) => {
      prepare('delete from kv_keys where project = ? and collection = ? and mark <> ?').run(project, name, mark);
    });
  }

  /**
   * The baseline is complete: collections it did not hold go, `lastSeq` becomes the snapshot's,
   * and the log restarts there (what came before is folded into the baseline).
   */
  finishBaseline(snapshotSeq: number, mark: number): Promise<void> {
    return this.direct.write((prepare) => {
      for (const row of prepare('select project, name from kv_collections where mark <> ?').all(mark) as { project: string; name: string }[]) {
        prepare('delete from kv_keys where project = ? and collection = ?').run(row.project, row.name);
      }
      prepare('delete from kv_collections where mark <> ?').run(mark);
      const cleared = (prepare('select coalesce(max(id), 0) as id from kv_log').get() as { id: number }).id;
      prepare('delete from kv_log').run();
      this.trimmedThrough = Math.max(this.trimmedThrough, cleared);
      KvStorage.setMeta(prepare, 'last_seq', snapshotSeq);
      KvStorage.setMeta(prepare, 'log_floor', snapshotSeq);
      KvStorage.setMeta(prepare, 'has_baseline', 1);
      this.lastSeqCache = snapshotSeq;
    });
  }

  /**
   * Keeps the newest `keep` log entries (about), cutting just after a key command so the floor is
   * an exact seq a child can resume from. Returns how many entries went.
   */
  trimLog(keep: number): Promise<number> {
    return this.direct.write((prepare) => {
      const cut = prepare('select id, seq from kv_log where seq is not null and id <= (select max(id) from kv_log) - ? order by id desc limit 1').get(keep) as { id: number; seq: number } | undefined;
      if (!cut) return 0;
      const removed = prepare('delete from kv_log where id <= ?').run(cut.id).changes;
      KvStorage.setMeta(prepare, 'log_floor', cut.seq);
      this.trimmedThrough = Math.max(this.trimmedThrough, cut.id);
      return removed;
    });
  }
}
