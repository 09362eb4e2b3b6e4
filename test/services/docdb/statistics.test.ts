// A large insert ends with the planner's statistics brought up to date (README: Storage), so the
// ordered index reads that follow are planned as index scans, not a bitmap scan and a sort of
// every matching entry. Observable on PostgreSQL only (SQLite plans from the schema).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { first } from '../../../src/store/sql-work.ts';
import { testDialect } from '../../helpers/database.ts';
import { createIndex, jsonOf, linesOf, ndjson, post, useEnv } from './fixtures.ts';

describe(
  'docdb: planner statistics after large inserts',
  { skip: testDialect !== 'postgres' && 'PostgreSQL only' },
  () => {
    const env = useEnv();

    const plannedRows = async (table: string) => {
      const row = await env.service.store.sql.database.read(() =>
        first<{ rows: number }>('select reltuples as rows from pg_class where oid = to_regclass(?)', table),
      );
      return Number(row?.rows);
    };

    it('analyzes after a collection grows by 10,000 documents, not after a small insert', async () => {
      jsonOf(await post(env, '', { name: 'bulk' }), 201);
      await createIndex(env, 'bulk', { name: 'by-cat', type: 'btree', fields: ['cat', 'n'] });
      linesOf(await post(env, 'bulk:insert', ndjson([{ cat: 'c0', n: 0 }])), 201);
      // Never analyzed: PostgreSQL reports -1 (or 0), far from the truth once the load is in.
      assert.ok((await plannedRows('docdb_index_entries')) < 10);
      const documents = Array.from({ length: 10_000 }, (_, n) => ({ cat: `c${n % 10}`, n }));
      assert.equal(linesOf(await post(env, 'bulk:insert', ndjson(documents)), 201).length, 10_000);
      assert.ok((await plannedRows('docdb_index_entries')) > 9_000, 'entries counted once the request ended');
      assert.ok((await plannedRows('docdb_documents')) > 9_000);
    });
  },
);
