import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import type { Settings } from '../../../src/config.ts';
import type { ServiceApp } from '../../../src/core/app.ts';
import { VERSION } from '../../../src/core/version.ts';
import { PlatformServiceCalls } from '../../../src/gateway/service-calls.ts';
import {
  LambdaEnvironment,
  MAX_ENV_NAMES,
  MAX_ENV_TOTAL_LENGTH,
  MAX_ENV_VALUE_LENGTH,
} from '../../../src/services/lambda/environment.ts';
import { lambdaServiceWith } from '../../../src/services/lambda/index.ts';
import { LambdaRepository, type Lambda } from '../../../src/services/lambda/repository.ts';
import { LambdaSecrets, SECRETS_KEY_FILE, SecretsKeyMismatch } from '../../../src/services/lambda/secrets.ts';
import { logsService } from '../../../src/services/logs/index.ts';
import { migrateStore, openStore, type Store } from '../../../src/store/index.ts';
import { first, run } from '../../../src/store/sql-work.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { storeDigest } from '../../helpers/platform.ts';
import { asUser, startTestService, testSettings, type TestService, jsonCaller } from '../../helpers/service.ts';

/** Every secret value below contains this, so one search finds any of them. */
const MARK = 'sEcReT-9f31c7';
const secret = (label: string) => `${MARK}-${label}`;

type LambdaAnswer = {
  id: string;
  name: string;
  env: Record<string, string>;
  secrets: string[];
  logger_id: string | null;
};

describe('lambda env, secrets and logger_id', () => {
  let database: TestDatabase;
  let settings: Settings;
  let store: Store;
  let logs: ServiceApp;
  let lambda: ServiceApp;
  let calls: PlatformServiceCalls;
  /** The same lambda service built without platform service calls. */
  let alone: TestService;
  /** Every log line the lambda service wrote. */
  const logLines: string[] = [];

  before(async () => {
    database = await createTestDatabase();
    settings = testSettings(database);
    store = await openStore(settings);
    const definition = lambdaServiceWith({ prewarm: 1 });
    await migrateStore(store, [definition.migrations, logsService.migrations]);
    const silent = pino({ level: 'silent' });
    logs = await logsService.build({ settings, store, logger: silent, version: VERSION });
    await logs.ready();
    calls = new PlatformServiceCalls({ domain: settings.domain, apps: new Map([['logs', logs]]), upstreamUrls: {} });
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    });
    lambda = await definition.build({
      settings,
      store,
      logger: pino({ level: 'trace' }, sink),
      version: VERSION,
      services: calls,
    });
    await lambda.ready();
    alone = await startTestService(lambdaServiceWith({ prewarm: 1 }));
  });
  after(async () => {
    await lambda.close();
    await logs.close();
    await calls.close();
    await store.close();
    await database.cleanup();
    await alone.close();
  });

  const ada = asUser('user-ada');
  const bob = asUser('user-bob');
  const call = (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    headers: Record<string, string>,
    payload?: unknown,
    app: ServiceApp = lambda,
  ): Promise<LightMyRequestResponse> => jsonCaller(app)(method, url, headers, payload);
  /** The answer, after checking that no secret value is in its raw text. */
  const clean = (res: LightMyRequestResponse): LightMyRequestResponse => {
    assert.ok(!res.body.includes(MARK), `a secret value is in the answer: ${res.body}`);
    return res;
  };
  const create = async (body: Record<string, unknown>, headers = ada): Promise<LambdaAnswer> => {
    const res = clean(await call('POST', '/api/v0/lambdas', headers, { code: '', ...body }));
    assert.equal(res.statusCode, 201, res.body);
    return res.json();
  };
  const patch = async (id: string, body: Record<string, unknown>, status = 200): Promise<LightMyRequestResponse> => {
    const res = clean(await call('PATCH', `/api/v0/lambdas/${id}`, ada, body));
    assert.equal(res.statusCode, status, res.body);
    return res;
  };
  const errorOf = (res: LightMyRequestResponse) => (res.json() as { error: { code: string; message: string } }).error;
  const newLogger = async (headers: Record<string, string>): Promise<string> => {
    const res = await logs.inject({
      method: 'POST',
      url: '/v1/loggers',
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify({ name: `logger-${randomBytes(3).toString('hex')}` }),
    });
    assert.equal(res.statusCode, 201, res.body);
    return (res.json() as { id: string }).id;
  };
  const repository = () => new LambdaRepository(store.sql, store.notifier);
  const environment = () => new LambdaEnvironment(repository(), LambdaSecrets.fromSettings(settings));
  const envOf = async (id: string): Promise<Record<string, string>> => {
    const stored = (await repository().get(id)) as Lambda;
    return environment().envFor(stored);
  };
  const storedRow = (id: string) =>
    store.sql.database.read(() =>
      first<{ env: string; secret_names: string; secrets: string | null; logger_id: string | null }>(
        'select env, secret_names, secrets, logger_id from lambda_functions where id = ?',
        id,
      ),
    );
  const digest = () => storeDigest(store.sql);

  it('creates with env, secrets and logger_id, and answers secret names only, sorted', async () => {
    const loggerId = await newLogger(ada);
    const created = await create({
      name: 'with-settings',
      env: { MODE: 'production', EMPTY: '' },
      secrets: { ZETA_TOKEN: secret('zeta'), API_KEY: secret('api'), _under: secret('under') },
      logger_id: loggerId,
    });
    assert.deepEqual(created.env, { MODE: 'production', EMPTY: '' });
    assert.deepEqual(created.secrets, ['API_KEY', 'ZETA_TOKEN', '_under']);
    assert.equal(created.logger_id, loggerId);

    const got = clean(await call('GET', `/api/v0/lambdas/${created.id}`, ada));
    assert.deepEqual(got.json(), created);
    const listed = clean(await call('GET', '/api/v0/lambdas', ada));
    assert.deepEqual(
      (listed.json() as LambdaAnswer[]).find((l) => l.id === created.id),
      created,
    );

    // What the code gets: env and the decrypted secrets.
    assert.deepEqual(await envOf(created.id), {
      MODE: 'production',
      EMPTY: '',
      ZETA_TOKEN: secret('zeta'),
      API_KEY: secret('api'),
      _under: secret('under'),
    });
  });

  it('stores secrets encrypted: the row holds names in clear text and no value', async () => {
    const created = await create({ name: 'stored', env: { A: 'a' }, secrets: { TOKEN: secret('stored') } });
    const row = await storedRow(created.id);
    assert.ok(row);
    assert.deepEqual(JSON.parse(row.env), { A: 'a' });
    assert.deepEqual(JSON.parse(row.secret_names), ['TOKEN']);
    assert.ok(row.secrets !== null && row.secrets.startsWith('v1.'));
    assert.ok(!JSON.stringify(row).includes(MARK));
    assert.ok(!Buffer.from(row.secrets, 'base64url').toString('latin1').includes(MARK));
    // The key file was made in the data directory, for the owner only.
    const keyFile = join(settings.dataDir, SECRETS_KEY_FILE);
    assert.ok(existsSync(keyFile));
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    // Another key cannot open them, and says why.
    await assert.rejects(
      new LambdaEnvironment(repository(), new LambdaSecrets(randomBytes(32))).envFor(
        (await repository().get(created.id)) as Lambda,
      ),
      SecretsKeyMismatch,
    );
    // A lambda without secrets stores none and needs no key.
    const plain = await create({ name: 'plain', env: { ONLY: 'env' } });
    assert.equal((await storedRow(plain.id))?.secrets, null);
    assert.deepEqual(
      await new LambdaEnvironment(repository(), new LambdaSecrets(randomBytes(32))).envFor(
        (await repository().get(plain.id)) as Lambda,
      ),
      { ONLY: 'env' },
    );
  });

  it('merges PATCH env and secrets: named set, null deleted, unnamed kept, absent unchanged', async () => {
    const created = await create({
      name: 'merge',
      env: { KEEP: 'k', DROP: 'd', CHANGE: 'old' },
      secrets: { S_KEEP: secret('keep'), S_DROP: secret('drop'), S_CHANGE: secret('old') },
    });
    let res = await patch(created.id, {
      env: { DROP: null, CHANGE: 'new', ADDED: 'a', NEVER_THERE: null },
      secrets: { S_DROP: null, S_CHANGE: secret('new'), S_ADDED: secret('added') },
    });
    let body = res.json() as LambdaAnswer;
    assert.deepEqual(body.env, { KEEP: 'k', CHANGE: 'new', ADDED: 'a' });
    assert.deepEqual(body.secrets, ['S_ADDED', 'S_CHANGE', 'S_KEEP']);
    assert.deepEqual(await envOf(created.id), {
      KEEP: 'k',
      CHANGE: 'new',
      ADDED: 'a',
      S_KEEP: secret('keep'),
      S_CHANGE: secret('new'),
      S_ADDED: secret('added'),
    });

    // Other fields alone leave env and secrets as they are; so do empty changes.
    const sealedBefore = (await storedRow(created.id))?.secrets;
    res = await patch(created.id, { name: 'merge-renamed' });
    body = res.json() as LambdaAnswer;
    assert.equal(body.name, 'merge-renamed');
    assert.deepEqual(body.env, { KEEP: 'k', CHANGE: 'new', ADDED: 'a' });
    assert.deepEqual(body.secrets, ['S_ADDED', 'S_CHANGE', 'S_KEEP']);
    assert.equal((await storedRow(created.id))?.secrets, sealedBefore);
    res = await patch(created.id, { env: {}, secrets: {} });
    assert.deepEqual((res.json() as LambdaAnswer).env, { KEEP: 'k', CHANGE: 'new', ADDED: 'a' });
    // An env change keeps the sealed secrets as they were.
    await patch(created.id, { env: { KEEP: 'k2' } });
    assert.equal((await storedRow(created.id))?.secrets, sealedBefore);

    // A name moves from secrets to env in one change.
    res = await patch(created.id, { secrets: { S_KEEP: null }, env: { S_KEEP: 'now visible' } });
    body = res.json() as LambdaAnswer;
    assert.equal(body.env.S_KEEP, 'now visible');
    assert.deepEqual(body.secrets, ['S_ADDED', 'S_CHANGE']);

    // Deleting every secret leaves no sealed value.
    res = await patch(created.id, { secrets: { S_ADDED: null, S_CHANGE: null } });
    assert.deepEqual((res.json() as LambdaAnswer).secrets, []);
    assert.equal((await storedRow(created.id))?.secrets, null);
    assert.deepEqual(await envOf(created.id), { KEEP: 'k2', CHANGE: 'new', ADDED: 'a', S_KEEP: 'now visible' });
  });

  it('keeps a __proto__ name as a plain member', async () => {
    const body = JSON.parse(
      `{"name":"proto","code":"","env":{"__proto__":"e"},"secrets":{"constructor":"${secret('c')}"}}`,
    ) as Record<string, unknown>;
    const created = await create(body);
    assert.deepEqual(Object.entries(created.env), [['__proto__', 'e']]);
    assert.deepEqual(created.secrets, ['constructor']);
    const env = await envOf(created.id);
    assert.equal(Object.getPrototypeOf(env), Object.prototype);
    assert.deepEqual(Object.entries(env), [
      ['__proto__', 'e'],
      ['constructor', secret('c')],
    ]);
  });

  it('refuses a create beyond any limit with 400, naming no secret value, and stores nothing', async () => {
    const many = (prefix: string, n: number, value: (i: number) => string) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, value(i)]));
    const long = (n: number) => secret('x') + 'x'.repeat(n - secret('x').length);
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ env: { '1STARTS_WITH_DIGIT': 'v' } }, /body\.env: "1STARTS_WITH_DIGIT" is not a valid name/],
      [{ secrets: { 'has-dash': secret('dash') } }, /body\.secrets: "has-dash" is not a valid name/],
      [{ secrets: { '': secret('empty') } }, /body\.secrets: "" is not a valid name/],
      [{ secrets: { ['A'.repeat(129)]: secret('long-name') } }, /is not a valid name/],
      [{ secrets: { 'WITH\nNEWLINE': 7 } }, /is not a valid name/],
      [{ env: { TOO_LONG: 'x'.repeat(MAX_ENV_VALUE_LENGTH + 1) } }, /body\.env\.TOO_LONG must NOT have more than 5120/],
      [
        { secrets: { TOO_LONG: long(MAX_ENV_VALUE_LENGTH + 1) } },
        /body\.secrets\.TOO_LONG must NOT have more than 5120/,
      ],
      [{ secrets: { NOT_TEXT: 12345 } }, /body\.secrets\.NOT_TEXT must be string/],
      [{ secrets: { NULL_ON_CREATE: null } }, /body\.secrets\.NULL_ON_CREATE must be string/],
      [
        { env: many('E', 33, () => 'v'), secrets: many('S', 32, (i) => secret(`${i}`)) },
        /at most 64 names together; this would make 65/,
      ],
      [{ env: many('E', MAX_ENV_NAMES + 1, () => 'v') }, /body\.env must NOT have more than 64 properties/],
      [
        { secrets: many('S', 13, () => long(MAX_ENV_VALUE_LENGTH)) },
        /at most 65536 characters of names and values together; this would make 66589/,
      ],
      [{ env: { SAME: 'a' }, secrets: { SAME: secret('same') } }, /SAME would be both in env and in secrets/],
      [{ env: ['A=b'] }, /body\.env must be object/],
      [{ logger_id: '' }, /body\.logger_id/],
    ];
    const before = await digest();
    for (const [extra, message] of bad) {
      const res = clean(await call('POST', '/api/v0/lambdas', bob, { name: 'refused', code: '', ...extra }));
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(errorOf(res).code, 'validation_error');
      assert.match(errorOf(res).message, message);
    }
    assert.deepEqual(await digest(), before);
    assert.deepEqual((await call('GET', '/api/v0/lambdas', bob)).json(), []);
    // Exactly at the limits is fine.
    const atLimits = await create(
      {
        name: 'at-limits',
        env: many('E', 32, () => 'v'),
        secrets: many('S', 32, (i) => secret(`${i}`)),
      },
      bob,
    );
    assert.equal(atLimits.secrets.length, 32);
    const total = MAX_ENV_TOTAL_LENGTH;
    // 12 values of 5,120 and one that brings names and values to exactly 65,536.
    const big = many('B', 12, () => long(MAX_ENV_VALUE_LENGTH));
    const used = Object.entries(big).reduce((sum, [k, v]) => sum + k.length + v.length, 0);
    big.LAST = long(total - used - 'LAST'.length);
    await create({ name: 'at-total', secrets: big }, bob);
  });

  it('checks PATCH limits on the merged result and changes nothing beyond them', async () => {
    const created = await create({
      name: 'patch-limits',
      env: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`E${i}`, 'v'])),
      // S0…S9 hold 5,000 characters each: 50,000 of the 65,536 are used by stored secrets.
      secrets: Object.fromEntries(
        Array.from({ length: 20 }, (_, i) => [`S${i}`, i < 10 ? secret(`${i}`).padEnd(5000, 'x') : secret(`${i}`)]),
      ),
    });
    const bigValue = secret('big') + 'x'.repeat(MAX_ENV_VALUE_LENGTH - secret('big').length);
    const bad: [Record<string, unknown>, RegExp][] = [
      // 60 stored + 5 new = 65.
      [
        { secrets: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`NEW${i}`, secret(`new${i}`)])) },
        /at most 64 names together; this would make 65/,
      ],
      [{ env: { X1: 'v', X2: 'v', X3: 'v' }, secrets: { Y1: secret('y1'), Y2: secret('y2') } }, /this would make 65/],
      // The size limit counts the stored secret values too.
      [
        { env: Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`E${i}`, 'x'.repeat(MAX_ENV_VALUE_LENGTH)])) },
        /at most 65536 characters/,
      ],
      [
        { secrets: Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`S${10 + i}`, bigValue])) },
        /at most 65536 characters/,
      ],
      [
        {
          env: Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`E${i}`, 'x'.repeat(MAX_ENV_VALUE_LENGTH)])),
          secrets: { S0: bigValue, S1: bigValue },
        },
        /at most 65536 characters/,
      ],
      [{ env: { S3: 'clash with a stored secret' } }, /S3 would be both in env and in secrets/],
      [{ secrets: { E7: secret('clash') } }, /E7 would be both in env and in secrets/],
      [{ secrets: { 'bad name': null } }, /body\.secrets: "bad name" is not a valid name/],
      [{ secrets: { S1: 5 } }, /body\.secrets\.S1 must be string/],
      [{ secrets: { S1: bigValue + 'x' } }, /body\.secrets\.S1 must NOT have more than 5120/],
      // A refused part refuses the whole change.
      [{ name: 'renamed', env: { OK: 'v' }, secrets: { 'no-dash': secret('d') } }, /is not a valid name/],
      [{ name: 'renamed', secrets: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`T${i}`, 'v'])) }, /64/],
    ];
    const before = await digest();
    for (const [body, message] of bad) {
      const res = await patch(created.id, body, 400);
      assert.equal(errorOf(res).code, 'validation_error');
      assert.match(errorOf(res).message, message);
    }
    assert.deepEqual(await digest(), before);
    // Deleting makes room within the same change: 60 - 5 + 5 = 60.
    const res = await patch(created.id, {
      env: { E0: null, E1: null, E2: null, E3: null, E4: null },
      secrets: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`NEW${i}`, secret(`new${i}`)])),
    });
    assert.equal((res.json() as LambdaAnswer).secrets.length, 25);
  });

  it('checks logger_id with the logs service as the owner', async () => {
    const adaLogger = await newLogger(ada);
    const bobLogger = await newLogger(bob);
    const before = await digest();
    for (const loggerId of [bobLogger, '00000000-0000-4000-8000-000000000000', 'not a uuid/..', '../v1/loggers']) {
      const res = await call('POST', '/api/v0/lambdas', ada, { name: 'logged', code: '', logger_id: loggerId });
      assert.equal(res.statusCode, 400, res.body);
      assert.deepEqual(errorOf(res), {
        status: 400,
        code: 'validation_error',
        message: `body.logger_id: no logger ${loggerId} that you own`,
      } as never);
    }
    assert.deepEqual(await digest(), before);

    const created = await create({ name: 'logged', logger_id: adaLogger });
    assert.equal(created.logger_id, adaLogger);
    // Bob's logger is not Ada's to use on a change either; nothing changes.
    let res = await patch(created.id, { logger_id: bobLogger, name: 'logged-2' }, 400);
    assert.equal(errorOf(res).message, `body.logger_id: no logger ${bobLogger} that you own`);
    assert.equal((await storedRow(created.id))?.logger_id, adaLogger);
    // Once Bob makes Ada an owner of his logger, she may.
    const added = await logs.inject({
      method: 'POST',
      url: `/v1/loggers/${bobLogger}/owners`,
      headers: { 'content-type': 'application/json', ...bob },
      payload: JSON.stringify({ user_id: 'user-ada' }),
    });
    assert.equal(added.statusCode, 200, added.body);
    res = await patch(created.id, { logger_id: bobLogger });
    assert.equal((res.json() as LambdaAnswer).logger_id, bobLogger);
    // null clears it; leaving it out keeps it.
    res = await patch(created.id, { name: 'logged-3' });
    assert.equal((res.json() as LambdaAnswer).logger_id, bobLogger);
    res = await patch(created.id, { logger_id: null });
    assert.equal((res.json() as LambdaAnswer).logger_id, null);
    assert.equal((await storedRow(created.id))?.logger_id, null);
  });

  it('answers 503 when the logs service cannot be asked, and stores nothing', async () => {
    const res = await call('POST', '/api/v0/lambdas', ada, { name: 'no-logs', code: '', logger_id: 'any' }, alone.app);
    assert.equal(res.statusCode, 503, res.body);
    assert.deepEqual(errorOf(res), {
      status: 503,
      code: 'service_unavailable',
      message: 'the logs service cannot be reached to check body.logger_id',
    } as never);
    assert.deepEqual((await call('GET', '/api/v0/lambdas', ada, undefined, alone.app)).json(), []);
    // Without a logger_id, or clearing it, the logs service is not needed.
    const created = await call('POST', '/api/v0/lambdas', ada, { name: 'no-logs', code: '' }, alone.app);
    assert.equal(created.statusCode, 201);
    const id = (created.json() as LambdaAnswer).id;
    const cleared = await call('PATCH', `/api/v0/lambdas/${id}`, ada, { logger_id: null }, alone.app);
    assert.equal(cleared.statusCode, 200, cleared.body);
    const refused = await call('PATCH', `/api/v0/lambdas/${id}`, ada, { logger_id: 'x', name: 'n2' }, alone.app);
    assert.equal(refused.statusCode, 503);
    assert.equal((await call('GET', `/api/v0/lambdas/${id}`, ada, undefined, alone.app)).json().name, 'no-logs');

    // A logs service that cannot be reached (a remote upstream that is down) is a 503 too.
    const down = new PlatformServiceCalls({
      domain: settings.domain,
      apps: new Map(),
      upstreamUrls: { logs: 'http://127.0.0.1:9' },
    });
    const failing = await lambdaServiceWith({ prewarm: 1 }).build({
      settings: alone.settings,
      store: alone.store,
      logger: pino({ level: 'silent' }),
      version: VERSION,
      services: down,
    });
    try {
      const res2 = await call('PATCH', `/api/v0/lambdas/${id}`, ada, { logger_id: 'x' }, failing);
      assert.equal(res2.statusCode, 503, res2.body);
      assert.equal(errorOf(res2).code, 'service_unavailable');
    } finally {
      await failing.close();
      await down.close();
    }
  });

  it('answers 500 secrets_unreadable to a change that needs secrets sealed under another key, and takes one that replaces them all', async () => {
    const created = await create({ name: 'rekey', secrets: { ONE: secret('one'), TWO: secret('two') } });
    const foreign = new LambdaSecrets(randomBytes(32)).seal(created.id, { ONE: secret('one'), TWO: secret('two') });
    await store.sql.database.write(() =>
      run('update lambda_functions set secrets = ? where id = ?', foreign, created.id),
    );
    const before = await digest();
    for (const body of [{ secrets: { ONE: secret('new') } }, { env: { PLAIN: 'p' } }]) {
      const res = await patch(created.id, body, 500);
      assert.deepEqual(errorOf(res), {
        status: 500,
        code: 'secrets_unreadable',
        message: `the secrets of lambda ${created.id} were encrypted with another key: every instance needs the same LAMBDA_SECRETS_KEY`,
      } as never);
    }
    assert.deepEqual(await digest(), before);
    // A change that names every secret does not need the old values.
    const res = await patch(created.id, { secrets: { ONE: secret('one-again'), TWO: null } });
    assert.deepEqual((res.json() as LambdaAnswer).secrets, ['ONE']);
    assert.deepEqual(await envOf(created.id), { ONE: secret('one-again') });
  });

  it('never quotes a malformed body, which may carry secrets, in its 400', async () => {
    const created = await create({ name: 'malformed' });
    const bodies = [
      `{"name":"m","code":"","secrets":{"A":${secret('unquoted')}}}`,
      `{"name":"m","code":"","secrets":{"A":"${secret('open')}`,
      `{"name":"m","code":"","secrets":{"A":"${secret('ctl')}\u0001"}}`,
      `{"secrets":{"A":"${secret('after')}"}} trailing`,
    ];
    for (const payload of bodies) {
      for (const [method, url] of [
        ['POST', '/api/v0/lambdas'],
        ['PATCH', `/api/v0/lambdas/${created.id}`],
      ] as const) {
        for (const type of ['application/json', 'application/merge-patch+json; charset=utf-8']) {
          const res = clean(await lambda.inject({ method, url, headers: { 'content-type': type, ...ada }, payload }));
          assert.equal(res.statusCode, 400, res.body);
          assert.equal(errorOf(res).code, 'invalid_json');
          assert.match(
            errorOf(res).message,
            /^request body is not valid JSON: (a syntax error( at position \d+)?|it ends early)$/,
          );
        }
      }
    }
    assert.equal((await call('GET', `/api/v0/lambdas/${created.id}`, ada)).json().name, 'malformed');
  });

  it('writes no secret value to the log', () => {
    for (const line of logLines) assert.ok(!line.includes(MARK), line);
  });
});
