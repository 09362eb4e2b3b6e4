import { spawn } from 'node:child_process';
import type { ServedProcess } from '../helpers/serve.ts';

/**
 * Runs `<entry> serve --port 0 --internal-port 0 --host 127.0.0.1 <args>` under tsx, as
 * test/helpers/serve.ts runs src/cli.ts, for an entry script that wraps the CLI (the newer-schema
 * launcher, test/cluster/newer-schema.ts). Resolves once the ready line names both ports; the child
 * is stopped by its process id, and killed if the test process exits first.
 */
export async function launch(
  entry: string,
  args: string[],
  env: Record<string, string | undefined>,
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
    { env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const collect = (chunk: Buffer) => (output += chunk.toString());
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const cleanup = () => child.kill('SIGKILL');
  process.once('exit', cleanup);
  try {
    const ports = await new Promise<[number, number]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${entry} did not get ready in 60 s:\n${output}`)), 60_000);
      child.stdout.on('data', () => {
        const match = /public port (\d+) .*internal port (\d+)/.exec(output);
        if (!match) return;
        clearTimeout(timer);
        resolve([Number(match[1]), Number(match[2])]);
      });
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${entry} exited with ${code}:\n${output}`));
      });
    });
    const stop = async (signal: NodeJS.Signals) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
      const code = await exited;
      clearTimeout(force);
      process.off('exit', cleanup);
      return code;
    };
    return {
      child,
      publicPort: ports[0],
      internalPort: ports[1],
      output: () => output,
      stop: () => stop('SIGTERM'),
      kill: async () => void (await stop('SIGKILL')),
    };
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    process.off('exit', cleanup);
    throw error;
  }
}
