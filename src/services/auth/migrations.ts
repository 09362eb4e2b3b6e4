import type { MigrationSet } from '../../store/migrate.ts';

/**
 * Tables of the auth service, one set for SQLite and PostgreSQL. Times that are compared
 * (expiry, throttling windows) are integer milliseconds; times that are returned are RFC 3339 text.
 * Tokens and SSO states are stored only as their SHA-256 hex digest.
 */
export const authMigrations: MigrationSet = {
  owner: 'auth',
  migrations: [
    {
      name: '001_users_sessions_identities',
      statements: ({ types }) => [
        // `email` is stored normalised (trimmed, NFC, lower-cased), so UNIQUE is case-insensitive.
        `create table auth_users (
          seq ${types.serialPrimaryKey},
          id text not null unique,
          email text not null,
          nick text,
          picture text,
          password_hash text,
          created_at text not null,
          constraint auth_users_email_unique unique (email)
        )`,

        // Single sign-on links: one (provider, subject) belongs to exactly one user.
        `create table auth_identities (
          provider text not null,
          subject text not null,
          user_id text not null references auth_users (id) on delete cascade,
          created_at text not null,
          primary key (provider, subject)
        )`,
        `create index auth_identities_user on auth_identities (user_id)`,

        `create table auth_sessions (
          id text primary key,
          token_hash text not null unique,
          user_id text not null references auth_users (id) on delete cascade,
          created_at ${types.bigint} not null,
          expires_at ${types.bigint} not null,
          last_seen_at ${types.bigint} not null
        )`,
        `create index auth_sessions_user on auth_sessions (user_id)`,
        `create index auth_sessions_expires on auth_sessions (expires_at)`,

        `create table auth_sso_states (
          state_hash text primary key,
          provider text not null,
          nonce text not null,
          verifier text not null,
          redirect text not null,
          expires_at ${types.bigint} not null
        )`,
        `create index auth_sso_states_expires on auth_sso_states (expires_at)`,

        // Failed-login throttling, per normalised email (known or not), shared by every instance.
        `create table auth_login_failures (
          email text primary key,
          failures integer not null,
          window_started_at ${types.bigint} not null
        )`,
        `create index auth_login_failures_window on auth_login_failures (window_started_at)`,
      ],
    },
    {
      // One-time codes that hand a single sign-on to the web console (see routes/session/token.ts).
      name: '002_sso_codes',
      statements: ({ types }) => [
        `create table auth_sso_codes (
          code_hash text primary key,
          user_id text not null,
          expires_at ${types.bigint} not null
        )`,
      ],
    },
    {
      // The hand-over code is bound to the page that started the sign-in (issue 17): the state
      // carries the S256 challenge that page sent to /login, and the code inherits it. Codes
      // issued before this migration were bound to nothing; they are dropped (they live 60 s).
      name: '003_sso_code_binding',
      statements: () => [
        `alter table auth_sso_states add column code_challenge text`,
        `alter table auth_sso_codes add column challenge text`,
        `delete from auth_sso_codes`,
      ],
    },
    {
      // The gateway's failed API-key checks per key and per address (src/gateway/guard.ts), shared
      // by every instance; `name` is `k:<key>` or `a:<address>`.
      name: '004_credential_failures',
      statements: ({ types }) => [
        `create table auth_credential_failures (
          name text primary key,
          failures integer not null,
          window_started_at ${types.bigint} not null
        )`,
        `create index auth_credential_failures_window on auth_credential_failures (window_started_at)`,
      ],
    },
  ],
};
