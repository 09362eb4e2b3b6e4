import { randomUUID } from 'node:crypto';
import { newId } from '../../core/ids.ts';
import type { BlobPin, BlobRefs } from '../../store/blob/refs.ts';
import { all, first, run, type Work } from '../../store/sql-work.ts';
import type { SqlColumn, SqlDatabase } from '../../store/sql/types.ts';
import { GroupCommit, togetherThenAlone, type Settled } from '../../store/group-commit.ts';
import { FilesErrors } from './errors.ts';
import { parseNs, type NanoClock } from './timestamps.ts';

/*
 * The service's only door to storage: bucket and file rows, and the blob references files hold
 * (through BlobRefs, in the same transactions). Every bucket lookup is scoped to its owner.
 */

export interface BucketRecord {
  id: string;
  projectId: string;
  createdNs: bigint;
  owners: string[];
  name: string;
  description: string;
}

interface BucketRow {
  id: string;
  project_id: string;
  created_ns: string;
  owners: string;
  name: string;
  description: string;
}

const BUCKET_COLUMNS = 'id, project_id, created_ns, owners, name, description';

function toBucket(row: BucketRow): BucketRecord {
  return {
    id: row.id,
    projectId: row.project_id,
    createdNs: parseNs(row.created_ns),
    owners: JSON.parse(row.owners) as string[],
    name: row.name,
    description: row.description,
  };
}

export interface FileRecord {
  id: string;
  uuid: string;
  bucketId: string;
  name: string;
  owners: string[];
  createdNs: bigint;
  updatedNs: bigint;
  size: number;
  md5: string;
  sha256: string;
  mimeType: string;
}

interface FileRow {
  id: string;
  uuid: string;
  bucket_id: string;
  name: string;
  owners: string;
  created_ns: string;
  updated_ns: string;
  size: number | string;
  hash_md5: string;
  hash_sha256: string;
  mime_type: string;
}

const FILE_COLUMNS =
  'id, uuid, bucket_id, name, owners, created_ns, updated_ns, size, hash_md5, hash_sha256, mime_type';
// Second key of the PostgreSQL advisory lock that serializes writes to one path of one bucket.
const PATH_LOCK_SPACE = 0x53544650; // "STFP"

/** The blob reference a file holds on its content. */
export function fileHolder(fileId: string): string {
  return `files:${fileId}`;
}

function toFile(row: FileRow): FileRecord {
  return {
    id: row.id,
    uuid: row.uuid,
    bucketId: row.bucket_id,
    name: row.name,
    owners: JSON.parse(row.owners) as string[],
    createdNs: parseNs(row.created_ns),
    updatedNs: parseNs(row.updated_ns),
    size: Number(row.size),
    md5: row.hash_md5,
    sha256: row.hash_sha256,
    mimeType: row.mime_type,
  };
}

/** What an upload stored, ready to commit. */
export interface StoredContent {
  pin: BlobPin;
  size: number;
  md5: string;
  mimeType: string;
}

export type CommitResult = { kind: 'no_bucket' } | { kind: 'created' | 'replaced'; file: FileRecord };

/** A bucket lookup scoped to its owner, with one file of it: both in one query. */
export type FileLookup = { bucket: false } | { bucket: true; file: FileRecord | null };

/** Buckets: the service's only door to their rows. Every lookup is scoped to the caller. */
export class BucketRepository {
  private readonly work: SqlDatabase;

  constructor(
    work: SqlDatabase,
    private readonly refs: BlobRefs,
    private readonly clock: NanoClock,
  ) {
    this.work = work;
  }

  async create(owner: string, projectId: string, input: { name: string; description: string }): Promise<BucketRecord> {
    const id = newId('bucket');
    const record: BucketRecord = {
      id,
      projectId,
      createdNs: this.clock(),
      owners: [owner],
      name: input.name === '' ? id : input.name,
      description: input.description,
    };
    try {
      await this.work.write(() =>
        run(
          'insert into files_buckets (id, owner, owners, project_id, name, description, created_ns) values (?, ?, ?, ?, ?, ?, ?)',
          record.id,
          owner,
          JSON.stringify(record.owners),
          record.projectId,
          record.name,
          record.description,
          record.createdNs.toString(),
        ),
      );
    } catch (error) {
      if (this.work.isUniqueViolation(error)) throw FilesErrors.bucketExists();
      throw error;
    }
    return record;
  }

  async listOwned(owner: string): Promise<BucketRecord[]> {
    const rows = await this.work.read(() =>
      all<BucketRow>(`select ${BUCKET_COLUMNS} from files_buckets where owner = ? order by seq`, owner),
    );
    return rows.map(toBucket);
  }

  async getOwned(id: string, owner: string): Promise<BucketRecord | null> {
    const row = await this.work.read(() =>
      first<BucketRow>(`select ${BUCKET_COLUMNS} from files_buckets where id = ? and owner = ?`, id, owner),
    );
    return row ? toBucket(row) : null;
  }

  /**
   * Deletes a bucket with its files in one transaction: the file rows (cascade) and their blob
   * references; the blobs themselves go through the sweeper. Returns the bucket as it was.
   */
  async deleteOwned(id: string, owner: string): Promise<BucketRecord | null> {
    const locking = this.work.syntax.forUpdate;
    const refs = this.refs;
    return this.work.write(function* (): Work<BucketRecord | null> {
      // The row lock orders this delete after uploads committing into the bucket (they take a
      // share lock), so their references are seen and removed here.
      const row = yield* first<BucketRow>(
        `select ${BUCKET_COLUMNS} from files_buckets where id = ? and owner = ?${locking}`,
        id,
        owner,
      );
      if (!row) return null;
      const files = yield* all<{ id: string }>('select id from files_files where bucket_id = ?', id);
      yield* refs.removeHoldersWork(files.map((file) => fileHolder(file.id)));
      yield* run('delete from files_files where bucket_id = ?', id);
      yield* run('delete from files_buckets where id = ?', id);
      return toBucket(row);
    });
  }
}

interface UploadToCommit {
  bucketId: string;
  owner: string;
  name: string;
  content: StoredContent;
}

const LOOKUP_COLUMNS: readonly SqlColumn[] = [
  { name: 'n', type: 'bigint' },
  { name: 'bucket_id', type: 'text' },
  { name: 'owner', type: 'text' },
  { name: 'name', type: 'text' },
];
const CONTENT_COLUMNS: readonly SqlColumn[] = [
  { name: 'now_ns', type: 'text' },
  { name: 'size', type: 'bigint' },
  { name: 'hash_md5', type: 'text' },
  { name: 'hash_sha256', type: 'text' },
  { name: 'mime_type', type: 'text' },
];
const CREATED_COLUMNS: readonly SqlColumn[] = [
  { name: 'n', type: 'bigint' },
  { name: 'id', type: 'text' },
  { name: 'uuid', type: 'text' },
  { name: 'bucket_id', type: 'text' },
  { name: 'name', type: 'text' },
  { name: 'owners', type: 'text' },
  ...CONTENT_COLUMNS,
];
const REPLACED_COLUMNS: readonly SqlColumn[] = [{ name: 'id', type: 'text' }, ...CONTENT_COLUMNS];

/** A bucket of its owner with one of its files, in one query; `lock` is appended (a `forShareOf('b')`). */
function* bucketAndFile(bucketId: string, owner: string, name: string, lock: string): Work<FileLookup> {
  const row = yield* first<{ bucket: string } & Partial<FileRow>>(
    `select b.id as bucket, ${FILE_COLUMNS.split(', ')
      .map((c) => `f.${c}`)
      .join(', ')}
     from files_buckets b left join files_files f on f.bucket_id = b.id and f.name = ?
     where b.id = ? and b.owner = ?${lock}`,
    name,
    bucketId,
    owner,
  );
  if (!row) return { bucket: false };
  return { bucket: true, file: row.id ? toFile(row as FileRow) : null };
}

/** Files: the service's only door to their rows and references. */
export class FileRepository {
  private readonly commits: GroupCommit<UploadToCommit, CommitResult>;

  constructor(
    private readonly work: SqlDatabase,
    private readonly refs: BlobRefs,
    private readonly clock: NanoClock,
    private readonly options: { onBatchRedone?(error: unknown): void } = {},
  ) {
    this.commits = new GroupCommit((items) => this.commitBatch(items), {
      maxBatch: 64,
      maxInFlight: work.writesShareCommits ? Number.POSITIVE_INFINITY : 2,
      observe: (calls, seconds) => work.commitObserver?.('files_commit', calls, seconds),
    });
  }

  async lookup(bucketId: string, owner: string, name: string): Promise<FileLookup> {
    return this.work.read(() => bucketAndFile(bucketId, owner, name, ''));
  }

  /** Files of a bucket whose name starts with `prefix`, compared exactly, in first-upload order. */
  async list(bucketId: string, prefix: string): Promise<FileRecord[]> {
    const rows = await this.work.read(() =>
      prefix === ''
        ? all<FileRow>(`select ${FILE_COLUMNS} from files_files where bucket_id = ? order by seq`, bucketId)
        : // substr counts characters on both databases; equality is exact (no collation folding).
          all<FileRow>(
            `select ${FILE_COLUMNS} from files_files where bucket_id = ? and substr(name, 1, ?) = ? order by seq`,
            bucketId,
            [...prefix].length,
            prefix,
          ),
    );
    return rows.map(toFile);
  }

  /**
   * Makes an uploaded blob the content of `bucketId/name` in one transaction: the file row is
   * inserted (201) or updated in place (200, keeping id, uuid, created_timestamp and owners), the
   * pin becomes the file's reference and the previous content's reference is dropped. Writes to
   * one path commit one after the other; the last to commit wins.
   */
  commitUpload(bucketId: string, owner: string, name: string, content: StoredContent): Promise<CommitResult> {
    return this.commits.submit({ bucketId, owner, name, content });
  }

  /**
   * Concurrent commits share a transaction where each write would otherwise commit on its own
   * (PostgreSQL): one statement per step for the whole batch. An item whose path repeats in the
   * batch, and every item of a batch that fails as a whole (a blob gone, a deadlock), is committed
   * on its own after, so each caller gets the outcome a commit of its own would have had.
   */
  private commitBatch(items: readonly UploadToCommit[]): Promise<Settled<CommitResult>[]> {
    return togetherThenAlone(items, {
      key: (item) => `${item.bucketId}/${item.name}`,
      together: (firsts) => this.commitMany(firsts),
      alone: (item) => this.commitOne(item.bucketId, item.owner, item.name, item.content),
      onTogetherFailed: (error) => this.options.onBatchRedone?.(error),
    });
  }

  /** The batch of `commitBatch`: paths distinct; the same steps as `commitOne`, a statement for each. */
  private async commitMany(items: readonly UploadToCommit[]): Promise<CommitResult[]> {
    const { refs, clock, work } = this;
    const { syntax } = work;
    return work.write(function* (): Work<CommitResult[]> {
      // Every path, then every hash, each in one order: batches and single commits take their
      // locks in the same order (paths before hashes), so they cannot wait on each other in a ring.
      const paths = [...new Set(items.map((item) => `${item.bucketId}/${item.name}`))].sort();
      const hashes = [...new Set(items.map((item) => item.content.pin.sha256))].sort();
      yield* work.lockNames([
        ...paths.map((name) => ({ space: PATH_LOCK_SPACE, name })),
        ...hashes.map((sha256) => refs.lockOf(sha256)),
      ]);
      const found = new Map<number, FileRecord | null>();
      const lookups = items.map((item, n) => [n, item.bucketId, item.owner, item.name]);
      for (const { source, params } of syntax.rowSources(LOOKUP_COLUMNS, lookups)) {
        const rows = yield* all<{ n: number | string; bucket: string } & Partial<FileRow>>(
          // Row by row (lateral), so that each lookup is the unique-index probe a single commit
          // makes: joined as sets, the planner chose scans of the whole files table (4 ms a batch
          // at a few thousand files). PostgreSQL only, like `addManyWork`.
          `select v.n, x.* from ${source} cross join lateral (
             select b.id as bucket, ${FILE_COLUMNS.split(', ')
               .map((c) => `f.${c}`)
               .join(', ')}
             from files_buckets b left join files_files f on f.bucket_id = b.id and f.name = v.name
             where b.id = v.bucket_id and b.owner = v.owner${syntax.forShareOf('b')}
           ) x`,
          ...params,
        );
        for (const row of rows) found.set(Number(row.n), row.id ? toFile(row as FileRow) : null);
      }
      const results: CommitResult[] = [];
      const created: unknown[][] = [];
      const replaced: unknown[][] = [];
      const adds: { pin: BlobPin; holder: string }[] = [];
      const removes: { sha256: string; holder: string }[] = [];
      for (const [n, item] of items.entries()) {
        const { content } = item;
        const previous = found.get(n);
        if (previous === undefined) {
          results.push({ kind: 'no_bucket' });
          continue;
        }
        const now = clock();
        const contentFields = {
          updatedNs: now,
          size: content.size,
          md5: content.md5,
          sha256: content.pin.sha256,
          mimeType: content.mimeType,
        };
        if (previous) {
          const file = { ...previous, ...contentFields };
          replaced.push([file.id, now.toString(), file.size, file.md5, file.sha256, file.mimeType]);
          adds.push({ pin: content.pin, holder: fileHolder(file.id) });
          if (previous.sha256 !== file.sha256) removes.push({ sha256: previous.sha256, holder: fileHolder(file.id) });
          results.push({ kind: 'replaced', file });
          continue;
        }
        const uuid = randomUUID();
        const file: FileRecord = {
          id: `file-${uuid}`,
          uuid,
          bucketId: item.bucketId,
          name: item.name,
          owners: [item.owner],
          createdNs: now,
          ...contentFields,
        };
        created.push([
          n,
          file.id,
          file.uuid,
          file.bucketId,
          file.name,
          JSON.stringify(file.owners),
          now.toString(),
          file.size,
          file.md5,
          file.sha256,
          file.mimeType,
        ]);
        adds.push({ pin: content.pin, holder: fileHolder(file.id) });
        results.push({ kind: 'created', file });
      }
      for (const { source, params } of syntax.rowSources(CREATED_COLUMNS, created))
        yield* run(
          `insert into files_files (id, uuid, bucket_id, name, owners, created_ns, updated_ns, size, hash_md5, hash_sha256, mime_type)
           select v.id, v.uuid, v.bucket_id, v.name, v.owners, v.now_ns, v.now_ns, v.size, v.hash_md5, v.hash_sha256, v.mime_type
           from ${source} order by v.n`,
          ...params,
        );
      for (const { source, params } of syntax.rowSources(REPLACED_COLUMNS, replaced))
        yield* run(
          `update files_files set updated_ns = v.now_ns, size = v.size, hash_md5 = v.hash_md5, hash_sha256 = v.hash_sha256,
           mime_type = v.mime_type from ${source} where files_files.id = v.id`,
          ...params,
        );
      yield* refs.addManyWork(adds);
      for (const remove of removes) yield* refs.removeWork(remove.sha256, remove.holder);
      return results;
    });
  }

  /** One commit in its own transaction (see `commitUpload`). */
  private async commitOne(
    bucketId: string,
    owner: string,
    name: string,
    content: StoredContent,
  ): Promise<CommitResult> {
    const { refs, clock, work } = this;
    return work.write(function* (): Work<CommitResult> {
      // PostgreSQL: an advisory lock on the path orders this against other writes to it (taken
      // with the lock the reference needs on the content's hash), then a share lock on the bucket
      // row against a bucket delete (read with the file, a statement after the locks so that it
      // sees what the path's last writer committed). SQLite serializes every write.
      yield* work.lockNames([{ space: PATH_LOCK_SPACE, name: `${bucketId}/${name}` }, refs.lockOf(content.pin.sha256)]);
      const found = yield* bucketAndFile(bucketId, owner, name, work.syntax.forShareOf('b'));
      if (!found.bucket) return { kind: 'no_bucket' };
      const now = clock();
      if (found.file) {
        const previous = found.file;
        yield* refs.addWork(content.pin, fileHolder(previous.id), { locked: true });
        if (previous.sha256 !== content.pin.sha256) yield* refs.removeWork(previous.sha256, fileHolder(previous.id));
        yield* run(
          'update files_files set updated_ns = ?, size = ?, hash_md5 = ?, hash_sha256 = ?, mime_type = ? where id = ?',
          now.toString(),
          content.size,
          content.md5,
          content.pin.sha256,
          content.mimeType,
          previous.id,
        );
        return {
          kind: 'replaced',
          file: {
            ...previous,
            updatedNs: now,
            size: content.size,
            md5: content.md5,
            sha256: content.pin.sha256,
            mimeType: content.mimeType,
          },
        };
      }
      const uuid = randomUUID();
      const file: FileRecord = {
        id: `file-${uuid}`,
        uuid,
        bucketId,
        name,
        owners: [owner],
        createdNs: now,
        updatedNs: now,
        size: content.size,
        md5: content.md5,
        sha256: content.pin.sha256,
        mimeType: content.mimeType,
      };
      yield* run(
        `insert into files_files (id, uuid, bucket_id, name, owners, created_ns, updated_ns, size, hash_md5, hash_sha256, mime_type) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        file.id,
        file.uuid,
        bucketId,
        name,
        JSON.stringify(file.owners),
        now.toString(),
        now.toString(),
        file.size,
        file.md5,
        file.sha256,
        file.mimeType,
      );
      yield* refs.addWork(content.pin, fileHolder(file.id), { locked: true });
      return { kind: 'created', file };
    });
  }

  /** Deletes one file and drops its reference. 'no_bucket' / 'no_file' when absent. */
  async delete(bucketId: string, owner: string, name: string): Promise<'deleted' | 'no_bucket' | 'no_file'> {
    const { refs, work } = this;
    return work.write(function* (): Work<'deleted' | 'no_bucket' | 'no_file'> {
      // The same locks in the same order as an upload's.
      yield* work.lockName(PATH_LOCK_SPACE, `${bucketId}/${name}`);
      const found = yield* bucketAndFile(bucketId, owner, name, work.syntax.forShareOf('b'));
      if (!found.bucket) return 'no_bucket';
      const existing = found.file;
      if (!existing) return 'no_file';
      yield* run('delete from files_files where id = ?', existing.id);
      yield* refs.removeWork(existing.sha256, fileHolder(existing.id));
      return 'deleted';
    });
  }
}
