// The SQL port's contract (sql-contract.ts) on the SQLite adapter always, and on the PostgreSQL
// adapter in the PostgreSQL suite.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqlite } from '../../src/store/db.ts';
import { createTestDatabase, testDialect } from '../helpers/database.ts';
import { runSqlContract } from './sql-contract.ts';

runSqlContract('sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-sql-'));
  const connection = openSqlite(join(dir, 'stratus.db'));
  return {
    database: connection.database,
    async cleanup() {
      await connection.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

if (testDialect === 'postgres') {
  runSqlContract('postgres', async () => {
    const testDatabase = await createTestDatabase();
    const connection = await testDatabase.connect();
    return {
      database: connection.database,
      async cleanup() {
        await connection.close();
        await testDatabase.cleanup();
      },
    };
  });
}
