import { validationError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import type { JsonObject } from '../../core/json.ts';
import type { BlobRefs } from '../../store/blob/refs.ts';
import { all, first, run, type Work } from '../../store/sql-work.ts';
import type { SqlDatabase } from '../../store/sql/types.ts';
import { FilesErrors } from './errors.ts';
import { fileHolder } from './files.ts';
import { parseNs, rfc3339Ns, type NanoClock } from './timestamps.ts';

export const MAX_BUCKET_NAME_LENGTH = 64;
export const MAX_DESCRIPTION_LENGTH = 4096;
const BUCKET_NAME = /^[A-Za-z0-9_-]*$/;

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

const COLUMNS = 'id, project_id, created_ns, owners, name, description';

function toRecord(row: BucketRow): BucketRecord {
  return { id: row.id, projectId: row.project_id, createdNs: parseNs(row.created_ns), owners: JSON.parse(row.owners) as string[], name: row.name, description: row.description };
}

/** The Bucket object; `created_timestamp` stays a bigint for core's exact JSON writing. */
export function bucketJson(bucket: BucketRecord): JsonObject {
  return { id: bucket.id, project_id: bucket.projectId, created_timestamp: bucket.createdNs, owners: bucket.owners, name: bucket.name, description: bucket.description };
}

/** A bucket list item: with `created_h`, without `project_id`. */
export function bucketListItemJson(bucket: BucketRecord): JsonObject {
  return { id: bucket.id, name: bucket.name, description: bucket.description, created_timestamp: bucket.createdNs, created_h: rfc3339Ns(bucket.createdNs), owners: bucket.owners };
}

/** Validates create input; returns the trimmed name ('' = use the id). */
export function checkBucketInput(input: { name?: unknown; description?: unknown }): { name: string; description: string } {
  const name = input.name === undefined ? '' : input.name;
  const description = input.description === undefined ? '' : input.description;
  if (typeof name !== 'string') throw validationError('name must be a string');
  if (typeof description !== 'string') throw validationError('description must be a string');
  const trimmed = name.trim();
  if (trimmed.length > MAX_BUCKET_NAME_LENGTH) throw validationError(`name must be at most ${MAX_BUCKET_NAME_LENGTH} characters`);
  if (!BUCKET_NAME.test(trimmed)) throw validationError('name may only contain A-Z, a-z, 0-9, _ and -');
  if ([...description].length > MAX_DESCRIPTION_LENGTH) throw validationError(`description must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
  if (description.includes('\u0000')) throw validationError('description must not contain NUL');
  return { name: trimmed, description };
}

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
    const record: BucketRecord = { id, projectId, createdNs: this.clock(), owners: [owner], name: input.name === '' ? id : input.name, description: input.description };
    try {
      await this.work.write(() =>
        run(
          'insert into files_buckets (id, owner, owners, project_id, name, description, created_ns) values (?, ?, ?, ?, ?, ?, ?)',
          record.id, owner, JSON.stringify(record.owners), record.projectId, record.name, record.description, record.createdNs.toString(),
        ),
      );
    } catch (error) {
      if (this.work.isUniqueViolation(error)) throw FilesErrors.bucketExists();
      throw error;
    }
    return record;
  }

  async listOwned(owner: string): Promise<BucketRecord[]> {
    const rows = await this.work.read(() => all<BucketRow>(`select ${COLUMNS} from files_buckets where owner = ? order by seq`, owner));
    return rows.map(toRecord);
  }

  async getOwned(id: string, owner: string): Promise<BucketRecord | null> {
    const row = await this.work.read(() => first<BucketRow>(`select ${COLUMNS} from files_buckets where id = ? and owner = ?`, id, owner));
    return row ? toRecord(row) : null;
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
      const row = yield* first<BucketRow>(`select ${COLUMNS} from files_buckets where id = ? and owner = ?${locking}`, id, owner);
      if (!row) return null;
      const files = yield* all<{ id: string }>('select id from files_files where bucket_id = ?', id);
      yield* refs.removeHoldersWork(files.map((file) => fileHolder(file.id)));
      yield* run('delete from files_files where bucket_id = ?', id);
      yield* run('delete from files_buckets where id = ?', id);
      return toRecord(row);
    });
  }
}
