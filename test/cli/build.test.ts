import { after, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'stratus-cli-build-'));
after(() => rmSync(work, { recursive: true, force: true }));

const tsc = (project: string, ...args: string[]) => {
  const result = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', project, ...args], {
    encoding: 'utf8',
  });
  assert.equal(result.status, 0, `tsc -p ${project}: ${result.stdout}${result.stderr}`);
};

// The published @stratus/cli is compiled ESM that imports @stratus/client by name. Laid out as an
// install would (the client under node_modules), the build runs on plain node: no tsx, no paths.
it('builds @stratus/cli to ESM that plain node runs against the built client', () => {
  const client = join(work, 'node_modules', '@stratus', 'client');
  mkdirSync(client, { recursive: true });
  cpSync(join(root, 'packages/client/package.json'), join(client, 'package.json'));
  tsc(join(root, 'packages/client/tsconfig.json'), '--outDir', join(client, 'dist'));

  const cli = join(work, 'cli');
  mkdirSync(cli, { recursive: true });
  cpSync(join(root, 'packages/cli/package.json'), join(cli, 'package.json'));
  writeFileSync(
    join(work, 'tsconfig.cli.json'),
    JSON.stringify({
      extends: join(root, 'packages/cli/tsconfig.json'),
      compilerOptions: {
        rootDir: join(root, 'packages/cli/src'),
        outDir: join(cli, 'dist'),
        // The types of the client just built, not whatever the checkout's node_modules link holds.
        paths: { '@stratus/client': [join(client, 'dist', 'index.d.ts')] },
        typeRoots: [join(root, 'node_modules/@types')],
      },
      include: [join(root, 'packages/cli/src')],
    }),
  );
  tsc(join(work, 'tsconfig.cli.json'));

  const run = (...args: string[]) =>
    spawnSync(process.execPath, [join(cli, 'dist', 'bin.js'), ...args], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH, STRATUS_CONFIG_DIR: join(work, 'config') },
    });
  const signedOut = run('whoami');
  assert.equal(signedOut.status, 1, signedOut.stderr);
  assert.match(signedOut.stderr, /not signed in: run stratus login first/);
  const unknown = run('frobnicate');
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /login \[--url URL\]/);
  // The client is really loaded: a platform that is not there is a network error, exit 1.
  const login = run('login', '--url', 'http://127.0.0.1:1', '--email', 'a@example.com', '--password', 'x', '--json');
  assert.equal(login.status, 1, login.stderr);
  assert.equal((JSON.parse(login.stderr) as { error: { code: string } }).error.code, 'network_error');
});
