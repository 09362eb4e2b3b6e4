#!/usr/bin/env node
// Runs every test file under test/ with node:test through tsx. Node 20 does not expand globs, so
// the files are listed here. `--pg` runs the same suite on PostgreSQL and fails without DATABASE_URL.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';

const args = process.argv.slice(2);
const pg = args.includes('--pg');
const only = args.filter((a) => !a.startsWith('--'));

if (pg && !process.env.DATABASE_URL) {
  console.error('test:pg needs DATABASE_URL pointing at a PostgreSQL database (see README).');
  process.exit(1);
}

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...collect(path));
    else if (name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

const files = only.length > 0 ? only : collect('test');
const env = { ...process.env, STRATUS_TEST_DB: pg ? 'postgres' : 'sqlite', LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' };
if (!pg) delete env.DATABASE_URL;

const child = spawn(
  process.execPath,
  ['--no-node-snapshot', '--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=spec', ...files],
  { stdio: 'inherit', env },
);
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
