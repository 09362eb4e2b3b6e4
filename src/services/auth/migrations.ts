import { sql } from 'kysely';
import { columnTypes, type MigrationSet } from '../../store/migrate.ts';

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
      async up(db, dialect) {
        const types = columnTypes(dialect);
        const seq = sql.raw(`seq ${types.serialPrimaryKey}`);
        const bigint = sql.raw(types.bigint);
        // `email` is stored normalised (trimmed, NFC, lower-cased), so UNIQUE is case-insensitive.
        await sql`create table auth_users (
          ${seq},
          id text not null unique,
          email text not null,
          nick text,
          picture text,
          password_hash text,
          created_at text not null,
          constraint auth_users_email_unique unique (email)
        )`.execute(db);

        // Single sign-on links: one (provider, subject) belongs to exactly one user.
        await sql`create table auth_identities (
          provider text not null,
          subject text not null,
          user_id text not null references auth_users (id) on delete cascade,
          created_at text not null,
          primary key (provider, subject)
        )`.execute(db);
        await sql`create index auth_identities_user on auth_identities (user_id)`.execute(db);

        await sql`create table auth_sessions (
          id text primary key,
          token_hash text not null unique,
          user_id text not null references auth_users (id) on delete cascade,
          created_at ${bigint} not null,
          expires_at ${bigint} not null,
          last_seen_at ${bigint} not null
        )`.execute(db);
        await sql`create index auth_sessions_user on auth_sessions (user_id)`.execute(db);
        await sql`create index auth_sessions_expires on auth_sessions (expires_at)`.execute(db);

        await sql`create table auth_sso_states (
          state_hash text primary key,
          provider text not null,
          nonce text not null,
          verifier text not null,
          redirect text not null,
          expires_at ${bigint} not null
        )`.execute(db);
        await sql`create index auth_sso_states_expires on auth_sso_states (expires_at)`.execute(db);

        // Failed-login throttling, per normalised email (known or not), shared by every instance.
        await sql`create table auth_login_failures (
          email text primary key,
          failures integer not null,
          window_started_at ${bigint} not null
        )`.execute(db);
        await sql`create index auth_login_failures_window on auth_login_failures (window_started_at)`.execute(db);
      },
    },
    {
      // One-time codes that hand a single sign-on to the web console (see routes/session.ts).
      name: '002_sso_codes',
      async up(db, dialect) {
        const bigint = sql.raw(columnTypes(dialect).bigint);
        await sql`create table auth_sso_codes (
          code_hash text primary key,
          user_id text not null,
          expires_at ${bigint} not null
        )`.execute(db);
      },
    },
    {
      // The hand-over code is bound to the page that started the sign-in (issue 17): the state
      // carries the S256 challenge that page sent to /login, and the code inherits it. Codes
      // issued before this migration were bound to nothing; they are dropped (they live 60 s).
      name: '003_sso_code_binding',
      async up(db) {
        await sql`alter table auth_sso_states add column code_challenge text`.execute(db);
        await sql`alter table auth_sso_codes add column challenge text`.execute(db);
        await sql`delete from auth_sso_codes`.execute(db);
      },
    },
  ],
};
