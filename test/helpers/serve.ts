import { spawn, type ChildProcess } from 'node:child_process';
import { after, before } from 'node:test';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

export interface ServedProcess {
  readonly child: ChildProcess;
  readonly publicPort: number;
  readonly internalPort: number;
  /** Everything the process printed so far. */
  output(): string;
  /** SIGTERM, and SIGKILL if it has not exited within 5 s. Resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL at once, like a crash or power cut of the process. */
  kill(): Promise<void>;
}

/**
 * Runs `stratus serve` as a child process on free loopback ports and waits for its ready line.
 * The child is stopped by process id; a test that forgets still has it killed when the runner exits.
 * `entry` replaces src/cli.ts with a script that wraps it (test/cluster/newer-schema.ts).
 */
export async function serve(
  args: string[],
  env: Record<string, string | undefined>,
  entry = CLI,
): Promise<ServedProcess> {
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      '--import',
      'tsx',
      entry,
      'serve',
      '--port',
      '0',
      '--internal-port',
      '0',
      '--host',
      '127.0.0.1',
      ...args,
    ],
    {
      env: { ...process.env, LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const cleanup = () => child.kill('SIGKILL');
  process.once('exit', cleanup);

  const name = entry === CLI ? 'stratus serve' : entry;
  const ready = new Promise<[number, number]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not get ready in 60 s:\n${output}`)), 60_000);
    const check = () => {
      const match = /public port (\d+) .*internal port (\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve([Number(match[1]), Number(match[2])]);
      }
    };
    child.stdout?.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code}:\n${output}`));
    });
  });
  const ports = await ready.catch(async (error: unknown) => {
    // Not ready in time: stop it now rather than when the runner exits.
    child.kill('SIGKILL');
    await exited;
    process.off('exit', cleanup);
    throw error;
  });

  return {
    child,
    publicPort: ports[0],
    internalPort: ports[1],
    output: () => output,
    async stop() {
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
      const code = await exited;
      clearTimeout(force);
      process.off('exit', cleanup);
      return code;
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
      process.off('exit', cleanup);
    },
  };
}

/** Runs `stratus <args>` to completion and returns its exit code and output. */
export function runCli(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', CLI, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/**
 * For a `describe` block: the whole platform (`stratus serve`) on a test database of its own,
 * started before its tests and stopped, database removed, after them. Read `.server` in tests.
 */
export function usePlatform(
  args: string[] = [],
  env: Record<string, string | undefined> = {},
): { readonly server: ServedProcess } {
  let database: TestDatabase | undefined;
  let server: ServedProcess | undefined;
  before(async () => {
    database = await createTestDatabase();
    server = await serve(args, { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl, ...env });
  });
  after(async () => {
    await server?.stop();
    await database?.cleanup();
  });
  return {
    get server(): ServedProcess {
      if (!server) throw new Error('the platform is not started yet (read .server inside a test)');
      return server;
    },
  };
}
