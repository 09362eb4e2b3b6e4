import { sql, type Generated, type Kysely } from 'kysely';
import type { SqlConnection } from '../../store/db.ts';

type ApikeysTables = {
  apikeys_keys: {
    seq: Generated<number>;
    key: string;
    owner: string;
    name: string;
    secret_hash: string;
    scopes: string;
    created_at: string;
  };
  apikeys_projects: {
    seq: Generated<number>;
    id: string;
    name: string;
    slug: string;
    owners: string;
    created_at: string;
  };
  apikeys_project_owners: { project_id: string; user_id: string };
};

/** Where a key is valid (apikeys.md §2.2); always stored with both members present. */
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
  created_at: string;
}

type ProjectRow = { id: string; name: string; slug: string; owners: string; created_at: string };

const PROJECT_COLUMNS = ['id', 'name', 'slug', 'owners', 'created_at'] as const;

const tables = (connection: SqlConnection): Kysely<ApikeysTables> => connection.db.withTables<ApikeysTables>();

function toProject(row: ProjectRow): Project {
  return { id: row.id, name: row.name, slug: row.slug, owners: JSON.parse(row.owners) as string[], created_at: row.created_at };
}

/** True when `error` is the slug's UNIQUE constraint refusing a row (SQLite or PostgreSQL). */
function isSlugConflict(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, constraint, message } = error as { code?: unknown; constraint?: unknown; message?: unknown };
  if (code === '23505') return constraint === 'apikeys_projects_slug_unique';
  return code === 'SQLITE_CONSTRAINT_UNIQUE' && typeof message === 'string' && message.includes('apikeys_projects.slug');
}

// Read functions the gateway uses for its key check and project-host routing; exported on their
// own so that the gateway does not need the service's repository object.

/** A key by its public id, with owner, secret hash and scopes; null when unknown or revoked. */
export async function findApiKey(connection: SqlConnection, key: string): Promise<StoredApiKey | null> {
  type Row = { key: string; owner: string; secret_hash: string; scopes: string };
  // Every request with an Api-Key the cache does not hold asks this (database keys of docdb pass
  // through the gateway too), so SQLite answers it synchronously when it can.
  const direct = connection.direct?.run((prepare) => prepare('select key, owner, secret_hash, scopes from apikeys_keys where key = ?').get(key) as Row | undefined);
  const row = direct ? direct.value : await tables(connection).selectFrom('apikeys_keys').select(['key', 'owner', 'secret_hash', 'scopes']).where('key', '=', key).executeTakeFirst();
  return row ? { key: row.key, owner: row.owner, secretHash: row.secret_hash, scopes: JSON.parse(row.scopes) as Scope[] } : null;
}

/** The project whose host is `<slug>.<domain>`; null when no project has that slug. */
export async function findProjectBySlug(connection: SqlConnection, slug: string): Promise<Project | null> {
  const row = await tables(connection).selectFrom('apikeys_projects').select(PROJECT_COLUMNS).where('slug', '=', slug).executeTakeFirst();
  return row ? toProject(row) : null;
}

export async function findProjectById(connection: SqlConnection, id: string): Promise<Project | null> {
  const row = await tables(connection).selectFrom('apikeys_projects').select(PROJECT_COLUMNS).where('id', '=', id).executeTakeFirst();
  return row ? toProject(row) : null;
}

/** Every project of every user, in creation order (the gateway's routing table). */
export async function listAllProjects(connection: SqlConnection): Promise<Project[]> {
  const rows = await tables(connection).selectFrom('apikeys_projects').select(PROJECT_COLUMNS).orderBy('seq').execute();
  return rows.map(toProject);
}

/** The apikeys service's only door to storage. Every method that takes `owner` only sees that user's rows. */
export class ApikeysRepository {
  private readonly connection: SqlConnection;
  private readonly db: Kysely<ApikeysTables>;

  constructor(connection: SqlConnection) {
    this.connection = connection;
    this.db = tables(connection);
  }

  async createKey(key: NewApiKey): Promise<void> {
    await this.db
      .insertInto('apikeys_keys')
      .values({
        key: key.key,
        owner: key.owner,
        name: key.name,
        secret_hash: key.secretHash,
        scopes: JSON.stringify(key.scopes),
        created_at: key.createdAt,
      })
      .execute();
  }

  async listKeys(owner: string): Promise<ApiKeySummary[]> {
    const rows = await this.db.selectFrom('apikeys_keys').select(['key', 'name', 'scopes']).where('owner', '=', owner).orderBy('seq').execute();
    return rows.map((row) => ({ key: row.key, name: row.name, scopes: JSON.parse(row.scopes) as Scope[] }));
  }

  findKey(key: string): Promise<StoredApiKey | null> {
    return findApiKey(this.connection, key);
  }

  /** Deletes the owner's key; false when it does not exist or belongs to someone else. */
  async deleteKey(owner: string, key: string): Promise<boolean> {
    const result = await this.db.deleteFrom('apikeys_keys').where('key', '=', key).where('owner', '=', owner).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /**
   * Inserts the project and its owner rows in one transaction. Returns false, storing nothing,
   * when the slug is taken: the UNIQUE constraint decides, so two concurrent creates of the same
   * slug cannot both succeed, on either database.
   */
  async createProject(project: Project): Promise<boolean> {
    try {
      await this.db.transaction().execute(async (trx) => {
        await trx
          .insertInto('apikeys_projects')
          .values({ id: project.id, name: project.name, slug: project.slug, owners: JSON.stringify(project.owners), created_at: project.created_at })
          .execute();
        await trx
          .insertInto('apikeys_project_owners')
          .values(project.owners.map((user_id) => ({ project_id: project.id, user_id })))
          .execute();
      });
      return true;
    } catch (error) {
      if (isSlugConflict(error)) return false;
      throw error;
    }
  }

  async slugTaken(slug: string): Promise<boolean> {
    const row = await this.db.selectFrom('apikeys_projects').select(sql<number>`1`.as('one')).where('slug', '=', slug).executeTakeFirst();
    return row !== undefined;
  }

  async listProjects(owner: string): Promise<Project[]> {
    const rows = await this.db
      .selectFrom('apikeys_projects as p')
      .innerJoin('apikeys_project_owners as o', 'o.project_id', 'p.id')
      .select(['p.id', 'p.name', 'p.slug', 'p.owners', 'p.created_at'])
      .where('o.user_id', '=', owner)
      .orderBy('p.seq')
      .execute();
    return rows.map(toProject);
  }

  /** The project when `owner` owns it; null otherwise, so foreign projects look like missing ones. */
  async getProject(owner: string, id: string): Promise<Project | null> {
    const row = await this.db
      .selectFrom('apikeys_projects as p')
      .innerJoin('apikeys_project_owners as o', 'o.project_id', 'p.id')
      .select(['p.id', 'p.name', 'p.slug', 'p.owners', 'p.created_at'])
      .where('p.id', '=', id)
      .where('o.user_id', '=', owner)
      .executeTakeFirst();
    return row ? toProject(row) : null;
  }

  /** Deletes a project `owner` owns and returns it (its slug is free at once); null when not owned or missing. */
  async deleteProject(owner: string, id: string): Promise<Project | null> {
    return this.db.transaction().execute(async (trx) => {
      const row = await trx
        .deleteFrom('apikeys_projects')
        .where('id', '=', id)
        .where('id', 'in', trx.selectFrom('apikeys_project_owners').select('project_id').where('user_id', '=', owner))
        .returning(PROJECT_COLUMNS)
        .executeTakeFirst();
      if (!row) return null;
      // The foreign key cascades too; deleting here keeps the table clean even if it is off.
      await trx.deleteFrom('apikeys_project_owners').where('project_id', '=', id).execute();
      return toProject(row);
    });
  }
}
