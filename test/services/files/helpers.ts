import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createFilesService, type FilesServiceOptions } from '../../../src/services/files/index.ts';
import { asUser, call, jsonOf, startTestService, type TestService } from '../../helpers/service.ts';

export { call, jsonOf } from '../../helpers/service.ts';
export { assertError, UUID_V4 } from '../../helpers/envelope.ts';
export const as = asUser;

export function startFiles(options: FilesServiceOptions = {}): Promise<TestService> {
  return startTestService(createFilesService(options));
}

export interface BucketBody {
  id: string;
  project_id: string;
  created_timestamp: number;
  owners: string[];
  name: string;
  description: string;
}

export interface FileBody {
  id: string;
  uuid?: string;
  created_timestamp: number;
  updated_timestamp: number;
  owners: string[];
  status: string;
  size: number;
  name: string;
  bucket: string;
  hash_md5: string;
  hash_sha256: string;
  mime_type: string;
}

export async function createBucket(service: TestService, owner: string, body: object = {}): Promise<BucketBody> {
  return jsonOf<BucketBody>(await call(service, 'POST', '/v1/buckets', as(owner), body), 201);
}

export async function upload(
  service: TestService,
  owner: string,
  bucket: string,
  path: string,
  content: string | Buffer,
  headers: Record<string, string> = {},
  status = 201,
): Promise<FileBody> {
  return jsonOf<FileBody>(
    await call(service, 'PUT', `/v1/buckets/${bucket}/files/${path}`, { ...as(owner), ...headers }, content),
    status,
  );
}

export const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
export const md5 = (data: string | Buffer) => createHash('md5').update(data).digest('hex');

/**
 * The blob directory of a SQLite-mode service, which must exist (the small-blob store keeps
 * blobs/inline.db in it from the start): a check of what is or is not in it must not pass because
 * the blobs went somewhere else.
 */
async function blobDirectory(service: TestService): Promise<string> {
  const { stat } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const root = join(service.database.dataDir, 'blobs');
  const info = await stat(root).catch(() => null);
  assert.ok(
    info?.isDirectory(),
    `the blob directory ${root} is missing: has the blob store's layout changed? (see src/store/index.ts)`,
  );
  return root;
}

/** Every blob file under a directory blob store (SQLite mode), or every blob row (PostgreSQL). */
export async function storedBlobs(service: TestService): Promise<string[]> {
  const { sql } = service.store;
  const { readdir } = await import('node:fs/promises');
  const { join } = await import('node:path');
  if (sql.dialect === 'postgres') {
    const result = await sql.pool!.query<{ sha256: string }>('select sha256 from stratus_blobs order by sha256');
    return result.rows.map((row) => row.sha256);
  }
  const root = await blobDirectory(service);
  const found: string[] = [];
  // Blobs are at <aa>/<bb>/<sha256> (src/store/blob/directory.ts); anything else in the way fails.
  const walk = async (dir: string, depth: number): Promise<void> => {
    for (const name of await readdir(dir)) {
      if (depth === 0 && (name === '.tmp' || name.startsWith('inline.db'))) continue;
      if (depth === 2) found.push(name);
      else await walk(join(dir, name), depth + 1);
    }
  };
  await walk(root, 0);
  // Small blobs live in blobs/inline.db (src/store/blob/inline.ts), read here through a second connection.
  const { default: Database } = await import('better-sqlite3');
  const inline = new Database(join(root, 'inline.db'), { readonly: true, fileMustExist: true });
  try {
    for (const row of inline.prepare('select sha256 from inline_blobs').all() as { sha256: string }[])
      found.push(row.sha256);
  } finally {
    inline.close();
  }
  return found.sort();
}

/** Temp files of uploads in progress (SQLite: blobs/.tmp; PostgreSQL: stratus_blob_uploads rows). */
export async function pendingUploads(service: TestService): Promise<number> {
  const { sql } = service.store;
  if (sql.dialect === 'postgres') {
    const result = await sql.pool!.query<{ n: string }>('select count(*)::text as n from stratus_blob_uploads');
    return Number(result.rows[0]!.n);
  }
  const { readdir } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const root = await blobDirectory(service);
  try {
    return (await readdir(join(root, '.tmp'))).length;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  // The directory store makes .tmp before it writes anything, and the small-blob store writes only
  // inline.db; so no .tmp is right only while nothing but inline.db is in the blob directory (an
  // upload refused within the inline limit never reaches the directory store).
  const others = (await readdir(root)).filter((name) => !name.startsWith('inline.db'));
  assert.deepEqual(
    others,
    [],
    `${join(root, '.tmp')} is missing though the blob directory holds ${others.join(', ')}: where do temp files go now?`,
  );
  return 0;
}

export async function waitUntil(
  predicate: () => Promise<boolean>,
  timeoutMs = 5_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The files service in a child process (fixtures/server.ts) on `settings`; resolves once it listens. */
export async function spawnFilesServer(
  settings: object,
): Promise<{ port: number; pid: number; kill(signal?: NodeJS.Signals): Promise<void> }> {
  const { spawn } = await import('node:child_process');
  const { fileURLToPath } = await import('node:url');
  const script = fileURLToPath(new URL('./fixtures/server.ts', import.meta.url));
  const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', script], {
    env: { ...process.env, FILES_TEST_SETTINGS: JSON.stringify(settings) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const cleanup = () => child.kill('SIGKILL');
  process.once('exit', cleanup);
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`files server not ready:\n${output}`)), 30_000);
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /port (\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    void exited.then(() => reject(new Error(`files server exited:\n${output}`)));
  });
  return {
    port,
    pid: child.pid!,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      child.kill(signal);
      await exited;
      process.off('exit', cleanup);
    },
  };
}

/** Resident memory of a process in bytes (Linux /proc). */
export async function rssOf(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  return kb ? Number(kb[1]) * 1024 : 0;
}
