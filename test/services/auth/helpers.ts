import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import type { SqlConnection } from '../../../src/store/db.ts';
import { all, first } from '../../../src/store/sql-work.ts';

export { assertError, UUID_V4 } from '../../helpers/envelope.ts';
export const USER_ID = /^user-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

/** The single Set-Cookie header of a response (fails when there is none or several). */
export function setCookieOf(response: LightMyRequestResponse): string {
  const header = response.headers['set-cookie'];
  assert.equal(typeof header, 'string', `expected one Set-Cookie header, got ${JSON.stringify(header)}`);
  return header as string;
}

type AuthTable = 'auth_users' | 'auth_sessions' | 'auth_identities' | 'auth_sso_states' | 'auth_login_failures';

export async function countRows(connection: SqlConnection, table: AuthTable): Promise<number> {
  const row = await connection.database.read(() => first<{ n: number | string }>(`select count(*) as n from ${table}`));
  return Number(row?.n);
}

/** Every row of a table as JSON text, to prove a secret appears nowhere in it. */
export async function tableText(connection: SqlConnection, table: AuthTable): Promise<string> {
  const rows = await connection.database.read(() => all(`select * from ${table}`));
  return JSON.stringify(rows);
}

export interface LoginBody {
  user: { id: string; email: string; nick?: string };
  token: string;
}
