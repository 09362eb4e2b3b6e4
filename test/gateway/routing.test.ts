import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { resolveRoute, routeApiPath } from '../../src/gateway/routing.ts';

describe('gateway routing', () => {
  it('routes api paths by longest prefix at segment boundaries', () => {
    const cases: [string, string | null][] = [
      ['/v0/apikeys', 'apikeys'],
      ['/v0/apikeys/abc', 'apikeys'],
      ['/v0/projects/p1', 'apikeys'],
      ['/api/v0/lambdas', 'lambda'],
      ['/run/abc', 'lambda'],
      ['/mux/u/x', 'lambda'],
      ['/ongoing', 'lambda'],
      ['/me', 'lambda'],
      ['/messages', null],
      ['/openapi', 'lambda'],
      ['/openapi.json', 'gateway'],
      ['/schedulers/s1/tasks', 'scheduler'],
      ['/v0/configs/x', 'config'],
      ['/v1/config', 'config'],
      ['/v1/configs', 'docdb'],
      ['/v1/buckets/b', 'files'],
      ['/v1/loggers', 'logs'],
      ['/v1/ingest/events', 'logs'],
      ['/v1/databases/d', 'docdb'],
      ['/v1/debug', 'docdb'],
      ['/doc', 'docdb'],
      ['/release', 'docdb'],
      ['/v1/anything', 'docdb'],
      ['/version', 'gateway'],
      ['/v0/stats', 'gateway'],
      ['/v2/', 'run'],
      ['/v2/repo/blobs/uploads/', 'run'],
      ['/', null],
      ['/nothing', null],
    ];
    for (const [path, target] of cases) assert.equal(routeApiPath(path), target, path);
  });

  it('resolves hosts: service hosts, gateway, api, bare domain, IP literals, projects, no route', () => {
    const d = 'localhost';
    assert.deepEqual(resolveRoute('config.localhost:8080', '/anything', d), { kind: 'service', service: 'config' });
    assert.deepEqual(resolveRoute('APIKEYS.localhost', '/v0/apikeys', d), { kind: 'service', service: 'apikeys' });
    assert.deepEqual(resolveRoute('gateway.localhost', '/version', d), { kind: 'gateway' });
    assert.deepEqual(resolveRoute('api.localhost', '/v0/configs', d), { kind: 'service', service: 'config' });
    assert.deepEqual(resolveRoute('api.localhost', '/version', d), { kind: 'gateway' });
    assert.deepEqual(resolveRoute('localhost:8080', '/v1/config', d), { kind: 'service', service: 'config' });
    assert.deepEqual(resolveRoute('127.0.0.1:8080', '/v0/projects', d), { kind: 'service', service: 'apikeys' });
    assert.deepEqual(resolveRoute('[::1]:8080', '/version', d), { kind: 'gateway' });
    assert.deepEqual(resolveRoute('api.localhost', '/nope', d), { kind: 'no_prefix' });
    assert.deepEqual(resolveRoute('my-project.localhost', '/', d), { kind: 'project', slug: 'my-project' });
    assert.deepEqual(resolveRoute('a.b.localhost', '/', d), { kind: 'no_route' });
    // A running container's host, `<slug>.run.<domain>`, goes to the run service (its README: Traffic).
    assert.deepEqual(resolveRoute('my-app-2.run.localhost:8080', '/any/path', d), { kind: 'service', service: 'run' });
    for (const host of [
      '.run.localhost',
      '-x.run.localhost',
      'x-.run.localhost',
      'a.b.run.localhost',
      'a_b.run.localhost',
    ])
      assert.deepEqual(resolveRoute(host, '/', d), { kind: 'no_route' }, host);
    assert.deepEqual(resolveRoute('example.com', '/', d), { kind: 'no_route' });
    assert.deepEqual(resolveRoute(undefined, '/', d), { kind: 'no_route' });
    assert.deepEqual(resolveRoute('config.example.org', '/', 'example.org'), { kind: 'service', service: 'config' });
    assert.deepEqual(resolveRoute('config.localhost', '/', 'example.org'), { kind: 'no_route' });
  });

  it('routes /services/<name>/… on the front door to that service, with the prefix to strip', () => {
    const d = 'localhost';
    for (const host of ['localhost:8080', 'api.localhost', '127.0.0.1', '[::1]:8080']) {
      assert.deepEqual(resolveRoute(host, '/services/docdb/v1/databases', d), {
        kind: 'service',
        service: 'docdb',
        prefix: '/services/docdb',
      });
    }
    assert.deepEqual(resolveRoute('localhost', '/services/kv', d), {
      kind: 'service',
      service: 'kv',
      prefix: '/services/kv',
    });
    assert.deepEqual(resolveRoute('localhost', '/services/gateway/v0/stats', d), {
      kind: 'gateway',
      prefix: '/services/gateway',
    });
    // Contract paths keep their routes; unknown names, the front door itself and a bare prefix are 404s.
    assert.deepEqual(resolveRoute('localhost', '/run/x', d), { kind: 'service', service: 'lambda' });
    for (const path of ['/services/nope/x', '/services/api/version', '/services/', '/services', '/services/docdbx'])
      assert.deepEqual(resolveRoute('localhost', path, d), { kind: 'no_prefix' }, path);
    // Only the front door has the prefix: on a service's own host the path is the service's.
    assert.deepEqual(resolveRoute('config.localhost', '/services/docdb/x', d), { kind: 'service', service: 'config' });
    assert.deepEqual(resolveRoute('gateway.localhost', '/services/docdb/x', d), { kind: 'gateway' });
    assert.deepEqual(resolveRoute('my-project.localhost', '/services/docdb/x', d), {
      kind: 'project',
      slug: 'my-project',
    });
  });
});
