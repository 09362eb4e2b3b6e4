import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { Type } from 'typebox';
import { createServiceApp, type ServiceApp } from '../../src/core/app.ts';
import { HttpError } from '../../src/core/errors.ts';

describe('service app kernel (DESIGN §6 overrides)', () => {
  let app: ServiceApp;
  let strictApp: ServiceApp;
  const seen: unknown[] = [];

  before(async () => {
    app = await createServiceApp({
      name: 'kernel-test',
      version: '1.2.3',
      logger: pino({ level: 'silent' }),
      bodyLimit: 1024,
    });
    app.post(
      '/items',
      {
        schema: {
          body: Type.Object(
            {
              name: Type.String({ minLength: 1 }),
              count: Type.Optional(Type.Integer()),
              tags: Type.Optional(Type.Array(Type.String())),
            },
            { additionalProperties: false },
          ),
        },
      },
      async (request, reply) => {
        seen.push(request.body);
        return reply.code(201).send(request.body);
      },
    );
    app.get(
      '/items/:id',
      {
        schema: {
          params: Type.Object({ id: Type.String() }),
          querystring: Type.Object({ limit: Type.Optional(Type.Integer()), flag: Type.Optional(Type.Boolean()) }),
        },
      },
      async (request) => ({
        id: request.params.id,
        limit: request.query.limit,
        flag: request.query.flag,
      }),
    );
    app.delete('/items/:id', async () => ({ deleted: true }));
    app.get('/boom', async () => {
      throw new Error('secret internal detail');
    });
    app.get('/teapot', async () => {
      throw new HttpError(418, 'teapot', 'short and stout', { 'x-extra': 'yes' });
    });
    await app.ready();

    strictApp = await createServiceApp({
      name: 'strict',
      version: '1.2.3',
      logger: pino({ level: 'silent' }),
      jsonForAnyContentType: false,
    });
    strictApp.post('/json', async (request) => ({ body: request.body ?? null }));
    await strictApp.ready();
  });

  after(async () => {
    await app.close();
    await strictApp.close();
  });

  const post = (payload: string, contentType = 'application/json') =>
    app.inject({ method: 'POST', url: '/items', payload, headers: { 'content-type': contentType } });

  it('accepts a valid body', async () => {
    const res = await post('{"name":"a","count":2}');
    assert.equal(res.statusCode, 201);
    assert.deepEqual(res.json(), { name: 'a', count: 2 });
  });

  it('rejects unknown fields instead of removing them', async () => {
    const before = seen.length;
    const res = await post('{"name":"a","extra":true}');
    assert.equal(res.statusCode, 400);
    assert.deepEqual(Object.keys(res.json()), ['error']);
    assert.equal(res.json().error.code, 'validation_error');
    assert.match(res.json().error.message, /extra/);
    assert.equal(seen.length, before, 'the handler never ran');
  });

  it('does not coerce body types', async () => {
    for (const payload of [
      '{"name":"a","count":"2"}',
      '{"name":5}',
      '{"name":"a","tags":"x"}',
      '{"name":"a","count":1.5}',
    ]) {
      const res = await post(payload);
      assert.equal(res.statusCode, 400, payload);
      assert.equal(res.json().error.code, 'validation_error');
    }
  });

  it('coerces query strings and params, which arrive as text', async () => {
    const res = await app.inject({ method: 'GET', url: '/items/abc?limit=5&flag=true' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { id: 'abc', limit: 5, flag: true });
    const bad = await app.inject({ method: 'GET', url: '/items/abc?limit=many' });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error.code, 'validation_error');
  });

  it('answers malformed JSON with invalid_json', async () => {
    const res = await post('{"name":');
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error.code, 'invalid_json');
  });

  it('never quotes a malformed body in the error (it may carry a password): the position only', async () => {
    const res = await post('{"name":"x","password":"hunter2-secret" oops}');
    assert.equal(res.statusCode, 400);
    assert.doesNotMatch(res.body, /hunter2|oops/);
    assert.match(res.json().error.message, /^request body is not valid JSON: a syntax error at position \d+$/);
    assert.equal((await post('{"name":')).json().error.message, 'request body is not valid JSON: it ends early');
  });

  it('parses JSON whatever the Content-Type by default', async () => {
    assert.equal((await post('{"name":"form"}', 'application/x-www-form-urlencoded')).statusCode, 201);
    assert.equal((await post('{"name":"text"}', 'text/plain')).statusCode, 201);
    assert.equal((await post('{"name":"vendor"}', 'application/vnd.api+json')).statusCode, 201);
  });

  it('only parses JSON content types when told so', async () => {
    const json = await strictApp.inject({
      method: 'POST',
      url: '/json',
      payload: '{"a":1}',
      headers: { 'content-type': 'application/json' },
    });
    assert.deepEqual(json.json(), { body: { a: 1 } });
    const other = await strictApp.inject({
      method: 'POST',
      url: '/json',
      payload: '{"a":1}',
      headers: { 'content-type': 'text/csv' },
    });
    assert.equal(other.statusCode, 415);
    assert.equal(other.json().error.code, 'unsupported_media_type');
  });

  it('answers an oversized body with 413 payload_too_large', async () => {
    const res = await post(JSON.stringify({ name: 'x'.repeat(2000) }));
    assert.equal(res.statusCode, 413);
    assert.equal(res.json().error.code, 'payload_too_large');
  });

  it('answers 405 with Allow for a known path and another method, 404 otherwise', async () => {
    const res = await app.inject({ method: 'PUT', url: '/items/abc' });
    assert.equal(res.statusCode, 405);
    assert.equal(res.json().error.code, 'method_not_allowed');
    assert.deepEqual(String(res.headers.allow).split(', ').sort(), ['DELETE', 'GET', 'HEAD']);
    const missing = await app.inject({ method: 'GET', url: '/nothing' });
    assert.equal(missing.statusCode, 404);
    assert.deepEqual(missing.json(), {
      error: { status: 404, code: 'not_found', message: 'no route for GET /nothing' },
    });
  });

  it('answers a path parameter that is not valid percent-encoding with a 404 envelope', async () => {
    const res = await app.inject({ method: 'GET', url: '/items/bad%zz' });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error.code, 'not_found');
  });

  it('accepts long path parameters', async () => {
    const id = 'k'.repeat(3000);
    const res = await app.inject({ method: 'GET', url: `/items/${id}` });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().id, id);
  });

  it('hides internal errors behind a 500 envelope without a stack trace', async () => {
    const res = await app.inject({ method: 'GET', url: '/boom' });
    assert.equal(res.statusCode, 500);
    assert.deepEqual(res.json(), { error: { status: 500, code: 'internal_error', message: 'internal error' } });
    assert.doesNotMatch(res.body, /secret internal detail|at /);
  });

  it('sends HttpError status, code, message and headers', async () => {
    const res = await app.inject({ method: 'GET', url: '/teapot' });
    assert.equal(res.statusCode, 418);
    assert.equal(res.headers['x-extra'], 'yes');
    assert.deepEqual(res.json(), { error: { status: 418, code: 'teapot', message: 'short and stout' } });
  });

  it('keeps a client request id and makes one otherwise', async () => {
    let id = '';
    const probe = await createServiceApp({ name: 'ids', version: '0', logger: pino({ level: 'silent' }) });
    probe.get('/id', async (request) => {
      id = request.id;
      return {};
    });
    await probe.inject({ method: 'GET', url: '/id', headers: { 'x-request-id': 'req-123' } });
    assert.equal(id, 'req-123');
    await probe.inject({ method: 'GET', url: '/id' });
    assert.match(id, /^[0-9a-f-]{36}$/);
    await probe.close();
  });

  it('serves an OpenAPI 3.0.3 document of its routes', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    assert.equal(doc.openapi, '3.0.3');
    assert.equal(doc.info.version, '1.2.3');
    assert.ok(doc.paths['/items'].post);
    assert.ok(doc.paths['/items/{id}'].get);
    assert.equal(doc.paths['/openapi.json'], undefined);
  });
});
