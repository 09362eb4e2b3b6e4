import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InvocationHistory, type InvocationRecord } from '../../../src/services/lambda/history.ts';
import { lambdaMigrations } from '../../../src/services/lambda/migrations.ts';
import type { SqlConnection } from '../../../src/store/db.ts';
import { migrate } from '../../../src/store/migrate.ts';
import { first, run } from '../../../src/store/sql-work.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`not reached in ${timeoutMs} ms: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// The recorder by itself: batches written off the request path, failures dropped.
describe('lambda invocation history: the recorder', () => {
  let database: TestDatabase;
  let connection: SqlConnection;
  before(async () => {
    database = await createTestDatabase();
    connection = await database.connect();
    await migrate(connection.database, [lambdaMigrations]);
    // The lambdas the entries belong to (a batch keeps only entries of existing lambdas).
    await connection.database.write(function* () {
      for (const id of ['lambda-a', 'lambda-b'])
        yield* run(
          `insert into lambda_functions (id, created_timestamp, owner, project_id, name, language, code, method, path)
            values (?, 0, 'user-ada', '', ?, 'javascript', '', 'ANY', ?)`,
          id,
          id,
          `/${id}`,
        );
    });
  });
  after(async () => {
    await connection.close();
    await database.cleanup();
  });

  let next = 0;
  const entry = (lambdaId: string, extra: Partial<InvocationRecord> = {}): InvocationRecord => ({
    id: `inv-${++next}`,
    lambda_id: lambdaId,
    owner: 'user-ada',
    started_at: '2026-01-01T00:00:00Z',
    duration_ms: 1.25,
    trigger: 'http',
    status: 200,
    error_code: null,
    error_message: null,
    logs: [{ level: 'log', message: 'line' }],
    ...extra,
  });
  const countOf = async (lambdaId: string) =>
    Number(
      (
        await connection.database.read(() =>
          first<{ n: number | string }>('select count(*) as n from lambda_invocations where lambda_id = ?', lambdaId),
        )
      )?.n ?? 0,
    );

  it('writes within the flush delay without anyone reading, and at once when a batch is full', async () => {
    const slow = new InvocationHistory(connection, () => assert.fail('no warning expected'), {
      keep: 100,
      flushMs: 100,
    });
    slow.record(entry('lambda-a'));
    slow.record(entry('lambda-a', { fetches: 3, bindings: 2, duration_ms: 0.5 }));
    assert.equal(slow.waiting, 2, 'record only queues');
    assert.equal(await countOf('lambda-a'), 0);
    await until(
      () => countOf('lambda-a'),
      (n) => n === 2,
      2_000,
    );
    const [newest] = await slow.list('lambda-a', 1);
    assert.equal(newest?.fetches, 3);
    assert.equal(newest?.bindings, 2);
    assert.equal(newest?.duration_ms, 0.5);
    await slow.close();

    const full = new InvocationHistory(connection, () => assert.fail('no warning expected'), {
      keep: 100,
      flushMs: 60_000,
      maxBatch: 3,
    });
    for (let i = 0; i < 3; i++) full.record(entry('lambda-b'));
    await until(
      () => countOf('lambda-b'),
      (n) => n === 3,
      2_000,
    );
    // Not full: waits for its delay (or a read, or close).
    full.record(entry('lambda-b'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(await countOf('lambda-b'), 3);
    await full.close();
    assert.equal(await countOf('lambda-b'), 4, 'close writes what waits');
  });

  it('records 0 for absent counts and keeps no entry of a lambda that does not exist', async () => {
    const history = new InvocationHistory(connection, () => assert.fail('no warning expected'), { keep: 100 });
    history.record(entry('lambda-gone'));
    history.record(entry('lambda-a', { fetches: undefined, bindings: undefined }));
    const [newest] = await history.list('lambda-a', 1);
    assert.equal(newest?.fetches, 0);
    assert.equal(newest?.bindings, 0);
    assert.equal(await countOf('lambda-gone'), 0);
    await history.close();
  });

  it('reports a failed batch without its lines or messages, drops it, and goes on', async () => {
    const warnings: { context: Record<string, unknown>; message: string }[] = [];
    let failing = true;
    // The same database, whose writes fail while `failing` holds.
    const flaky = new Proxy(connection.database, {
      get(target, property) {
        if (property === 'write' && failing) return () => Promise.reject(new Error('disk I/O error'));
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const history = new InvocationHistory(
      { ...connection, database: flaky },
      (context, message) => warnings.push({ context, message }),
      { keep: 100 },
    );
    const before = await countOf('lambda-a');
    history.record(
      entry('lambda-a', {
        error_code: 'lambda_error',
        error_message: 'token sk-live-123',
        logs: [{ level: 'log', message: 'password hunter2' }],
      }),
    );
    await history.flush();
    assert.equal(history.waiting, 0, 'dropped, not retried');
    assert.equal(warnings.length, 1);
    const text = JSON.stringify(warnings);
    assert.match(text, /disk I\/O error/);
    assert.doesNotMatch(text, /hunter2|sk-live/);
    failing = false;
    history.record(entry('lambda-a'));
    await history.flush();
    assert.equal(await countOf('lambda-a'), before + 1);
    await history.close();
  });
});
