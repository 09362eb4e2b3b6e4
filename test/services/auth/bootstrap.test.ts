import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { Writable } from 'node:stream';
import type { Settings } from '../../../src/config.ts';
import { SettingsError } from '../../../src/config.ts';
import { VERSION } from '../../../src/core/version.ts';
import { authService } from '../../../src/services/auth/index.ts';
import { findUserByEmail } from '../../../src/services/auth/repository.ts';
import type { SqlConnection } from '../../../src/store/db.ts';
import { migrateStore, openStore } from '../../../src/store/index.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { testSettings } from '../../helpers/service.ts';
import { countRows, type LoginBody } from './helpers.ts';

let database: TestDatabase;

before(async () => {
  database = await createTestDatabase();
});

after(async () => {
  await database.cleanup();
});

/** Starts the auth service on the shared test database (as a fresh process would), captures its log, runs `work`, stops. */
async function withService<T>(
  overrides: Partial<Settings>,
  work: (app: Awaited<ReturnType<typeof authService.build>>, log: () => string) => Promise<T>,
): Promise<T> {
  const settings = testSettings(database, overrides);
  const store = await openStore(settings);
  let log = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      log += chunk.toString();
      done();
    },
  });
  try {
    await migrateStore(store, [authService.migrations]);
    const app = await authService.build({ settings, store, logger: pino({ level: 'info' }, sink), version: VERSION });
    try {
      await app.ready();
      return await work(app, () => log);
    } finally {
      await app.close();
    }
  } finally {
    await store.close();
  }
}

const ADMIN = { adminEmail: 'Root@Example.com', adminPassword: 'bootstrap secret 42' };

describe('bootstrap admin', () => {
  test('is created on first start, logged once without the password, and can log in', async () => {
    await withService(ADMIN, async (app, log) => {
      const user = await withConnection((conn) => findUserByEmail(conn, 'root@example.com'));
      assert.ok(user, 'admin exists');
      assert.match(log(), /bootstrap admin user created/);
      assert.doesNotMatch(log(), /bootstrap secret 42/);
      const response = await app.inject({
        method: 'POST',
        url: '/v0/login',
        payload: { email: 'root@example.com', password: 'bootstrap secret 42' },
      });
      assert.equal(response.statusCode, 200, response.body);
      assert.equal((response.json() as LoginBody).user.id, user.id);
    });
  });

  test('a restart does not create it again, nor change its password', async () => {
    await withService({ ...ADMIN, adminPassword: 'a different password' }, async (app, log) => {
      assert.doesNotMatch(log(), /bootstrap admin user created/);
      const old = await app.inject({
        method: 'POST',
        url: '/v0/login',
        payload: { email: 'root@example.com', password: 'bootstrap secret 42' },
      });
      assert.equal(old.statusCode, 200, old.body);
      const changed = await app.inject({
        method: 'POST',
        url: '/v0/login',
        payload: { email: 'root@example.com', password: 'a different password' },
      });
      assert.equal(changed.statusCode, 401);
    });
    assert.equal(await withConnection((conn) => countRows(conn, 'auth_users')), 1);
  });

  test('nothing is created when only one of ADMIN_EMAIL and ADMIN_PASSWORD is set', async () => {
    await withService({ adminEmail: 'half@example.com', adminPassword: undefined }, async (_app, log) => {
      assert.match(log(), /ADMIN_EMAIL and ADMIN_PASSWORD/);
    });
    assert.equal(await withConnection((conn) => findUserByEmail(conn, 'half@example.com')), null);
  });

  test('a bad ADMIN_EMAIL or a too-short ADMIN_PASSWORD stops the start with a SettingsError', async () => {
    await assert.rejects(
      withService({ adminEmail: 'not an email', adminPassword: 'long enough password' }, async () => {}),
      (error: unknown) => {
        assert.ok(error instanceof SettingsError);
        assert.match(error.message, /ADMIN_EMAIL/);
        return true;
      },
    );
    await assert.rejects(
      withService({ adminEmail: 'x@example.com', adminPassword: 'tiny' }, async () => {}),
      (error: unknown) => {
        assert.ok(error instanceof SettingsError);
        assert.match(error.message, /ADMIN_PASSWORD/);
        assert.doesNotMatch(error.message, /tiny/);
        return true;
      },
    );
  });
});

/** Runs `work` on a second connection to the same database, as another process would open it. */
async function withConnection<T>(work: (conn: SqlConnection) => Promise<T>): Promise<T> {
  const conn = await database.connect();
  try {
    return await work(conn);
  } finally {
    await conn.close();
  }
}
