#!/usr/bin/env node
// Runs every test file under test/ with node:test through tsx, on the Node that runs this script
// (npm test: the project's own; CI also runs it with each other supported line). The files are
// listed here rather than globbed so the order and the ALONE list below are ours.
// `--pg` runs the same suite on PostgreSQL and fails without DATABASE_URL.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { ENGINES, isSupported } from './node-lines.mjs';

const args = process.argv.slice(2);
const pg = args.includes('--pg');
const only = args.filter((a) => !a.startsWith('--'));

if (pg && !process.env.DATABASE_URL) {
  console.error('test:pg needs DATABASE_URL pointing at a PostgreSQL database (see README).');
  process.exit(1);
}

if (!isSupported(process.version)) {
  console.error(
    `The tests run on Node ${ENGINES}; this is ${process.version} (${process.execPath}). Run them with npm test, which uses the Node npm install put in node_modules.`,
  );
  process.exit(1);
}
console.log(`Node ${process.version} (${process.execPath}), ${pg ? 'PostgreSQL' : 'SQLite'}`);

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...collect(path));
    else if (name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

// Files that measure the event loop's latency run alone after the rest, so another test file's
// load on this 2-core machine does not count against the code they measure.
const ALONE = ['test/e2e/event-loop.test.ts'];

const files = only.length > 0 ? only : collect('test');
const env = {
  ...process.env,
  STRATUS_TEST_DB: pg ? 'postgres' : 'sqlite',
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
};
if (!pg) delete env.DATABASE_URL;

// Per test and per hook, not per file or describe block: 5 min, 1.6x the slowest test seen (1 GiB files, 186 s on PostgreSQL, loaded machine).
const TEST_TIMEOUT_MS = 300_000;
// A whole run that outlives this (a test file whose leaked timers or sockets keep its process alive
// after a timeout) is stopped and fails, so CI never waits on it. `--test-force-exit` would do this
// per file, but it cut files' reports short on a loaded machine (tests went missing from the count).
const RUN_DEADLINE_MS = 45 * 60_000;

function run(list, concurrency) {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        '--no-node-snapshot',
        '--import',
        'tsx',
        '--test',
        `--test-concurrency=${concurrency}`,
        `--test-timeout=${TEST_TIMEOUT_MS}`,
        '--test-reporter=spec',
        ...list,
      ],
      { stdio: 'inherit', env, detached: true },
    );
    const deadline = setTimeout(() => {
      console.error(
        `\nThe test run took longer than ${RUN_DEADLINE_MS / 60_000} minutes; stopping it (a test file that does not exit).`,
      );
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }, RUN_DEADLINE_MS);
    // The child leads its own process group (so the deadline can stop every process it started);
    // an interrupt of this runner is passed on to that group.
    const forward = (signal) => {
      try {
        process.kill(-child.pid, signal);
      } catch {
        child.kill(signal);
      }
    };
    for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, forward);
    child.on('exit', () => {
      clearTimeout(deadline);
      for (const signal of ['SIGINT', 'SIGTERM']) process.off(signal, forward);
    });
    child.on('exit', (code, signal) => resolve(signal ? 1 : (code ?? 1)));
  });
}

const together = files.filter((file) => !ALONE.includes(file.replaceAll('\\', '/')));
const alone = files.filter((file) => ALONE.includes(file.replaceAll('\\', '/')));
let status = together.length > 0 ? await run(together, 2) : 0;
if (alone.length > 0) status = (await run(alone, 1)) || status;
process.exit(status);
