import type { MigrationSet } from '../../store/migrate.ts';

/**
 * Tables of the apikeys service. `seq` is the creation order lists follow; it is the integer key
 * (SQLite only auto-numbers its rowid alias), so the public ids are unique columns instead.
 * Scopes and owners are JSON text so they come back exactly as stored, key order included.
 */
export const apikeysMigrations: MigrationSet = {
  owner: 'apikeys',
  migrations: [
    {
      name: '001_keys_and_projects',
      statements: ({ types }) => [
        `create table apikeys_keys (
          seq ${types.serialPrimaryKey},
          key text not null unique,
          owner text not null,
          name text not null,
          secret_hash text not null,
          scopes text not null,
          created_at text not null
        )`,
        'create index apikeys_keys_owner on apikeys_keys (owner, seq)',
        `create table apikeys_projects (
          seq ${types.serialPrimaryKey},
          id text not null unique,
          name text not null,
          slug text not null,
          owners text not null,
          created_at text not null,
          constraint apikeys_projects_slug_unique unique (slug)
        )`,
        // Who owns what, for "my projects" queries without parsing JSON in SQL; written in the same
        // transaction as `owners`, and gone with the project.
        `create table apikeys_project_owners (
          project_id text not null references apikeys_projects (id) on delete cascade,
          user_id text not null,
          primary key (project_id, user_id)
        )`,
        'create index apikeys_project_owners_user on apikeys_project_owners (user_id)',
      ],
    },
    {
      // Origins a project's apps run on, allowed plain CORS by the gateway (root README.md, CORS):
      // the list as given, in `allowed_origins`, and one row per origin for the gateway's
      // "is this origin listed?" lookup, written in the same transaction.
      name: '002_project_origins',
      statements: () => [
        `alter table apikeys_projects add column allowed_origins text not null default '[]'`,
        `create table apikeys_project_origins (
          project_id text not null references apikeys_projects (id) on delete cascade,
          origin text not null,
          primary key (project_id, origin)
        )`,
        'create index apikeys_project_origins_origin on apikeys_project_origins (origin)',
      ],
    },
  ],
};
