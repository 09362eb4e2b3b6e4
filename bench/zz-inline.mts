import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDirectoryBlobStore } from '../src/store/blob/directory.ts';
import { withInlineSmallBlobs } from '../src/store/blob/inline.ts';
import type { BlobStore } from '../src/store/blob/types.ts';
const data = randomBytes(5 * 1024 * 1024);
async function* chunks(buf: Buffer) { for (let i = 0; i < buf.length; i += 65536) yield buf.subarray(i, i + 65536); }
async function time(name: string, store: BlobStore) {
  const started = performance.now();
  for (let i = 0; i < 40; i++) { data[0] = i; data[1] = Math.random() * 255; await store.put(chunks(data)); }
  const s = (performance.now() - started) / 1000;
  console.log(name, (40 * 5 / s).toFixed(0), 'MB/s');
}
for (let round = 0; round < 2; round++) {
  const dir = mkdtempSync(join(tmpdir(), 'zz-'));
  await time('plain ', createDirectoryBlobStore(join(dir, 'a')));
  const w = withInlineSmallBlobs(createDirectoryBlobStore(join(dir, 'b')), join(dir, 'b.db'));
  await time('inline', w);
  await w.close();
  rmSync(dir, { recursive: true, force: true });
}
