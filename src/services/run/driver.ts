import type { SqlConnection } from '../../store/db.ts';
import { first, run } from '../../store/sql-work.ts';
import type { SqlDatabase } from '../../store/sql/types.ts';
import { rfc3339 } from '../../core/ids.ts';

export interface EnvVar {
  key: string;
  desired_value: string;
}

export interface Volume {
  name: string;
  target: string;
  mode: 'rw' | 'ro';
}

/** The repository's desired state as the console shows it (service README, "Console data names"). */
export interface DesiredState {
  state: 'running' | 'stopped';
  /** The tag it was started at, or null (started by digest, or never started). */
  reference: string | null;
  /** The manifest digest, or null when never started. */
  digest: string | null;
}

/** Everything a driver needs to make one repository follow its desired state. */
export interface DesiredDeployment extends DesiredState {
  env: EnvVar[];
  volumes: Volume[];
}

/**
 * What the engine reports (the console data's `actual.state`; service README, "Actual state"):
 * `unknown` when the driver cannot tell (the recording driver runs nothing, so it never claims
 * a container runs — decisions 49).
 */
export type ActualRunState = 'running' | 'starting' | 'restarting' | 'exited' | 'stopped' | 'failed' | 'unknown';

/** What a driver reports (the console data's `actual`). */
export interface ActualState {
  state: ActualRunState;
  /** The tag it runs (or was last asked to run), or null (by digest, or nothing). */
  reference: string | null;
  /** The manifest digest it runs (or was last asked to run), or null. */
  digest: string | null;
  /** When the driver last applied a change (RFC 3339 UTC). */
  applied_at: string;
  /** The container's exit code, when `exited`. */
  exit_code?: number;
  /** Why the last change failed (`failed`: the engine's own message), when it did. */
  message?: string;
}

/**
 * What makes reality follow the desired state. The console saves the desired state first (it is
 * the durable record) and then calls `apply`, waiting for it; a driver must be idempotent, since
 * the same state may be applied again (a retried call, a stop of a stopped repository, an env
 * change on a running one). See the service README for the container-engine contract.
 */
export interface RuntimeDriver {
  readonly name: string;
  /** Make `repository` match `desired`. Rejecting reports a driver failure (502 to the caller). */
  apply(repository: string, desired: DesiredDeployment): Promise<void>;
  /** The state the driver has applied, or null when it has never applied anything here. */
  status?(repository: string): Promise<ActualState | null>;
  /** `status` of many repositories at once (the repository list), when the driver can do better than one by one. */
  statuses?(repositories: string[]): Promise<Map<string, ActualState | null>>;
  /** False while the driver cannot apply anything (`/readyz` answers 503). */
  ready?(): Promise<boolean>;
  /** Makes reality follow every stored desired state (called once when the service starts). */
  reconcile?(): Promise<void>;
  close?(): Promise<void>;
}

/** What a driver was last asked to apply to a repository, and whether that failed. */
export interface DriverRecord {
  state: 'running' | 'stopped';
  reference: string | null;
  digest: string | null;
  applied_at: string;
  /** Why applying it failed; null when it succeeded. */
  message: string | null;
}

interface RecordRow {
  state: string;
  reference: string | null;
  digest: string | null;
  applied_at: string;
  message: string | null;
}

/**
 * `run_driver_records`: one row per repository of what the driver was last asked to apply, in
 * SQL so every instance reports the same thing.
 */
export class DriverRecords {
  private readonly database: SqlDatabase;

  constructor(connection: SqlConnection) {
    this.database = connection.database;
  }

  async save(repository: string, desired: DesiredDeployment, message: string | null): Promise<DriverRecord> {
    const at = rfc3339();
    // An upsert: two instances applying at once must not collide on the primary key.
    await this.database.write(() =>
      run(
        `insert into run_driver_records (repository, state, reference, digest, env, volumes, applied_at, message) values (?, ?, ?, ?, ?, ?, ?, ?)
         on conflict (repository) do update set state = excluded.state, reference = excluded.reference, digest = excluded.digest,
         env = excluded.env, volumes = excluded.volumes, applied_at = excluded.applied_at, message = excluded.message`,
        repository,
        desired.state,
        desired.reference,
        desired.digest,
        JSON.stringify(desired.env),
        JSON.stringify(desired.volumes),
        at,
        message,
      ),
    );
    return { state: desired.state, reference: desired.reference, digest: desired.digest, applied_at: at, message };
  }

  /** The loopback port the repository's running container is published on (null: none). */
  async setPort(repository: string, port: number | null): Promise<void> {
    await this.database.write(() =>
      run('update run_driver_records set port = ? where repository = ?', port, repository),
    );
  }

  async find(repository: string): Promise<DriverRecord | null> {
    const row = await this.database.read(() =>
      first<RecordRow>(
        'select state, reference, digest, applied_at, message from run_driver_records where repository = ?',
        repository,
      ),
    );
    if (!row) return null;
    return { ...row, state: row.state === 'running' ? 'running' : 'stopped' };
  }
}

/**
 * The default driver: it records what it was asked to apply (in SQL, so every instance reports
 * the same `actual`) and runs nothing, so its `actual.state` is always `unknown`.
 */
export class RecordingDriver implements RuntimeDriver {
  readonly name = 'recording';
  private readonly records: DriverRecords;

  constructor(connection: SqlConnection) {
    this.records = new DriverRecords(connection);
  }

  async apply(repository: string, desired: DesiredDeployment): Promise<void> {
    await this.records.save(repository, desired, null);
  }

  async status(repository: string): Promise<ActualState | null> {
    const record = await this.records.find(repository);
    if (!record) return null;
    // Nothing runs: what it was last asked to apply is all it knows (decisions 49).
    return { state: 'unknown', reference: record.reference, digest: record.digest, applied_at: record.applied_at };
  }
}
