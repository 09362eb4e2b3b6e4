import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { createConsoleService } from '../../../src/services/console/index.ts';
import { VERSION } from '../../../src/core/version.ts';
import { assertError } from '../../helpers/envelope.ts';
import { startTestService, type TestService } from '../../helpers/service.ts';

const buildDir = mkdtempSync(join(tmpdir(), 'stratus-console-build-'));
let service: TestService;

before(async () => {
  mkdirSync(join(buildDir, 'assets'));
  writeFileSync(join(buildDir, 'index.html'), '<!doctype html><title>Stratus console</title>');
  writeFileSync(join(buildDir, 'assets', 'index-abc123.js'), 'console.log("ui")');
  service = await startTestService(createConsoleService({ buildDir }), {
    consoleDemo: true,
    authProviders: [{ name: 'idp', issuer: 'https://idp.test', clientId: 'c', clientSecret: 'secret-never-shown' }],
  });
});
after(async () => {
  await service.close();
  rmSync(buildDir, { recursive: true, force: true });
});

const get = (url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<LightMyRequestResponse> =>
  service.app.inject({ method: method as 'GET', url, headers });

const MOCKS: [string, string][] = [
  [
    '/fakeapi/authapi/auth/me',
    '{"email":"fulanez@gmail.com","id":"user-1234","nick":"fulanez","picture":"https://lh3.googleusercontent.com/a-/ACNPEu8h8e8wfcL1Hsk4JbFsROFXIBNIllOFLLPnWEDWV2s=s96-c"}',
  ],
  [
    '/fakeapi/projectsapi/v0/projects',
    '[{"id":"project-00000000-0000-0000-0000-000000000001","name":"Hello","host":"red-pepper.holacloud.app","owners":["user1"]}]',
  ],
  [
    '/fakeapi/projectsapi/v0/projects/project-00000000-0000-0000-0000-000000000001',
    '{"id":"project-00000000-0000-0000-0000-000000000001","name":"Hello","host":"red-pepper.holacloud.app","owners":["user1"]}',
  ],
  [
    '/fakeapi/inceptionapi/v1/databases',
    '[{"id":"00000000-0000-0000-0000-000000000001","name":"db1","owners_length":1}]',
  ],
  [
    '/fakeapi/inceptionapi/v1/databases/00000000-0000-0000-0000-000000000001/collections',
    '[{"name":"users","total":2,"indexes":1,"defaults":{"id":"uuid()"}},{"name":"orders","total":0,"indexes":0,"defaults":null}]',
  ],
  [
    '/fakeapi/lambdasapi/api/v0/lambdas',
    '[{"id":"a663e1f1-e5cb-4fc2-b846-53f2cc7574c9","method":"GET","name":"Index","path":"/"}]',
  ],
  [
    '/fakeapi/filesapi/v1/buckets',
    '[{"id":"bucket-00000000-0000-0000-0000-000000000001","name":"my-first-bucket","description":"First bucket","created_timestamp":1782045600000000000,"created_h":"2026-06-21T12:40:00Z","owners":["user-1234"]}]',
  ],
];

describe('console: /version and the mock API', () => {
  it('GET /version is the version as text', async () => {
    const response = await get('/version');
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(response.body, VERSION);
    assertError(await get('/version', {}, 'POST'), 405, 'method_not_allowed');
  });

  it('answers the seven routes with the reference bytes, whoever asks, query ignored', async () => {
    for (const [path, body] of MOCKS) {
      const callers: Record<string, string>[] = [
        {},
        { 'x-gateway-authentication': JSON.stringify({ user: { id: 'someone' } }) },
      ];
      for (const headers of callers) {
        const response = await get(`${path}?x=1`, headers);
        assert.equal(response.statusCode, 200, path);
        assert.equal(response.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(response.body, body, path);
      }
      assertError(await get(path, {}, 'DELETE'), 405, 'method_not_allowed');
      const head = await get(path, {}, 'HEAD');
      assert.equal(head.statusCode, 200);
      assert.equal(head.body, '');
    }
  });

  it('anything else under /fakeapi/ is a strict 404, even for a browser', async () => {
    const whatever = await get('/fakeapi/authapi/whatever', { accept: 'text/html' });
    assert.equal(whatever.statusCode, 404);
    assert.deepEqual(whatever.json(), {
      error: { status: 404, code: 'not_found', message: 'route GET /fakeapi/authapi/whatever not found' },
    });
    for (const path of [
      '/fakeapi/',
      '/fakeapi',
      '/fakeapi/authapi/auth/me/',
      '/fakeapi/projectsapi/v0/projects/other',
      '/fakeapi/inceptionapi/v1/databases/other/collections',
    ]) {
      assertError(await get(path, { accept: 'text/html' }), 404, 'not_found');
    }
    assertError(await get('/fakeapi/nothing', {}, 'POST'), 404, 'not_found');
  });
});

describe('console: the web console', () => {
  it('serves built files, and index.html for page paths (single-page app)', async () => {
    const index = await get('/', { accept: 'text/html' });
    assert.equal(index.statusCode, 200);
    assert.equal(index.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(index.headers['cache-control'], 'no-cache');
    assert.match(index.body, /Stratus console/);
    const asset = await get('/assets/index-abc123.js');
    assert.equal(asset.statusCode, 200);
    assert.equal(asset.headers['content-type'], 'text/javascript; charset=utf-8');
    assert.match(String(asset.headers['cache-control']), /immutable/);
    assert.equal(asset.body, 'console.log("ui")');
    assert.match((await get('/lambdas/edit', { accept: 'text/html,application/xhtml+xml' })).body, /Stratus console/);
    // Not a page: a missing file, a JSON client, a path escaping the build, another method.
    assertError(await get('/assets/missing.js'), 404, 'not_found');
    assertError(await get('/somewhere', { accept: 'application/json' }), 404, 'not_found');
    assertError(await get('/..%2F..%2Fetc%2Fpasswd', { accept: 'text/html' }), 404, 'not_found');
    assertError(await get('/', {}, 'POST'), 404, 'not_found');
  });

  it('/console-config.json tells the UI demo mode, the domain and the providers (never their secrets)', async () => {
    const response = await get('/console-config.json');
    assert.deepEqual(response.json(), {
      demo: true,
      domain: 'localhost',
      providers: [{ name: 'idp' }],
      signup: false,
      version: VERSION,
    });
    assert.ok(!response.body.includes('secret-never-shown'));
  });

  it('the OpenAPI document lists /version and the seven mock routes', async () => {
    const paths = Object.keys((await get('/openapi.json')).json<{ paths: Record<string, unknown> }>().paths);
    for (const path of ['/version', '/console-config.json', ...MOCKS.map(([p]) => p)])
      assert.ok(paths.includes(path), path);
  });
});

describe('console: before the UI is built', () => {
  it('answers 503 console_not_built for pages, and the mock API still works', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'stratus-console-empty-'));
    const bare = await startTestService(createConsoleService({ buildDir: empty }));
    try {
      assertError(
        await bare.app.inject({ method: 'GET', url: '/', headers: { accept: 'text/html' } }),
        503,
        'console_not_built',
      );
      assert.equal((await bare.app.inject({ method: 'GET', url: MOCKS[0]![0] })).statusCode, 200);
      assert.equal(
        (await bare.app.inject({ method: 'GET', url: '/console-config.json' })).json<{ demo: boolean }>().demo,
        false,
      );
    } finally {
      await bare.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
