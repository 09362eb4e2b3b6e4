import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { ensureChromium, ensureConsoleBuilt, launchChromium, pageLog, screenshot } from '../helpers/browser.ts';
import { request } from '../helpers/http.ts';
import { startTestIdp, type TestIdp } from '../helpers/oidc-provider.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';
import { basicAuth, createApiKey } from '../helpers/apikeys.ts';

const ADMIN_EMAIL = 'admin@example.com';
const ADMIN_PASSWORD = 'correct horse battery staple';
const SCHEDULER_KEY = 'console-test-scheduler-key';
const WAIT = 15_000;

/** Opens an area from the left nav and waits for its page. */
async function open(page: Page, area: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Areas' }).getByRole('link', { name: area, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: area, exact: true }).waitFor();
}

/** Runs one step of the walk-through; screenshots it, or on failure screenshots the page and adds its log. */
async function step(page: Page, log: () => string, name: string, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    await screenshot(page, `${name}-failed`).catch(() => undefined);
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`step ${name} failed: ${message}\n--- page log ---\n${log()}`, { cause: err });
  }
  await screenshot(page, name);
}

describe('web console in a browser', { timeout: 20 * 60_000 }, () => {
  let database: TestDatabase | undefined;
  let server: ServedProcess | undefined;
  let browser: Browser | undefined;

  before(async () => {
    await Promise.all([ensureConsoleBuilt(), ensureChromium()]);
    database = await createTestDatabase();
    server = await serve([], {
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.databaseUrl,
      ADMIN_EMAIL,
      ADMIN_PASSWORD,
      COOKIE_SECURE: 'false',
      SCHEDULER_API_KEYS: SCHEDULER_KEY,
    });
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await database?.cleanup();
  });

  it('signs in and uses every area without curl', { timeout: 5 * 60_000 }, async () => {
    assert.ok(browser && server);
    const port = server.publicPort;
    const context: BrowserContext = await browser.newContext({
      acceptDownloads: true,
      viewport: { width: 1280, height: 900 },
    });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    page.on('dialog', (dialog) => void dialog.accept());
    const log = pageLog(page);
    const origin = `http://console.localhost:${port}`;

    try {
      await step(page, log, '01-sign-in', async () => {
        await page.goto(`${origin}/`, { timeout: WAIT });
        await page.getByLabel('Email').fill(ADMIN_EMAIL);
        await page.getByLabel('Password').fill('wrong password');
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.locator('.error').waitFor();
        await page.getByLabel('Password').fill(ADMIN_PASSWORD);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByTestId('user').filter({ hasText: ADMIN_EMAIL }).waitFor();
        await page.getByRole('heading', { name: /Welcome/ }).waitFor();
      });

      await step(page, log, '02-project', async () => {
        await open(page, 'Projects');
        await page.getByLabel('Name').fill('Demo site');
        await page.getByLabel(/^Slug/).fill('demo-site');
        await page.getByRole('button', { name: 'Create project' }).click();
        await page.getByRole('cell', { name: 'demo-site.localhost' }).waitFor();
      });

      await step(page, log, '03-api-key', async () => {
        await open(page, 'API keys');
        await page.getByLabel('Name').fill('ci key');
        await page.getByRole('button', { name: 'Create key' }).click();
        const panel = page.getByTestId('secret-panel');
        await panel.waitFor();
        const key = (await panel.locator('code[data-field=key]').textContent()) ?? '';
        const secret = (await panel.locator('code[data-field=secret]').textContent()) ?? '';
        assert.match(key, /^[0-9a-f-]{36}$/);
        assert.match(secret, /^[0-9a-f-]{36}$/);
        // the key works against the platform
        const check = await request(port, {
          path: '/v0/secret',
          host: 'api.localhost',
          headers: { 'api-key': key, 'api-secret': secret },
        });
        assert.equal(check.status, 200, check.text);
        await page.getByTestId('apikeys-table').getByText('ci key').waitFor();
        await screenshot(page, '03-api-key-secret');
        await page.getByRole('button', { name: 'I have copied it' }).click();
        await panel.waitFor({ state: 'detached' });
        assert.equal(await page.getByText(secret).count(), 0, 'the secret is shown only once');
        // a key scoped to the project and its host
        await page.getByLabel('Name').fill('site key');
        await page.getByRole('button', { name: 'Add scope' }).click();
        await page.getByLabel('Project').selectOption({ label: 'Demo site (demo-site.localhost)' });
        await page.getByLabel(/^Hosts/).fill('demo-site.localhost');
        await page.getByRole('button', { name: 'Create key' }).click();
        await page.getByTestId('secret-panel').waitFor();
        await page.getByRole('button', { name: 'I have copied it' }).click();
        await page
          .getByTestId('apikeys-table')
          .getByText(/hosts demo-site\.localhost/)
          .waitFor();
        // revoke the first key: it stops working
        await page
          .getByRole('row', { name: /ci key/ })
          .getByRole('button', { name: 'Revoke' })
          .click();
        await page.getByTestId('apikeys-table').getByText('ci key').waitFor({ state: 'detached' });
        const revoked = await request(port, {
          path: '/v0/secret',
          host: 'api.localhost',
          headers: { 'api-key': key, 'api-secret': secret },
        });
        assert.equal(revoked.status, 401, revoked.text);
      });

      await step(page, log, '04-lambda', async () => {
        await open(page, 'Lambdas');
        await page.getByLabel('Name').fill('hello');
        await page
          .getByLabel('Code')
          .fill(
            "export default (req) => {\n  console.log('greeting', req.query.who);\n  return { body: { message: 'Hello, ' + req.query.who } };\n};\n",
          );
        await page.getByRole('button', { name: 'Create lambda' }).click();
        await page.getByRole('heading', { name: 'hello' }).waitFor();
        await page.getByLabel('Query').fill('who=browser');
        await page.getByRole('button', { name: 'Invoke' }).click();
        const output = page.getByTestId('invoke-output');
        await output.filter({ hasText: 'Hello, browser' }).waitFor();
        await page.getByTestId('invoke-logs').filter({ hasText: '[log] greeting browser' }).waitFor();
        // edit the code and invoke again
        await page.getByLabel('Code').fill("write('edited ' + query.who)");
        await page.getByRole('button', { name: 'Save' }).click();
        await page.getByText('Saved.').waitFor();
        await page.getByRole('button', { name: 'Invoke' }).click();
        await output.filter({ hasText: 'edited browser' }).waitFor();
      });

      await step(page, log, '05-database', async () => {
        await open(page, 'Databases');
        await page.getByLabel('Name').fill('shop');
        await page.getByRole('button', { name: 'Create database' }).click();
        await page.getByRole('heading', { name: 'shop' }).waitFor();
        await page.getByRole('textbox', { name: 'New collection' }).fill('people');
        await page.getByRole('button', { name: 'Create collection' }).click();
        await page.getByTestId('collections-table').getByRole('link', { name: 'people' }).click();
        await page.getByRole('heading', { name: 'Collection people' }).waitFor();
        const documentBox = page.getByLabel(/^Document/);
        await documentBox.fill('{"name":"Ada","n":1}');
        await page.getByRole('button', { name: 'Insert' }).click();
        await page.getByTestId('inserted').filter({ hasText: '"Ada"' }).waitFor();
        await documentBox.fill('{"name":"Bob","n":2}');
        await page.getByRole('button', { name: 'Insert' }).click();
        await page.getByTestId('inserted').filter({ hasText: '"Bob"' }).waitFor();
        await page.getByLabel(/^Filter/).fill('{"n":{"$gt":1}}');
        await page.getByRole('button', { name: 'Find' }).click();
        await page.getByTestId('find-count').filter({ hasText: '1 document' }).waitFor();
        const results = (await page.getByTestId('find-results').textContent()) ?? '';
        assert.match(results, /Bob/);
        assert.doesNotMatch(results, /Ada/);
        // an index
        await page.getByLabel('Name', { exact: true }).fill('by-name');
        await page.getByLabel('Field', { exact: true }).fill('name');
        await page.getByRole('button', { name: 'Create index' }).click();
        await page.getByTestId('indexes-table').getByText('by-name').waitFor();
      });

      await step(page, log, '06-bucket', async () => {
        await open(page, 'Buckets');
        await page.getByLabel('Name').fill('uploads');
        await page.getByRole('button', { name: 'Create bucket' }).click();
        await page.getByRole('heading', { name: 'Bucket uploads' }).waitFor();
        const content = Buffer.from(`hello from the browser test ${Date.now()}\n`.repeat(2000));
        await page
          .getByLabel('File', { exact: true })
          .setInputFiles({ name: 'hello.txt', mimeType: 'text/plain', buffer: content });
        await page.getByRole('button', { name: 'Upload' }).click();
        await page.getByTestId('upload-done').waitFor();
        assert.equal(await page.getByTestId('upload-percent').textContent(), '100 %');
        assert.equal(await page.getByTestId('upload-progress').getAttribute('value'), '100');
        await page.getByTestId('files-table').getByText('hello.txt').waitFor();
        const [download] = await Promise.all([
          page.waitForEvent('download', { timeout: WAIT }),
          page.getByRole('button', { name: 'Download' }).click(),
        ]);
        assert.equal(download.suggestedFilename(), 'hello.txt');
        const path = await download.path();
        assert.ok(readFileSync(path).equals(content), 'the downloaded bytes equal the uploaded ones');
      });

      await step(page, log, '07-logger-follow', async () => {
        await open(page, 'Loggers');
        await page.getByLabel('Name').fill('app');
        await page.getByRole('button', { name: 'Create logger' }).click();
        await page.getByRole('heading', { name: 'Logger app' }).waitFor();
        await page.getByLabel(/^Regular expressions/).fill('^ERROR .*live');
        await page.getByRole('button', { name: 'Follow live' }).click();
        await page.getByTestId('follow-state').filter({ hasText: 'Following live' }).waitFor();
        const output = page.getByTestId('log-output');
        // a non-matching line, then a matching one, ingested from the UI while the follow is open
        await page.getByLabel('Text').fill('INFO not shown live');
        await page.getByRole('button', { name: 'Ingest' }).click();
        await page.getByText('Ingested 20 bytes.').waitFor();
        await page.getByLabel('Text').fill('ERROR shown live 1');
        await page.getByRole('button', { name: 'Ingest' }).click();
        await output.filter({ hasText: 'ERROR shown live 1' }).waitFor();
        // and one from a program, over HTTP with the session token the console holds
        const token = await page.evaluate<string | null>("sessionStorage.getItem('stratus.console.token')");
        assert.ok(token);
        const id = decodeURIComponent(page.url().split('/').pop() ?? '');
        const ingested = await request(port, {
          method: 'POST',
          path: `/v1/loggers/${id}/ingest`,
          host: 'logs.localhost',
          headers: { authorization: `Bearer ${token}` },
          body: 'ERROR shown live 2\nINFO live but filtered\n',
        });
        assert.equal(ingested.status, 200, ingested.text);
        await output.filter({ hasText: 'ERROR shown live 2' }).waitFor();
        assert.equal(await output.textContent(), 'ERROR shown live 1\nERROR shown live 2');
        await page.getByTestId('follow-state').filter({ hasText: 'Following live' }).waitFor();
      });

      await step(page, log, '08-scheduler-live', async () => {
        await open(page, 'Schedulers');
        await page.getByLabel('Display name').fill('jobs');
        await page.getByLabel(/^Scheduler API key/).fill(SCHEDULER_KEY);
        await page.getByRole('button', { name: 'Create scheduler' }).click();
        await page.getByTestId('live').filter({ hasText: 'live' }).waitFor();
        await page.getByLabel(/^Delay/).fill('1h');
        await page.getByLabel(/^Labels/).fill('kind:test');
        await page.getByRole('button', { name: 'Enqueue' }).click();
        // the task arrives through the SSE stream, not a reload
        await page.getByTestId('scheduled-table').getByText('kind:test').waitFor();
      });

      await step(page, log, '20-scheduler-target-dead', async () => {
        const SECRET = 'whsec-console-test-never-shown-0123';
        const token = await page.evaluate<string | null>("sessionStorage.getItem('stratus.console.token')");
        assert.ok(token);
        const schedulerId = decodeURIComponent(page.url().split('/').pop() ?? '');
        const stored = async () => {
          const answer = await request(port, { path: `/schedulers/${schedulerId}`, host: 'scheduler.localhost' });
          assert.equal(answer.status, 200, answer.text);
          return answer.json<{ target?: unknown; retry?: { max_attempts: number } }>();
        };
        /** The target PATCHes the page sent: their bodies and whether both credentials went along. */
        const patches: { body: unknown; key: boolean; bearer: boolean }[] = [];
        const onRequest = (r: Request) => {
          if (r.method() !== 'PATCH' || !r.url().includes('/schedulers/')) return;
          const headers = r.headers();
          patches.push({
            body: JSON.parse(r.postData() ?? 'null'),
            key: headers['x-api-key'] === SCHEDULER_KEY,
            bearer: headers.authorization === `Bearer ${token}`,
          });
        };
        page.on('request', onRequest);
        const form = page.getByRole('form', { name: 'Target' });
        const shown = page.getByTestId('target');
        try {
          await shown.filter({ hasText: 'none' }).waitFor();
          await page.getByTestId('no-dead').waitFor();

          // A lambda target: it runs as the signed-in user, so the session goes beside the key.
          await form.getByLabel('Deliver due tasks to').selectOption('lambda');
          await form.getByLabel(/^Lambda/).selectOption({ label: 'hello' });
          await form.getByRole('button', { name: 'Save target' }).click();
          const link = shown.getByRole('link', { name: 'hello' });
          await link.waitFor();
          assert.match((await link.getAttribute('href')) ?? '', /^#\/lambdas\/[^/]+$/);
          assert.equal(patches.length, 1);
          assert.deepEqual(patches[0]?.key && patches[0].bearer, true, 'the key and the session were sent');
          assert.deepEqual(Object.keys((await stored()).target ?? {}), ['lambda_id']);

          // A webhook on loopback: the egress policy refuses it, so every delivery fails.
          await form.getByLabel('Deliver due tasks to').selectOption('webhook');
          await form.getByLabel('Webhook URL').fill('http://127.0.0.1:9/hook');
          const secretField = form.getByLabel(/^Signing secret/);
          assert.equal(await secretField.getAttribute('type'), 'password');
          await secretField.fill('too short');
          await form.getByRole('button', { name: 'Save target' }).click();
          await page
            .getByRole('alert')
            .filter({ hasText: /secret/ })
            .waitFor();
          assert.deepEqual(Object.keys((await stored()).target ?? {}), ['lambda_id'], 'a refused save changes nothing');
          await secretField.fill(SECRET);
          await form.getByLabel('Max attempts').fill('2');
          await form.getByLabel('First wait').fill('4s');
          patches.length = 0;
          await form.getByRole('button', { name: 'Save target' }).click();
          await shown.filter({ hasText: 'http://127.0.0.1:9/hook' }).filter({ hasText: 'secret set' }).waitFor();
          await page
            .getByTestId('retry')
            .filter({ hasText: /^2 attempts; waits 4s/ })
            .waitFor();
          assert.deepEqual(
            patches.map((p) => p.body),
            [
              {
                target: { url: 'http://127.0.0.1:9/hook', secret: SECRET },
                retry: { max_attempts: 2, base: '4s', factor: 2, cap: '15m' },
              },
            ],
          );
          assert.deepEqual((await stored()).target, { url: 'http://127.0.0.1:9/hook', secret_set: true });
          assert.equal(await secretField.inputValue(), '', 'the secret field is cleared');
          assert.ok(!(await page.evaluate<string>('document.body.innerHTML')).includes(SECRET), 'not in the DOM');
          const fields = await page.evaluate<string[]>(
            "[...document.querySelectorAll('input, textarea, select')].map((e) => e.value)",
          );
          assert.ok(!fields.some((v) => v.includes(SECRET)), 'not in any field');

          // A task due now: its first delivery fails and it waits 4 s with its attempt and error shown.
          await page.getByLabel(/^Delay/).fill('');
          await page.getByLabel(/^Labels/).fill('kind:doomed');
          await page.getByRole('button', { name: 'Enqueue' }).click();
          const waiting = page.getByTestId('scheduled-table').getByRole('row').filter({ hasText: 'kind:doomed' });
          await waiting
            .getByTestId('task-error')
            .filter({ hasText: /refused/ })
            .waitFor();
          assert.equal(await waiting.getByTestId('task-attempt').textContent(), '1');
          // The second fails too: it is a dead letter, with its last error.
          const deadRow = page.getByTestId('dead-table').getByRole('row').filter({ hasText: 'kind:doomed' });
          await deadRow
            .getByTestId('dead-error')
            .filter({ hasText: /refused/ })
            .waitFor();
          const taskId = (await deadRow.getAttribute('data-task')) ?? '';
          assert.ok(taskId);
          assert.equal(await deadRow.getByRole('cell').nth(2).textContent(), '2');
          await waiting.waitFor({ state: 'detached' });
          await screenshot(page, '20-scheduler-dead');

          // Retry: back in the task list with its attempts reset (it fails once more and waits again).
          const [retried] = await Promise.all([
            page.waitForResponse((r) => r.url().endsWith(`/dead/${taskId}/retry`) && r.request().method() === 'POST'),
            deadRow.getByRole('button', { name: 'Retry' }).click(),
          ]);
          assert.equal(retried.status(), 200);
          await page.getByTestId('no-dead').waitFor();
          await waiting.getByTestId('task-attempt').filter({ hasText: /^1$/ }).waitFor();
          // …and dies again after its second attempt; Discard empties the list.
          await deadRow.getByRole('button', { name: 'Discard' }).click();
          await page.getByTestId('no-dead').waitFor();
          const dead = await request(port, { path: `/schedulers/${schedulerId}/dead`, host: 'scheduler.localhost' });
          assert.deepEqual(dead.json<{ dead: unknown[] }>().dead, []);

          // No target: the scheduler is back to workers reserving its tasks.
          await form.getByLabel('Deliver due tasks to').selectOption('none');
          await form.getByLabel('Max attempts').fill('');
          await form.getByLabel('First wait').fill('');
          await form.getByLabel('Factor').fill('');
          await form.getByLabel('Longest wait').fill('');
          patches.length = 0;
          await form.getByRole('button', { name: 'Save target' }).click();
          await shown.filter({ hasText: /^none/ }).waitFor();
          assert.deepEqual(
            patches.map((p) => p.body),
            [{ target: null, retry: null }],
          );
          assert.equal((await stored()).target, undefined);
        } finally {
          page.off('request', onRequest);
        }
      });

      await step(page, log, '21-run-page', async () => {
        const token = await page.evaluate<string | null>("sessionStorage.getItem('stratus.console.token')");
        assert.ok(token);
        const bearer = { authorization: `Bearer ${token}` };
        // Push a tiny image as a container tool would: through the public port, an API key as Basic credentials.
        const basic = basicAuth(await createApiKey(port, bearer, 'registry'));
        const registry = `localhost:${port}`;
        const name = 'console/web';
        const digestOf = (data: string) => `sha256:${createHash('sha256').update(data).digest('hex')}`;
        for (const blob of ['{}', 'console layer']) {
          const pushed = await request(port, {
            method: 'POST',
            path: `/v2/${name}/blobs/uploads/?digest=${digestOf(blob)}`,
            host: registry,
            headers: { ...basic, 'content-type': 'application/octet-stream' },
            body: blob,
          });
          assert.equal(pushed.status, 201, pushed.text);
        }
        const manifestType = 'application/vnd.docker.distribution.manifest.v2+json';
        const manifest = JSON.stringify({
          schemaVersion: 2,
          mediaType: manifestType,
          config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: 2, digest: digestOf('{}') },
          layers: [
            {
              mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
              size: 13,
              digest: digestOf('console layer'),
            },
          ],
        });
        const tagged = await request(port, {
          method: 'PUT',
          path: `/v2/${name}/manifests/v1`,
          host: registry,
          headers: { ...basic, 'content-type': manifestType },
          body: manifest,
        });
        assert.equal(tagged.status, 201, tagged.text);
        const stored = async () => {
          const answer = await request(port, {
            path: `/api/console?repository=${name}`,
            host: 'run.localhost',
            headers: bearer,
          });
          assert.equal(answer.status, 200, answer.text);
          return answer.json<{ env: unknown; logger_id: string | null; desired: { state: string } }>();
        };
        /** Requests the page makes to the run service: the PUT bodies, and how many state reads. */
        const puts: { path: string; body: unknown }[] = [];
        let reads = 0;
        const onRequest = (r: Request) => {
          const url = new URL(r.url());
          if (!url.pathname.startsWith('/services/run/api/console')) return;
          if (r.method() === 'PUT') puts.push({ path: url.pathname, body: JSON.parse(r.postData() ?? 'null') });
          if (r.method() === 'GET' && url.pathname === '/services/run/api/console') reads++;
        };
        page.on('request', onRequest);
        try {
          // The list: the pushed repository, nothing applied yet, and the driver said.
          await open(page, 'Containers');
          await page.getByTestId('run-driver').filter({ hasText: 'recording' }).waitFor();
          const row = page.getByTestId('repositories-table').locator(`tr[data-repository="${name}"]`);
          await row.getByTestId('desired-badge').filter({ hasText: 'stopped' }).waitFor();
          await row.getByTestId('actual-badge').filter({ hasText: 'nothing applied' }).waitFor();
          await row.getByRole('link', { name }).click();
          await page.getByRole('heading', { level: 1, name }).waitFor();

          // Start: desired running; the recording driver runs nothing, and the page says so.
          await page.getByRole('button', { name: 'Start v1' }).click();
          const state = page.getByTestId('run-state');
          await state.getByTestId('desired-badge').filter({ hasText: 'running' }).waitFor();
          await state.getByTestId('actual-badge').filter({ hasText: 'unknown' }).waitFor();
          await state.getByTestId('actual-note').filter({ hasText: 'the recording driver runs nothing' }).waitFor();
          await page.getByTestId('run-host').filter({ hasText: 'console-web.run.localhost' }).waitFor();
          await page.getByRole('button', { name: 'Roll back to v1' }).click();
          await page.getByTestId('history-table').getByRole('cell', { name: 'rollback', exact: true }).waitFor();
          // The state is read again while the page is open.
          const before = reads;
          await page.waitForRequest((r) => r.url().includes('/services/run/api/console?repository='), {
            timeout: 5000,
          });
          assert.ok(reads > before);

          // Env: a row typed in, saved as the whole list.
          const env = page.getByRole('group', { name: 'Environment' });
          await env.getByRole('button', { name: 'Add variable' }).click();
          await env.getByLabel('Variable name').fill('1BAD');
          await env.getByLabel('Variable value').fill('hello console');
          await page.getByRole('button', { name: 'Save environment' }).click();
          await page.getByTestId('run-env').getByRole('alert').filter({ hasText: 'letters, digits and _' }).waitFor();
          assert.deepEqual(puts, [], 'a wrong name is said before sending');
          await env.getByLabel('Variable name').fill('GREETING');
          await page.getByRole('button', { name: 'Save environment' }).click();
          await page.getByTestId('run-env').getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
          assert.deepEqual(puts, [
            {
              path: '/services/run/api/console/env',
              body: { repository: name, env: [{ key: 'GREETING', desired_value: 'hello console' }] },
            },
          ]);
          assert.deepEqual((await stored()).env, [{ key: 'GREETING', desired_value: 'hello console' }]);

          // Logger: the output goes to logger "app" (step 07), and the Logs panel follows it live.
          await page.getByLabel(/^Logger \(gets the container/).selectOption({ label: 'app' });
          await page.getByRole('button', { name: 'Save logger' }).click();
          await page.getByTestId('run-logger').getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
          const loggerId = (await stored()).logger_id;
          assert.ok(loggerId);
          await page.getByTestId('run-follow-state').filter({ hasText: 'Following live' }).waitFor();
          const output = page.getByTestId('run-log-output');
          await output.filter({ hasText: 'ERROR shown live 2' }).waitFor();
          const ingested = await request(port, {
            method: 'POST',
            path: `/v1/loggers/${loggerId}/ingest`,
            host: 'logs.localhost',
            headers: bearer,
            body: 'container line followed live\n',
          });
          assert.equal(ingested.status, 200, ingested.text);
          await output.filter({ hasText: 'container line followed live' }).waitFor();

          // Stop, and the history has it all (newest first).
          await page.getByRole('button', { name: 'Stop', exact: true }).click();
          await state.getByTestId('desired-badge').filter({ hasText: 'stopped' }).waitFor();
          const actions = page.getByTestId('history-table').locator('tbody tr td:nth-child(2)');
          await actions.filter({ hasText: 'stop' }).waitFor();
          assert.deepEqual(await actions.allTextContents(), ['stop', 'rollback', 'start']);
          assert.equal((await stored()).desired.state, 'stopped');
          await screenshot(page, '21-run-repository');

          // Leaving the page stops its reads.
          await page.getByRole('link', { name: '← Containers' }).click();
          await row.getByTestId('desired-badge').filter({ hasText: 'stopped' }).waitFor();
          const left = reads;
          await page.waitForTimeout(3500);
          assert.equal(reads, left, 'no state reads once the page is gone');
        } finally {
          page.off('request', onRequest);
        }
      });

      await step(page, log, '22-kv', async () => {
        const token = await page.evaluate<string | null>("sessionStorage.getItem('stratus.console.token')");
        assert.ok(token);
        const stored = (key: string) =>
          request(port, {
            path: `/v1/collections/settings/keys/${key}`,
            host: 'kv.localhost',
            headers: { authorization: `Bearer ${token}` },
          });
        await open(page, 'Key-value');
        await page.getByTestId('kv-role').filter({ hasText: 'primary' }).waitFor();
        await page.getByLabel('Name').fill('settings');
        await page.getByRole('button', { name: 'Create collection' }).click();
        await page.getByRole('heading', { name: 'Collection settings' }).waitFor();
        await page.getByTestId('no-keys').waitFor();
        const setKey = async (key: string, value: string, as: 'json' | 'text' = 'json') => {
          await page.getByLabel('Key (slashes allowed)').fill(key);
          await page.getByLabel('Value is').selectOption(as);
          await page.getByLabel('Value', { exact: true }).fill(value);
          await page.getByRole('button', { name: 'Save key' }).click();
          await page
            .getByTestId('kv-saved')
            .filter({ hasText: `Saved ${key}:` })
            .waitFor();
        };
        await setKey('ui/theme', '{"dark": true}');
        await setKey('ui/lang', 'en', 'text');
        await setKey('other/x', '42');
        // JSON as JSON, text as a string.
        assert.deepEqual((await stored('ui/theme')).json<{ value: unknown }>().value, { dark: true });
        assert.equal((await stored('ui/lang')).json<{ value: unknown }>().value, 'en');
        // Not JSON: said before sending.
        await setKey('ui/bad', '{oops', 'text');
        await page.getByLabel('Value is').selectOption('json');
        await page.getByRole('button', { name: 'Save key' }).click();
        await page.getByRole('alert').filter({ hasText: 'not valid JSON' }).waitFor();

        // Prefix search.
        const table = page.getByTestId('kv-keys-table');
        const shownKeys = () =>
          table.locator('tr[data-key]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-key')));
        await page.getByLabel('Key prefix').fill('ui/');
        await page.getByRole('button', { name: 'Search' }).click();
        await table.locator('tr[data-key="other/x"]').waitFor({ state: 'detached' });
        assert.deepEqual(await shownKeys(), ['ui/bad', 'ui/lang', 'ui/theme']);
        await table.locator('tr[data-key="ui/theme"]').getByRole('button', { name: 'View' }).click();
        await page.getByTestId('kv-value').filter({ hasText: '"dark": true' }).waitFor();

        // Pages of 20: the next page starts after the last key shown.
        for (let i = 0; i < 21; i++) {
          const written = await request(port, {
            method: 'POST',
            path: `/v1/collections/settings/keys/page/${String(i).padStart(2, '0')}`,
            host: 'kv.localhost',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: `{"value":${i}}`,
          });
          assert.equal(written.status, 200, written.text);
        }
        await page.getByLabel('Key prefix').fill('page/');
        await page.getByRole('button', { name: 'Search' }).click();
        await page
          .getByTestId('kv-page-info')
          .filter({ hasText: 'Keys 1–20 starting with “page/”, more follow' })
          .waitFor();
        await page.getByRole('button', { name: 'Next page' }).click();
        await page
          .getByTestId('kv-page-info')
          .filter({ hasText: /^Keys 21–21/ })
          .waitFor();
        assert.deepEqual(await shownKeys(), ['page/20']);
        await page.getByRole('button', { name: 'Previous page' }).click();
        await page
          .getByTestId('kv-page-info')
          .filter({ hasText: /^Keys 1–20/ })
          .waitFor();

        // Delete a key: gone from the search and from the node.
        await page.getByLabel('Key prefix').fill('ui/');
        await page.getByRole('button', { name: 'Search' }).click();
        await table.locator('tr[data-key="ui/theme"]').getByRole('button', { name: 'Delete' }).click();
        await table.locator('tr[data-key="ui/theme"]').waitFor({ state: 'detached' });
        assert.deepEqual(await shownKeys(), ['ui/bad', 'ui/lang']);
        assert.equal((await stored('ui/theme')).status, 404);
        await screenshot(page, '22-kv-keys');
        // The collections list counts the keys.
        await page.getByRole('link', { name: '← Key-value' }).click();
        await page
          .getByTestId('kv-collections-table')
          .locator('tr[data-collection="settings"]')
          .getByRole('cell', { name: '24', exact: true })
          .waitFor();
      });

      /** Sends a request to `host` every 100 ms until stopped. */
      const background = (host: string) => {
        let on = true;
        const done = (async () => {
          while (on) {
            await request(port, { path: '/version', host }).catch(() => undefined);
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        })();
        return async () => {
          on = false;
          await done;
        };
      };
      /** How many points a chart plots (its box's data-points). */
      const pointsOf = async (testId: string) =>
        Number((await page.getByTestId(testId).getAttribute('data-points')) ?? 0);
      /** A chart's canvas as it is drawn now. */
      const canvasOf = (testId: string) =>
        page.evaluate<string>(`document.querySelector('[data-testid=${testId}] canvas').toDataURL()`);

      await step(page, log, '23-gateway', async () => {
        await open(page, 'Gateway');
        const chart = page.getByTestId('traffic-chart');
        await chart.locator('canvas').waitFor();
        await page.getByTestId('traffic-waiting').waitFor({ state: 'detached' });
        const points = await pointsOf('traffic-chart');
        const drawn = await canvasOf('traffic-chart');
        const stop = background('api.localhost');
        try {
          // api.localhost gets a line, a rate above zero, and the chart more points.
          await chart.locator('.u-legend').getByText('api.localhost').waitFor();
          await page.waitForFunction(
            `Number(document.querySelector('[data-testid=stats-table] tr[data-host="api.localhost"] [data-testid=host-rate]')?.textContent) > 0`,
          );
        } finally {
          await stop();
        }
        assert.ok((await pointsOf('traffic-chart')) > points, 'the chart has more points');
        assert.notEqual(await canvasOf('traffic-chart'), drawn, 'the canvas was drawn again');
        await page.getByTestId('status-table').locator('tr[data-status-id="kv"]').getByText('200 OK').waitFor();
        await page.getByTestId('instances-table').getByText('this one').waitFor();
        await page.getByTestId('virtual-hosts').getByText('kv.localhost', { exact: true }).waitFor();
        // The route policy as the gateway applies it: every kv path but its health checks needs a credential.
        const kvRule = page.getByTestId('policy-table').locator('tr', { hasText: 'kv' }).filter({ hasText: 'require' });
        await kvRule.first().waitFor();
        await page.getByTestId('prefix-table').locator('tr', { hasText: '/v2/' }).getByText('run').waitFor();
      });

      await step(page, log, '24-overview', async () => {
        await page.getByRole('navigation', { name: 'Areas' }).getByRole('link', { name: 'Overview' }).click();
        await page.getByRole('heading', { level: 1, name: /^Welcome/ }).waitFor();
        await page
          .getByTestId('health-summary')
          .filter({ hasText: /^All \d+ services answer\.$/ })
          .waitFor();
        await page.getByTestId('health-table').locator('tr[data-status-id="docdb"]').getByText('200 OK').waitFor();
        await page.waitForFunction(`Number(document.querySelector('[data-testid=rate-chart]')?.dataset.points) >= 1`);
        const points = await pointsOf('rate-chart');
        // Requests to a host the gateway does not know: counted apart from the 5xx answers.
        const stop = background('nowhere.example');
        try {
          await page.waitForFunction(
            `Number(document.querySelector('[data-testid=noroute-now]')?.textContent.replace(/^· unroutable /, '')) > 0`,
          );
        } finally {
          await stop();
        }
        assert.ok((await pointsOf('rate-chart')) > points);
        assert.ok((await pointsOf('error-chart')) > points);
        assert.ok((await pointsOf('latency-chart')) > points);
        // No 5xx answer in this run: the error rate is a known zero, not a gap.
        assert.match((await page.getByTestId('errors-now').textContent()) ?? '', /^now 0(\.0+)?$/);
      });

      await step(page, log, '25-charts-stop', async () => {
        // The reads stop with the page.
        let reads = 0;
        const onRequest = (r: Request) => {
          if (r.url().endsWith('/v0/stats') || r.url().endsWith('/v0/status')) reads++;
        };
        await open(page, 'Config');
        page.on('request', onRequest);
        try {
          await page.waitForTimeout(2500);
          assert.equal(reads, 0, 'no stats or status reads once the page is gone');
        } finally {
          page.off('request', onRequest);
        }
      });

      await step(page, log, '09-config', async () => {
        await open(page, 'Config');
        await page.getByLabel('Key', { exact: true }).fill('feature.newCheckout');
        await page.getByLabel(/^Value/).fill('true');
        await page.getByRole('button', { name: 'Save' }).click();
        await page.getByTestId('config-table').getByText('feature.newCheckout').waitFor();
      });

      await step(page, log, '10-sign-out', async () => {
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
        assert.equal(await page.evaluate<string | null>("sessionStorage.getItem('stratus.console.token')"), null);
      });
    } finally {
      await context.close();
    }
  });

  it(
    "edits a lambda's env, secrets, logger and schedule, and shows its invocations",
    { timeout: 3 * 60_000 },
    async () => {
      assert.ok(browser && server);
      const port = server.publicPort;
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT);
      page.on('dialog', (dialog) => void dialog.accept());
      const log = pageLog(page);
      const origin = `http://console.localhost:${port}`;
      const SECRET = 'sk-console-test-0123456789-never-shown';
      const REPLACED = 'sk-console-test-replaced-value';
      /** The PATCH bodies the page sent, in order. */
      const patches: Record<string, unknown>[] = [];
      page.on('request', (r) => {
        if (r.method() === 'PATCH') patches.push(JSON.parse(r.postData() ?? '{}') as Record<string, unknown>);
      });
      let token = '';
      let lambdaId = '';
      let loggerId = '';
      const api = async <T>(path: string, host = 'lambda.localhost'): Promise<T> => {
        const answer = await request(port, { path, host, headers: { authorization: `Bearer ${token}` } });
        assert.equal(answer.status, 200, answer.text);
        return answer.json<T>();
      };
      /** Nothing of a secret's value anywhere in the page: its markup, or any field's value. */
      const assertSecretGone = async (value: string) => {
        assert.ok(!(await page.evaluate<string>('document.body.innerHTML')).includes(value), 'not in the DOM');
        const fields = await page.evaluate<string[]>(
          "[...document.querySelectorAll('input, textarea, select')].map((e) => e.value)",
        );
        assert.ok(!fields.some((v) => v.includes(value)), 'not in any field');
      };
      const env = page.getByRole('group', { name: 'Environment' });
      const secrets = page.getByRole('group', { name: 'Secrets' });
      const invocations = page.getByTestId('invocations-table');

      try {
        await step(page, log, '16-lambda-settings', async () => {
          await page.goto(`${origin}/`, { timeout: WAIT });
          await page.getByLabel('Email').fill(ADMIN_EMAIL);
          await page.getByLabel('Password').fill(ADMIN_PASSWORD);
          await page.getByRole('button', { name: 'Sign in' }).click();
          await page.getByTestId('user').filter({ hasText: ADMIN_EMAIL }).waitFor();
          token = (await page.evaluate<string | null>("sessionStorage.getItem('stratus.console.token')")) ?? '';
          assert.ok(token);
          await open(page, 'Loggers');
          await page.getByLabel('Name').fill('lambda-out');
          await page.getByRole('button', { name: 'Create logger' }).click();
          await page.getByRole('heading', { name: 'Logger lambda-out' }).waitFor();
          loggerId = decodeURIComponent(page.url().split('/').pop() ?? '');

          await open(page, 'Lambdas');
          await page.getByLabel('Name').fill('configured');
          await page
            .getByLabel('Code')
            .fill(
              [
                'export default (req, ctx) => {',
                "  console.log('greeting is', ctx.env.GREETING);",
                "  console.log('token', ctx.env.API_TOKEN);",
                "  if (req.query.fail) throw new Error('failed on purpose');",
                '  return { body: { greeting: ctx.env.GREETING ?? null, token_length: (ctx.env.API_TOKEN ?? "").length } };',
                '};',
              ].join('\n'),
            );
          await page.getByRole('button', { name: 'Create lambda' }).click();
          await page.getByRole('heading', { name: 'configured' }).waitFor();
          lambdaId = decodeURIComponent(page.url().split('/').pop() ?? '');
          await page.getByTestId('no-invocations').waitFor();

          await env.getByRole('button', { name: 'Add variable' }).click();
          await env.getByLabel('Variable name').last().fill('GREETING');
          await env.getByLabel('Variable value').last().fill('hello from env');
          await secrets.getByRole('button', { name: 'Add secret' }).click();
          await secrets.getByLabel('Secret name').last().fill('API_TOKEN');
          const value = secrets.getByLabel('Secret value').last();
          assert.equal(await value.getAttribute('type'), 'password');
          await value.fill(SECRET);
          await page.getByLabel(/^Logger/).selectOption({ label: 'lambda-out' });
          await screenshot(page, '16-lambda-settings-form');
          await page.getByRole('button', { name: 'Save' }).click();
          await page.getByText('Saved.').waitFor();
          // Only what changed went out: env and secrets as merge patches, and the logger.
          assert.deepEqual(patches, [
            { env: { GREETING: 'hello from env' }, secrets: { API_TOKEN: SECRET }, logger_id: loggerId },
          ]);
          const stored = await api<{ env: object; secrets: string[]; logger_id: string | null }>(
            `/api/v0/lambdas/${lambdaId}`,
          );
          assert.deepEqual(stored.env, { GREETING: 'hello from env' });
          assert.deepEqual(stored.secrets, ['API_TOKEN']);
          assert.equal(stored.logger_id, loggerId);
          await secrets.locator('[data-secret=API_TOKEN]').getByText('value set (hidden)').waitFor();
          assert.equal(await secrets.getByLabel('Secret value').count(), 0, 'no value field is left');
          await assertSecretGone(SECRET);
        });

        await step(page, log, '17-lambda-invocations', async () => {
          await page.getByRole('button', { name: 'Invoke' }).click();
          await page
            .getByTestId('invoke-output')
            .filter({ hasText: `"token_length": ${SECRET.length}` })
            .waitFor();
          // The test run is in the history at once, with its console lines behind a button.
          const first = invocations.locator('tbody tr').first();
          await first.getByRole('cell', { name: 'invoke', exact: true }).waitFor();
          await first.getByText('200', { exact: true }).waitFor();
          await first.getByRole('button', { name: 'Show 2 lines' }).click();
          const lines = page.getByTestId('invocation-logs').first();
          await lines.filter({ hasText: '[log] greeting is hello from env' }).waitFor();
          assert.match((await lines.textContent()) ?? '', /\[log\] token \*\*\*/, 'the secret is masked');
          // A failed test run, and a public run from elsewhere that Refresh brings in.
          await page.getByLabel('Query').fill('fail=1');
          await page.getByRole('button', { name: 'Invoke' }).click();
          await invocations.getByText('failed on purpose').waitFor();
          const run = await request(port, { path: `/run/${lambdaId}`, host: 'lambda.localhost' });
          assert.equal(run.status, 200, run.text);
          await page.getByRole('button', { name: 'Refresh' }).click();
          await invocations.locator('tbody tr').first().getByRole('cell', { name: 'http', exact: true }).waitFor();
          assert.equal(await invocations.locator('tbody tr[data-invocation]').count(), 3);
          await assertSecretGone(SECRET);
        });

        await step(page, log, '18-lambda-settings-change', async () => {
          patches.length = 0;
          // Replace the secret's value, remove the variable, drop the logger.
          await secrets.getByRole('button', { name: 'Replace the value of API_TOKEN' }).click();
          await secrets.getByLabel('New value of API_TOKEN').fill(REPLACED);
          await env.getByRole('button', { name: 'Remove variable GREETING' }).click();
          await page.getByLabel(/^Logger/).selectOption({ label: 'none' });
          await page.getByRole('button', { name: 'Save' }).click();
          await page.getByText('Saved.').waitFor();
          assert.deepEqual(patches, [{ env: { GREETING: null }, secrets: { API_TOKEN: REPLACED }, logger_id: null }]);
          const stored = await api<{ env: object; secrets: string[]; logger_id: string | null }>(
            `/api/v0/lambdas/${lambdaId}`,
          );
          assert.deepEqual(stored, { ...stored, env: {}, secrets: ['API_TOKEN'], logger_id: null });
          await assertSecretGone(REPLACED);
          // Over a limit: the platform's 400 message is shown, and nothing is changed.
          await env.getByRole('button', { name: 'Add variable' }).click();
          await env.getByLabel('Variable name').last().fill('BIG');
          await env.getByLabel('Variable value').last().fill('x'.repeat(5121));
          await page.getByRole('button', { name: 'Save' }).click();
          await page.getByRole('alert').filter({ hasText: /5120/ }).waitFor();
          await screenshot(page, '18-lambda-settings-limit');
          assert.deepEqual((await api<{ env: object }>(`/api/v0/lambdas/${lambdaId}`)).env, {});
          await env.getByRole('button', { name: 'Remove variable BIG' }).click();
          // Remove the secret: a null in the patch.
          patches.length = 0;
          await secrets.getByRole('button', { name: 'Remove secret API_TOKEN' }).click();
          await page.getByRole('button', { name: 'Save' }).click();
          await page.getByText('Saved.').waitFor();
          assert.deepEqual(patches, [{ secrets: { API_TOKEN: null } }]);
          assert.deepEqual((await api<{ secrets: string[] }>(`/api/v0/lambdas/${lambdaId}`)).secrets, []);
          await secrets.getByText('No secrets.').waitFor();
        });

        await step(page, log, '19-lambda-schedule', async () => {
          const schedule = page.getByRole('group', { name: 'Schedule' });
          // A refused expression: the platform's 400 message is shown, nothing is stored.
          await schedule.getByLabel('Cron expression').fill('61 * * * *');
          await page.getByRole('button', { name: 'Save' }).click();
          await page.getByRole('alert').filter({ hasText: /61/ }).waitFor();
          assert.equal((await api<{ schedule: string | null }>(`/api/v0/lambdas/${lambdaId}`)).schedule, null);
          // Set with a zone: both are sent, and the next run is shown as the platform computed it.
          patches.length = 0;
          await schedule.getByLabel('Cron expression').fill('0 9 * * MON-FRI');
          await schedule.getByLabel('Time zone').fill('Europe/Paris');
          await page.getByRole('button', { name: 'Save' }).click();
          await page.getByText('Saved.').waitFor();
          assert.deepEqual(patches, [{ schedule: '0 9 * * MON-FRI', schedule_tz: 'Europe/Paris' }]);
          const stored = await api<{ next_run_at: string | null }>(`/api/v0/lambdas/${lambdaId}`);
          assert.match(stored.next_run_at ?? '', /^\d{4}-\d\d-\d\dT0[78]:00:00Z$/);
          await page
            .getByTestId('next-run')
            .filter({ hasText: stored.next_run_at ?? '' })
            .waitFor();
          await open(page, 'Lambdas');
          await page
            .getByTestId('lambda-next-run')
            .filter({ hasText: stored.next_run_at ?? '' })
            .waitFor();
          await page.getByRole('link', { name: 'configured' }).click();
          await page.getByTestId('next-run').waitFor();
          // Remove it: schedule null alone, and the page says there is none.
          patches.length = 0;
          await schedule.getByRole('button', { name: 'Remove schedule' }).click();
          await page.getByRole('button', { name: 'Save' }).click();
          await page.getByText('Saved.').waitFor();
          assert.deepEqual(patches, [{ schedule: null }]);
          await schedule.getByText('no schedule').waitFor();
          // The form shows the answer at once; the heading follows when the page's reload lands.
          await page.getByTestId('next-run').waitFor({ state: 'detached' });
          const cleared = await api<{ schedule: unknown; schedule_tz: unknown }>(`/api/v0/lambdas/${lambdaId}`);
          assert.deepEqual([cleared.schedule, cleared.schedule_tz], [null, null]);
        });
      } finally {
        await context.close();
      }
    },
  );

  it(
    'works from the front door under /services/console, calling every service on the same origin',
    { timeout: 60_000 },
    async () => {
      assert.ok(browser && server);
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      page.setDefaultTimeout(WAIT);
      const log = pageLog(page);
      const origin = `http://127.0.0.1:${server.publicPort}`;
      const called = new Set<string>();
      page.on('request', (r) => called.add(new URL(r.url()).origin));
      try {
        await step(page, log, '15-front-door', async () => {
          await page.goto(`${origin}/services/console`, { timeout: WAIT });
          assert.equal(new URL(page.url()).pathname, '/services/console/');
          await page.getByLabel('Email').fill(ADMIN_EMAIL);
          await page.getByLabel('Password').fill(ADMIN_PASSWORD);
          await page.getByRole('button', { name: 'Sign in' }).click();
          await page.getByTestId('user').filter({ hasText: ADMIN_EMAIL }).waitFor();
          await open(page, 'Projects');
          await page.getByLabel('Name').fill('Front door');
          await page.getByLabel(/^Slug/).fill('front-door');
          await page.getByRole('button', { name: 'Create project' }).click();
          await page.getByRole('cell', { name: 'front-door.localhost' }).waitFor();
          const row = page.getByRole('row', { name: /front-door\.localhost/ });
          await row.getByRole('button', { name: 'Edit origins' }).click();
          await row.getByLabel('Origins').fill('https://app.example.com, http://localhost:5173');
          await row.getByRole('button', { name: 'Save origins' }).click();
          await row.getByText('http://localhost:5173').waitFor();
        });
        assert.deepEqual([...called], [origin], 'pages, assets and API calls all on the front door');
        // The origins reached the platform: the gateway grants one of them CORS.
        const preflight = await request(server.publicPort, {
          method: 'OPTIONS',
          path: '/services/docdb/v1/databases',
          host: 'localhost',
          headers: { origin: 'https://app.example.com', 'access-control-request-method': 'GET' },
        });
        assert.equal(preflight.status, 204);
        assert.equal(preflight.headers['access-control-allow-origin'], 'https://app.example.com');
      } finally {
        await context.close();
      }
    },
  );
});

describe('web console in demo mode', { timeout: 10 * 60_000 }, () => {
  let database: TestDatabase | undefined;
  let server: ServedProcess | undefined;
  let browser: Browser | undefined;

  before(async () => {
    await Promise.all([ensureConsoleBuilt(), ensureChromium()]);
    database = await createTestDatabase();
    server = await serve([], { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl, CONSOLE_DEMO: '1' });
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await database?.cleanup();
  });

  it('renders the mock user and the mock lambda list', { timeout: 2 * 60_000 }, async () => {
    assert.ok(browser && server);
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.setDefaultTimeout(WAIT);
    const log = pageLog(page);
    try {
      await step(page, log, '11-demo-lambdas', async () => {
        await page.goto(`http://console.localhost:${server?.publicPort}/#/lambdas`, { timeout: WAIT });
        await page.getByTestId('demo-banner').waitFor();
        await page.getByTestId('user').filter({ hasText: 'fulanez@gmail.com' }).waitFor();
        await page.getByTestId('lambdas-table').getByText('Index').waitFor();
        assert.ok(
          await page.getByRole('button', { name: 'Create lambda' }).isDisabled(),
          'writes are disabled in demo mode',
        );
        await open(page, 'Buckets');
        await page.getByTestId('buckets-table').getByText('my-first-bucket').waitFor();
        // The mock API has no run routes.
        await open(page, 'Containers');
        await page.getByText('Not available in demo mode.').waitFor();
        // Nor key-value or gateway routes: those pages say so, and the overview's charts too.
        await open(page, 'Key-value');
        await page.getByText('Not available in demo mode.').waitFor();
        await open(page, 'Gateway');
        await page.getByText('Not available in demo mode.').waitFor();
        await page.getByRole('navigation', { name: 'Areas' }).getByRole('link', { name: 'Overview' }).click();
        await page.getByRole('heading', { level: 1, name: /^Welcome/ }).waitFor();
        assert.equal(await page.getByText('Not available in demo mode.').count(), 2);
      });
    } finally {
      await page.close();
    }
  });
});

describe('web console single sign-on', { timeout: 10 * 60_000 }, () => {
  let database: TestDatabase | undefined;
  let server: ServedProcess | undefined;
  let browser: Browser | undefined;
  let idp: TestIdp | undefined;

  before(async () => {
    await Promise.all([ensureConsoleBuilt(), ensureChromium()]);
    idp = await startTestIdp({
      accounts: [{ sub: 'alice', email: 'alice@example.com', email_verified: true, name: 'Alice' }],
    });
    database = await createTestDatabase();
    const configFile = join(database.dataDir, 'sso.config.json');
    writeFileSync(
      configFile,
      JSON.stringify({
        auth: {
          providers: [{ name: 'idp', issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret }],
        },
      }),
    );
    server = await serve(['--config', configFile], {
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.databaseUrl,
      // The default domain, where cookies cannot span hosts: the console gets its session from the
      // one-time code the sign-on puts in its redirect.
      SIGNUP: 'open',
      ADMIN_EMAIL: 'alice@example.com',
      ADMIN_PASSWORD: ADMIN_PASSWORD,
      COOKIE_SECURE: 'false',
    });
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await database?.cleanup();
    await idp?.close();
  });

  it('signs in through the identity provider button', { timeout: 2 * 60_000 }, async () => {
    assert.ok(browser && server && idp);
    const provider = idp;
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const log = pageLog(page);
    // The provider's login page is driven over HTTP by the helper: the console's redirect to the
    // provider is replaced by a redirect straight back to the callback, as after a real login.
    await context.route(
      (url) => url.pathname === '/v0/sso/idp/login',
      async (route) => {
        try {
          const url = new URL(route.request().url());
          const response = await request(Number(url.port), { path: url.pathname + url.search, host: url.host });
          const location = response.headers.location;
          if (response.status !== 302 || !location?.startsWith(provider.issuer))
            throw new Error(`the login answered ${response.status} ${location ?? response.text}`);
          const callback = await provider.authorize(location, { account: 'alice' });
          const headers: Record<string, string> = { location: callback.href };
          const cookies = response.headers['set-cookie'];
          if (cookies) headers['set-cookie'] = cookies.join('\n');
          await route.fulfill({ status: 302, headers });
        } catch (err) {
          await route.fulfill({
            status: 500,
            contentType: 'text/plain',
            body: `test provider bridge failed: ${err instanceof Error ? err.message : String(err)}`,
          });
        }
      },
    );
    try {
      await step(page, log, '12-sso', async () => {
        await page.goto(`http://console.localhost:${server?.publicPort}/`, { timeout: WAIT });
        await page.getByRole('link', { name: 'Sign in with idp' }).click();
        await page.getByTestId('user').filter({ hasText: 'alice@example.com' }).waitFor();
        assert.equal(new URL(page.url()).search, '', 'the one-time sso_code is removed from the address');
        await open(page, 'Lambdas');
      });
      await step(page, log, '13-session-ended', async () => {
        // the session ends elsewhere: the next refused call sends the console back to the sign-in page
        const token = await page.evaluate<string | null>("sessionStorage.getItem('stratus.console.token')");
        assert.ok(token);
        const out = await request(server?.publicPort ?? 0, {
          method: 'POST',
          path: '/v0/logout',
          host: 'auth.localhost',
          headers: { authorization: `Bearer ${token}` },
        });
        assert.ok(out.status < 300, out.text);
        await context.clearCookies();
        await open(page, 'Databases');
        await page.getByText('Your session has ended').waitFor();
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
      });
    } finally {
      await context.close();
    }
  });

  it('creates an account from the sign-in page when sign-up is open', { timeout: 60_000 }, async () => {
    assert.ok(browser && server);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const log = pageLog(page);
    try {
      await step(page, log, '14-signup', async () => {
        await page.goto(`http://console.localhost:${server?.publicPort}/`, { timeout: WAIT });
        await page.getByRole('link', { name: 'Create an account' }).click();
        await page.getByLabel('Email').fill('newcomer@example.com');
        await page.getByLabel('Password').fill('a long enough passphrase');
        await page.getByLabel('Nickname (optional)').fill('newcomer');
        await page.getByRole('button', { name: 'Create account' }).click();
        await page.getByTestId('user').filter({ hasText: 'newcomer@example.com' }).waitFor();
      });
    } finally {
      await context.close();
    }
  });
});
