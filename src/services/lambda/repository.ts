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
  /** The logger the lambda's console lines are ingested into, if any (README: Invocation history and logs). */
  logger_id?: string | null;
}

const COLUMNS = 'id, created_timestamp, owner, project_id, name, language, code, method, path';

/** The columns a change may set, in the order the update statement names them. */
const CHANGEABLE = ['name', 'language', 'code', 'method', 'path'] as const;

/** Thrown when an owner already has a lambda with that name. */
export class NameTaken extends Error {}

function row(r: Lambda): Lambda {
  return { ...r, created_timestamp: Number(r.created_timestamp) };
}

/** Strips one trailing slash so `/hello` and `/hello/` are one route; `/` stays `/`. */
export function routeKey(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

/** Notifier topics of the read caches: a lambda's id when it changes; any change of the routes. */
export const LAMBDA_CHANGED_TOPIC = 'lambda.functions';
export const LAMBDA_ROUTES_TOPIC = 'lambda.routes';

const CACHE_BYTES = 32 * 1024 * 1024;
const sizeOf = (lambda: Lambda): number => lambda.code.length + 256;

/**
 * The lambda service's only door to storage. The invocation path's lookups (by id, and the mux's
 * route choice) are served from read caches kept right across instances by the store's
 * SharedCache (README: Caching): an update is run by every instance from its next invocation on.
 * Lambdas returned from the caches are shared: callers do not change them.
 */
export class LambdaRepository {
  private readonly database: SqlDatabase;
  private readonly byId: SharedCache<Lambda>;
  private readonly routes: SharedCache<Lambda>;

  /** `feed` is required where the process is not the database's only writer. */
  constructor(connection: SqlConnection, feed?: ChangeFeed) {
    this.database = connection.database;
    const { soleWriter } = this.database;
    this.byId = new SharedCache(new SizedCache(CACHE_BYTES, sizeOf), LAMBDA_CHANGED_TOPIC, soleWriter, feed);
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

  async create(lambda: Lambda): Promise<Lambda> {
    const { id, created_timestamp, owner, project_id, name, language, code, method, path } = lambda;
    try {
      await this.database.write(() =>
        run(
          `insert into lambda_functions (${COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          id,
          created_timestamp,
          owner,
          project_id,
          name,
          language,
          code,
          method,
          path,
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
        ? all<Lambda>(`select ${COLUMNS} from lambda_functions where owner = ? order by seq`, owner)
        : all<Lambda>(
            `select ${COLUMNS} from lambda_functions where owner = ? and project_id = ? order by seq`,
            owner,
            projectId,
          ),
    );
    return rows.map(row);
  }

  get(id: string): Promise<Lambda | null> {
    return this.byId.read(id, async () => {
      const r = await this.database.read(() =>
        first<Lambda>(`select ${COLUMNS} from lambda_functions where id = ?`, id),
      );
      return r ? row(r) : null;
    });
  }

  async update(
    id: string,
    changes: Partial<Pick<Lambda, 'name' | 'language' | 'code' | 'method' | 'path'>>,
  ): Promise<Lambda | null> {
    const columns = CHANGEABLE.filter((column) => changes[column] !== undefined);
    if (columns.length > 0) {
      const assignments = columns.map((column) => `${column} = ?`).join(', ');
      const values = columns.map((column) => changes[column]);
      this.byId.writing(id);
      this.routes.writing();
      try {
        await this.database.write(() => run(`update lambda_functions set ${assignments} where id = ?`, ...values, id));
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
        all<Lambda>(
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
