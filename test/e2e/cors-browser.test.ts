import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { ensureChromium, launchChromium } from '../helpers/browser.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const EMAIL = 'cors-browser@example.com';
const PASSWORD = 'correct horse battery staple';

/** A page server on its own loopback port: another origin, as an app's own site would be. */
async function pageServer(): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>app</title><p>an app on its own origin</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** What the page's fetch saw: the answer it could read, or the error the browser gave it. */
type Seen = { ok: true; status: number; id: string | null; requestId: string | null } | { ok: false; error: string };

/** Creates a database from inside `page` with an API key in headers (a preflighted request). */
function createDatabaseFrom(page: Page, url: string, key: { key: string; secret: string }): Promise<Seen> {
  return page.evaluate(
    async ({ url, key }) => {
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'Api-Key': key.key, 'Api-Secret': key.secret, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'from-the-browser' }),
        });
        const body = (await res.json()) as { id?: string };
        return {
          ok: true,
          status: res.status,
          id: body.id ?? null,
          requestId: res.headers.get('x-request-id'),
        } as const;
      } catch (error) {
        return { ok: false, error: String(error) } as const;
      }
    },
    { url, key },
  );
}

/** Issue 21, item 6: a browser app on another origin calls the platform through the gateway's CORS. */
describe('CORS in a browser: apps on their own origins call the platform', { timeout: 5 * 60_000 }, () => {
  let t: TestPlatform;
  let browser: Browser;
  let listed: Awaited<ReturnType<typeof pageServer>>;
  let unlisted: Awaited<ReturnType<typeof pageServer>>;
  let key: { key: string; secret: string };
  let api: string;

  before(async () => {
    await ensureChromium();
    [t, listed, unlisted] = await Promise.all([
      startTestPlatform({ adminEmail: EMAIL, adminPassword: PASSWORD }),
      pageServer(),
      pageServer(),
    ]);
    const port = t.platform.publicPort;
    api = `http://localhost:${port}/services/docdb/v1/databases`;
    const front = (method: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
      t.call({
        method,
        path,
        host: `localhost:${port}`,
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    const login = await front('POST', '/services/auth/v0/login', { email: EMAIL, password: PASSWORD });
    const bearer = { authorization: `Bearer ${login.json<{ token: string }>().token}` };
    const project = await front(
      'POST',
      '/services/apikeys/v0/projects',
      { name: 'Cors app', slug: 'cors-app', allowed_origins: [listed.origin] },
      bearer,
    );
    assert.equal(project.status, 201, project.text);
    const created = await front('POST', '/services/apikeys/v0/apikeys', { name: 'browser app' }, bearer);
    assert.equal(created.status, 201, created.text);
    key = created.json<{ key: string; secret: string }>();
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await Promise.all([t?.close(), listed?.close(), unlisted?.close()]);
  });

  const fromPage = async (pageUrl: string): Promise<Seen> => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(pageUrl);
      return await createDatabaseFrom(page, api, key);
    } finally {
      await context.close();
    }
  };

  it('lets an origin the project lists create a database and read the answer and its headers', async () => {
    const seen = await fromPage(`${listed.origin}/`);
    assert.ok(seen.ok, JSON.stringify(seen));
    assert.equal(seen.status, 201);
    assert.match(seen.id ?? '', /./);
    assert.match(seen.requestId ?? '', /^[0-9a-f-]{36}$/, 'X-Request-Id is exposed');
  });

  it("lets the project host's own origin do the same", async () => {
    // Any answer of the project host makes the page that origin's; its path does not matter.
    const seen = await fromPage(`http://cors-app.localhost:${t.platform.publicPort}/no-such-page`);
    assert.ok(seen.ok, JSON.stringify(seen));
    assert.equal(seen.status, 201);
  });

  it('refuses an origin nobody lists: the browser gives the page nothing', async () => {
    const seen = await fromPage(`${unlisted.origin}/`);
    assert.equal(seen.ok, false);
    assert.match((seen as { error: string }).error, /TypeError/);
    // The preflight was refused, so the POST was never sent: only the two granted pages made one.
    const list = await t.call({
      path: '/services/docdb/v1/databases',
      host: `localhost:${t.platform.publicPort}`,
      headers: { 'api-key': key.key, 'api-secret': key.secret },
    });
    const names = JSON.stringify(list.json()).match(/from-the-browser/g) ?? [];
    assert.equal(names.length, 2, list.text);
  });
});
