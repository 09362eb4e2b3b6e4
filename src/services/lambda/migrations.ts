import type { MigrationSet } from '../../store/migrate.ts';

export const lambdaMigrations: MigrationSet = {
  owner: 'lambda',
  migrations: [
    {
      name: '001_lambda_functions',
      // `seq` keeps creation order for lists and for "oldest wins" in the mux.
      statements: ({ types }) => [
        `create table lambda_functions (
          seq ${types.serialPrimaryKey},
          id text not null unique,
          created_timestamp integer not null,
          owner text not null,
          project_id text not null,
          name text not null,
          language text not null,
          code text not null,
          method text not null,
          path text not null,
          constraint lambda_functions_owner_name unique (owner, name)
        )`,
        'create index lambda_functions_project on lambda_functions (project_id, seq)',
      ],
    },
  ],
};
