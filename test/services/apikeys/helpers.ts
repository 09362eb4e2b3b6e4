import { sql } from 'kysely';
import type { TestService } from '../../helpers/service.ts';

export { assertError, UUID_V4 } from '../../helpers/envelope.ts';


/** Number of rows in one of the service's tables, straight from the database. */
export async function countRows(service: TestService, table: 'apikeys_keys' | 'apikeys_projects' | 'apikeys_project_owners'): Promise<number> {
  const result = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table)}`.execute(service.store.sql.db);
  return Number(result.rows[0]?.n);
}

export { nextMessage } from '../../helpers/notifier.ts';
