import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { UUID_V4, assertError } from '../../helpers/envelope.ts';
import { KEY, OTHER_KEY, startScheduler, type SchedulerHarness } from './helpers.ts';

const RFC3339_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

describe('scheduler: schedulers, health, keys and OpenAPI', () => {
  let h: SchedulerHarness;
  before(async () => {
    h = await startScheduler();
  });
  after(async () => {
    await h.close();
  });

  it('creates with a generated sched-<uuid> id and zero counts', async () => {
    const res = await h.call('POST', '/schedulers', { display_name: 'Primary', description: 'kept, not returned' });
    assert.equal(res.statusCode, 201);
    const { scheduler } = res.json();
    assert.match(scheduler.id, new RegExp(`^sched-${UUID_V4.source.slice(1, -1)}$`));
    assert.deepEqual(Object.keys(scheduler), [
      'id',
      'display_name',
      'ready',
      'scheduled',
      'inflight',
      'created_at',
      'updated_at',
    ]);
    assert.equal(scheduler.display_name, 'Primary');
    assert.equal(scheduler.ready, true);
    assert.equal(scheduler.scheduled, 0);
    assert.equal(scheduler.inflight, 0);
    assert.match(scheduler.created_at, RFC3339_SECONDS);
    assert.equal(scheduler.updated_at, scheduler.created_at);
    const got = await h.call('GET', `/schedulers/${scheduler.id}`, undefined, { key: null });
    assert.equal(got.statusCode, 200);
    assert.deepEqual(got.json(), scheduler);
  });

  it('creates with a client id; a used id is 409 conflict', async () => {
    assert.equal((await h.call('POST', '/schedulers', { id: 'crud.one_1-a', display_name: 'One' })).statusCode, 201);
    assertError(await h.call('POST', '/schedulers', { id: 'crud.one_1-a', display_name: 'Again' }), 409, 'conflict');
    assert.equal((await h.call('GET', '/schedulers/crud.one_1-a')).json().display_name, 'One');
  });

  it('rejects bad create bodies with 400 and creates nothing', async () => {
    const before = (await h.call('GET', '/schedulers')).json().total;
    const cases: [unknown, string][] = [
      ['{"display_name":', 'invalid_json'],
      ['[1]', 'validation_error'],
      [{}, 'validation_error'],
      [{ display_name: '' }, 'validation_error'],
      [{ display_name: 5 }, 'validation_error'],
      [{ display_name: 'x', id: 'has space' }, 'validation_error'],
      [{ display_name: 'x', id: 'a'.repeat(129) }, 'validation_error'],
      [{ display_name: 'x', unknown: 1 }, 'validation_error'],
    ];
    for (const [body, code] of cases) assertError(await h.call('POST', '/schedulers', body), 400, code);
    assertError(await h.call('POST', '/schedulers', undefined), 400, 'validation_error');
    assert.equal((await h.call('GET', '/schedulers')).json().total, before);
  });

  it('parses JSON whatever the Content-Type', async () => {
    const res = await h.call(
      'POST',
      '/schedulers',
      { id: 'plain-text', display_name: 'T' },
      { headers: { 'content-type': 'text/plain' } },
    );
    assert.equal(res.statusCode, 201);
  });

  it('needs a key on every private endpoint: X-API-Key or Authorization: Bearer, 401 before validation', async () => {
    assertError(await h.call('POST', '/schedulers', { display_name: 'x' }, { key: null }), 401, 'unauthorized');
    assertError(await h.call('POST', '/schedulers', '{bad json', { key: null }), 401, 'unauthorized');
    assertError(await h.call('POST', '/schedulers', { display_name: 'x' }, { key: 'wrong' }), 401, 'unauthorized');
    assertError(
      await h.call(
        'POST',
        '/schedulers',
        { display_name: 'x' },
        { key: null, headers: { authorization: 'Bearer nope' } },
      ),
      401,
      'unauthorized',
    );
    const bearer = await h.call(
      'POST',
      '/schedulers',
      { id: 'via-bearer', display_name: 'x' },
      { key: null, headers: { authorization: `Bearer ${OTHER_KEY}` } },
    );
    assert.equal(bearer.statusCode, 201);
    for (const [method, url] of [
      ['PUT', '/schedulers/via-bearer'],
      ['PATCH', '/schedulers/via-bearer'],
      ['DELETE', '/schedulers/via-bearer'],
      ['POST', '/schedulers/via-bearer/tasks'],
      ['POST', '/schedulers/via-bearer/tasks/reserve'],
      ['DELETE', '/schedulers/via-bearer/tasks/t'],
      ['POST', '/schedulers/via-bearer/tasks/t/extend'],
      ['POST', '/schedulers/via-bearer/tasks/t/reschedule'],
    ] as const) {
      const message = assertError(await h.call(method, url, {}, { key: null }), 401, 'unauthorized');
      assert.ok(!message.includes(KEY));
    }
    assert.equal((await h.call('GET', '/schedulers/via-bearer')).statusCode, 200);
  });

  it('PUT replaces, PATCH changes the given fields, updated_at moves', async () => {
    await h.createScheduler('upd', 'Before');
    const created = (await h.call('GET', '/schedulers/upd')).json();
    await new Promise((r) => setTimeout(r, 1100));
    const put = await h.call('PUT', '/schedulers/upd', { display_name: 'After' });
    assert.equal(put.statusCode, 200);
    assert.equal(put.json().display_name, 'After');
    assert.equal(put.json().created_at, created.created_at);
    assert.notEqual(put.json().updated_at, created.updated_at);
    const patch = await h.call('PATCH', '/schedulers/upd', { description: 'only this' });
    assert.equal(patch.statusCode, 200);
    assert.equal(patch.json().display_name, 'After');
    assertError(await h.call('PUT', '/schedulers/upd', { description: 'no name' }), 400, 'validation_error');
    assertError(await h.call('PATCH', '/schedulers/upd', { display_name: 3 }), 400, 'validation_error');
    assertError(await h.call('PUT', '/schedulers/missing', { display_name: 'x' }), 404, 'not_found');
    assertError(await h.call('PATCH', '/schedulers/missing', {}), 404, 'not_found');
  });

  it('lists in creation order with case-insensitive search; q also matches ids', async () => {
    await h.createScheduler('list-b', 'Billing Jobs');
    await h.createScheduler('list-a', 'Mail jobs');
    const all = (await h.call('GET', '/schedulers')).json();
    assert.equal(all.total, all.schedulers.length);
    const ids = all.schedulers.map((s: { id: string }) => s.id);
    assert.ok(ids.indexOf('list-b') < ids.indexOf('list-a'));
    const search = (await h.call('GET', '/schedulers?search=JOBS')).json();
    assert.deepEqual(
      search.schedulers.map((s: { id: string }) => s.id),
      ['list-b', 'list-a'],
    );
    assert.equal(search.total, 2);
    assert.deepEqual(
      (await h.call('GET', '/schedulers?q=list-a')).json().schedulers.map((s: { id: string }) => s.id),
      ['list-a'],
    );
    assert.deepEqual((await h.call('GET', '/schedulers?search=list-a')).json().schedulers, []);
  });

  it('health reports counts; unknown is 404 not_found', async () => {
    await h.createScheduler('healthy');
    await h.enqueue('healthy', {});
    await h.enqueue('healthy', { delay: '1h' });
    const reserved = await h.call('POST', '/schedulers/healthy/tasks/reserve', { worktime: '30s' });
    assert.equal(reserved.statusCode, 200);
    const res = await h.call('GET', '/schedulers/healthy/health');
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: 'ok', ready: true, scheduled: 1, inflight: 1, scheduler_id: 'healthy' });
    const s = (await h.call('GET', '/schedulers/healthy')).json();
    assert.equal(s.scheduled, 1);
    assert.equal(s.inflight, 1);
    assertError(await h.call('GET', '/schedulers/nope/health'), 404, 'not_found');
    assertError(await h.call('GET', '/schedulers/nope'), 404, 'not_found');
  });

  it('delete discards the scheduler and its tasks; the id can be created again', async () => {
    await h.createScheduler('gone');
    await h.enqueue('gone', { id: 'task-a' });
    const res = await h.call('DELETE', '/schedulers/gone');
    assert.equal(res.statusCode, 204);
    assert.equal(res.body, '');
    assertError(await h.call('GET', '/schedulers/gone'), 404, 'not_found');
    assertError(await h.call('DELETE', '/schedulers/gone'), 404, 'not_found');
    await h.createScheduler('gone');
    const list = (await h.call('GET', '/schedulers/gone/tasks')).json();
    assert.equal(list.scheduled_meta.total, 0);
  });

  it('answers 405 for a known path with another method', async () => {
    const res = await h.call('PUT', '/schedulers');
    assertError(res, 405, 'method_not_allowed');
  });

  it('serves an OpenAPI 3.1.0 document titled Scheduler API', async () => {
    const res = await h.call('GET', '/openapi.json', undefined, { key: null });
    assert.equal(res.statusCode, 200);
    const doc = res.json();
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.title, 'Scheduler API');
    assert.equal(doc.info.version, '1.0.0');
    for (const path of [
      '/schedulers',
      '/schedulers/{id}',
      '/schedulers/{id}/health',
      '/schedulers/{id}/tasks',
      '/schedulers/{id}/tasks/stream',
      '/schedulers/{id}/tasks/reserve',
      '/schedulers/{id}/tasks/{task}',
      '/schedulers/{id}/tasks/{task}/extend',
      '/schedulers/{id}/tasks/{task}/reschedule',
    ]) {
      assert.ok(doc.paths[path], `missing ${path}`);
    }
    assert.ok(doc.components.securitySchemes.schedulerApiKey);
    assert.ok(!res.body.includes(KEY));
  });
});
