import type { SqlConnection } from '../../store/db.ts';
import { all, first, run } from '../../store/sql-work.ts';
import type { SqlDatabase } from '../../store/sql/types.ts';

/** Where a key is valid (README: Scopes); always stored with both members present. */
export interface Scope {
  projects: string[];
  host_rules: Record<string, string>;
}

/** A key as its owner sees it in a list: never the secret or its hash. */
export interface ApiKeySummary {
  key: string;
  name: string;
  scopes: Scope[];
}

export interface NewApiKey extends ApiKeySummary {
  owner: string;
  secretHash: string;
  createdAt: string;
}

/** What the gateway needs to check a presented key: the owner to act as, the hash, the scopes. */
export interface StoredApiKey {
  key: string;
  owner: string;
  secretHash: string;
  scopes: Scope[];
}

export interface Project {
  id: string;
  name: string;
  slug: string;
  /** User ids, the creator first. */
  owners: string[];
  /** Origins (`scheme://host[:port]`) whose pages may call the platform with plain CORS, in the order given. */
  allowed_origins: string[];
  created_at: string;
}

/** What `PATCH /v0/projects/{id}` may change. */
export interface ProjectChanges {
  name?: string;
  allowed_origins?: string[];
}

type ProjectRow = {
  id: string;
  name: string;
  slug: string;
  owners: string;
  allowed_origins: string;
  created_at: string;
};

const PROJECT_COLUMNS = 'id, name, slug, owners, allowed_origins, created_at';
/** The same columns of `apikeys_projects as p`, for joins. */
const P_PROJECT_COLUMNS = 'p.id, p.name, p.slug, p.owners, p.allowed_origins, p.created_at';

function toProject(row: ProjectRow): Project {
  return {
    id: row.id,
    name: row.name,
    slug: row.slug,
    owners: JSON.parse(row.owners) as string[],
    allowed_origins: JSON.parse(row.allowed_origins) as string[],
    created_at: row.created_at,
  };
}

/** True when `error` is the slug's UNIQUE constraint refusing a row (SQLite or PostgreSQL). */
function isSlugConflict(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, constraint, message } = error as { code?: unknown; constraint?: unknown; message?: unknown };
  if (code === '23505') return constraint === 'apikeys_projects_slug_unique';
  return (
    code === 'SQLITE_CONSTRAINT_UNIQUE' && typeof message === 'string' && message.includes('apikeys_projects.slug')
  );
}

// Read functions the gateway uses for its key check and project-host routing; exported on their
// own so that the gateway does not need the service's repository object.

/** A key by its public id, with owner, secret hash and scopes; null when unknown or revoked. */
export async function findApiKey(connection: SqlConnection, key: string): Promise<StoredApiKey | null> {
  type Row = { key: string; owner: string; secret_hash: string; scopes: string };
  // Every request with an Api-Key the cache does not hold asks this (database keys of docdb pass
  // through the gateway too): one keyed read, which the port answers synchronously on SQLite when
  // the connection is free.
  const row = await connection.database.read(() =>
    first<Row>('select key, owner, secret_hash, scopes from apikeys_keys where key = ?', key),
  );
  return row
    ? { key: row.key, owner: row.owner, secretHash: row.secret_hash, scopes: JSON.parse(row.scopes) as Scope[] }
    : null;
}

/** The project whose host is `<slug>.<domain>`; null when no project has that slug. */
export async function findProjectBySlug(connection: SqlConnection, slug: string): Promise<Project | null> {
  const row = await connection.database.read(() =>
    first<ProjectRow>(`select ${PROJECT_COLUMNS} from apikeys_projects where slug = ?`, slug),
  );
  return row ? toProject(row) : null;
}

export async function findProjectById(connection: SqlConnection, id: string): Promise<Project | null> {
  const row = await connection.database.read(() =>
    first<ProjectRow>(`select ${PROJECT_COLUMNS} from apikeys_projects where id = ?`, id),
  );
  return row ? toProject(row) : null;
}

/** Whether any project lists `origin` among its allowed origins (the gateway's CORS check). */
export async function originListed(connection: SqlConnection, origin: string): Promise<boolean> {
  const row = await connection.database.read(() =>
    first('select 1 as one from apikeys_project_origins where origin = ? limit 1', origin),
  );
  return row !== undefined;
}

/** Every project of every user, in creation order (the gateway's routing table). */
export async function listAllProjects(connection: SqlConnection): Promise<Project[]> {
  const rows = await connection.database.read(() =>
    all<ProjectRow>(`select ${PROJECT_COLUMNS} from apikeys_projects order by seq`),
  );
  return rows.map(toProject);
}

/** The apikeys service's only door to storage. Every method that takes `owner` only sees that user's rows. */
export class ApikeysRepository {
  private readonly connection: SqlConnection;
  private readonly sql: SqlDatabase;

  constructor(connection: SqlConnection) {
    this.connection = connection;
    this.sql = connection.database;
  }

  async createKey(key: NewApiKey): Promise<void> {
    const scopes = JSON.stringify(key.scopes);
    await this.sql.write(() =>
      run(
        'insert into apikeys_keys (key, owner, name, secret_hash, scopes, created_at) values (?, ?, ?, ?, ?, ?)',
        key.key,
        key.owner,
        key.name,
        key.secretHash,
        scopes,
        key.createdAt,
      ),
    );
  }

  async listKeys(owner: string): Promise<ApiKeySummary[]> {
    const rows = await this.sql.read(() =>
      all<{ key: string; name: string; scopes: string }>(
        'select key, name, scopes from apikeys_keys where owner = ? order by seq',
        owner,
      ),
    );
    return rows.map((row) => ({ key: row.key, name: row.name, scopes: JSON.parse(row.scopes) as Scope[] }));
  }

  findKey(key: string): Promise<StoredApiKey | null> {
    return findApiKey(this.connection, key);
  }

  /** Deletes the owner's key; false when it does not exist or belongs to someone else. */
  async deleteKey(owner: string, key: string): Promise<boolean> {
    const deleted = await this.sql.write(() => run('delete from apikeys_keys where key = ? and owner = ?', key, owner));
    return deleted > 0;
  }

  /**
   * Inserts the project and its owner rows in one transaction. Returns false, storing nothing,
   * when the slug is taken: the UNIQUE constraint decides, so two concurrent creates of the same
   * slug cannot both succeed, on either database.
   */
  async createProject(project: Project): Promise<boolean> {
    const owners = JSON.stringify(project.owners);
    try {
      await this.sql.write(function* () {
        yield* run(
          'insert into apikeys_projects (id, name, slug, owners, allowed_origins, created_at) values (?, ?, ?, ?, ?, ?)',
          project.id,
          project.name,
          project.slug,
          owners,
          JSON.stringify(project.allowed_origins),
          project.created_at,
        );
        for (const origin of project.allowed_origins)
          yield* run('insert into apikeys_project_origins (project_id, origin) values (?, ?)', project.id, origin);
        for (const userId of project.owners)
          yield* run('insert into apikeys_project_owners (project_id, user_id) values (?, ?)', project.id, userId);
      });
      return true;
    } catch (error) {
      if (isSlugConflict(error)) return false;
      throw error;
    }
  }

  async slugTaken(slug: string): Promise<boolean> {
    const row = await this.sql.read(() => first('select 1 as one from apikeys_projects where slug = ?', slug));
    return row !== undefined;
  }

  async listProjects(owner: string): Promise<Project[]> {
    const rows = await this.sql.read(() =>
      all<ProjectRow>(
        `select ${P_PROJECT_COLUMNS} from apikeys_projects p join apikeys_project_owners o on o.project_id = p.id
          where o.user_id = ? order by p.seq`,
        owner,
      ),
    );
    return rows.map(toProject);
  }

  /** The project when `owner` owns it; null otherwise, so foreign projects look like missing ones. */
  async getProject(owner: string, id: string): Promise<Project | null> {
    const row = await this.sql.read(() =>
      first<ProjectRow>(
        `select ${P_PROJECT_COLUMNS} from apikeys_projects p join apikeys_project_owners o on o.project_id = p.id
          where p.id = ? and o.user_id = ?`,
        id,
        owner,
      ),
    );
    return row ? toProject(row) : null;
  }

  /** Deletes a project `owner` owns and returns it (its slug is free at once); null when not owned or missing. */
  async deleteProject(owner: string, id: string): Promise<Project | null> {
    const row = await this.sql.write(function* () {
      const deleted = yield* first<ProjectRow>(
        `delete from apikeys_projects where id = ? and id in (select project_id from apikeys_project_owners where user_id = ?)
          returning ${PROJECT_COLUMNS}`,
        id,
        owner,
      );
      if (!deleted) return undefined;
      // The foreign key cascades too; deleting here keeps the tables clean even if it is off.
      yield* run('delete from apikeys_project_owners where project_id = ?', id);
      yield* run('delete from apikeys_project_origins where project_id = ?', id);
      return deleted;
    });
    return row ? toProject(row) : null;
  }

  /**
   * Applies `changes` to a project `owner` owns and returns it as it now is; null when not owned
   * or missing. The origin rows are replaced in the same transaction as the list.
   */
  async updateProject(owner: string, id: string, changes: ProjectChanges): Promise<Project | null> {
    const row = await this.sql.write(function* () {
      const current = yield* first<ProjectRow>(
        `select ${P_PROJECT_COLUMNS} from apikeys_projects p join apikeys_project_owners o on o.project_id = p.id
          where p.id = ? and o.user_id = ?`,
        id,
        owner,
      );
      if (!current) return undefined;
      const name = changes.name ?? current.name;
      const origins = changes.allowed_origins ? JSON.stringify(changes.allowed_origins) : current.allowed_origins;
      yield* run('update apikeys_projects set name = ?, allowed_origins = ? where id = ?', name, origins, id);
      if (changes.allowed_origins) {
        yield* run('delete from apikeys_project_origins where project_id = ?', id);
        for (const origin of changes.allowed_origins)
          yield* run('insert into apikeys_project_origins (project_id, origin) values (?, ?)', id, origin);
      }
      return { ...current, name, allowed_origins: origins };
    });
    return row ? toProject(row) : null;
  }
}
