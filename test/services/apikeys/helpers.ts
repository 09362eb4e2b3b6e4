import { first } from '../../../src/store/sql-work.ts';
import type { TestService } from '../../helpers/service.ts';

export { assertError, UUID_V4 } from '../../helpers/envelope.ts';

/** Number of rows in one of the service's tables, straight from the database. */
export async function countRows(
  service: TestService,
  table: 'apikeys_keys' | 'apikeys_projects' | 'apikeys_project_owners' | 'apikeys_project_origins',
): Promise<number> {
  const row = await service.store.sql.database.read(() =>
    first<{ n: number | string }>(`select count(*) as n from ${table}`),
  );
  return Number(row?.n);
}

export { nextMessage } from '../../helpers/notifier.ts';
