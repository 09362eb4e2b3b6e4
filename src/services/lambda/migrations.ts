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
    {
      name: '002_lambda_ongoing',
      // Running invocations of every instance (ongoing.ts): a row per invocation, its instance's
      // lease renewed while it runs; rows whose lease ended are not listed and are deleted.
      statements: ({ types }) => [
        `create table lambda_ongoing (
          id text primary key,
          instance text not null,
          owner text not null,
          lambda_id text not null,
          lambda_name text not null,
          started_at text not null,
          method text not null,
          path text not null,
          lease_until ${types.bigint} not null
        )`,
        'create index lambda_ongoing_owner on lambda_ongoing (owner)',
        'create index lambda_ongoing_instance on lambda_ongoing (instance)',
        'create index lambda_ongoing_lease on lambda_ongoing (lease_until)',
      ],
    },
    {
      name: '003_lambda_settings',
      // README: Environment and secrets. `env` and `secret_names` are JSON in clear text (a list
      // needs no decryption); `secrets` is the sealed object (secrets.ts), null when there is none;
      // `logger_id` the logger of the lambda's output, null when none.
      statements: () => [
        `alter table lambda_functions add column env text not null default '{}'`,
        `alter table lambda_functions add column secret_names text not null default '[]'`,
        'alter table lambda_functions add column secrets text',
        'alter table lambda_functions add column logger_id text',
      ],
    },
    {
      name: '004_lambda_invocations',
      // Invocation history (history.ts): a row per invocation, written in batches; each lambda
      // keeps its newest `lambdaInvocationHistory` rows, read newest first (by `seq`).
      statements: ({ types }) => [
        `create table lambda_invocations (
          seq ${types.serialPrimaryKey},
          id text not null,
          lambda_id text not null,
          owner text not null,
          started_at text not null,
          duration_ms double precision not null,
          trigger text not null,
          status integer not null,
          error_code text,
          error_message text,
          logs text not null,
          fetches integer not null,
          bindings integer not null
        )`,
        'create index lambda_invocations_lambda on lambda_invocations (lambda_id, seq)',
      ],
    },
    {
      name: '005_lambda_schedules',
      // Cron schedules (cron.ts): the expression and its time zone (null: UTC), and the next tick
      // in epoch milliseconds, which is also the claim of that tick (compare-and-set by every
      // instance's ticker); null when the lambda has no schedule. The index serves "what is due".
      statements: ({ types }) => [
        'alter table lambda_functions add column schedule text',
        'alter table lambda_functions add column schedule_tz text',
        `alter table lambda_functions add column next_run_ms ${types.bigint}`,
        'create index lambda_functions_next_run on lambda_functions (next_run_ms)',
      ],
    },
  ],
};
