import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createClient, type StratusClient } from '../../packages/client/src/index.ts';
import { runUserCommand, type CommandIo } from '../../packages/cli/src/index.ts';
import { ProgressBar } from '../../packages/cli/src/progress.ts';
import { ROOT } from '../helpers/browser.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

const EMAIL = 'cli@example.com';
const PASSWORD = 'correct horse battery staple';

/** Issue 21, item 5: the user CLI on the client, end to end against a running platform. */
describe('stratus user commands', () => {
  let t: TestPlatform;
  let url: string;
  let dir: string;
  let client: StratusClient;

  /** Runs one command in process, as the terminal would, with `stdin` as its input. */
  async function stratus(args: string[], stdin = ''): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const io: CommandIo = {
      stdout: { write: (text: string | Uint8Array) => (out += typeof text === 'string' ? text : Buffer.from(text)) },
      stderr: { write: (text: string) => (err += text) },
      stdin: Readable.from([Buffer.from(stdin)]),
      env: { STRATUS_CONFIG_DIR: join(dir, 'config') },
    };
    const code = await runUserCommand(args, io);
    return { code, out, err };
  }
  const json = async <T>(args: string[], stdin = ''): Promise<T> => {
    const result = await stratus([...args, '--json'], stdin);
    assert.equal(result.code, 0, `${args.join(' ')}: ${result.err}`);
    return JSON.parse(result.out) as T;
  };

  before(async () => {
    t = await startTestPlatform({ adminEmail: EMAIL, adminPassword: PASSWORD });
    url = `http://127.0.0.1:${t.platform.publicPort}`;
    dir = await mkdtemp(join(tmpdir(), 'stratus-cli-'));
    client = createClient({ url });
    await client.auth.login(EMAIL, PASSWORD);
  });
  after(async () => {
    await t?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('refuses a wrong password, then signs in with one from stdin into a file only the user reads', async () => {
    const wrong = await stratus(['login', '--url', url, '--email', EMAIL, '--password', 'nope']);
    assert.equal(wrong.code, 1);
    assert.match(wrong.err, /invalid_credentials|unauthorized/);
    await assert.rejects(stat(join(dir, 'config', 'credentials.json')), { code: 'ENOENT' });

    const signedIn = await json<{ email: string }>(
      ['login', '--url', url, '--email', EMAIL, '--password', '-'],
      `${PASSWORD}\n`,
    );
    assert.equal(signedIn.email, EMAIL);
    const file = join(dir, 'config', 'credentials.json');
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.equal((await stat(join(dir, 'config'))).mode & 0o777, 0o700);
    assert.ok(!(await readFile(file, 'utf8')).includes(PASSWORD), 'the password is never stored');
    assert.equal((await json<{ email: string }>(['whoami'])).email, EMAIL);
  });

  it('creates, lists and revokes API keys', async () => {
    const created = await json<{ key: string; secret: string }>(['keys', 'create', 'from the cli']);
    assert.match(created.secret, /./);
    // Signing in with the key pair (--secret is also lambda deploy's repeatable NAME=VALUE flag).
    const keyIo = (sink: { out: string }): CommandIo => ({
      stdout: { write: (text: string | Uint8Array) => (sink.out += String(text)) },
      stderr: { write: (text: string) => (sink.out += text) },
      stdin: Readable.from([]),
      env: { STRATUS_CONFIG_DIR: join(dir, 'key-config') },
    });
    const signIn = { out: '' };
    const args = ['login', '--url', url, '--api-key', created.key, '--secret', created.secret, '--json'];
    assert.equal(await runUserCommand(args, keyIo(signIn)), 0, signIn.out);
    const who = { out: '' };
    assert.equal(await runUserCommand(['whoami', '--json'], keyIo(who)), 0, who.out);
    assert.equal((JSON.parse(who.out) as { email: string }).email, EMAIL);
    const listed = await json<{ key: string; name: string }[]>(['keys', 'list']);
    assert.ok(listed.some((k) => k.key === created.key && k.name === 'from the cli'));
    const text = await stratus(['keys', 'list']);
    assert.match(text.out, /^KEY\s+NAME\n/);
    assert.ok(!text.out.includes(created.secret), 'lists never show secrets');
    assert.equal((await json<{ key: string }>(['keys', 'revoke', created.key])).key, created.key);
    assert.ok(!(await json<{ key: string }[]>(['keys', 'list'])).some((k) => k.key === created.key));
  });

  it('deploys a lambda from a file, redeploys it by name, and invokes it', async () => {
    const file = join(dir, 'greet.js');
    await writeFile(file, 'export default (req) => new Response("hello " + (req.query.name ?? "you"))');
    const deployed = await json<{ id: string; name: string; path: string }>([
      'lambda',
      'deploy',
      file,
      '--path',
      '/greet',
    ]);
    assert.equal(deployed.name, 'greet');
    assert.equal(deployed.path, '/greet');
    await writeFile(file, 'export default () => new Response("changed")');
    const again = await json<{ id: string }>(['lambda', 'deploy', file]);
    assert.equal(again.id, deployed.id, 'the same lambda, updated');
    const run = await json<{ status: number; body: string }>(['lambda', 'invoke', 'greet']);
    assert.equal(run.status, 200);
    assert.equal(run.body, 'changed');
  });

  it('imports an NDJSON file into a collection and exports it back, streamed', async () => {
    const database = await client.docdb.databases.create('cli-db');
    const source = join(dir, 'items.ndjson');
    const lines = Array.from({ length: 250 }, (_, i) => JSON.stringify({ n: i, even: i % 2 === 0 }));
    await writeFile(source, `${lines.join('\n')}\n`);
    assert.deepEqual(await json(['db', 'import', 'cli-db', 'items', source]), { imported: 250 });
    const target = join(dir, 'out.ndjson');
    assert.deepEqual(await json(['db', 'export', database.id, 'items', target]), { exported: 250, file: target });
    const exported = (await readFile(target, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { n: number });
    assert.deepEqual(
      exported.map((d) => d.n).sort((a, b) => a - b),
      lines.map((_, i) => i),
    );
    const toStdout = await stratus(['db', 'export', 'cli-db', 'items']);
    assert.equal(toStdout.out.trim().split('\n').length, 250);

    await writeFile(source, '{"ok":1}\nnot json\n');
    const bad = await stratus(['db', 'import', 'cli-db', 'items', source]);
    assert.equal(bad.code, 1);
    assert.match(bad.err, /line 2/);
    const missing = await stratus(['db', 'import', 'no-such-db', 'items', source]);
    assert.equal(missing.code, 1);
    assert.match(missing.err, /no database named no-such-db/);
  });

  it('copies files both ways', async () => {
    await client.files.buckets.create({ name: 'cli-bucket' });
    const local = join(dir, 'report.bin');
    const content = Buffer.alloc(300_000, 7);
    await writeFile(local, content);
    const up = await stratus(['files', 'cp', local, 'cli-bucket:reports/']);
    assert.equal(up.code, 0, up.err);
    assert.match(up.out, /Uploaded .* to cli-bucket:reports\/report\.bin/);
    const listed = await json<{ name: string; size: number }[]>(['files', 'ls', 'cli-bucket:reports/']);
    assert.deepEqual(
      listed.map((f) => [f.name, f.size]),
      [['reports/report.bin', content.length]],
    );
    const back = join(dir, 'back.bin');
    const down = await json<{ bytes: number }>(['files', 'cp', 'cli-bucket:reports/report.bin', back]);
    assert.equal(down.bytes, content.length);
    assert.ok((await readFile(back)).equals(content));
    const both = await stratus(['files', 'cp', local, back]);
    assert.equal(both.code, 2, 'two local paths is a usage mistake');
  });

  it('sets, gets and lists key-value entries and config', async () => {
    await json(['kv', 'set', 'prefs', 'theme', 'dark']);
    await json(['kv', 'set', 'prefs', 'size', '12']);
    assert.equal((await stratus(['kv', 'get', 'prefs', 'theme'])).out, 'dark\n');
    assert.equal((await json<{ value: unknown }>(['kv', 'get', 'prefs', 'size'])).value, 12, 'JSON values stay JSON');
    assert.deepEqual((await stratus(['kv', 'ls', 'prefs'])).out.trim().split('\n').sort(), ['size', 'theme']);
    assert.ok((await json<string[]>(['kv', 'ls'])).includes('prefs'));
    const missing = await stratus(['kv', 'get', 'prefs', 'nope', '--json']);
    assert.equal(missing.code, 1);
    assert.equal((JSON.parse(missing.err) as { error: { status: number } }).error.status, 404);

    await json(['config', 'set', 'greeting', '"hi"']);
    assert.equal((await stratus(['config', 'get', 'greeting'])).out, 'hi\n');
    assert.deepEqual(await json(['config', 'get', 'greeting']), { greeting: 'hi' });
  });

  it('tails a logger through the real stratus command until Ctrl-C', async () => {
    const logger = await client.logs.loggers.create({ name: 'cli-tail' });
    await client.logs.logger(logger.id).ingest(['error early', 'info early']);
    const child = spawn(
      process.execPath,
      [join(ROOT, 'bin', 'stratus.js'), 'logs', 'tail', 'cli-tail', '--regex', '^error'],
      {
        env: { ...process.env, STRATUS_CONFIG_DIR: join(dir, 'config') },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no line in time; stderr: ${err}`)), 20_000);
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('error early') && !out.includes('error late'))
            void client.logs.logger(logger.id).ingest(['info late', 'error late']);
          if (out.includes('error late')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
    } finally {
      child.kill('SIGINT');
    }
    assert.equal(await exited, 0, err);
    assert.deepEqual(out.trim().split('\n'), ['error early', 'error late']);
  });

  /** The real `stratus` command in a child process, to follow until Ctrl-C (SIGINT). */
  function spawnStratus(args: string[]) {
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'stratus.js'), ...args], {
      env: { ...process.env, STRATUS_CONFIG_DIR: join(dir, 'config') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    const waiters: (() => void)[] = [];
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (const wake of waiters.splice(0)) wake();
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    return {
      out: () => out,
      /** Resolves once stdout holds `text`. */
      async waitFor(text: string, ms = 20_000): Promise<void> {
        const deadline = Date.now() + ms;
        while (!out.includes(text)) {
          if (Date.now() > deadline) throw new Error(`no ${JSON.stringify(text)} in time; out: ${out}; err: ${err}`);
          await new Promise<void>((resolve) => {
            waiters.push(resolve);
            setTimeout(resolve, 200);
          });
        }
      },
      /** Ctrl-C, and the exit code with what was printed on stderr. */
      async interrupt(): Promise<{ code: number | null; err: string }> {
        child.kill('SIGINT');
        return { code: await exited, err };
      },
    };
  }

  it('deploys a lambda with env, secrets and a logger, never printing a secret value', async () => {
    const SECRET = 'sk-cli-test-4a7c9e1f0b2d';
    const REPLACED = 'sk-cli-test-replaced-77';
    const logger = await client.logs.loggers.create({ name: 'cli-lambda-out' });
    const file = join(dir, 'configured.js');
    await writeFile(
      file,
      "export default (req, ctx) => { console.log('token', ctx.env.TOKEN); return new Response(ctx.env.REGION + ' ' + ctx.env.MODE + ' ' + ctx.env.TOKEN.length) }",
    );
    const deployed = await stratus([
      'lambda',
      'deploy',
      file,
      '--env',
      'REGION=eu',
      '--env',
      'MODE=a=b',
      '--secret',
      `TOKEN=${SECRET}`,
      '--logger',
      'cli-lambda-out',
      '--path',
      '/configured',
    ]);
    assert.equal(deployed.code, 0, deployed.err);
    assert.match(
      deployed.out,
      /^Deployed configured \(.+\): ANY \/configured\nenv: REGION, MODE\nsecrets: TOKEN\nlogger: /,
    );
    const id = /\(([^)]+)\)/.exec(deployed.out)?.[1] ?? '';
    let stored = await client.lambda.get(id);
    assert.deepEqual(stored.env, { REGION: 'eu', MODE: 'a=b' }, 'split at the first =');
    assert.deepEqual(stored.secrets, ['TOKEN']);
    assert.equal(stored.logger_id, logger.id);
    assert.equal(stored.path, '/configured');

    // The code runs with both; the secret printed by the lambda is masked by the platform.
    const run = await stratus(['lambda', 'invoke', 'configured']);
    assert.equal(run.code, 0, run.err);
    assert.equal(run.out, `# log: token ***\n200\neu a=b ${SECRET.length}\n`);

    // Redeploying replaces the secret's value, keeps the env, and clears the logger.
    const again = await stratus([
      'lambda',
      'deploy',
      file,
      '--secret',
      `TOKEN=${REPLACED}`,
      '--logger',
      'none',
      '--json',
    ]);
    assert.equal(again.code, 0, again.err);
    const answer = JSON.parse(again.out) as { id: string; secrets: string[]; logger_id: string | null };
    assert.equal(answer.id, id);
    assert.deepEqual(answer.secrets, ['TOKEN']);
    assert.equal(answer.logger_id, null);
    stored = await client.lambda.get(id);
    assert.deepEqual(stored.env, { REGION: 'eu', MODE: 'a=b' });
    assert.equal((await stratus(['lambda', 'invoke', id])).out, `# log: token ***\n200\neu a=b ${REPLACED.length}\n`);

    // Mistakes: a secret without a name, a logger that is not there, an invalid name.
    const nameless = await stratus(['lambda', 'deploy', file, '--secret', SECRET]);
    assert.equal(nameless.code, 2);
    assert.match(nameless.err, /--secret takes NAME=VALUE/);
    const noLogger = await stratus(['lambda', 'deploy', file, '--logger', 'no-such-logger']);
    assert.equal(noLogger.code, 1);
    assert.match(noLogger.err, /no logger named no-such-logger/);
    const badName = await stratus(['lambda', 'deploy', file, '--secret', `9BAD=${SECRET}`]);
    assert.equal(badName.code, 1);
    assert.match(badName.err, /validation_error/);
    for (const result of [deployed, run, again, nameless, noLogger, badName])
      for (const value of [SECRET, REPLACED]) {
        assert.ok(!result.out.includes(value), `a secret value on stdout: ${result.out}`);
        assert.ok(!result.err.includes(value), `a secret value on stderr: ${result.err}`);
      }
  });

  it("prints a lambda's invocations oldest first, each with its console lines", async () => {
    const logged = await client.lambda.create({
      name: 'cli-logged',
      code: "export default (req) => { console.log('hello', req.query.n); if (req.query.fail) throw new Error('broken ' + req.query.n); console.warn('two\\nlines'); return 'ok' }",
    });
    for (const n of ['1', '2']) await client.lambda.invoke(logged.id, { query: { n } });
    await client.lambda.invoke(logged.id, { query: { n: '3', fail: '1' } });

    const all = await stratus(['lambda', 'logs', 'cli-logged']);
    assert.equal(all.code, 0, all.err);
    const header = (trigger: string, status: number, tail = '') =>
      new RegExp(`^\\d{4}-\\d\\d-\\d\\dT[^ ]+ ${trigger} ${status} [0-9.]+ms [0-9a-f-]{36}${tail}$`);
    const lines = all.out.trimEnd().split('\n');
    assert.equal(lines.length, 10, all.out);
    for (const [i, n] of [
      [0, '1'],
      [4, '2'],
    ] as const) {
      assert.match(lines[i]!, header('invoke', 200));
      assert.deepEqual(lines.slice(i + 1, i + 4), [`  log hello ${n}`, '  warn two', '  warn lines']);
    }
    assert.match(lines[8]!, header('invoke', 500, ' error lambda_error: .*broken 3'));
    assert.deepEqual(lines.slice(9), ['  log hello 3']);

    const lastTwo = await stratus(['lambda', 'logs', logged.id, '--limit', '2']);
    const headers = lastTwo.out.split('\n').filter((l) => l !== '' && !l.startsWith(' '));
    assert.equal(headers.length, 2, lastTwo.out);
    assert.match(lastTwo.out, /^\S+ invoke 200 .*\n {2}log hello 2\n/);
    const listed = await json<{ logs: { message: string }[] }[]>(['lambda', 'logs', 'cli-logged']);
    assert.deepEqual(
      listed.map((i) => i.logs[0]?.message),
      ['hello 1', 'hello 2', 'hello 3'],
    );
    for (const bad of ['0', 'x', '1.5']) {
      const usage = await stratus(['lambda', 'logs', 'cli-logged', '--limit', bad]);
      assert.equal(usage.code, 2, bad);
      assert.match(usage.err, /--limit takes a positive whole number/);
    }
    assert.equal((await stratus(['lambda', 'logs'])).code, 2);
    const missing = await stratus(['lambda', 'logs', 'no-such-lambda']);
    assert.equal(missing.code, 1);
    assert.match(missing.err, /no lambda named no-such-lambda/);
  });

  it("follows a lambda's new invocations until Ctrl-C: from the history, or live from its logger", async () => {
    const followed = await client.lambda.create({
      name: 'cli-followed',
      code: "export default (req) => { console.log('run', req.query.n); return 'ok' }",
    });
    await client.lambda.invoke(followed.id, { query: { n: 'before' } });
    // Without a logger: the history, asked every second; what was printed is not printed again.
    const history = spawnStratus(['lambda', 'logs', 'cli-followed', '--follow']);
    try {
      await history.waitFor('  log run before\n');
      await client.lambda.invoke(followed.id, { query: { n: 'during' } });
      await history.waitFor('  log run during\n');
    } finally {
      const ended = await history.interrupt();
      assert.equal(ended.code, 0, ended.err);
    }
    assert.deepEqual(
      history
        .out()
        .split('\n')
        .filter((l) => l.startsWith('  ')),
      ['  log run before', '  log run during'],
    );
    assert.match(history.out(), /^\S+ invoke 200 [0-9.]+ms \S+\n {2}log run before\n\S+ invoke 200 /);

    // With a logger: its lines, as the platform ingests them.
    const logger = await client.logs.loggers.create({ name: 'cli-followed-out' });
    await client.lambda.update(followed.id, { logger_id: logger.id });
    const live = spawnStratus(['lambda', 'logs', followed.id, '--follow']);
    try {
      // The follow starts at the logger's first line, so the run may come before it connects.
      const run = await client.lambda.invoke(followed.id, { query: { n: 'logged' } });
      assert.equal(run.status, 200);
      await live.waitFor(' log run logged\n');
    } finally {
      const ended = await live.interrupt();
      assert.equal(ended.code, 0, ended.err);
    }
    assert.match(live.out(), /^[0-9a-f-]{36} log run logged\n$/);
  });

  it('says what is wrong: usage mistakes exit 2, a signed-out user 1', async () => {
    const usage = await stratus(['keys', 'rotate']);
    assert.equal(usage.code, 2);
    assert.match(usage.err, /unknown keys action rotate/);
    assert.equal((await stratus(['kv', 'get', '--bogus'])).code, 2);
    assert.equal((await json<{ signed_out: boolean }>(['logout'])).signed_out, true);
    await assert.rejects(stat(join(dir, 'config', 'credentials.json')), { code: 'ENOENT' });
    const after = await stratus(['whoami']);
    assert.equal(after.code, 1);
    assert.match(after.err, /not signed in/);
  });
});

describe('progress bar', () => {
  it('draws on terminals only, with the share, and ends its line', () => {
    let drawn = '';
    let clock = 0;
    const bar = new ProgressBar(
      { isTTY: true, columns: 80, write: (text) => (drawn += text) },
      'up',
      2048,
      () => clock,
    );
    bar.update(1024);
    bar.update(1100); // within 100 ms: not redrawn
    clock = 200;
    bar.finish(2048);
    assert.equal(drawn.split('\r').length - 1, 2);
    assert.match(drawn, /50% 1\.0 KiB\/2\.0 KiB/);
    assert.match(drawn, /100% 2\.0 KiB\/2\.0 KiB\n$/);
    let piped = '';
    const quiet = new ProgressBar({ isTTY: false, write: (text) => (piped += text) }, 'up', 10);
    quiet.update(5);
    quiet.finish(10);
    assert.equal(piped, '');
  });
});
