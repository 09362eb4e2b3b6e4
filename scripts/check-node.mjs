// postinstall: npm runs this with the project's own Node first on PATH (node_modules/.bin/node from
// the node-linux-<arch> optional dependency), the same Node `npm start` and `npm test` run on. It
// fails the install, with the reason, when that Node is not a supported line or the native modules
// (better-sqlite3, isolated-vm; both ship prebuilt binaries) do not load and work on it.
import { spawnSync } from 'node:child_process';
import { ENGINES, PACKAGE_ROOT, isSupported } from './node-lines.mjs';

if (!isSupported(process.version)) {
  console.error(
    `Stratus runs on Node ${ENGINES}; npm scripts here run on ${process.version}.\n` +
      `npm installs Node 24 into node_modules on Linux x64 and arm64 (the node-linux-* packages); ` +
      `on other platforms install Node 24 or 26 yourself and run npm install again.`,
  );
  process.exit(1);
}

// A child process, because isolated-vm needs --no-node-snapshot on the command line (README of
// isolated-vm: "If you are using a version of nodejs 20.x or later, you must pass --no-node-snapshot").
const probe = `
const Database = require('better-sqlite3');
const db = new Database(':memory:');
if (db.prepare('select 40 + 2 as n').get().n !== 42) throw new Error('better-sqlite3 answered wrongly');
db.close();
const ivm = require('isolated-vm');
const isolate = new ivm.Isolate({ memoryLimit: 16 });
if (isolate.createContextSync().evalSync('40 + 2') !== 42) throw new Error('isolated-vm answered wrongly');
isolate.dispose();
`;
const result = spawnSync(process.execPath, ['--no-node-snapshot', '-e', probe], {
  cwd: PACKAGE_ROOT,
  encoding: 'utf8',
});
if (result.status !== 0) {
  console.error(
    `The native modules do not load on Node ${process.version} (${process.platform}-${process.arch}):\n${result.stderr}`,
  );
  process.exit(1);
}
console.log(`Stratus: Node ${process.version} (${process.execPath}); better-sqlite3 and isolated-vm load.`);
