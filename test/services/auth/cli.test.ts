import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { verify } from '@node-rs/bcrypt';
import { findUserByEmail } from '../../../src/services/auth/repository.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/database.ts';
import { USER_ID } from './helpers.ts';

const CLI = fileURLToPath(new URL('../../../src/cli.ts', import.meta.url));

let database: TestDatabase;

before(async () => {
  database = await createTestDatabase();
});

after(async () => {
  await database.cleanup();
});

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `stratus <args>` against the test database, with stdout and stderr kept apart. */
function stratus(args: string[], stdin = ''): Promise<CliResult> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: database.dataDir, LOG_LEVEL: 'silent' };
  delete env.DATABASE_URL;
  delete env.ADMIN_EMAIL;
  delete env.ADMIN_PASSWORD;
  if (database.databaseUrl) env.DATABASE_URL = database.databaseUrl;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', CLI, ...args], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

async function storedUser(email: string) {
  const conn = await database.connect();
  try {
    return await findUserByEmail(conn, email);
  } finally {
    await conn.close();
  }
}

describe('stratus users add', () => {
  test('creates the user, prints only its id, never the password', async () => {
    const result = await stratus([
      'users',
      'add',
      '--email',
      'Linus@Example.com',
      '--password',
      'kernel hacker 1991',
      '--nick',
      'linus',
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, new RegExp(`^${USER_ID.source.slice(1, -1)}\\n$`));
    assert.doesNotMatch(result.stdout + result.stderr, /kernel hacker/);
    const user = await storedUser('linus@example.com');
    assert.ok(user);
    assert.equal(user.id, result.stdout.trim());
    assert.equal(user.email, 'linus@example.com');
    assert.equal(user.nick, 'linus');
    assert.equal(await verify('kernel hacker 1991', user.passwordHash ?? ''), true);
  });

  test('a duplicate email exits 2 with a clear message and changes nothing', async () => {
    const result = await stratus(['users', 'add', '--email', 'LINUS@example.com', '--password', 'another password']);
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /already exists/);
    assert.doesNotMatch(result.stderr, /another password/);
    assert.equal(await verify('kernel hacker 1991', (await storedUser('linus@example.com'))?.passwordHash ?? ''), true);
  });

  test('--password - reads the password from stdin', async () => {
    const result = await stratus(
      ['users', 'add', '--email', 'stdin@example.com', '--password', '-'],
      'from standard input\n',
    );
    assert.equal(result.code, 0, result.stderr);
    assert.equal(
      await verify('from standard input', (await storedUser('stdin@example.com'))?.passwordHash ?? ''),
      true,
    );
  });

  test('bad usage and bad values exit 2 without creating anything', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['users'], /missing subcommand/],
      [['users', 'remove'], /unknown subcommand/],
      [['users', 'add', '--password', 'long enough'], /--email is required/],
      [['users', 'add', '--email', 'nopass@example.com'], /--password is required/],
      [
        ['users', 'add', '--email', 'short@example.com', '--password', 'tiny'],
        /--password must have 8–1024 characters/,
      ],
      [['users', 'add', '--email', 'not-an-email', '--password', 'long enough'], /--email must be an email address/],
      [['users', 'add', '--email', 'x@example.com', '--password', 'long enough', '--bogus', '1'], /bogus/],
    ];
    for (const [args, message] of cases) {
      const result = await stratus(args);
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message);
      assert.doesNotMatch(result.stderr, /tiny|long enough/);
    }
    assert.equal(await storedUser('short@example.com'), null);
    assert.equal(await storedUser('nopass@example.com'), null);
  });

  test('the usage text lists the command', async () => {
    const result = await stratus(['help']);
    assert.match(result.stdout, /users add --email EMAIL --password PASSWORD \[--nick NICK\]/);
  });
});
