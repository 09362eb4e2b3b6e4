import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, type StratusClient } from '@stratus/client';
import { IDENTITY_HEADER } from '../../src/core/identity.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

// Issue 22, items 1, 3 and 7: a lambda's fetch and its bindings to the owner's platform, end to end
// through the public port. Every server here listens on loopback; no test connects anywhere else.

const EMAIL = 'owner@example.com';
const PASSWORD = 'correct horse battery staple';

/** A loopback server that records what reaches it. */
async function startUpstream(): Promise<{ server: http.Server; port: number; seen: string[] }> {
  const seen: string[] = [];
  let port = 0;
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/quote')
      return res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ quote: 'hello', auth: req.headers.authorization ?? null }));
    if (url.pathname === '/to-own') return res.writeHead(302, { location: url.searchParams.get('to') ?? '/' }).end();
    if (url.pathname === '/to-other-loopback')
      return res.writeHead(307, { location: `http://127.0.0.2:${port}/quote` }).end();
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  return { server, port, seen };
}

async function signedIn(t: TestPlatform): Promise<StratusClient> {
  const client = createClient({ url: `http://127.0.0.1:${t.platform.publicPort}` });
  await client.auth.login(EMAIL, PASSWORD);
  return client;
}

/** Creates a lambda and answers what a GET of it returns (JSON, or the error envelope). */
async function runLambda(client: StratusClient, name: string, code: string, body?: unknown): Promise<unknown> {
  const lambda = await client.lambda.create({ name, code });
  const response = await client.lambda.run(
    lambda.id,
    body === undefined
      ? {}
      : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
  );
  return response.json();
}

const catching = (expression: string) =>
  `export default async (req, ctx) => { try { return await (${expression}); } catch (e) { return { error: e.name + ': ' + e.message, status: e.status ?? null } } }`;

describe('lambda fetch: the default egress policy refuses loopback end to end', () => {
  let t: TestPlatform;
  let client: StratusClient;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  before(async () => {
    upstream = await startUpstream();
    t = await startTestPlatform({ adminEmail: EMAIL, adminPassword: PASSWORD, lambdaTimeoutSeconds: 5 });
    client = await signedIn(t);
  });
  after(async () => {
    await t?.close();
    upstream?.server.close();
  });

  it('refuses 127.0.0.1, ::1, a name resolving to loopback and the platform itself, with nothing sent', async () => {
    const targets: [string, RegExp][] = [
      [`http://127.0.0.1:${upstream.port}/quote`, /127\.0\.0\.1 refused: a loopback address/],
      [`http://[::1]:${upstream.port}/quote`, /refused: a loopback address/],
      [`http://localhost:${upstream.port}/quote`, /localhost \(.+\) refused: a loopback address/],
      [`http://127.0.0.1:${t.platform.publicPort}/`, /refused/],
      [`http://127.0.0.1:${t.platform.internalPort}/`, /refused/],
    ];
    for (const [i, [url, message]] of targets.entries()) {
      const answer = (await runLambda(client, `refused-${i}`, catching(`fetch(${JSON.stringify(url)})`))) as {
        error: string;
      };
      assert.match(answer.error, /^TypeError: /, url);
      assert.match(answer.error, message, url);
    }
    assert.deepEqual(upstream.seen, [], 'the loopback server received nothing');
  });
});

describe('lambda fetch and bindings with LAMBDA_EGRESS_ALLOW=127.0.0.1', () => {
  let t: TestPlatform;
  let client: StratusClient;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  before(async () => {
    upstream = await startUpstream();
    t = await startTestPlatform({
      adminEmail: EMAIL,
      adminPassword: PASSWORD,
      lambdaTimeoutSeconds: 5,
      lambdaEgressAllow: '127.0.0.1',
      lambdaFetchRequests: 12,
    });
    client = await signedIn(t);
  });
  after(async () => {
    await t?.close();
    upstream?.server.close();
  });

  it('fetches JSON from an allowed server', async () => {
    const answer = await runLambda(
      client,
      'quote',
      `export default async () => {
        const r = await fetch('http://127.0.0.1:${upstream.port}/quote', { headers: { authorization: 'Bearer t0ken' } });
        return { status: r.status, type: r.headers.get('content-type'), body: await r.json() };
      }`,
    );
    assert.deepEqual(answer, {
      status: 200,
      type: 'application/json',
      body: { quote: 'hello', auth: 'Bearer t0ken' },
    });
  });

  it('re-checks every redirect hop: to the platform itself and to a loopback address not allowed', async () => {
    const own = `http://127.0.0.1:${t.platform.publicPort}/`;
    const toOwn = (await runLambda(
      client,
      'to-own',
      catching(`fetch('http://127.0.0.1:${upstream.port}/to-own?to=${encodeURIComponent(own)}')`),
    )) as { error: string };
    assert.match(toOwn.error, /this platform's own port/);
    const toOther = (await runLambda(
      client,
      'to-other',
      catching(`fetch('http://127.0.0.1:${upstream.port}/to-other-loopback')`),
    )) as { error: string };
    assert.match(toOther.error, /127\.0\.0\.2 refused: a loopback address/);
  });

  it('counts fetches and binding calls against one request limit', async () => {
    const answer = (await runLambda(
      client,
      'many',
      catching(`(async () => {
        for (let i = 0; i < 7; i++) await fetch('http://127.0.0.1:${upstream.port}/quote');
        for (let i = 0; i < 7; i++) await ctx.platform.config.get();
        return 'no limit';
      })()`),
    )) as { error: string };
    assert.match(answer.error, /at most 12 requests \(fetch and bindings\) per invocation/);
  });

  it("stores a webhook's payload in the owner's collection and finds it by a map index", async () => {
    const database = await client.docdb.databases.create('hooks');
    await client.docdb.database(database.id).collection('events').create();
    await client.docdb
      .database(database.id)
      .collection('events')
      .createIndex({ name: 'by-kind', type: 'map', field: 'kind' });
    const code = `export default async (req, ctx) => {
      const events = ctx.platform.docdb(${JSON.stringify(database.id)}).collection('events');
      const [stored] = await events.insert({ kind: req.body.kind, payload: req.body });
      console.log('stored', stored.id);
      const found = await events.find({}, { index: 'by-kind', value: req.body.kind });
      return { id: stored.id, found: found.length, first: await events.get(stored.id) };
    }`;
    const answer = (await runLambda(client, 'webhook', code, { kind: 'push', ref: 'main' })) as {
      id: string;
      found: number;
      first: { kind: string };
    };
    assert.equal(answer.found, 1);
    assert.equal(answer.first.kind, 'push');
    const direct = await client.docdb.database(database.id).collection('events').getDocument(answer.id);
    assert.deepEqual(direct.payload, { kind: 'push', ref: 'main' });
  });

  it('uses config, kv, files and logs as the owner', async () => {
    const bucket = await client.files.buckets.create({ name: 'out' });
    const logger = await client.logs.loggers.create({ name: 'fn' });
    const code = `export default async (req, ctx) => {
      const p = ctx.platform;
      const config = await p.config.patch({ greeting: 'hi' });
      const missing = await p.kv('cache').get('k');
      await p.kv('cache').set('k', { n: 1 });
      const cached = await p.kv('cache').get('k');
      await p.files(${JSON.stringify(bucket.id)}).put('notes/a.txt', 'file body', 'text/plain');
      const file = await p.files(${JSON.stringify(bucket.id)}).get('notes/a.txt');
      const listed = await p.files(${JSON.stringify(bucket.id)}).list('notes/');
      await p.logs(${JSON.stringify(logger.id)}).write('from the lambda');
      const raw = await p.request('config', '/v1/config');
      return { config, missing, cached, file: await file.text(), type: file.headers.get('content-type'),
        listed: listed.length, raw: (await raw.json()).entries };
    }`;
    assert.deepEqual(await runLambda(client, 'services', code), {
      config: { greeting: 'hi' },
      missing: null,
      cached: { n: 1 },
      file: 'file body',
      type: 'text/plain; charset=utf-8',
      listed: 1,
      raw: { greeting: 'hi' },
    });
    assert.deepEqual(await client.config.get(), { greeting: 'hi' });
    const lines: string[] = [];
    for await (const line of client.logs.logger(logger.id).lines()) lines.push(line);
    assert.deepEqual(lines, ['from the lambda']);
  });

  it("runs the lambda README's two examples as written", async () => {
    const readme = await readFile(new URL('../../src/services/lambda/README.md', import.meta.url), 'utf8');
    const examples = readme.slice(readme.indexOf('## Examples'));
    const [webhookCode, quoteCode] = [...examples.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!);
    assert.ok(webhookCode && quoteCode);
    const database = await client.docdb.databases.create('readme-hooks');
    const logger = await client.logs.loggers.create({ name: 'readme-webhook' });
    const webhook = await client.lambda.create({
      name: 'readme-webhook',
      code: webhookCode,
      env: { DATABASE_ID: database.id },
      logger_id: logger.id,
    });
    const stored = await client.lambda.run(webhook.id, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ event: 'push' }),
    });
    assert.equal(stored.status, 201);
    const { id } = (await stored.json()) as { id: string };
    const document = await client.docdb.database(database.id).collection('events').getDocument(id);
    assert.deepEqual(document.payload, { event: 'push' });
    const refused = await fetch(`http://127.0.0.1:${t.platform.publicPort}/run/${webhook.id}`, {
      headers: { host: 'lambda.localhost' },
    });
    assert.equal(refused.status, 405);
    const lines: string[] = [];
    for (let tries = 0; tries < 50 && lines.length === 0; tries++) {
      for await (const line of client.logs.logger(logger.id).lines()) lines.push(line);
      if (lines.length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.match(lines[0] ?? '', new RegExp(`^\\S+ log stored event ${id}$`));

    const quote = await client.lambda.create({
      name: 'readme-quote',
      code: quoteCode,
      env: { QUOTE_URL: `http://127.0.0.1:${upstream.port}/quote` },
      secrets: { QUOTE_TOKEN: 'readme-token' },
    });
    assert.deepEqual(await (await client.lambda.run(quote.id)).json(), {
      from: 'api',
      quote: { quote: 'hello', auth: 'Bearer readme-token' },
    });
    // The owner's cache as the lambda left it; cleared for the next test's own run.
    const cached = await client.kv.collection('quotes').get('today');
    assert.deepEqual(cached.value, { quote: 'hello', auth: 'Bearer readme-token' });
    await client.kv.collection('quotes').delete('today');
  });

  it('calls an API with a secret token, caches the answer in kv, and never shows the secret', async () => {
    const SECRET = 'sk-live-7f3a9c2e51';
    const code = `export default async (req, ctx) => {
      const cache = ctx.platform.kv('secret-quotes');
      const cached = await cache.get('today');
      if (cached) return { from: 'cache', quote: cached };
      const r = await fetch(ctx.env.QUOTE_URL, { headers: { authorization: 'Bearer ' + ctx.env.QUOTE_TOKEN } });
      if (!r.ok) throw new Error('quote service answered ' + r.status);
      const quote = await r.json();
      await cache.set('today', quote);
      console.log('fetched with', ctx.env.QUOTE_TOKEN);
      return { from: 'api', quote };
    }`;
    const lambda = await client.lambda.create({
      name: 'quote-of-the-day',
      code,
      env: { QUOTE_URL: `http://127.0.0.1:${upstream.port}/quote` },
      secrets: { QUOTE_TOKEN: SECRET },
    });
    const first = await client.lambda.invoke(lambda.id);
    assert.deepEqual(JSON.parse(first.body), { from: 'api', quote: { quote: 'hello', auth: `Bearer ${SECRET}` } });
    assert.deepEqual(first.logs, [{ level: 'log', message: 'fetched with ***' }]);
    const second = await (await client.lambda.run(lambda.id)).json();
    assert.equal((second as { from: string }).from, 'cache');
    // The history counts what each run did, and shows no secret either.
    const invocations = await client.lambda.invocations(lambda.id);
    assert.deepEqual(
      invocations.map((i) => [i.trigger, i.fetches, i.bindings]),
      [
        ['run', 0, 1],
        // get; set, which made the collection on its first write (set, create, set again)
        ['invoke', 1, 4],
      ],
    );
    assert.ok(!JSON.stringify(invocations).includes(SECRET));
    // A throw that carries the secret is masked too.
    const leaky = await client.lambda.create({
      name: 'leaky',
      code: 'export default (req, ctx) => { throw new Error("token " + ctx.env.QUOTE_TOKEN) }',
      secrets: { QUOTE_TOKEN: SECRET },
    });
    const failed = await client.lambda.invoke(leaky.id);
    assert.match(failed.body, /token \*\*\*/);
    const base = `http://127.0.0.1:${t.platform.publicPort}/services/lambda/api/v0/lambdas`;
    for (const url of [base, `${base}/${lambda.id}`]) {
      const text = await (await fetch(url, { headers: client.transport.credentialHeaders() })).text();
      assert.ok(text.includes('QUOTE_TOKEN') && !text.includes(SECRET), `${url}: ${text.slice(0, 200)}`);
    }
  });

  it("reaches no other user's database or bucket, and no service outside the bindings", async () => {
    // Another user makes a database and a bucket (on the internal port, which trusts the identity).
    const other = { [IDENTITY_HEADER]: JSON.stringify({ user: { id: 'user-someone-else' } }) };
    const db = await t.callInternal({
      method: 'POST',
      host: 'docdb.localhost',
      path: '/v1/databases',
      headers: { ...other, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'private' }),
    });
    assert.equal(db.status, 201, db.text);
    const bucket = await t.callInternal({
      method: 'POST',
      host: 'files.localhost',
      path: '/v1/buckets',
      headers: { ...other, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'private' }),
    });
    assert.equal(bucket.status, 201, bucket.text);
    const dbAnswer = (await runLambda(
      client,
      'steal-db',
      catching(`ctx.platform.docdb(${JSON.stringify(db.json<{ id: string }>().id)}).collection('c').find({})`),
    )) as { error: string; status: number };
    assert.match(dbAnswer.error, /^PlatformError: docdb POST .*: 40[34]/);
    assert.ok(dbAnswer.status === 403 || dbAnswer.status === 404);
    const bucketAnswer = (await runLambda(
      client,
      'steal-bucket',
      catching(`ctx.platform.files(${JSON.stringify(bucket.json<{ id: string }>().id)}).list()`),
    )) as { error: string; status: number };
    assert.ok(bucketAnswer.status === 403 || bucketAnswer.status === 404, bucketAnswer.error);
    const apikeys = (await runLambda(client, 'keys', catching(`ctx.platform.request('apikeys', '/v0/apikeys')`))) as {
      error: string;
    };
    assert.match(apikeys.error, /TypeError: platform.request: no service "apikeys"/);
    // The key-value replication feed carries every tenant: never open to a lambda.
    const feed = (await runLambda(client, 'feed', catching(`ctx.platform.request('kv', '/v1/%72eplicate')`))) as {
      error: string;
    };
    assert.match(feed.error, /replication feed is not open to lambdas/);
  });
});
