import type { BlobPin, BlobRefs } from '../../store/blob/refs.ts';
import { all, first, run, type Work } from '../../store/sql-work.ts';
import type { SqlDatabase } from '../../store/sql/types.ts';
import type { DesiredState, EnvVar, Volume } from './driver.ts';

/** The blob-reference holder of blobs linked to a repository. */
export const repositoryHolder = (repository: string) => `run:${repository}`;
/** The blob-reference holder of an upload's chunks, released when the upload ends. */
export const uploadHolder = (uuid: string) => `run-upload:${uuid}`;

export interface RepositoryRow {
  name: string;
  owner: string;
  desired: DesiredState;
  env: EnvVar[];
  volumes: Volume[];
  /** Its host label (`<slug>.run.<domain>`), given at its first start; null before. */
  slug: string | null;
  /** The logger its container output goes to, or null. */
  loggerId: string | null;
}

export interface HistoryEntry {
  action: 'start' | 'stop' | 'rollback';
  reference: string | null;
  digest: string | null;
  user: string;
  at: string;
}

/** The console data (service README, "Console data names"), without the driver's view. */
export interface ConsoleData {
  repository: string;
  references: string[];
  env: EnvVar[];
  volumes: Volume[];
  desired: DesiredState;
  history: HistoryEntry[];
}

export interface UploadPart {
  /** Hex SHA-256 of the chunk blob. */
  sha256: string;
  size: number;
}

export interface Upload {
  id: string;
  repository: string;
  owner: string;
  size: number;
  parts: UploadPart[];
  updatedAt: number;
}

export type Ownership = 'ok' | 'denied';

export interface ManifestInput {
  repository: string;
  owner: string;
  digest: string;
  mediaType: string;
  body: Buffer;
  /** The tag to point at the manifest, or null for a push by digest. */
  tag: string | null;
  /** Blobs (config, layers) and child manifests the manifest names. */
  blobs: readonly string[];
  manifests: readonly string[];
}

export type ManifestOutcome =
  { kind: 'ok' } | { kind: 'denied' } | { kind: 'unknown'; digest: string; what: 'blob' | 'manifest' };

interface RepositorySqlRow {
  name: string;
  owner: string;
  desired_state: string;
  desired_reference: string | null;
  desired_digest: string | null;
  env: string;
  volumes: string;
  slug: string | null;
  logger_id: string | null;
}

interface UploadSqlRow {
  id: string;
  repository: string;
  owner: string;
  size: number | string;
  parts: string;
  updated_at: number | string;
}

function toRepository(row: RepositorySqlRow): RepositoryRow {
  return {
    name: row.name,
    owner: row.owner,
    desired: {
      state: row.desired_state === 'running' ? 'running' : 'stopped',
      reference: row.desired_reference,
      digest: row.desired_digest,
    },
    env: JSON.parse(row.env) as EnvVar[],
    volumes: JSON.parse(row.volumes) as Volume[],
    slug: row.slug,
    loggerId: row.logger_id,
  };
}

function toUpload(row: UploadSqlRow): Upload {
  return {
    id: row.id,
    repository: row.repository,
    owner: row.owner,
    size: Number(row.size),
    parts: JSON.parse(row.parts) as UploadPart[],
    updatedAt: Number(row.updated_at),
  };
}

/**
 * The run service's only door to SQL. Every change that must be consistent (a repository's
 * creation with its first upload or manifest, a chunk with its blob reference, a finished
 * upload's link with the release of its chunks) is one transaction.
 */
export class RunRepository {
  constructor(
    private readonly database: SqlDatabase,
    private readonly refs: BlobRefs,
  ) {}

  /** Rejects when the database does not answer (`/readyz`). */
  async reachable(): Promise<void> {
    await this.database.read(() => all('select 1'));
  }

  // ---- repositories -------------------------------------------------------------------------

  async findRepository(name: string): Promise<RepositoryRow | null> {
    const row = await this.database.read(() =>
      first<RepositorySqlRow>(
        'select name, owner, desired_state, desired_reference, desired_digest, env, volumes, slug, logger_id from run_repositories where name = ?',
        name,
      ),
    );
    return row ? toRepository(row) : null;
  }

  async ownerOf(name: string): Promise<string | null> {
    const row = await this.database.read(() =>
      first<{ owner: string }>('select owner from run_repositories where name = ?', name),
    );
    return row?.owner ?? null;
  }

  /** Creates the repository for `owner` if the name is unused; 'denied' when another user owns it. */
  private *ensureRepositoryWork(name: string, owner: string): Work<Ownership> {
    // The unique name makes two first pushes at once safe: one insert wins, the other reads its owner.
    yield* run(
      'insert into run_repositories (name, owner, created_at) values (?, ?, ?) on conflict (name) do nothing',
      name,
      owner,
      new Date().toISOString(),
    );
    const row = yield* first<{ owner: string }>('select owner from run_repositories where name = ?', name);
    return row?.owner === owner ? 'ok' : 'denied';
  }

  async consoleData(repository: RepositoryRow): Promise<ConsoleData> {
    const name = repository.name;
    const [references, history] = await this.database.read(function* () {
      const tags = yield* all<{ tag: string }>('select tag from run_tags where repository = ? order by seq', name);
      const entries = yield* all<{
        action: HistoryEntry['action'];
        reference: string | null;
        digest: string | null;
        user_id: string;
        at: string;
      }>('select action, reference, digest, user_id, at from run_history where repository = ? order by seq', name);
      return [tags.map((t) => t.tag), entries] as const;
    });
    return {
      repository: name,
      references,
      env: repository.env,
      volumes: repository.volumes,
      desired: repository.desired,
      history: history.map((h) => ({
        action: h.action,
        reference: h.reference,
        digest: h.digest,
        user: h.user_id,
        at: h.at,
      })),
    };
  }

  /**
   * Sets the desired state and, when `action` is given, appends a history entry, in one
   * transaction. Returns the repository as stored afterwards.
   */
  async setDesired(
    name: string,
    desired: DesiredState,
    entry: { action: HistoryEntry['action']; user: string; at: string } | null,
  ): Promise<RepositoryRow | null> {
    const row = await this.database.write(function* () {
      const changed = yield* run(
        'update run_repositories set desired_state = ?, desired_reference = ?, desired_digest = ? where name = ?',
        desired.state,
        desired.reference,
        desired.digest,
        name,
      );
      if (changed === 0) return undefined;
      if (entry) {
        yield* run(
          'insert into run_history (repository, action, reference, digest, user_id, at) values (?, ?, ?, ?, ?, ?)',
          name,
          entry.action,
          desired.reference,
          desired.digest,
          entry.user,
          entry.at,
        );
      }
      return yield* first<RepositorySqlRow>(
        'select name, owner, desired_state, desired_reference, desired_digest, env, volumes, slug, logger_id from run_repositories where name = ?',
        name,
      );
    });
    return row ? toRepository(row) : null;
  }

  async setConfig(name: string, column: 'env' | 'volumes', value: EnvVar[] | Volume[]): Promise<RepositoryRow | null> {
    const text = JSON.stringify(value);
    // The column name is one of two literals, never user input.
    const row = await this.database.write(function* () {
      const changed = yield* run(`update run_repositories set ${column} = ? where name = ?`, text, name);
      if (changed === 0) return undefined;
      return yield* first<RepositorySqlRow>(
        'select name, owner, desired_state, desired_reference, desired_digest, env, volumes, slug, logger_id from run_repositories where name = ?',
        name,
      );
    });
    return row ? toRepository(row) : null;
  }

  async setLogger(name: string, loggerId: string | null): Promise<RepositoryRow | null> {
    const row = await this.database.write(function* () {
      const changed = yield* run('update run_repositories set logger_id = ? where name = ?', loggerId, name);
      if (changed === 0) return undefined;
      return yield* first<RepositorySqlRow>(
        'select name, owner, desired_state, desired_reference, desired_digest, env, volumes, slug, logger_id from run_repositories where name = ?',
        name,
      );
    });
    return row ? toRepository(row) : null;
  }

  // ---- tags and manifests -------------------------------------------------------------------

  async tagDigest(repository: string, tag: string): Promise<string | null> {
    const row = await this.database.read(() =>
      first<{ digest: string }>('select digest from run_tags where repository = ? and tag = ?', repository, tag),
    );
    return row?.digest ?? null;
  }

  async manifest(repository: string, digest: string): Promise<{ mediaType: string; size: number } | null> {
    const row = await this.database.read(() =>
      first<{ media_type: string; size: number | string }>(
        'select media_type, size from run_manifests where repository = ? and digest = ?',
        repository,
        digest,
      ),
    );
    return row ? { mediaType: row.media_type, size: Number(row.size) } : null;
  }

  /** A stored manifest's bytes and media type (the podman driver assembles images from them). */
  async manifestBody(repository: string, digest: string): Promise<{ mediaType: string; body: Buffer } | null> {
    const row = await this.database.read(() =>
      first<{ media_type: string; body: Uint8Array }>(
        'select media_type, body from run_manifests where repository = ? and digest = ?',
        repository,
        digest,
      ),
    );
    return row ? { mediaType: row.media_type, body: Buffer.from(row.body) } : null;
  }

  /** The repositories `owner` owns, by name, each with its tags in first-push order. */
  async repositoriesOf(owner: string): Promise<{ row: RepositoryRow; references: string[]; createdAt: string }[]> {
    return this.database.read(function* () {
      const rows = yield* all<RepositorySqlRow & { created_at: string }>(
        'select name, owner, desired_state, desired_reference, desired_digest, env, volumes, slug, logger_id, created_at from run_repositories where owner = ? order by name',
        owner,
      );
      const tags = yield* all<{ repository: string; tag: string }>(
        'select t.repository, t.tag from run_tags t join run_repositories r on r.name = t.repository where r.owner = ? order by t.seq',
        owner,
      );
      return rows.map((row) => ({
        row: toRepository(row),
        references: tags.filter((t) => t.repository === row.name).map((t) => t.tag),
        createdAt: row.created_at,
      }));
    });
  }

  /**
   * The repository's host label (`<slug>.run.<domain>`): given once, at its first start, from its
   * name (runs of anything but a-z and 0-9 become `-`, at most 50 characters), with `-2`, `-3`, …
   * when another repository has it already.
   */
  async ensureSlug(name: string): Promise<string | null> {
    const base =
      name
        .replace(/[^a-z0-9]+/g, '-')
        .slice(0, 50)
        .replace(/^-+|-+$/g, '') || 'app';
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        return await this.database.write(function* () {
          const row = yield* first<{ slug: string | null }>('select slug from run_repositories where name = ?', name);
          if (!row) return null;
          if (row.slug) return row.slug;
          const taken = new Set(
            (yield* all<{ slug: string }>(
              'select slug from run_repositories where slug = ? or slug like ?',
              base,
              `${base}-%`,
            )).map((r) => r.slug),
          );
          let slug = base;
          for (let n = 2; taken.has(slug); n++) slug = `${base}-${n}`;
          yield* run('update run_repositories set slug = ? where name = ? and slug is null', slug, name);
          return (
            (yield* first<{ slug: string }>('select slug from run_repositories where name = ?', name))?.slug ?? null
          );
        });
      } catch (error) {
        // Two first starts picked the same label at once (the unique index): pick again.
        if (attempt === 4) throw error;
      }
    }
    return null;
  }

  /** The repository with host label `slug`, whether it should run, and its container's port. */
  async routeBySlug(slug: string): Promise<{ repository: string; running: boolean; port: number | null } | null> {
    const row = await this.database.read(() =>
      first<{ name: string; desired_state: string; port: number | string | null }>(
        `select r.name, r.desired_state, d.port from run_repositories r
         left join run_driver_records d on d.repository = r.name where r.slug = ?`,
        slug,
      ),
    );
    if (!row) return null;
    return {
      repository: row.name,
      running: row.desired_state === 'running',
      port: row.port === null ? null : Number(row.port),
    };
  }

  /** Every repository, by name (a driver reconciling the engine with the desired states). */
  async allRepositories(): Promise<RepositoryRow[]> {
    const rows = await this.database.read(() =>
      all<RepositorySqlRow>(
        'select name, owner, desired_state, desired_reference, desired_digest, env, volumes, slug, logger_id from run_repositories order by name',
      ),
    );
    return rows.map(toRepository);
  }

  /**
   * The value that marks this platform's containers and volumes on an engine other platforms may
   * share (a random id made once; the first instance to ask makes it).
   */
  async engineScope(candidate: string): Promise<string> {
    const row = await this.database.write(function* () {
      yield* run(
        "insert into run_settings (name, value) values ('engine_scope', ?) on conflict (name) do nothing",
        candidate,
      );
      return yield* first<{ value: string }>("select value from run_settings where name = 'engine_scope'");
    });
    return row?.value ?? candidate;
  }

  /**
   * Stores a manifest (creating the repository on a first push) after checking, in the same
   * transaction, that every blob and child manifest it names is in the repository; points `tag`
   * at it when given.
   */
  async putManifest(input: ManifestInput): Promise<ManifestOutcome> {
    return this.database.write(() => this.putManifestWork(input, new Date().toISOString()));
  }

  private *putManifestWork(input: ManifestInput, now: string): Work<ManifestOutcome> {
    const { repository, owner, digest, mediaType, body, tag, blobs, manifests } = input;
    if ((yield* this.ensureRepositoryWork(repository, owner)) === 'denied') return { kind: 'denied' };
    for (const blob of new Set(blobs)) {
      const found = yield* first(
        'select 1 as present from run_blobs where repository = ? and digest = ?',
        repository,
        blob,
      );
      if (!found) return { kind: 'unknown', digest: blob, what: 'blob' };
    }
    for (const child of new Set(manifests)) {
      const found = yield* first(
        'select 1 as present from run_manifests where repository = ? and digest = ?',
        repository,
        child,
      );
      if (!found) return { kind: 'unknown', digest: child, what: 'manifest' };
    }
    yield* run(
      'insert into run_manifests (repository, digest, media_type, size, body, created_at) values (?, ?, ?, ?, ?, ?) on conflict (repository, digest) do nothing',
      repository,
      digest,
      mediaType,
      body.byteLength,
      body,
      now,
    );
    if (tag !== null) {
      // The tag keeps its `seq` (its place in `references`) when it moves to another manifest.
      yield* run(
        'insert into run_tags (repository, tag, digest) values (?, ?, ?) on conflict (repository, tag) do update set digest = excluded.digest',
        repository,
        tag,
        digest,
      );
    }
    return { kind: 'ok' };
  }

  // ---- blobs --------------------------------------------------------------------------------

  /** The size of a blob linked to the repository, or null. */
  async linkedBlob(repository: string, digest: string): Promise<number | null> {
    const row = await this.database.read(() =>
      first<{ size: number | string }>(
        'select size from run_blobs where repository = ? and digest = ?',
        repository,
        digest,
      ),
    );
    return row ? Number(row.size) : null;
  }

  private *linkWork(repository: string, digest: string, size: number, pin: BlobPin): Work<void> {
    yield* run(
      'insert into run_blobs (repository, digest, size, created_at) values (?, ?, ?, ?) on conflict (repository, digest) do nothing',
      repository,
      digest,
      size,
      new Date().toISOString(),
    );
    yield* this.refs.addWork(pin, repositoryHolder(repository));
  }

  /** Monolithic upload: links a stored blob (creating the repository on a first push). */
  async linkBlob(repository: string, owner: string, digest: string, size: number, pin: BlobPin): Promise<Ownership> {
    return this.database.write(() => this.linkBlobWork(repository, owner, digest, size, pin));
  }

  private *linkBlobWork(
    repository: string,
    owner: string,
    digest: string,
    size: number,
    pin: BlobPin,
  ): Work<Ownership> {
    if ((yield* this.ensureRepositoryWork(repository, owner)) === 'denied') return 'denied';
    yield* this.linkWork(repository, digest, size, pin);
    return 'ok';
  }

  // ---- uploads ------------------------------------------------------------------------------

  async startUpload(id: string, repository: string, owner: string, now: number): Promise<Ownership> {
    return this.database.write(() => this.startUploadWork(id, repository, owner, now));
  }

  private *startUploadWork(id: string, repository: string, owner: string, now: number): Work<Ownership> {
    if ((yield* this.ensureRepositoryWork(repository, owner)) === 'denied') return 'denied';
    yield* run(
      'insert into run_uploads (id, repository, owner, size, parts, created_at, updated_at) values (?, ?, ?, 0, ?, ?, ?)',
      id,
      repository,
      owner,
      '[]',
      now,
      now,
    );
    return 'ok';
  }

  async upload(id: string): Promise<Upload | null> {
    const row = await this.database.read(() =>
      first<UploadSqlRow>('select id, repository, owner, size, parts, updated_at from run_uploads where id = ?', id),
    );
    return row ? toUpload(row) : null;
  }

  /**
   * Appends a stored chunk when the upload still has `expectedSize` bytes (another chunk that
   * landed meanwhile, on this or another instance, makes it 'conflict'), and makes the upload
   * hold the chunk's blob.
   */
  async appendPart(
    id: string,
    expectedSize: number,
    part: UploadPart,
    pin: BlobPin | null,
    now: number,
  ): Promise<'ok' | 'gone' | 'conflict'> {
    const refs = this.refs;
    return this.database.write(function* () {
      const row = yield* first<UploadSqlRow>(
        'select id, repository, owner, size, parts, updated_at from run_uploads where id = ?',
        id,
      );
      if (!row) return 'gone';
      const upload = toUpload(row);
      if (upload.size !== expectedSize) return 'conflict';
      const parts = part.size > 0 ? [...upload.parts, part] : upload.parts;
      // Guarded by the size as well: on PostgreSQL a concurrent append that committed first makes this match nothing.
      const changed = yield* run(
        'update run_uploads set size = ?, parts = ?, updated_at = ? where id = ? and size = ?',
        expectedSize + part.size,
        JSON.stringify(parts),
        now,
        id,
        expectedSize,
      );
      if (changed === 0) return 'conflict';
      if (pin) yield* refs.addWork(pin, uploadHolder(id));
      return 'ok';
    });
  }

  /**
   * Ends an upload whose bytes were verified: links the blob to the repository and releases the
   * chunks (the sweeper deletes them once nothing else holds them).
   */
  async finishUpload(upload: Upload, digest: string, size: number, pin: BlobPin): Promise<'ok' | 'gone' | 'conflict'> {
    return this.database.write(() => this.finishUploadWork(upload, digest, size, pin));
  }

  private *finishUploadWork(
    upload: Upload,
    digest: string,
    size: number,
    pin: BlobPin,
  ): Work<'ok' | 'gone' | 'conflict'> {
    const row = yield* first<{ size: number | string }>('select size from run_uploads where id = ?', upload.id);
    if (!row) return 'gone';
    if (Number(row.size) !== upload.size) return 'conflict';
    yield* this.linkWork(upload.repository, digest, size, pin);
    yield* this.refs.removeHoldersWork([uploadHolder(upload.id)]);
    yield* run('delete from run_uploads where id = ?', upload.id);
    return 'ok';
  }

  /** Cancels an upload (DELETE, digest mismatch, expiry); returns whether it existed. */
  async discardUpload(id: string): Promise<boolean> {
    const refs = this.refs;
    return this.database.write(function* () {
      const removed = yield* run('delete from run_uploads where id = ?', id);
      if (removed > 0) yield* refs.removeHoldersWork([uploadHolder(id)]);
      return removed > 0;
    });
  }

  /** Discards uploads idle since before `cutoff` (ms); returns how many. */
  async expireUploads(cutoff: number, batch = 100): Promise<number> {
    let expired = 0;
    for (;;) {
      const rows = await this.database.read(() =>
        all<{ id: string }>(
          'select id from run_uploads where updated_at < ? order by updated_at limit ?',
          cutoff,
          batch,
        ),
      );
      for (const row of rows) if (await this.discardUpload(row.id)) expired++;
      if (rows.length < batch) return expired;
    }
  }
}
