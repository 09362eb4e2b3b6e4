import { sql, type Generated, type Kysely } from 'kysely';
import type { SqlConnection } from '../../store/db.ts';

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
}

type LambdaTables = {
  lambda_functions: Omit<Lambda, 'language'> & { seq: Generated<number>; language: string };
  apikeys_project_owners: { project_id: string; user_id: string };
};

const COLUMNS = ['id', 'created_timestamp', 'owner', 'project_id', 'name', 'language', 'code', 'method', 'path'] as const;

/** Thrown when an owner already has a lambda with that name. */
export class NameTaken extends Error {}

function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e.code === '23505' || e.code === 'SQLITE_CONSTRAINT_UNIQUE' || (typeof e.message === 'string' && /UNIQUE constraint failed/.test(e.message));
}

function row(r: Record<string, unknown>): Lambda {
  return { ...(r as unknown as Lambda), created_timestamp: Number(r.created_timestamp) };
}

/** Strips one trailing slash so `/hello` and `/hello/` are one route; `/` stays `/`. */
export function routeKey(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

/** The lambda service's only door to storage. Every read goes to the database (scale-out safe). */
export class LambdaRepository {
  private readonly db: Kysely<LambdaTables>;

  constructor(connection: SqlConnection) {
    this.db = connection.db.withTables<LambdaTables>();
  }

  async create(lambda: Lambda): Promise<Lambda> {
    try {
      await this.db.insertInto('lambda_functions').values(lambda).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw new NameTaken(lambda.name);
      throw err;
    }
    return lambda;
  }

  async list(owner: string, projectId: string | null): Promise<Lambda[]> {
    let q = this.db.selectFrom('lambda_functions').select(COLUMNS).where('owner', '=', owner);
    if (projectId !== null) q = q.where('project_id', '=', projectId);
    return (await q.orderBy('seq').execute()).map(row);
  }

  async get(id: string): Promise<Lambda | null> {
    const r = await this.db.selectFrom('lambda_functions').select(COLUMNS).where('id', '=', id).executeTakeFirst();
    return r ? row(r) : null;
  }

  async update(id: string, changes: Partial<Pick<Lambda, 'name' | 'language' | 'code' | 'method' | 'path'>>): Promise<Lambda | null> {
    if (Object.keys(changes).length > 0) {
      try {
        await this.db.updateTable('lambda_functions').set(changes).where('id', '=', id).execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw new NameTaken(changes.name ?? '');
        throw err;
      }
    }
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    const r = await this.db.deleteFrom('lambda_functions').where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }

  /**
   * The mux choice (lambda.md §5.3, decision 18): candidates by owner or project, method equal
   * (HEAD also matches GET) or ANY, path equal ignoring one trailing slash; an exact method beats
   * ANY, then the oldest wins.
   */
  async route(scope: { owner: string } | { projectId: string }, method: string, path: string): Promise<Lambda | null> {
    const key = routeKey(path);
    const methods = method === 'HEAD' ? ['HEAD', 'GET', 'ANY'] : [method, 'ANY'];
    let q = this.db.selectFrom('lambda_functions').select([...COLUMNS, 'seq'])
      .where('method', 'in', methods)
      .where((eb) => eb.or([eb('path', '=', key), eb('path', '=', `${key}/`)]));
    q = 'owner' in scope ? q.where('owner', '=', scope.owner) : q.where('project_id', '=', scope.projectId);
    const rows = await q.orderBy('seq').execute();
    const exact = rows.find((r) => r.method !== 'ANY' && routeKey(r.path) === key);
    const any = rows.find((r) => routeKey(r.path) === key);
    const chosen = exact ?? any;
    return chosen ? row(chosen) : null;
  }

  /** Whether the user owns the project (the apikeys service's table; absent → nobody owns it). */
  async ownsProject(userId: string, projectId: string): Promise<boolean> {
    try {
      const r = await this.db.selectFrom('apikeys_project_owners').select(sql<number>`1`.as('one'))
        .where('project_id', '=', projectId).where('user_id', '=', userId).executeTakeFirst();
      return r !== undefined;
    } catch {
      return false;
    }
  }
}
