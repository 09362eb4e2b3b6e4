#!/usr/bin/env node
// Runs the TypeScript CLI through tsx with the flag isolated-vm needs on Node 20.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
// Resolved from this file, so the command works from any working directory.
const tsx = import.meta.resolve('tsx');
const child = spawn(process.execPath, ['--no-node-snapshot', '--import', tsx, cli, ...process.argv.slice(2)], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
