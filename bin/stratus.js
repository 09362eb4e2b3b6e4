#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, on a supported Node line: when the `node` on PATH is an
// older one (this machine kind ships Node 20), on the Node the project installed for itself.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ENGINES, isSupported, projectNode } from '../scripts/node-lines.mjs';

const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
// Resolved from this file, so the command works from any working directory.
const tsx = import.meta.resolve('tsx');
const node = isSupported(process.version) ? process.execPath : projectNode();
if (!node) {
  console.error(
    `stratus needs Node ${ENGINES}; this is ${process.version} and npm installed no Node for ${process.platform}-${process.arch}.`,
  );
  process.exit(1);
}
// --no-node-snapshot: isolated-vm's README requires it on Node 20 and later (see DESIGN.md §5).
// The project's tsconfig maps the workspace packages (@stratus/client, @stratus/cli) to their
// sources; tsx reads it from the working directory unless told where it is.
const tsconfig = fileURLToPath(new URL('../tsconfig.json', import.meta.url));
const child = spawn(node, ['--no-node-snapshot', '--import', tsx, cli, ...process.argv.slice(2)], {
  stdio: 'inherit',
  env: { ...process.env, TSX_TSCONFIG_PATH: process.env.TSX_TSCONFIG_PATH ?? tsconfig },
});
// The child drains on the first SIGINT/SIGTERM and ignores later ones (a terminal's Ctrl-C reaches
// both processes), then exits 0 (README.md: Rolling restarts); its exit code is ours.
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
