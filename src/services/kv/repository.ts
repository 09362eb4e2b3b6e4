import { SizedCache } from '../../store/cache.ts';
import { openSqlite } from '../../store/db.ts';
import { SharedCache, type ChangeFeed } from '../../store/shared-cache.ts';
import { all, first, run, type Work } from '../../store/sql-work.ts';
import type { SqlDatabase } from '../../store/sql/types.ts';
import { encodeLine, entryJson, type Command } from './commands.ts';

/**
 * The key-value node's durable state, through the platform's SQL port (tables in migrations.ts):
 * the embedded SQLite file, or PostgreSQL, where every instance sharing the database serves the
 * same node. On SQLite a write joins the store's group commit, so it is fsynced before it is
 * acknowledged and one fsync serves a burst of writes.
 *
 * Every write that appends to the replication log first locks `kv_meta.last_log_id` (on SQLite the
 * write transaction already excludes other writers): writes are one at a time across instances,
 * `seq` never repeats, and log ids commit in order with no gaps, which is what lets a reader follow
 * the log with `id > cursor`. Only the write that appends takes the next id, so a refused write
 * leaves no hole.
 */

export interface KeyEntry {
  key: string;
  /** Exact JSON text. */
  value: string;
  version: number;
  seq: number;
  /** Unix seconds of the last set. */
  updatedAt: number;
}

export type WriteOutcome = { seq: number; version: number; command: Command };

/** The node-wide counters, read together. */
export interface NodeState {
  /** The last key-write `seq` this node has (assigned as primary, or received from its parent). */
  lastSeq: number;
  lastLogId: number;
  /** The log holds every command after the one with this seq: a child at or above it can resume. */
  logFloor: number;
  /** The log id a child at exactly `logFloor` continues after. */
  logFloorId: number;
  /** True once this node's copy came from a complete baseline (or it is a primary with data). */
  hasBaseline: boolean;
}

/** The follower lease of a replica node (see `FollowerLease`). */
export interface FollowerRow {
  holder: string;
  expiresAt: number;
  connected: boolean;
  ready: boolean;
}

/** The follower lost its lease while applying: another instance follows the parent now. */
export class LeaseLostError extends Error {
  constructor() {
    super('another instance now follows the parent');
  }
}

interface EntryRow {
  key: string;
  value: string;
  version: number;
  seq: number;
  updated_at: number;
}

/** A live key as `find` has it. */
export interface FoundKey {
  readonly entry: KeyEntry;
  /** The key's GET answer (`entryJson`). */
  answer(): string;
}

/** A live key in the read cache: its GET answer is made once, at the first read that asks for it. */
class CachedKey implements FoundKey {
  private json: string | undefined;
  constructor(readonly entry: KeyEntry) {}
  answer(): string {
    return (this.json ??= entryJson(this.entry));
  }
}

const entryOf = (row: EntryRow): KeyEntry => ({
  key: row.key,
  value: row.value,
  version: Number(row.version),
  seq: Number(row.seq),
  updatedAt: Number(row.updated_at),
});

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

type KeyCommand = Extract<Command, { type: 'SET' | 'DELETE' }>;
/** A key command before it has its seq. */
type KeyCommandDraft =
  Omit<Extract<Command, { type: 'SET' }>, 'seq'> | Omit<Extract<Command, { type: 'DELETE' }>, 'seq'>;

/** The notifier topic a key write publishes its cache key on, so other instances drop their copy. */
export const KV_KEYS_CHANGED_TOPIC = 'kv.keys';
/**
 * The read cache's bound: the characters of the keys and values it holds, counted twice (an entry
 * may come to hold its answer's JSON text too), plus a little per entry.
 */
const READ_CACHE_CHARS = 64 * 1024 * 1024;
const ENTRY_OVERHEAD_CHARS = 128;
/**
 * Cache keys longer than this are announced as a change of every key: a notification carries at
 * most 7000 bytes (the store's notifier), and a character takes up to 3 UTF-8 bytes.
 */
const MAX_ANNOUNCED_CHARS = 2_000;

/**
 * The read cache's key of a project's collection's key. A project has no ':' (it matches
 * `[A-Za-z0-9_-]*`) and the collection's length comes before it, so no two triples share one.
 */
const cacheKeyOf = (project: string, collection: string, key: string) =>
  `${project}:${collection.length}:${collection}:${key}`;
/** The key announced for a write of `cacheKey` (undefined: every key). */
const announced = (cacheKey: string) => (cacheKey.length > MAX_ANNOUNCED_CHARS ? undefined : cacheKey);

const COLLECTION_EXISTS = 'select 1 as present from kv_collections where project = ? and name = ?';
/**
 * A primary's set: the primary's seq is the newest, so the write always lands; the version counts
 * on from the row's (a deleted key's row keeps its version), and is returned.
 */
const SET_KEY = `insert into kv_keys (project, collection, key, value, version, seq, updated_at) values (?, ?, ?, ?, 1, ?, ?)
  on conflict (project, collection, key) do update set value = excluded.value, version = kv_keys.version + 1,
    seq = excluded.seq, updated_at = excluded.updated_at
  returning version`;
const GET_LIVE_KEY =
  'select key, value, version, seq, updated_at from kv_keys where project = ? and collection = ? and key = ? and value is not null';

export class KvRepository {
  /** `has_baseline` never goes back to 0: once this process saw it set, writes skip setting it. */
  private baselineKnown = false;
  /**
   * Live keys as last read or written, for `get` (a single-key read is most of a node's traffic):
   * kept right across instances by the store's SharedCache. Only hits are kept; a miss is read
   * each time. Absent without `options.feed` (then every read goes to the database).
   */
  private readonly cache: SharedCache<CachedKey> | undefined;

  /**
   * `options.feed`: the store's notifier, which turns the read cache on (required for it where
   * other instances write the same database). Every write of keys through this class keeps the
   * cache right; nothing else writes the node's tables.
   */
  constructor(
    private readonly database: SqlDatabase,
    options: { feed?: ChangeFeed } = {},
  ) {
    this.cache = options.feed
      ? new SharedCache(
          new SizedCache<CachedKey>(
            READ_CACHE_CHARS,
            ({ entry }) => 2 * (entry.key.length + entry.value.length) + ENTRY_OVERHEAD_CHARS,
          ),
          KV_KEYS_CHANGED_TOPIC,
          database.soleWriter,
          options.feed,
        )
      : undefined;
  }

  /** Stops listening for other instances' changes. */
  close(): void {
    this.cache?.close();
  }

  /** Runs a write of one key (of every key: `cacheKey` undefined), keeping the read cache right. */
  private async changingKey<T>(
    cacheKey: string | undefined,
    write: () => Promise<T>,
    /** The key's entry after the write, null when unknown or gone, 'unchanged' for a refused write. */
    after: (outcome: T) => KeyEntry | null | 'unchanged' = () => null,
  ): Promise<T> {
    const cache = this.cache;
    if (!cache) return write();
    const key = cacheKey === undefined ? undefined : announced(cacheKey);
    cache.writing(key);
    const outcome = await write();
    const entry = after(outcome);
    // Settles once other instances are told (README: Storage): a client reading elsewhere next sees this write.
    if (entry !== 'unchanged')
      await cache.written(key, key === undefined || entry === null ? null : new CachedKey(entry));
    return outcome;
  }

  /** A replicated command's write: of its key, of every key of a dropped collection, or of none. */
  private changingFor<T>(command: Command, write: () => Promise<T>): Promise<T> {
    switch (command.type) {
      case 'SET':
      case 'DELETE':
        return this.changingKey(cacheKeyOf(command.project, command.collection, command.key), write);
      case 'DROP_COLLECTION':
        return this.changingAll(write);
      case 'CREATE_COLLECTION':
        // A new collection has no keys: no live key changes.
        return write();
    }
  }

  /** A write that may change any number of keys (a drop, a baseline, an import). */
  private changingAll<T>(write: () => Promise<T>): Promise<T> {
    return this.changingKey(undefined, write);
  }

  // ---- reads -------------------------------------------------------------------------------

  state(): Promise<NodeState> {
    return this.database.read(function* () {
      const rows = yield* all<{ name: string; value: number }>('select name, value from kv_meta');
      const meta = new Map(rows.map((row) => [row.name, Number(row.value)]));
      const value = (name: string) => meta.get(name) ?? 0;
      return {
        lastSeq: value('last_seq'),
        lastLogId: value('last_log_id'),
        logFloor: value('log_floor'),
        logFloorId: value('log_floor_id'),
        hasBaseline: value('has_baseline') === 1,
      };
    });
  }

  collections(project: string): Promise<string[]> {
    return this.database.read(function* () {
      const rows = yield* all<{ name: string }>(
        'select name from kv_collections where project = ? order by ord',
        project,
      );
      return rows.map((row) => row.name);
    });
  }

  /** Every collection of every project, in creation order (the baseline's order). */
  allCollections(): Promise<{ project: string; name: string }[]> {
    return this.database.read(() =>
      all<{ project: string; name: string }>('select project, name from kv_collections order by ord'),
    );
  }

  hasCollection(project: string, name: string): Promise<boolean> {
    return this.database.read(function* () {
      return (yield* first(COLLECTION_EXISTS, project, name)) !== undefined;
    });
  }

  /** A live key; `collection: false` when the collection does not exist. */
  async get(project: string, collection: string, key: string): Promise<KeyEntry | null | { collection: false }> {
    const found = await this.find(project, collection, key);
    if (found !== null) return found.entry;
    return (await this.hasCollection(project, collection)) ? null : { collection: false };
  }

  /**
   * A live key, null when there is none (nor, maybe, its collection: `hasCollection` tells). A
   * collection's keys go with it, so a key row means the collection exists: a hit is one lookup,
   * and only a miss needs a second. The promise is the cache's own (a hit costs no more turns).
   */
  find(project: string, collection: string, key: string): Promise<FoundKey | null> {
    const load = () =>
      this.database.read(function* () {
        const found = yield* first<EntryRow>(GET_LIVE_KEY, project, collection, key);
        return found ? new CachedKey(entryOf(found)) : null;
      });
    return this.cache ? this.cache.read(cacheKeyOf(project, collection, key), load) : load();
  }

  /**
   * Live keys in code-point order (the key columns sort by UTF-8 bytes on both databases); null
   * when the collection does not exist.
   */
  list(
    project: string,
    collection: string,
    options: { prefix: string; after?: string; limit: number },
  ): Promise<KeyEntry[] | null> {
    const { prefix, after, limit } = options;
    const exclusive = after !== undefined && after >= prefix;
    const from = exclusive ? after : prefix;
    const upper = prefixUpperBound(prefix);
    return this.database.read(function* () {
      if ((yield* first(COLLECTION_EXISTS, project, collection)) === undefined) return null;
      const rows = yield* all<EntryRow>(
        `select key, value, version, seq, updated_at from kv_keys where project = ? and collection = ? and value is not null and key ${exclusive ? '>' : '>='} ?${upper === null ? '' : ' and key < ?'} order by key limit ?`,
        ...(upper === null ? [project, collection, from, limit] : [project, collection, from, upper, limit]),
      );
      return rows.filter((row) => row.key.startsWith(prefix)).map(entryOf);
    });
  }

  /** Up to `limit` live keys of a collection after `afterKey`, for a baseline. */
  async baselineBatch(
    project: string,
    collection: string,
    afterKey: string | null,
    limit: number,
  ): Promise<KeyEntry[]> {
    return (
      (await this.list(
        project,
        collection,
        afterKey === null ? { prefix: '', limit } : { prefix: '', after: afterKey, limit },
      )) ?? []
    );
  }

  /** Per collection of `project`: live keys and the highest seq of its keys. */
  collectionStats(project: string): Promise<Record<string, { keys: number; lastSeq: number }>> {
    return this.database.read(function* () {
      const rows = yield* all<{ name: string; keys: number; last_seq: number }>(
        `select c.name as name, count(k.value) as keys, coalesce(max(k.seq), 0) as last_seq
           from kv_collections c left join kv_keys k on k.project = c.project and k.collection = c.name
          where c.project = ? group by c.ord, c.name order by c.ord`,
        project,
      );
      const stats: Record<string, { keys: number; lastSeq: number }> = {};
      for (const row of rows) stats[row.name] = { keys: Number(row.keys), lastSeq: Number(row.last_seq) };
      return stats;
    });
  }

  totals(): Promise<{ collections: number; keys: number }> {
    return this.database.read(function* () {
      const collections = yield* first<{ n: number }>('select count(*) as n from kv_collections');
      const keys = yield* first<{ n: number }>('select count(*) as n from kv_keys where value is not null');
      return { collections: Number(collections?.n ?? 0), keys: Number(keys?.n ?? 0) };
    });
  }

  /**
   * Where a child that holds everything up to `since` can continue: the log id to read after, or
   * null when the log no longer (or never) holds what it misses, and it needs a baseline.
   */
  resumePoint(since: number, isReplica: boolean): Promise<number | null> {
    return this.database.read(function* (this: void) {
      const rows = yield* all<{ name: string; value: number }>('select name, value from kv_meta');
      const meta = new Map(rows.map((row) => [row.name, Number(row.value)]));
      // A replica's log only means something once a baseline gave it a starting point.
      if (isReplica && meta.get('has_baseline') !== 1) return null;
      const floor = meta.get('log_floor') ?? 0;
      if (since < floor || since > (meta.get('last_seq') ?? 0)) return null;
      if (since === floor) return meta.get('log_floor_id') ?? 0;
      const row = yield* first<{ id: number }>('select id from kv_log where seq = ? order by id desc limit 1', since);
      return row ? Number(row.id) : null;
    });
  }

  /** Log entries after `afterId`, in order. */
  logAfter(afterId: number, limit: number): Promise<{ id: number; line: string }[]> {
    return this.database.read(function* () {
      const rows = yield* all<{ id: number; line: string }>(
        'select id, line from kv_log where id > ? order by id limit ?',
        afterId,
        limit,
      );
      return rows.map((row) => ({ id: Number(row.id), line: row.line }));
    });
  }

  // ---- the log --------------------------------------------------------------------------------

  /** Takes the log lock (see the class comment); returns the last log id. */
  private *lockLog(): Work<number> {
    const row = yield* first<{ value: number }>(
      `select value from kv_meta where name = 'last_log_id'${this.database.syntax.forUpdate}`,
    );
    return Number(row?.value ?? 0);
  }

  /** Takes the log lock by claiming the next log id (see the class comment); the caller appends with it. */
  private *takeLogId(): Work<number> {
    const row = yield* first<{ value: number }>(
      "update kv_meta set value = value + 1 where name = 'last_log_id' returning value",
    );
    return Number(row!.value);
  }

  /** Appends a command after `lastId` (from `lockLog`, in the same write). */
  private *append(lastId: number, command: Command): Work<void> {
    const id = lastId + 1;
    const seq = command.type === 'SET' || command.type === 'DELETE' ? command.seq : null;
    yield* run("update kv_meta set value = ? where name = 'last_log_id'", id);
    yield* run('insert into kv_log (id, seq, line) values (?, ?, ?)', id, seq, encodeLine(command));
  }

  private *nextSeq(): Work<number> {
    const row = yield* first<{ value: number }>(
      "update kv_meta set value = value + 1 where name = 'last_seq' returning value",
    );
    if (!this.baselineKnown) {
      yield* run("update kv_meta set value = 1 where name = 'has_baseline' and value = 0");
      this.baselineKnown = true;
    }
    return Number(row!.value);
  }

  // ---- writes as the primary (assigning seq and version) -------------------------------------

  /** Creates a collection; false when it already existed (nothing changes then). */
  createCollection(project: string, name: string, timestamp: number): Promise<boolean> {
    return this.database.write(
      function* (this: KvRepository) {
        const lastId = yield* this.lockLog();
        if ((yield* first(COLLECTION_EXISTS, project, name)) !== undefined) return false;
        const command: Command = { type: 'CREATE_COLLECTION', project, collection: name, timestamp };
        yield* applyState(command);
        yield* this.append(lastId, command);
        return true;
      }.bind(this),
    );
  }

  /** Drops a collection and its keys; false when it did not exist. */
  dropCollection(project: string, name: string, timestamp: number): Promise<boolean> {
    return this.changingAll(() =>
      this.database.write(
        function* (this: KvRepository) {
          const lastId = yield* this.lockLog();
          if ((yield* first(COLLECTION_EXISTS, project, name)) === undefined) return false;
          const command: Command = { type: 'DROP_COLLECTION', project, collection: name, timestamp };
          yield* applyState(command);
          yield* this.append(lastId, command);
          return true;
        }.bind(this),
      ),
    );
  }

  /**
   * Sets a key as the primary. The most frequent write, so it takes five statements (each a round
   * trip on PostgreSQL while the log lock is held) where the general `keyWrite` takes seven: the
   * next log id (which takes the lock), the collection check, the next seq, one upsert that also
   * counts the version up and returns it (a set does not depend on the key's row, unlike a
   * delete), and the log entry. A missing collection gives its log id back in the same
   * transaction, so a refused write leaves no hole.
   */
  set(
    project: string,
    collection: string,
    key: string,
    value: string,
    timestamp: number,
  ): Promise<WriteOutcome | 'missing_collection'> {
    const write = () =>
      this.database.write(
        function* (this: KvRepository) {
          const id = yield* this.takeLogId();
          if ((yield* first(COLLECTION_EXISTS, project, collection)) === undefined) {
            yield* run("update kv_meta set value = ? where name = 'last_log_id'", id - 1);
            return 'missing_collection' as const;
          }
          const seq = yield* this.nextSeq();
          const row = yield* first<{ version: number }>(SET_KEY, project, collection, key, value, seq, timestamp);
          const command: KeyCommand = {
            type: 'SET',
            project,
            collection,
            key,
            value,
            version: Number(row!.version),
            seq,
            timestamp,
          };
          yield* run('insert into kv_log (id, seq, line) values (?, ?, ?)', id, seq, encodeLine(command));
          return { seq, version: command.version, command };
        }.bind(this),
      );
    return this.changingKey(cacheKeyOf(project, collection, key), write, (outcome) =>
      outcome === 'missing_collection'
        ? 'unchanged'
        : { key, value, version: outcome.version, seq: outcome.seq, updatedAt: timestamp },
    );
  }

  delete(
    project: string,
    collection: string,
    key: string,
    timestamp: number,
  ): Promise<WriteOutcome | 'missing_collection' | 'not_found'> {
    return this.keyWrite(project, collection, key, (current) =>
      current === null || !current.live
        ? 'not_found'
        : { type: 'DELETE', project, collection, key, version: current.version + 1, timestamp },
    );
  }

  /**
   * A key write as the primary, under the log lock: the collection must exist; `make` builds the
   * command from the key's current row (null when it never existed), or refuses; the command then
   * takes the next seq (a refused write takes none).
   */
  private keyWrite(
    project: string,
    collection: string,
    key: string,
    make: (current: { version: number; live: boolean } | null) => KeyCommandDraft | 'not_found',
  ): Promise<WriteOutcome | 'missing_collection' | 'not_found'> {
    const write = () =>
      this.database.write(
        function* (this: KvRepository) {
          const lastId = yield* this.lockLog();
          if ((yield* first(COLLECTION_EXISTS, project, collection)) === undefined)
            return 'missing_collection' as const;
          const row = yield* first<{ value: string | null; version: number }>(
            'select value, version from kv_keys where project = ? and collection = ? and key = ?',
            project,
            collection,
            key,
          );
          const current = row ? { version: Number(row.version), live: row.value !== null } : null;
          const draft = make(current);
          if (draft === 'not_found') return draft;
          const seq = yield* this.nextSeq();
          const command = { ...draft, seq } as KeyCommand;
          yield* applyState(command, true);
          yield* this.append(lastId, command);
          return { seq, version: command.version, command };
        }.bind(this),
      );
    // The primary's write always lands (its seq is the newest): a set leaves exactly this entry.
    return this.changingKey(cacheKeyOf(project, collection, key), write, (outcome) =>
      typeof outcome !== 'object'
        ? 'unchanged'
        : outcome.command.type === 'SET'
          ? {
              key,
              value: outcome.command.value,
              version: outcome.command.version,
              seq: outcome.seq,
              updatedAt: outcome.command.timestamp,
            }
          : null,
    );
  }

  // ---- writes as a replica (seq and version come from the parent) ----------------------------

  /**
   * A live command from the parent's stream, by the holder of the follower lease: applied when
   * newer than what the key has (and its collection exists), and always logged, so this node's
   * children receive the stream unbroken. Throws `LeaseLostError` when `holder` lost the lease.
   */
  applyFromParent(command: Command, holder: string): Promise<void> {
    return this.changingFor(command, () =>
      this.database.write(
        function* (this: KvRepository) {
          const lastId = yield* this.lockLog();
          yield* this.checkLease(holder);
          yield* applyState(command);
          if (command.type === 'SET' || command.type === 'DELETE')
            yield* run("update kv_meta set value = ? where name = 'last_seq' and value < ?", command.seq, command.seq);
          yield* this.append(lastId, command);
        }.bind(this),
      ),
    );
  }

  /** A write this replica forwarded and its parent accepted: seen here at once, not logged (the stream brings it). */
  applyForwarded(command: Command): Promise<void> {
    return this.changingFor(command, () => this.database.write(() => applyState(command)));
  }

  // ---- baselines from the parent ---------------------------------------------------------------

  /** Starts receiving a baseline: returns its mark, which every collection and key it holds gets. */
  beginBaseline(holder: string): Promise<number> {
    return this.database.write(
      function* (this: KvRepository) {
        yield* this.checkLease(holder);
        const row = yield* first<{ value: number }>(
          "update kv_meta set value = value + 1 where name = 'baseline_mark' returning value",
        );
        return Number(row!.value);
      }.bind(this),
    );
  }

  baselineCollection(project: string, name: string, mark: number): Promise<void> {
    return this.database.write(function* () {
      yield* run(
        'insert into kv_collections (project, name, mark) values (?, ?, ?) on conflict (project, name) do update set mark = excluded.mark',
        project,
        name,
        mark,
      );
    });
  }

  /** A baseline key: its state at the snapshot, unless this node already holds a newer write. */
  baselineKey(command: Extract<Command, { type: 'SET' }>, mark: number): Promise<void> {
    return this.changingFor(command, () => this.writeBaselineKey(command, mark));
  }

  private writeBaselineKey(command: Extract<Command, { type: 'SET' }>, mark: number): Promise<void> {
    return this.database.write(function* () {
      yield* run(
        `insert into kv_keys (project, collection, key, value, version, seq, updated_at, mark) values (?, ?, ?, ?, ?, ?, ?, ?)
         on conflict (project, collection, key) do update set
           value = case when excluded.seq >= kv_keys.seq then excluded.value else kv_keys.value end,
           version = case when excluded.seq >= kv_keys.seq then excluded.version else kv_keys.version end,
           updated_at = case when excluded.seq >= kv_keys.seq then excluded.updated_at else kv_keys.updated_at end,
           seq = case when excluded.seq >= kv_keys.seq then excluded.seq else kv_keys.seq end,
           mark = excluded.mark`,
        command.project,
        command.collection,
        command.key,
        command.value,
        command.version,
        command.seq,
        command.timestamp,
        mark,
      );
    });
  }

  /** `BASELINE_END`: keys of the collection that were not in its baseline go. */
  endBaselineCollection(project: string, name: string, mark: number): Promise<void> {
    return this.changingAll(() =>
      this.database.write(function* () {
        yield* run('delete from kv_keys where project = ? and collection = ? and mark <> ?', project, name, mark);
      }),
    );
  }

  /**
   * The baseline is complete: collections it did not hold go, `lastSeq` becomes the snapshot's,
   * and the log restarts there (what came before is folded into the baseline). The next log id
   * skips one, so a child following this node's old log sees a gap and takes a new baseline.
   * `snapshotSeq` null: the node's own last seq.
   */
  finishBaseline(snapshotSeq: number | null, mark: number, holder: string): Promise<number> {
    return this.changingAll(() => this.writeFinishBaseline(snapshotSeq, mark, holder));
  }

  private writeFinishBaseline(snapshotSeq: number | null, mark: number, holder: string): Promise<number> {
    return this.database.write(
      function* (this: KvRepository) {
        const lastId = yield* this.lockLog();
        yield* this.checkLease(holder);
        yield* run(
          'delete from kv_keys where exists (select 1 from kv_collections c where c.project = kv_keys.project and c.name = kv_keys.collection and c.mark <> ?)',
          mark,
        );
        yield* run('delete from kv_collections where mark <> ?', mark);
        yield* run('delete from kv_log');
        const seq =
          snapshotSeq ??
          Number((yield* first<{ value: number }>("select value from kv_meta where name = 'last_seq'"))?.value ?? 0);
        yield* run("update kv_meta set value = ? where name = 'last_log_id'", lastId + 1);
        yield* run("update kv_meta set value = ? where name in ('last_seq', 'log_floor')", seq);
        yield* run("update kv_meta set value = ? where name = 'log_floor_id'", lastId + 1);
        yield* run("update kv_meta set value = 1 where name = 'has_baseline'");
        return seq;
      }.bind(this),
    );
  }

  /**
   * Keeps the newest `keep` log entries (about), cutting just after a key command so the floor is
   * an exact seq a child can resume from. Returns how many entries went.
   */
  trimLog(keep: number): Promise<number> {
    return this.database.write(
      function* (this: KvRepository) {
        const lastId = yield* this.lockLog();
        const cut = yield* first<{ id: number; seq: number }>(
          'select id, seq from kv_log where seq is not null and id <= ? order by id desc limit 1',
          lastId - keep,
        );
        if (!cut) return 0;
        const removed = yield* run('delete from kv_log where id <= ?', cut.id);
        yield* run("update kv_meta set value = ? where name = 'log_floor'", cut.seq);
        yield* run("update kv_meta set value = ? where name = 'log_floor_id'", cut.id);
        return removed;
      }.bind(this),
    );
  }

  // ---- the follower lease ----------------------------------------------------------------------

  /**
   * Takes or renews the lease for `holder` until `expiresAt` (when free, expired, or its own), and
   * records its connection state; true when `holder` holds it now.
   */
  claimLease(
    holder: string,
    now: number,
    expiresAt: number,
    state: { connected: boolean; ready: boolean },
  ): Promise<boolean> {
    return this.database.write(function* () {
      const changed = yield* run(
        'update kv_follower set holder = ?, expires_at = ?, connected = ?, ready = ? where id = 1 and (holder = ? or expires_at < ?)',
        holder,
        expiresAt,
        state.connected ? 1 : 0,
        state.ready ? 1 : 0,
        holder,
        now,
      );
      return changed === 1;
    });
  }

  /** Gives the lease up at once (a stopping instance), so another takes over without waiting for expiry. */
  releaseLease(holder: string): Promise<void> {
    return this.database.write(function* () {
      yield* run(
        "update kv_follower set holder = '', expires_at = 0, connected = 0, ready = 0 where id = 1 and holder = ?",
        holder,
      );
    });
  }

  lease(): Promise<FollowerRow> {
    return this.database.read(function* () {
      const row = yield* first<{ holder: string; expires_at: number; connected: number; ready: number }>(
        'select holder, expires_at, connected, ready from kv_follower where id = 1',
      );
      return {
        holder: row?.holder ?? '',
        expiresAt: Number(row?.expires_at ?? 0),
        connected: Number(row?.connected) === 1,
        ready: Number(row?.ready) === 1,
      };
    });
  }

  private *checkLease(holder: string): Work<void> {
    const row = yield* first<{ holder: string }>(
      `select holder from kv_follower where id = 1${this.database.syntax.forShare}`,
    );
    if (row?.holder !== holder) throw new LeaseLostError();
  }

  // ---- import of a node file from before the node moved into the platform's database ----------

  /** True when the node holds nothing yet: no collection, no key write, no log. */
  isEmpty(): Promise<boolean> {
    return this.database.read(function* () {
      const collection = yield* first('select 1 as present from kv_collections limit 1');
      const meta = yield* first<{ n: number }>(
        "select count(*) as n from kv_meta where name in ('last_seq', 'last_log_id') and value > 0",
      );
      return collection === undefined && Number(meta?.n ?? 0) === 0;
    });
  }

  /** `importFrom` a node file of the old layout (`<DATA_DIR>/kv/kv.db`). */
  async importFile(file: string): Promise<boolean> {
    const source = openSqlite(file);
    try {
      return await this.importFrom(source.database);
    } finally {
      await source.close();
    }
  }

  /**
   * Copies a node file of the old layout (`<DATA_DIR>/kv/kv.db`: the same tables, log ids from
   * SQLite's autoincrement) into this node, in slices; false when this node already holds data.
   * A copy cut short is redone from the start (`kv_meta.importing`).
   */
  importFrom(source: SqlDatabase): Promise<boolean> {
    return this.changingAll(() => this.copyFrom(source));
  }

  private async copyFrom(source: SqlDatabase): Promise<boolean> {
    const SLICE = 1_000;
    const started = await this.database.write(
      function* (this: KvRepository) {
        yield* this.lockLog();
        const importing = yield* first<{ value: number }>("select value from kv_meta where name = 'importing'");
        if (!importing) {
          const collection = yield* first('select 1 as present from kv_collections limit 1');
          const used = yield* first<{ n: number }>(
            "select count(*) as n from kv_meta where name in ('last_seq', 'last_log_id') and value > 0",
          );
          if (collection !== undefined || Number(used?.n ?? 0) > 0) return false;
          yield* run("insert into kv_meta (name, value) values ('importing', 1)");
        }
        for (const table of ['kv_keys', 'kv_collections', 'kv_log']) yield* run(`delete from ${table}`);
        return true;
      }.bind(this),
    );
    if (!started) return false;

    const collections = await source.read(() =>
      all<{ project: string; name: string }>('select project, name from kv_collections order by ord'),
    );
    await this.database.write(function* () {
      for (const c of collections)
        yield* run('insert into kv_collections (project, name) values (?, ?)', c.project, c.name);
    });
    let after: [string, string, string] = ['', '', ''];
    for (let first_ = true; ; first_ = false) {
      const rows = await source.read(() =>
        all<{
          project: string;
          collection: string;
          key: string;
          value: string | null;
          version: number;
          seq: number;
          updated_at: number;
        }>(
          `select project, collection, key, value, version, seq, updated_at from kv_keys ${first_ ? '' : 'where (project, collection, key) > (?, ?, ?) '}order by project, collection, key limit ?`,
          ...(first_ ? [SLICE] : [...after, SLICE]),
        ),
      );
      if (rows.length === 0) break;
      await this.database.write(function* () {
        for (const r of rows)
          yield* run(
            'insert into kv_keys (project, collection, key, value, version, seq, updated_at) values (?, ?, ?, ?, ?, ?, ?)',
            r.project,
            r.collection,
            r.key,
            r.value,
            r.version,
            r.seq,
            r.updated_at,
          );
      });
      const last = rows[rows.length - 1]!;
      after = [last.project, last.collection, last.key];
      if (rows.length < SLICE) break;
    }
    let afterId = 0;
    for (;;) {
      const rows = await source.read(() =>
        all<{ id: number; seq: number | null; line: string }>(
          'select id, seq, line from kv_log where id > ? order by id limit ?',
          afterId,
          SLICE,
        ),
      );
      if (rows.length === 0) break;
      await this.database.write(function* () {
        for (const r of rows) yield* run('insert into kv_log (id, seq, line) values (?, ?, ?)', r.id, r.seq, r.line);
      });
      afterId = Number(rows[rows.length - 1]!.id);
    }
    const meta = await source.read(() => all<{ name: string; value: number }>('select name, value from kv_meta'));
    const bounds = await source.read(() =>
      first<{ low: number | null; high: number | null }>('select min(id) as low, max(id) as high from kv_log'),
    );
    const values = new Map(meta.map((row) => [row.name, Number(row.value)]));
    const lastLogId = Number(bounds?.high ?? 0);
    await this.database.write(function* () {
      for (const name of ['last_seq', 'log_floor', 'has_baseline', 'baseline_mark'])
        yield* run('update kv_meta set value = ? where name = ?', values.get(name) ?? 0, name);
      yield* run("update kv_meta set value = ? where name = 'last_log_id'", lastLogId);
      // The old node kept where its trimmed log ended in memory only: a child at the floor continues
      // with everything the log still holds.
      yield* run(
        "update kv_meta set value = ? where name = 'log_floor_id'",
        bounds?.low === null || bounds?.low === undefined ? lastLogId : Number(bounds.low) - 1,
      );
      yield* run("delete from kv_meta where name = 'importing'");
    });
    return true;
  }
}

/** Applies a command to collections and keys (no log, no counters); `collectionChecked`: the write already found the collection under the log lock. */
function* applyState(command: Command, collectionChecked = false): Work<void> {
  const { project, collection } = command;
  switch (command.type) {
    case 'CREATE_COLLECTION':
      yield* run(
        'insert into kv_collections (project, name) values (?, ?) on conflict (project, name) do nothing',
        project,
        collection,
      );
      return;
    case 'DROP_COLLECTION':
      yield* run('delete from kv_keys where project = ? and collection = ?', project, collection);
      yield* run('delete from kv_collections where project = ? and name = ?', project, collection);
      return;
    case 'SET':
    case 'DELETE': {
      if (!collectionChecked && (yield* first(COLLECTION_EXISTS, project, collection)) === undefined) return;
      const value = command.type === 'SET' ? command.value : null;
      // Only a newer write (higher seq) changes a key; replays and late duplicates change nothing.
      yield* run(
        `insert into kv_keys (project, collection, key, value, version, seq, updated_at) values (?, ?, ?, ?, ?, ?, ?)
         on conflict (project, collection, key) do update set value = excluded.value, version = excluded.version, seq = excluded.seq,
           updated_at = case when excluded.value is null then kv_keys.updated_at else excluded.updated_at end
         where excluded.seq > kv_keys.seq`,
        project,
        collection,
        command.key,
        value,
        command.version,
        command.seq,
        command.timestamp,
      );
      return;
    }
  }
}
