// The Node.js lines Stratus supports, read from package.json `engines.node` so that field stays the
// one place they are written. Shared by the install check, the test runner and bin/stratus.js.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PACKAGE_ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8'));

/** `engines.node` as written, for messages. */
export const ENGINES = manifest.engines.node;

/** The majors `engines.node` names; it is written as `^24.0.0 || ^26.0.0`, one caret range per line. */
export const SUPPORTED_MAJORS = ENGINES.split('||').map((range) => {
  const match = /^\s*\^(\d+)\.0\.0\s*$/.exec(range);
  if (!match) throw new Error(`engines.node must list caret ranges of whole lines, found "${range}"`);
  return Number(match[1]);
});

/** Whether a version string such as `v24.21.0` is on a supported line. */
export function isSupported(version) {
  return SUPPORTED_MAJORS.includes(Number(/^v?(\d+)\./.exec(version)?.[1]));
}

/**
 * The Node binary the project installed for itself (the `node-linux-<arch>` optional dependency,
 * which npm installs only on the matching platform), or undefined where there is none.
 */
export function projectNode() {
  const require = createRequire(join(PACKAGE_ROOT, 'package.json'));
  try {
    return join(dirname(require.resolve(`node-${process.platform}-${process.arch}/package.json`)), 'bin', 'node');
  } catch {
    return undefined;
  }
}
