import { after, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const outDir = mkdtempSync(join(tmpdir(), 'stratus-client-build-'));
after(() => rmSync(outDir, { recursive: true, force: true }));

/** The Nodes to load the build with: this one, and an older line on PATH (this machine kind ships Node 20). */
function nodes(): string[] {
  const found = [process.execPath];
  for (const dir of (process.env.PATH ?? '').split(':').filter((d) => d && !d.includes('node_modules'))) {
    const candidate = `${dir}/node`;
    if (!existsSync(candidate)) continue;
    const major = Number(/^v(\d+)/.exec(spawnSync(candidate, ['--version'], { encoding: 'utf8' }).stdout)?.[1]);
    if (major >= 20 && major < 24) {
      found.push(candidate);
      break;
    }
  }
  return found;
}

// The package ships compiled ESM and declarations; this proves they load in plain Node (no tsx, no
// TypeScript loader) and that the source imports nothing Node-only, so browsers get the same files.
it('builds @stratus/client to ESM with types that plain node imports, on this line and an older one on PATH', () => {
  execFileSync(
    process.execPath,
    [
      join(root, 'node_modules/typescript/bin/tsc'),
      '-p',
      join(root, 'packages/client/tsconfig.json'),
      '--outDir',
      outDir,
    ],
    { stdio: 'pipe' },
  );
  const files = readdirSync(outDir);
  assert.ok(files.includes('index.js') && files.includes('index.d.ts'), files.join(', '));
  for (const file of files.filter((name) => name.endsWith('.js'))) {
    const text = readFileSync(join(outDir, file), 'utf8');
    assert.doesNotMatch(text, /from ['"]node:|require\(/, `${file} imports nothing Node-only`);
    assert.doesNotMatch(text, /from ['"]\.[^'"]*\.ts['"]/, `${file} imports .js, not .ts`);
  }
  // A package.json beside the output makes the .js files ES modules, as the published package does.
  writeFileSync(join(outDir, 'package.json'), '{"type":"module"}');
  const script = `
    const sdk = await import(${JSON.stringify(join(outDir, 'index.js'))});
    const client = sdk.createClient({ url: 'http://127.0.0.1:1/', token: 't', retry: { attempts: 1 } });
    const error = await client.kv.listCollections().catch((e) => e);
    console.log(JSON.stringify({
      exports: Object.keys(sdk).sort(),
      url: client.transport.url('docdb', '/v1/databases', { a: 'b c' }),
      error: [error instanceof sdk.StratusError, error.status, error.code],
    }));`;
  for (const node of nodes()) {
    const output = execFileSync(node, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const result = JSON.parse(output) as { exports: string[]; url: string; error: unknown[] };
    assert.ok(result.exports.includes('createClient') && result.exports.includes('StratusError'), node);
    assert.equal(result.url, 'http://127.0.0.1:1/services/docdb/v1/databases?a=b+c');
    assert.deepEqual(result.error, [true, 0, 'network_error'], node);
  }
});
