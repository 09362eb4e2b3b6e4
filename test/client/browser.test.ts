import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, normalize } from 'node:path';
import type { Browser } from 'playwright-core';
import { ROOT, ensureChromium, launchChromium, pageLog } from '../helpers/browser.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const EMAIL = 'client-browser@example.com';
const PASSWORD = 'correct horse battery staple';

/** What the page reports back from its run of the built SDK. */
interface PageResult {
  email: string;
  found: number[];
  progress: number[];
  downloaded: string;
  reserved: unknown[];
  followed: string[];
  followEnded: string;
  missing: [boolean, number, string];
}

// The built package, unchanged, in a real browser on another origin: ES modules, fetch streams,
// XMLHttpRequest upload progress and CORS, with no polyfills.
describe('client SDK in a browser', { timeout: 10 * 60_000 }, () => {
  let t: TestPlatform;
  let pages: Server;
  let browser: Browser | undefined;
  const built = mkdtempSync(join(tmpdir(), 'stratus-client-browser-'));

  before(async () => {
    await ensureChromium();
    execFileSync(process.execPath, [
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      '-p',
      join(ROOT, 'packages/client/tsconfig.json'),
      '--outDir',
      built,
    ]);
    // The page's own origin: a blank page and the built SDK under /sdk/.
    pages = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://x').pathname;
      if (path.startsWith('/sdk/')) {
        const file = normalize(join(built, path.slice('/sdk/'.length)));
        if (!file.startsWith(built)) return response.writeHead(404).end();
        try {
          const body = readFileSync(file);
          return response.writeHead(200, { 'content-type': 'text/javascript' }).end(body);
        } catch {
          return response.writeHead(404).end();
        }
      }
      response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>sdk</title>');
    });
    await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
    t = await startTestPlatform({ adminEmail: EMAIL, adminPassword: PASSWORD, corsOrigins: [origin] });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    pages?.closeAllConnections();
    await new Promise((resolve) => pages?.close(resolve));
    await t?.close();
    rmSync(built, { recursive: true, force: true });
  });

  it('signs in, streams documents, uploads with progress, follows a log until aborted and reserves a task', async () => {
    assert.ok(browser);
    const page = await browser.newPage();
    const log = pageLog(page);
    try {
      await page.goto(`http://127.0.0.1:${(pages.address() as AddressInfo).port}/`);
      // A string, not a function: tsx would add its own helpers to a function's source.
      const result = (await page.evaluate(`(async () => {
        const sdk = await import('/sdk/index.js');
        const client = sdk.createClient({ url: ${JSON.stringify(`http://127.0.0.1:${t.platform.publicPort}`)} });
        await client.auth.login(${JSON.stringify(EMAIL)}, ${JSON.stringify(PASSWORD)});
        const me = await client.auth.me();

        const db = await client.docdb.databases.create('browser');
        const items = client.docdb.database(db.id).collection('items');
        await items.insert([{ n: 1 }, { n: 2 }, { n: 3 }]);
        const found = [];
        for await (const doc of items.find({ n: { $gt: 1 } })) found.push(doc.n);

        const bucket = await client.files.buckets.create({ name: 'browser' });
        const files = client.files.bucket(bucket.id);
        const progress = [];
        const blob = new Blob(['x'.repeat(2000000)], { type: 'text/plain' });
        await files.upload('in browser/a.txt', blob, { onProgress: (p) => progress.push(p.loaded) });
        const downloaded = await (await files.download('in browser/a.txt')).text();

        const logger = await client.logs.loggers.create({ name: 'browser' });
        const handle = client.logs.logger(logger.id);
        await handle.ingest(['one']);
        const controller = new AbortController();
        const followed = [];
        let followEnded = '';
        try {
          for await (const line of handle.follow({ signal: controller.signal })) {
            followed.push(line);
            if (followed.length === 1) await handle.ingest(['two']);
            else controller.abort();
          }
        } catch (error) {
          followEnded = error.name;
        }

        // A worker on the page: the scheduler's own key, sent as X-API-Key across origins.
        const worker = sdk.createClient({ url: ${JSON.stringify(`http://127.0.0.1:${t.platform.publicPort}`)}, schedulerKey: 'test-scheduler-key' });
        await worker.scheduler.schedulers.create({ display_name: 'Browser jobs', id: 'browser-jobs' });
        const queue = worker.scheduler.scheduler('browser-jobs');
        await queue.enqueue({ id: 'job-1', payload: { page: true } });
        const task = await queue.reserve({ worktime: '10s' });
        await queue.ack(task.id, task.lease_id);
        const reserved = [task.id, task.payload.page];

        const missing = await files.download('nope').catch((e) => [e instanceof sdk.StratusError, e.status, e.code]);
        return { email: me.email, found, progress, downloaded: String(downloaded.length), followed, followEnded, reserved, missing };
      })()`)) as PageResult;
      assert.equal(result.email, EMAIL);
      assert.deepEqual(result.found, [2, 3]);
      assert.equal(result.progress.at(-1), 2_000_000, 'XMLHttpRequest reported the whole upload');
      assert.equal(result.downloaded, '2000000');
      assert.deepEqual(result.followed, ['one', 'two']);
      assert.equal(result.followEnded, 'AbortError');
      assert.deepEqual(result.reserved, ['job-1', true], 'a task reserved and acknowledged from the page');
      assert.deepEqual(result.missing, [true, 404, 'not_found']);
    } catch (error) {
      throw new Error(`${error instanceof Error ? error.message : String(error)}\n${log()}`, { cause: error });
    } finally {
      await page.close();
    }
  });
});
