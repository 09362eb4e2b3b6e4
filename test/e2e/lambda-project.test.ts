import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from '../helpers/http.ts';
import { usePlatform } from '../helpers/serve.ts';

const owner = {
  'x-gateway-authentication': JSON.stringify({ user: { id: 'site-owner' } }),
  'content-type': 'application/json',
};

describe('lambdas through the gateway: project hosts and /run', () => {
  const platform = usePlatform();

  it("serves a project's lambdas on its host by method and path, and /run publicly", async () => {
    const project = await request(platform.server.internalPort, {
      method: 'POST',
      path: '/v0/projects',
      host: 'apikeys.localhost',
      headers: owner,
      body: '{"name":"Shop","slug":"shop"}',
    });
    assert.equal(project.status, 201, project.text);

    // Created on the project's host: the gateway adds X-Project-Id, the lambda belongs to the project.
    const page = await request(platform.server.internalPort, {
      method: 'POST',
      path: '/api/v0/lambdas',
      host: 'shop.localhost',
      headers: owner,
      body: JSON.stringify({ name: 'home', language: 'static-html', method: 'GET', path: '/', code: '<h1>Shop</h1>' }),
    });
    assert.equal(page.status, 201, page.text);
    const echo = await request(platform.server.internalPort, {
      method: 'POST',
      path: '/api/v0/lambdas',
      host: 'shop.localhost',
      headers: owner,
      body: JSON.stringify({
        name: 'echo',
        method: 'POST',
        path: '/api/echo',
        code: 'export default async (req) => ({ got: req.body, q: req.query.q })',
      }),
    });
    assert.equal(echo.status, 201, echo.text);

    const home = await request(platform.server.publicPort, { path: '/', host: 'shop.localhost' });
    assert.equal(home.status, 200);
    assert.equal(home.text, '<h1>Shop</h1>');
    assert.equal(home.headers['content-type'], 'text/html; charset=utf-8');
    const echoed = await request(platform.server.publicPort, {
      method: 'POST',
      path: '/api/echo?q=1',
      host: 'shop.localhost',
      body: '{"a":1}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(echoed.status, 200, echoed.text);
    assert.deepEqual(echoed.json(), { got: { a: 1 }, q: '1' });
    // A forged project header from the client is dropped: the host decides the project.
    const elsewhere = await request(platform.server.publicPort, {
      path: '/',
      host: 'lambda.localhost',
      headers: { 'x-project-id': JSON.parse(project.text).id as string },
    });
    assert.notEqual(elsewhere.text, '<h1>Shop</h1>');
    // An unknown project host matches no route.
    assert.equal((await request(platform.server.publicPort, { path: '/', host: 'nope.localhost' })).status, 404);

    const viaRun = await request(platform.server.publicPort, {
      method: 'POST',
      path: `/run/${echo.json<{ id: string }>().id}`,
      host: 'lambda.localhost',
      body: '{"b":2}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(viaRun.status, 200, viaRun.text);
    assert.deepEqual(viaRun.json(), { got: { b: 2 } });
  });
});
