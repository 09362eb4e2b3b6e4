// The Node lines Stratus runs on (issue 18): package.json `engines` names them, the suite itself runs
// on one of them, and bin/stratus.js moves a start on an older Node onto the project's own.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { ENGINES, SUPPORTED_MAJORS, isSupported, projectNode } from '../scripts/node-lines.mjs';

const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as {
  engines: { node: string };
  optionalDependencies: Record<string, string>;
};

/** An unsupported Node on PATH outside node_modules (this machine kind ships Node 20), if any. */
function olderNode(): string | undefined {
  const path = (process.env.PATH ?? '').split(':').filter((dir) => !dir.includes('node_modules'));
  for (const dir of path) {
    const candidate = `${dir}/node`;
    if (!existsSync(candidate)) continue;
    const version = spawnSync(candidate, ['--version'], { encoding: 'utf8' }).stdout.trim();
    if (version && !isSupported(version)) return candidate;
  }
  return undefined;
}

describe('Node lines', () => {
  it('reads the supported majors from engines and judges versions by them', () => {
    assert.equal(ENGINES, manifest.engines.node);
    assert.deepEqual(SUPPORTED_MAJORS, [24, 26]);
    for (const version of ['v24.0.0', 'v24.21.0', '26.10.0']) assert.equal(isSupported(version), true, version);
    for (const version of ['v20.20.2', 'v22.23.3', 'v25.1.0', 'v27.0.0', 'v2.24.0', 'nonsense'])
      assert.equal(isSupported(version), false, version);
  });

  it('runs this suite on a supported line', () => {
    assert.ok(isSupported(process.version), process.version);
  });

  it(
    'installs its own Node from the npm registry on Linux, pinned to a supported line',
    { skip: process.platform !== 'linux' && 'npm installs a Node package only on Linux' },
    () => {
      const node = projectNode();
      assert.ok(node && existsSync(node), 'node-linux-<arch> is installed');
      const pinned = manifest.optionalDependencies[`node-linux-${process.arch}`];
      assert.ok(pinned && isSupported(pinned), `node-linux-${process.arch}@${pinned}`);
      assert.equal(execFileSync(node, ['--version'], { encoding: 'utf8' }).trim(), `v${pinned}`);
    },
  );

  it(
    'bin/stratus.js started by an older Node runs the CLI on the project Node',
    { skip: !olderNode() && 'no unsupported Node on PATH' },
    () => {
      const older = olderNode()!;
      const out = execFileSync(older, ['bin/stratus.js', 'version'], { encoding: 'utf8' });
      const reported = /\(Node (v[\d.]+)\)/.exec(out)?.[1];
      assert.ok(reported, out);
      assert.equal(isSupported(reported), true, out);
      assert.equal(reported, execFileSync(projectNode()!, ['--version'], { encoding: 'utf8' }).trim());
    },
  );
});
