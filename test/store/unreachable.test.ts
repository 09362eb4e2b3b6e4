import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import pg from 'pg';
import { HttpError } from '../../src/core/errors.ts';
import { createPostgresBlobStore } from '../../src/store/blob/postgres.ts';
import { postgresDatabase } from '../../src/store/sql/postgres.ts';
import { first } from '../../src/store/sql-work.ts';
import { asUnreachable, isUnreachable, StoreUnreachableError } from '../../src/store/unreachable.ts';

const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });

/** A loopback port nothing listens on: bound once, then closed. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('an unreachable database', () => {
  it('is told apart from a failing statement', () => {
    for (const error of [
      coded('ECONNREFUSED'),
      coded('ECONNRESET'),
      coded('ETIMEDOUT'),
      coded('08006'),
      coded('08001'),
      coded('57P01', 'terminating connection due to administrator command'),
      coded('57P03', 'the database system is starting up'),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')], 'connect failed'),
    ])
      assert.equal(isUnreachable(error), true, `${(error as { code?: string }).code ?? error.message}`);
    for (const error of [
      coded('23505', 'duplicate key value violates unique constraint'),
      coded('42P01', 'relation "x" does not exist'),
      coded('40001', 'could not serialize access'),
      new Error('something else'),
      'ECONNREFUSED',
      null,
    ])
      assert.equal(isUnreachable(error), false, String(error));
    const wrapped = asUnreachable(coded('57P01'));
    assert.ok(wrapped instanceof StoreUnreachableError && wrapped instanceof HttpError);
    assert.equal(wrapped.status, 503);
    assert.equal(wrapped.code, 'store_unreachable');
    assert.equal(wrapped.headers['retry-after'], '1');
    const other = coded('23505');
    assert.equal(asUnreachable(other), other);
  });

  it('makes the PostgreSQL adapters answer 503 store_unreachable, naming no host or user', async () => {
    const port = await closedPort();
    const pool = new pg.Pool({
      host: '127.0.0.1',
      port,
      user: 'secret-user',
      password: 'secret-password',
      database: 'x',
      connectionTimeoutMillis: 2_000,
    });
    pool.on('error', () => {});
    try {
      const database = postgresDatabase(pool);
      const blobs = createPostgresBlobStore(pool);
      const failures = await Promise.allSettled([
        database.read(() => first('select 1')),
        database.write(() => first('select 1')),
        database.writeEach(() => first('select 1')),
        blobs.stat('0'.repeat(64)),
        blobs.get('0'.repeat(64)),
      ]);
      for (const failure of failures) {
        assert.equal(failure.status, 'rejected');
        const reason = (failure as PromiseRejectedResult).reason as HttpError;
        assert.ok(reason instanceof StoreUnreachableError, String(reason));
        assert.equal(reason.status, 503);
        assert.doesNotMatch(reason.message, /secret|127\.0\.0\.1|ECONNREFUSED/);
      }
    } finally {
      await pool.end();
    }
  });
});
