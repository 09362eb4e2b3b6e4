/** Where a command reads and writes: the process's streams, or a test's. */
export interface CommandIo {
  stdout: { write(text: string | Uint8Array): unknown };
  stderr: { write(text: string): unknown; isTTY?: boolean; columns?: number };
  stdin: AsyncIterable<Uint8Array | string> & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
}

export function processIo(): CommandIo {
  return { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env };
}

/** A usage mistake: the message and the usage are printed, and the exit code is 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A command that cannot go on (not signed in, no such database): the message is printed, exit code 1. */
export class CommandError extends Error {
  override readonly name = 'CommandError';
}

/** Writes `value` for scripts (`--json`: one JSON document) or people (`text`). */
export function print(io: CommandIo, json: boolean, value: unknown, text: () => string): void {
  io.stdout.write(json ? `${JSON.stringify(value)}\n` : `${text()}\n`);
}

/** Rows as aligned columns under a header, for people. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** All of stdin as text (`--password -`, `kv set … -`). */
export async function readAll(stdin: CommandIo['stdin']): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}
