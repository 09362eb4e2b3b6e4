import { SizedCache } from '../../store/cache.ts';
import type { SqlConnection } from '../../store/db.ts';
import { SharedCache, type ChangeFeed } from '../../store/shared-cache.ts';
import { all, first, run } from '../../store/sql-work.ts';
import type { SqlDatabase } from '../../store/sql/types.ts';

export const LANGUAGES = ['javascript', 'static-html', 'static-css', 'static-js'] as const;
export type Language = (typeof LANGUAGES)[number];

export interface Lambda {
  id: string;
  created_timestamp: number;
  owner: string;
  project_id: string;
  name: string;
  language: Language;
  code: string;
  method: string;
  path: string;
  /** Shown to the owner; the code's environment together with the secrets (README: Environment and secrets). */
  env: Record<string, string>;
  /** The names of the secrets, sorted; their sealed values are read apart (`secretsOf`). */
  secret_names: string[];
  /** The logger the lambda's output goes to, or null. */
  logger_id: string | null;
  /** Its cron schedule, or null (README: Cron schedules). */
  schedule: string | null;
  /** The schedule's IANA time zone; null is UTC. */
  schedule_tz: string | null;
}

/** What a lambda's env and secrets are stored as: `secrets` sealed (secrets.ts), null when there are none. */
export interface StoredSettings {
  env: Record<string, string>;
  secret_names: string[];
  secrets: string | null;
}

/**
 * The fields a change may set besides env and secrets. A change of the schedule carries its next
 * tick (`next_run_ms`, epoch ms, null without a schedule), written with it.
 */
export type LambdaChanges = Partial<
  Pick<Lambda, 'name' | 'language' | 'code' | 'method' | 'path' | 'logger_id' | 'schedule' | 'schedule_tz'>
> & { next_run_ms?: number | null };

/**
 * Every column of a `Lambda`; the sealed `secrets` are not among them, nor `next_run_ms`, which
 * every tick changes: a cached lambda would show it stale, so it is read apart (`nextRunOf`).
 */
const COLUMNS =
  'id, created_timestamp, owner, project_id, name, language, code, method, path, env, secret_names, logger_id, schedule, schedule_tz';

/** The columns a change may set, in the order the update statement names them. */
const CHANGEABLE = [
  'name',
  'language',
  'code',
  'method',
  'path',
  'logger_id',
  'schedule',
  'schedule_tz',
  'next_run_ms',
] as const;

/** A scheduled lambda whose tick is due (cron.ts). */
export interface DueSchedule {
  id: string;
  schedule: string;
  schedule_tz: string | null;
  next_run_ms: number;
}

/** Thrown when an owner already has a lambda with that name. */
export class NameTaken extends Error {}

/** A row as the database gives it: env and secret names as JSON text. */
type LambdaRow = Omit<Lambda, 'env' | 'secret_names'> & { env: string; secret_names: string };

function row(r: LambdaRow): Lambda {
  return {
    ...r,
    created_timestamp: Number(r.created_timestamp),
    env: JSON.parse(r.env) as Record<string, string>,
    secret_names: JSON.parse(r.secret_names) as string[],
  };
}

/** A cached lambda with its sealed secrets, which are kept out of the `Lambda` itself. */
interface Stored {
  lambda: Lambda;
  secrets: string | null;
}

/** Strips one trailing slash so `/hello` and `/hello/` are one route; `/` stays `/`. */
export function routeKey(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

/** Notifier topics of the read caches: a lambda's id when it changes; any change of the routes. */
export const LAMBDA_CHANGED_TOPIC = 'lambda.functions';
export const LAMBDA_ROUTES_TOPIC = 'lambda.routes';

const CACHE_BYTES = 32 * 1024 * 1024;
const sizeOf = (lambda: Lambda): number =>
  lambda.code.length + JSON.stringify(lambda.env).length + lambda.secret_names.join().length + 256;
const storedSizeOf = (stored: Stored): number => sizeOf(stored.lambda) + (stored.secrets?.length ?? 0);

/**
 * The lambda service's only door to storage. The invocation path's lookups (by id, and the mux's
 * route choice) are served from read caches kept right across instances by the store's
 * SharedCache (README: Caching): an update is run by every instance from its next invocation on.
 * Lambdas returned from the caches are shared: callers do not change them.
 */
export class LambdaRepository {
  private readonly database: SqlDatabase;
  private readonly byId: SharedCache<Stored>;
  private readonly routes: SharedCache<Lambda>;

  /** `feed` is required where the process is not the database's only writer. */
  constructor(connection: SqlConnection, feed?: ChangeFeed) {
    this.database = connection.database;
    const { soleWriter } = this.database;
    this.byId = new SharedCache(new SizedCache(CACHE_BYTES, storedSizeOf), LAMBDA_CHANGED_TOPIC, soleWriter, feed);
    this.routes = new SharedCache(new SizedCache(CACHE_BYTES, sizeOf), LAMBDA_ROUTES_TOPIC, soleWriter, feed);
  }

  /** Stops listening for other instances' changes. */
  close(): void {
    this.byId.close();
    this.routes.close();
  }

  /** After a committed change of lambda `id`: its entry and every cached route choice go. */
  private async changed(id: string): Promise<void> {
    await Promise.all([this.byId.written(id), this.routes.written(undefined)]);
  }

  /** Stores a new lambda with its sealed secrets (null: none) and its first tick (null: no schedule). */
  async create(lambda: Lambda, secrets: string | null, nextRunMs: number | null = null): Promise<Lambda> {
    const { id, created_timestamp, owner, project_id, name, language, code, method, path, env } = lambda;
    try {
      await this.database.write(() =>
        run(
          `insert into lambda_functions (${COLUMNS}, secrets, next_run_ms) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          id,
          created_timestamp,
          owner,
          project_id,
          name,
          language,
          code,
          method,
          path,
          JSON.stringify(env),
          JSON.stringify(lambda.secret_names),
          lambda.logger_id,
          lambda.schedule,
          lambda.schedule_tz,
          secrets,
          nextRunMs,
        ),
      );
    } catch (err) {
      if (this.database.isUniqueViolation(err)) throw new NameTaken(lambda.name);
      throw err;
    }
    await this.changed(id);
    return lambda;
  }

  async list(owner: string, projectId: string | null): Promise<Lambda[]> {
    const rows = await this.database.read(() =>
      projectId === null
        ? all<LambdaRow>(`select ${COLUMNS} from lambda_functions where owner = ? order by seq`, owner)
        : all<LambdaRow>(
            `select ${COLUMNS} from lambda_functions where owner = ? and project_id = ? order by seq`,
            owner,
            projectId,
          ),
    );
    return rows.map(row);
  }

  /** The lambda and its sealed secrets, from the cache. */
  private stored(id: string): Promise<Stored | null> {
    return this.byId.read(id, async () => {
      const r = await this.database.read(() =>
        first<LambdaRow & { secrets: string | null }>(
          `select ${COLUMNS}, secrets from lambda_functions where id = ?`,
          id,
        ),
      );
      if (!r) return null;
      const { secrets, ...rest } = r;
      return { lambda: row(rest), secrets };
    });
  }

  async get(id: string): Promise<Lambda | null> {
    return (await this.stored(id))?.lambda ?? null;
  }

  /** The sealed secrets of lambda `id` (secrets.ts), null when it has none or does not exist; cached as `get` is. */
  async secretsOf(id: string): Promise<string | null> {
    return (await this.stored(id))?.secrets ?? null;
  }

  /**
   * Changes the lambda's fields. `settle`, when given, gets the stored env and secrets inside the
   * write's transaction (the row locked) and returns what to store instead; what it throws
   * leaves everything unchanged.
   */
  async update(
    id: string,
    changes: LambdaChanges,
    settle?: (stored: StoredSettings) => StoredSettings,
  ): Promise<Lambda | null> {
    const columns = CHANGEABLE.filter((column) => changes[column] !== undefined);
    if (columns.length > 0 || settle) {
      const { forUpdate } = this.database.syntax;
      this.byId.writing(id);
      this.routes.writing();
      try {
        await this.database.write(function* () {
          const assignments = columns.map((column) => `${column} = ?`);
          const values: unknown[] = columns.map((column) => changes[column]);
          if (settle) {
            const current = yield* first<{ env: string; secret_names: string; secrets: string | null }>(
              `select env, secret_names, secrets from lambda_functions where id = ?${forUpdate}`,
              id,
            );
            if (!current) return 0;
            const next = settle({
              env: JSON.parse(current.env) as Record<string, string>,
              secret_names: JSON.parse(current.secret_names) as string[],
              secrets: current.secrets,
            });
            assignments.push('env = ?', 'secret_names = ?', 'secrets = ?');
            values.push(JSON.stringify(next.env), JSON.stringify(next.secret_names), next.secrets);
          }
          return yield* run(`update lambda_functions set ${assignments.join(', ')} where id = ?`, ...values, id);
        });
      } catch (err) {
        if (this.database.isUniqueViolation(err)) throw new NameTaken(changes.name ?? '');
        throw err;
      } finally {
        await this.changed(id);
      }
    }
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    this.byId.writing(id);
    this.routes.writing();
    const deleted = (await this.database.write(() => run('delete from lambda_functions where id = ?', id))) > 0;
    if (deleted) await this.changed(id);
    return deleted;
  }

  /**
   * The mux choice (README: Invocation, mux): candidates by owner or project, method equal
   * (HEAD also matches GET) or ANY, path equal ignoring one trailing slash; an exact method beats
   * ANY, then the oldest wins.
   */
  route(scope: { owner: string } | { projectId: string }, method: string, path: string): Promise<Lambda | null> {
    const key = routeKey(path);
    const methods = method === 'HEAD' ? ['HEAD', 'GET', 'ANY'] : [method, 'ANY'];
    const [scopeColumn, scopeValue] = 'owner' in scope ? ['owner', scope.owner] : ['project_id', scope.projectId];
    return this.routes.read(`${scopeColumn}\n${scopeValue}\n${method}\n${key}`, async () => {
      const rows = await this.database.read(() =>
        all<LambdaRow>(
          `select ${COLUMNS} from lambda_functions where method in (${methods.map(() => '?').join(', ')}) and (path = ? or path = ?) and ${scopeColumn} = ? order by seq`,
          ...methods,
          key,
          `${key}/`,
          scopeValue,
        ),
      );
      const exact = rows.find((r) => r.method !== 'ANY' && routeKey(r.path) === key);
      const any = rows.find((r) => routeKey(r.path) === key);
      const chosen = exact ?? any;
      return chosen ? row(chosen) : null;
    });
  }

  /** The next tick of lambda `id` in epoch ms, read from the database (never cached); null without a schedule. */
  async nextRunOf(id: string): Promise<number | null> {
    const r = await this.database.read(() =>
      first<{ next_run_ms: unknown }>('select next_run_ms from lambda_functions where id = ?', id),
    );
    return r?.next_run_ms == null ? null : Number(r.next_run_ms);
  }

  /** The next ticks of the owner's scheduled lambdas (in the project, if given), by id. */
  async nextRunsOf(owner: string, projectId: string | null): Promise<Map<string, number>> {
    const rows = await this.database.read(() =>
      projectId === null
        ? all<{ id: string; next_run_ms: unknown }>(
            'select id, next_run_ms from lambda_functions where owner = ? and next_run_ms is not null',
            owner,
          )
        : all<{ id: string; next_run_ms: unknown }>(
            'select id, next_run_ms from lambda_functions where owner = ? and project_id = ? and next_run_ms is not null',
            owner,
            projectId,
          ),
    );
    return new Map(rows.map((r) => [r.id, Number(r.next_run_ms)]));
  }

  /** Up to `limit` scheduled lambdas whose tick is due at `nowMs`, the earliest first. */
  async dueSchedules(nowMs: number, limit: number): Promise<DueSchedule[]> {
    const rows = await this.database.read(() =>
      all<{ id: string; schedule: string; schedule_tz: string | null; next_run_ms: unknown }>(
        'select id, schedule, schedule_tz, next_run_ms from lambda_functions where next_run_ms <= ? and schedule is not null order by next_run_ms limit ?',
        nowMs,
        limit,
      ),
    );
    return rows.map((r) => ({ ...r, next_run_ms: Number(r.next_run_ms) }));
  }

  /** The earliest next tick of any lambda, or null when none has a schedule. */
  async earliestRun(): Promise<number | null> {
    const r = await this.database.read(() =>
      first<{ next_run_ms: unknown }>('select min(next_run_ms) as next_run_ms from lambda_functions'),
    );
    return r?.next_run_ms == null ? null : Number(r.next_run_ms);
  }

  /**
   * The claim of a due tick: moves `next_run_ms` from the value `due` was read with to `next`,
   * only if the row still has that value and that schedule. One statement, so of the instances
   * that read the same row exactly one changes it; true for that one. The schedule is compared as
   * well, so a tick computed from a schedule changed meanwhile never overwrites the new one's.
   */
  async claimTick(due: DueSchedule, next: number | null): Promise<boolean> {
    const changed = await this.database.writeEach(() =>
      run(
        "update lambda_functions set next_run_ms = ? where id = ? and next_run_ms = ? and schedule = ? and coalesce(schedule_tz, '') = ?",
        next,
        due.id,
        due.next_run_ms,
        due.schedule,
        due.schedule_tz ?? '',
      ),
    );
    return changed > 0;
  }

  /** Whether the user owns the project (the apikeys service's table; absent → nobody owns it). */
  async ownsProject(userId: string, projectId: string): Promise<boolean> {
    try {
      const r = await this.database.read(() =>
        first('select 1 as one from apikeys_project_owners where project_id = ? and user_id = ?', projectId, userId),
      );
      return r !== undefined;
    } catch {
      return false;
    }
  }
}
