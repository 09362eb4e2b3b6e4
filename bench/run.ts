// `npm run bench -- <name>`: runs bench/<name>.ts, which prints its figures beside a baseline or
// peer measured in the same run. `npm run bench -- all` runs the benches of bench/README.md one
// after another, each in a process of its own, and writes bench/RESULTS.md from their rows.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { commitLine, machineLine, resultsMarkdown } from './results-file.ts';
import type { ResultRow } from './results.ts';

const BENCHMARKS: Record<string, () => Promise<{ run(): Promise<void> }>> = {
  config: () => import('./config.ts'),
  docdb: () => import('./docdb.ts'),
  files: () => import('./files.ts'),
  lambda: () => import('./lambda.ts'),
  logs: () => import('./logs.ts'),
  gateway: () => import('./gateway.ts'),
  kv: () => import('./kv.ts'),
  scheduler: () => import('./scheduler.ts'),
  triggers: () => import('./triggers.ts'),
  run: () => import('./run-service.ts'),
  cluster: () => import('./cluster.ts'),
  memory: () => import('./memory.ts'),
  registry: () => import('./registry.ts'),
};

/**
 * What `all` runs, in order. The scheduler's peers (pg-boss, graphile-worker) are PostgreSQL
 * queues, so that bench alone gets DATABASE_URL; the others run on the embedded store, as
 * `npm start` does. `memory` is last: it measures one server's RSS after a mixed workload.
 */
const ALL = ['gateway', 'config', 'kv', 'docdb', 'files', 'logs', 'lambda', 'registry', 'scheduler', 'memory'];
const ON_POSTGRES = new Set(['scheduler']);

/** Runs one bench in a child process, its output passed through; resolves its exit code and output. */
function runChild(name: string, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--no-node-snapshot', '--import', 'tsx', fileURLToPath(import.meta.url), name],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      process.stdout.write(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      process.stderr.write(chunk);
    });
    child.on('exit', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
  });
}

async function runAll(): Promise<void> {
  const started = Date.now();
  const date = new Date().toISOString();
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-all-'));
  const rowsFile = join(dir, 'rows.jsonl');
  const failures: string[] = [];
  const skipped: string[] = [];
  try {
    for (const name of ALL) {
      console.log(`\n=== bench ${name} ===`);
      const env: NodeJS.ProcessEnv = { ...process.env, BENCH_RESULTS_FILE: rowsFile };
      if (!ON_POSTGRES.has(name)) delete env.DATABASE_URL;
      else if (!env.DATABASE_URL)
        skipped.push(`${name}: no DATABASE_URL, so it ran on SQLite without its PostgreSQL peers`);
      const { code, output } = await runChild(name, env);
      for (const line of output.split('\n'))
        if (/^peer .* skipped:/.test(line)) skipped.push(`${name}: ${line.slice(5)}`);
      if (code !== 0)
        failures.push(`${name} exited with ${code} (see its output; a BENCH INVALID line says which scenario)`);
    }
    const rows = existsSync(rowsFile)
      ? readFileSync(rowsFile, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as ResultRow)
      : [];
    const file = fileURLToPath(new URL('./RESULTS.md', import.meta.url));
    writeFileSync(
      file,
      resultsMarkdown(rows, {
        date,
        commit: commitLine(),
        machine: machineLine(),
        durationS: (Date.now() - started) / 1000,
        failures,
        skipped,
      }),
    );
    console.log(`\n${rows.length} rows written to ${file}`);
    if (failures.length) process.exitCode = 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const name = process.argv[2];
if (name === 'all') {
  await runAll();
} else {
  const loadBenchmark = name ? BENCHMARKS[name] : undefined;
  if (!loadBenchmark) {
    console.error(`usage: npm run bench -- <all|${Object.keys(BENCHMARKS).join('|')}>`);
    process.exit(2);
  }
  const benchmark = await loadBenchmark();
  await benchmark.run();
  if (process.exitCode === 1)
    console.error(
      `\nbench ${name} FAILED: some scenarios had errors or non-2xx answers (BENCH INVALID lines above); their rates are not throughput`,
    );
}
