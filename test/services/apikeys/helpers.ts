import { sql } from 'kysely';
import type { Store } from '../../../src/store/index.ts';
import type { TestService } from '../../helpers/service.ts';

export { assertError, UUID_V4 } from '../../helpers/envelope.ts';


/** Number of rows in one of the service's tables, straight from the database. */
export async function countRows(service: TestService, table: 'apikeys_keys' | 'apikeys_projects' | 'apikeys_project_owners'): Promise<number> {
  const result = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table)}`.execute(service.store.sql.db);
  return Number(result.rows[0]?.n);
}

/**
 * Resolves with the first message on `topic` that `accept` takes; rejects after `timeoutMs`.
 * Subscribe before triggering the change.
 */
export function nextMessage(store: Store, topic: string, accept: (message: unknown) => boolean, timeoutMs = 3000): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`no matching message on ${topic} within ${timeoutMs} ms`));
    }, timeoutMs);
    const unsubscribe = store.notifier.subscribe(topic, (text) => {
      const message: unknown = JSON.parse(text);
      if (!accept(message)) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(message);
    });
  });
}
