import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { VERSION } from '../../../src/core/version.ts';
import type { CronOptions } from '../../../src/services/lambda/cron.ts';
import type { InvocationItem } from '../../../src/services/lambda/history.ts';
import { lambdaServiceWith } from '../../../src/services/lambda/index.ts';
import { lambdaMigrations } from '../../../src/services/lambda/migrations.ts';
import { migrateStore, openStore, type Store } from '../../../src/store/index.ts';
import { all } from '../../../src/store/sql-work.ts';
import type { ServiceApp } from '../../../src/core/app.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { asUser, jsonCaller, startTestService, testSettings, type TestService } from '../../helpers/service.ts';

const ada = asUser('user-ada');

interface LambdaBody {
  id: string;
  path: string;
  language: string;
  schedule: string | null;
  schedule_tz: string | null;
  next_run_at: string | null;
}

/** The lambda service with a test clock and a short poll (README: Cron schedules). */
const cronService = (cron: CronOptions) => lambdaServiceWith({ timeoutMs: 2000, prewarm: 1 }, {}, {}, cron);

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 8_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`not reached in ${timeoutMs} ms: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every run prints what started it, so the history shows the trigger each tick had. */
const REPORTER = `export default (req, ctx) => {
  console.log(JSON.stringify({ trigger: ctx.trigger, method: req.method, path: req.path, body: req.body ?? null }));
  return 'ok';
}`;

interface Reported {
  trigger: { type: string; scheduled_at: string };
  method: string;
  path: string;
  body: unknown;
}

const reportOf = (item: { logs: { message: string }[] }): Reported => JSON.parse(item.logs[0]!.message) as Reported;

describe('lambda cron schedules: validation and next_run_at', () => {
  // A fixed clock: nothing comes due, and every next_run_at below is known in advance.
  const NOW = Date.parse('2026-03-07T12:34:56.789Z');
  let service: TestService;
  let call: ReturnType<typeof jsonCaller>;
  before(async () => {
    service = await startTestService(cronService({ now: () => NOW, pollMs: 50 }));
    call = jsonCaller(service.app);
  });
  after(async () => {
    await service.close();
  });

  const create = (body: Record<string, unknown>) =>
    call('POST', '/api/v0/lambdas', ada, { code: 'export default () => 1', ...body });
  const created = async (body: Record<string, unknown>): Promise<LambdaBody> => {
    const res = await create(body);
    assert.equal(res.statusCode, 201, res.body);
    return res.json<LambdaBody>();
  };
  const refused = (res: LightMyRequestResponse, pattern: RegExp) => {
    assert.equal(res.statusCode, 400, res.body);
    const { error } = res.json<{ error: { code: string; message: string } }>();
    assert.equal(error.code, 'validation_error');
    assert.match(error.message, pattern);
  };
  const names = async () =>
    (await call('GET', '/api/v0/lambdas', ada)).json<{ name: string }[]>().map((lambda) => lambda.name);

  it('computes next_run_at from the schedule, in UTC or in the given time zone', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ schedule: '0 0 * * *' }, '2026-03-08T00:00:00Z'],
      // Midnight in New York on 8 March 2026 is still EST (UTC-5): DST starts at 2:00 that day.
      [{ schedule: '0 0 * * *', schedule_tz: 'America/New_York' }, '2026-03-08T05:00:00Z'],
      [{ schedule: '0 9 * * *', schedule_tz: 'Asia/Tokyo' }, '2026-03-08T00:00:00Z'],
      [{ schedule: '@hourly' }, '2026-03-07T13:00:00Z'],
      [{ schedule: '@daily' }, '2026-03-08T00:00:00Z'],
      [{ schedule: '@midnight' }, '2026-03-08T00:00:00Z'],
      [{ schedule: '@weekly' }, '2026-03-08T00:00:00Z'],
      [{ schedule: '@monthly' }, '2026-04-01T00:00:00Z'],
      [{ schedule: '@yearly' }, '2027-01-01T00:00:00Z'],
      [{ schedule: '*/15 * * * *' }, '2026-03-07T12:45:00Z'],
      [{ schedule: '0 12 * * MON-FRI' }, '2026-03-09T12:00:00Z'],
      // 6 fields: a leading seconds field.
      [{ schedule: '30 * * * * *' }, '2026-03-07T12:35:30Z'],
      [{ schedule: '* * * * * *' }, '2026-03-07T12:34:57Z'],
    ];
    for (const [i, [body, expected]] of cases.entries()) {
      const lambda = await created({ name: `good-${i}`, ...body });
      assert.equal(lambda.next_run_at, expected, JSON.stringify(body));
      assert.equal(lambda.schedule, body.schedule);
      assert.equal(lambda.schedule_tz, body.schedule_tz ?? null);
      const got = (await call('GET', `/api/v0/lambdas/${lambda.id}`, ada)).json<LambdaBody>();
      assert.equal(got.next_run_at, expected);
      const listed = (await call('GET', '/api/v0/lambdas', ada)).json<LambdaBody[]>().find((l) => l.id === lambda.id);
      assert.equal(listed?.next_run_at, expected);
    }
    const plain = await created({ name: 'unscheduled' });
    assert.deepEqual([plain.schedule, plain.schedule_tz, plain.next_run_at], [null, null, null]);
  });

  it('refuses bad schedules with a 400 that says what is wrong, and stores nothing', async () => {
    const before = await names();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ schedule: '* * * *' }, /5 fields .* or 6 .*not 4/],
      [{ schedule: '0 1 2 3 4 5 6' }, /not 7/],
      [{ schedule: '61 * * * *' }, /not a valid cron expression: .*61/],
      [{ schedule: '0 25 * * *' }, /not a valid cron expression/],
      [{ schedule: 'a b c d e' }, /not a valid cron expression/],
      [{ schedule: '0 0 31 2 *' }, /not a valid cron expression/],
      [{ schedule: '*/0 * * * *' }, /not a valid cron expression/],
      [{ schedule: 'H * * * *' }, /H \(hashed\)/],
      [{ schedule: '@reboot' }, /unknown nickname "@reboot"/],
      [{ schedule: '@minutely' }, /unknown nickname/],
      [{ schedule: '@DAILY' }, /unknown nickname/],
      [{ schedule: '   ' }, /not 0/],
      [{ schedule: '' }, /schedule/],
      [{ schedule: `${'0 '.repeat(200)}` }, /schedule/],
      [{ schedule: 5 }, /schedule/],
      [{ schedule: '0 0 * * *', schedule_tz: 'Nope/Zone' }, /"Nope\/Zone" is not a known IANA time zone/],
      [{ schedule_tz: 'Europe/Paris' }, /schedule_tz needs a schedule/],
      [{ schedule: null, schedule_tz: 'Europe/Paris' }, /schedule_tz needs a schedule/],
      [{ schedule: '0 0 * * *', language: 'static-html' }, /static-html lambda .* cannot have a schedule/],
    ];
    for (const [i, [body, pattern]] of cases.entries()) refused(await create({ name: `bad-${i}`, ...body }), pattern);
    assert.deepEqual(await names(), before);
  });

  it('patches the schedule: set, zone, refused changes leave it as it was, null removes it', async () => {
    const lambda = await created({ name: 'patched' });
    const patch = (body: Record<string, unknown>) => call('PATCH', `/api/v0/lambdas/${lambda.id}`, ada, body);
    const get = async () => (await call('GET', `/api/v0/lambdas/${lambda.id}`, ada)).json<LambdaBody>();

    refused(await patch({ schedule_tz: 'UTC' }), /schedule_tz needs a schedule/);
    let body = (await patch({ schedule: '0 6 * * *' })).json<LambdaBody>();
    assert.deepEqual([body.schedule, body.schedule_tz, body.next_run_at], ['0 6 * * *', null, '2026-03-08T06:00:00Z']);
    body = (await patch({ schedule_tz: 'Europe/Paris' })).json<LambdaBody>();
    // 06:00 in Paris (CET, UTC+1) is 05:00 UTC.
    assert.deepEqual(
      [body.schedule, body.schedule_tz, body.next_run_at],
      ['0 6 * * *', 'Europe/Paris', '2026-03-08T05:00:00Z'],
    );

    const kept = await get();
    refused(await patch({ schedule: '0 6 * *' }), /not 4/);
    refused(await patch({ schedule_tz: 'Mars/Olympus' }), /not a known IANA time zone/);
    refused(await patch({ language: 'static-css' }), /static-css lambda .* cannot have a schedule/);
    refused(await patch({ schedule: null, schedule_tz: 'UTC' }), /needs a schedule/);
    refused(await patch({ name: 'renamed', schedule: '@never' }), /unknown nickname/);
    assert.deepEqual(await get(), kept);

    body = (await patch({ schedule_tz: null })).json<LambdaBody>();
    assert.deepEqual([body.schedule_tz, body.next_run_at], [null, '2026-03-08T06:00:00Z']);
    body = (await patch({ schedule_tz: 'Europe/Paris' })).json<LambdaBody>();
    // schedule: null drops the zone with it.
    body = (await patch({ schedule: null })).json<LambdaBody>();
    assert.deepEqual([body.schedule, body.schedule_tz, body.next_run_at], [null, null, null]);
    assert.deepEqual([(await get()).schedule, (await get()).next_run_at], [null, null]);
    // Static again is fine without a schedule.
    assert.equal((await patch({ language: 'static-html', code: '<p>hi</p>' })).statusCode, 200);
    refused(await patch({ schedule: '@daily' }), /static-html lambda/);
  });

  it('shows the new fields in the OpenAPI document', async () => {
    const doc = (await call('GET', '/openapi.json')).json<{
      components: { schemas: Record<string, { properties: Record<string, unknown> }> };
    }>();
    for (const field of ['schedule', 'schedule_tz', 'next_run_at'])
      assert.ok(doc.components.schemas.Lambda!.properties[field], field);
  });
});

describe('lambda cron schedules: runs', () => {
  let service: TestService;
  let call: ReturnType<typeof jsonCaller>;
  before(async () => {
    service = await startTestService(cronService({ pollMs: 50 }));
    call = jsonCaller(service.app);
  });
  after(async () => {
    await service.close();
  });

  const cronRuns = async (id: string) =>
    (await call('GET', `/api/v0/lambdas/${id}/invocations?limit=100`, ada))
      .json<{ invocations: InvocationItem[] }>()
      .invocations.filter((item) => item.trigger === 'cron');

  it('runs every tick once as a POST to its path with ctx.trigger cron, recorded as cron; null stops it', async () => {
    const res = await call('POST', '/api/v0/lambdas', ada, {
      name: 'every-second',
      code: REPORTER,
      path: '/tick',
      schedule: '* * * * * *',
    });
    assert.equal(res.statusCode, 201, res.body);
    const lambda = res.json<LambdaBody>();
    const runs = await until(
      () => cronRuns(lambda.id),
      (items) => items.length >= 3,
    );
    const reports = runs.map(reportOf);
    for (const report of reports) {
      assert.equal(report.trigger.type, 'cron');
      assert.match(report.trigger.scheduled_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      assert.deepEqual([report.method, report.path, report.body], ['POST', '/tick', null]);
    }
    const ticks = reports.map((report) => report.trigger.scheduled_at);
    assert.equal(new Set(ticks).size, ticks.length, `a tick ran twice: ${ticks.join(' ')}`);
    for (const item of runs) assert.deepEqual([item.status, item.error], [200, null]);

    const stopped = await call('PATCH', `/api/v0/lambdas/${lambda.id}`, ada, { schedule: null });
    assert.equal(stopped.json<LambdaBody>().next_run_at, null);
    // A tick claimed just before the patch may still be finishing.
    await sleep(300);
    const count = (await cronRuns(lambda.id)).length;
    await sleep(1500);
    assert.equal((await cronRuns(lambda.id)).length, count, 'a lambda without a schedule ran by itself');
  });

  it('records a failing tick in the history and keeps ticking', async () => {
    const res = await call('POST', '/api/v0/lambdas', ada, {
      name: 'failing',
      code: 'export default () => { throw new Error("tick failed") }',
      schedule: '* * * * * *',
    });
    const lambda = res.json<LambdaBody>();
    const runs = await until(
      () => cronRuns(lambda.id),
      (items) => items.length >= 2,
    );
    for (const item of runs) {
      assert.equal(item.status, 500);
      assert.equal(item.error?.code, 'lambda_error');
      assert.match(item.error?.message ?? '', /tick failed/);
    }
    await call('DELETE', `/api/v0/lambdas/${lambda.id}`, ada);
  });
});

describe('lambda cron schedules: missed ticks', () => {
  let clock = Date.parse('2026-03-07T12:00:30Z');
  let service: TestService;
  let call: ReturnType<typeof jsonCaller>;
  before(async () => {
    service = await startTestService(cronService({ now: () => clock, pollMs: 25 }));
    call = jsonCaller(service.app);
  });
  after(async () => {
    await service.close();
  });

  it('runs only the latest missed tick after a gap, then goes on from there', async () => {
    const lambda = (
      await call('POST', '/api/v0/lambdas', ada, { name: 'per-minute', code: REPORTER, schedule: '* * * * *' })
    ).json<LambdaBody>();
    assert.equal(lambda.next_run_at, '2026-03-07T12:01:00Z');
    const ticks = async () =>
      (await call('GET', `/api/v0/lambdas/${lambda.id}/invocations?limit=100`, ada))
        .json<{ invocations: InvocationItem[] }>()
        .invocations.filter((item) => item.trigger === 'cron')
        .map((item) => reportOf(item).trigger.scheduled_at)
        .reverse();
    await sleep(200);
    assert.deepEqual(await ticks(), [], 'nothing is due before 12:01');

    // The platform was "down" for an hour: 60 ticks were missed.
    clock = Date.parse('2026-03-07T13:00:45Z');
    await until(ticks, (list) => list.length >= 1);
    await sleep(400);
    assert.deepEqual(await ticks(), ['2026-03-07T13:00:00Z']);
    const get = async () => (await call('GET', `/api/v0/lambdas/${lambda.id}`, ada)).json<LambdaBody>();
    assert.equal((await get()).next_run_at, '2026-03-07T13:01:00Z');

    clock = Date.parse('2026-03-07T13:03:10Z');
    await until(ticks, (list) => list.length >= 2);
    await sleep(400);
    assert.deepEqual(await ticks(), ['2026-03-07T13:00:00Z', '2026-03-07T13:03:00Z']);
    assert.equal((await get()).next_run_at, '2026-03-07T13:04:00Z');
  });
});

// Two instances of the service on one database, as two processes have (two stores, two
// connections): every tick is run by exactly one of them (README: Cron schedules).
describe('lambda cron schedules: two instances', () => {
  let database: TestDatabase;
  const stores: Store[] = [];
  const apps: ServiceApp[] = [];
  before(async () => {
    database = await createTestDatabase();
    const settings = testSettings(database);
    for (let i = 0; i < 2; i++) stores.push(await openStore(settings));
    await migrateStore(stores[0]!, [lambdaMigrations]);
    for (const store of stores) {
      const app = await cronService({ pollMs: 20 }).build({
        settings,
        store,
        logger: pino({ level: 'silent' }),
        version: VERSION,
      });
      await app.ready();
      apps.push(app);
    }
  });
  let closed = false;
  after(async () => {
    if (!closed) for (const app of apps) await app.close();
    for (const store of stores) await store.close();
    await database.cleanup();
  });

  it('runs each tick exactly once in all', async () => {
    const [a, b] = apps.map((app) => jsonCaller(app));
    const res = await a!('POST', '/api/v0/lambdas', ada, { name: 'shared', code: REPORTER, schedule: '* * * * * *' });
    assert.equal(res.statusCode, 201, res.body);
    const lambda = res.json<LambdaBody>();
    await sleep(3_500);
    assert.equal((await b!('PATCH', `/api/v0/lambdas/${lambda.id}`, ada, { schedule: null })).statusCode, 200);
    // Closing writes what each instance's history still holds.
    for (const app of apps) await app.close();
    closed = true;
    const rows = await stores[0]!.sql.database.read(() =>
      all<{ logs: string; trigger: string }>(
        'select logs, trigger from lambda_invocations where lambda_id = ? order by seq',
        lambda.id,
      ),
    );
    const ticks = rows
      .filter((row) => row.trigger === 'cron')
      .map((row) => reportOf({ logs: JSON.parse(row.logs) as { message: string }[] }).trigger.scheduled_at)
      .sort();
    assert.ok(ticks.length >= 2, `too few ticks ran: ${ticks.join(' ')}`);
    assert.equal(new Set(ticks).size, ticks.length, `a tick ran more than once: ${ticks.join(' ')}`);
  });
});
