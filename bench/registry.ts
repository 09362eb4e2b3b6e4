// Registry benchmark: the same image (one ~200 MB layer and a small config, in an OCI layout made
// once per run) pushed by skopeo to Stratus's registry (`stratus serve`, public port, an API key as
// Basic credentials) and to the CNCF distribution registry (Debian's `docker-registry`, filesystem
// storage, no auth), in alternating rounds. The figure is the layer's bytes over the wall time of
// one `skopeo copy`; after each push the manifest must answer 200 under its tag.
//
// Every round pushes to a repository name of its own, and the distribution registry is a fresh
// instance (empty storage, new port) each round: skopeo's blob-info cache remembers where a blob
// was pushed and would otherwise mount it from an earlier repository instead of uploading it.
// Stratus ignores mount requests (a normal upload starts), so one instance serves every round,
// after one untimed push.
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { benchDatabaseUrl, cpuSeconds, startStratus, stopper, type Child } from './lib.ts';
import { freePort } from './nginx.ts';
import { debianPeer, versionOf } from './peers.ts';
import { recordResult } from './results.ts';

const execFileAsync = promisify(execFile);
const LAYER_MB = Number(process.env.BENCH_LAYER_MB ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const IDENTITY = JSON.stringify({ user: { id: 'user-bench' } });

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/**
 * An OCI layout with one image: a gzip layer of random bytes (stored, level 0: skopeo sees a
 * compressed layer and sends it as is, instead of compressing it on the client while it is timed)
 * and a config. Returns the layer's size in bytes.
 */
export function writeImage(dir: string): number {
  const blobs = join(dir, 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const put = (data: Buffer | string) => {
    const hex = sha256(data);
    writeFileSync(join(blobs, hex), data);
    return { digest: `sha256:${hex}`, size: Buffer.byteLength(data) };
  };
  // One file in a ustar archive, so the layer is a real (if dull) filesystem layer.
  const content = randomBytes(LAYER_MB * 1024 * 1024);
  const header = Buffer.alloc(512);
  header.write('random.bin', 0, 100, 'ascii');
  header.write('0000644\0', 100, 8, 'ascii');
  header.write('0000000\0', 108, 8, 'ascii');
  header.write('0000000\0', 116, 8, 'ascii');
  header.write(`${content.length.toString(8).padStart(11, '0')}\0`, 124, 12, 'ascii');
  header.write(`${(1_700_000_000).toString(8).padStart(11, '0')}\0`, 136, 12, 'ascii');
  header.write('        ', 148, 8, 'ascii');
  header.write('0', 156, 1, 'ascii');
  header.write('ustar\0', 257, 6, 'ascii');
  header.write('00', 263, 2, 'ascii');
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  const layerTar = Buffer.concat([
    header,
    content,
    Buffer.alloc((512 - (content.length % 512)) % 512),
    Buffer.alloc(1024),
  ]);
  const layer = put(gzipSync(layerTar, { level: 0 }));
  const config = put(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config: {},
      rootfs: { type: 'layers', diff_ids: [`sha256:${sha256(layerTar)}`] },
    }),
  );
  const manifest = put(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', ...layer }],
    }),
  );
  writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(dir, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          ...manifest,
          annotations: { 'org.opencontainers.image.ref.name': 'v1' },
        },
      ],
    }),
  );
  return layer.size;
}

function request(
  port: number,
  options: { method?: string; path: string; host?: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { host: options.host ?? `127.0.0.1:${port}`, ...options.headers };
    if (options.body !== undefined)
      Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(options.body) });
    const req = http.request(
      { host: '127.0.0.1', port, path: options.path, method: options.method ?? 'GET', headers, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The distribution registry, with a generated config: filesystem storage in `dir`, no auth. */
async function startDistribution(binary: string, dir: string): Promise<Child> {
  const port = await freePort();
  const config = join(dir, 'config.yml');
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(dir, 'storage')}`,
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '',
    ].join('\n'),
  );
  const child = spawn(binary, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  const stop = stopper(child);
  const until = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited with ${child.exitCode}:\n${output}`);
    const ok = await request(port, { path: '/v2/' }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (Date.now() > until) {
      await stop();
      throw new Error(`docker-registry did not answer in 30 s:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { port, internalPort: 0, pid: child.pid!, stop };
}

/** One timed `skopeo copy` of the layout to `docker://127.0.0.1:<port>/<repository>:v1`; seconds. */
async function push(skopeo: string, layout: string, port: number, repository: string, creds?: string): Promise<number> {
  const started = performance.now();
  await execFileAsync(
    skopeo,
    [
      '--insecure-policy',
      'copy',
      '--quiet',
      '--dest-tls-verify=false',
      ...(creds ? ['--dest-creds', creds] : []),
      `oci:${layout}:v1`,
      `docker://127.0.0.1:${port}/${repository}:v1`,
    ],
    { timeout: 10 * 60_000, maxBuffer: 16 * 1024 * 1024 },
  );
  return (performance.now() - started) / 1000;
}

/** The pushed manifest must be there under its tag (Stratus's registry is push-only: HEAD, not GET). */
async function checkManifest(port: number, repository: string, headers: Record<string, string> = {}): Promise<void> {
  const res = await request(port, {
    method: 'HEAD',
    path: `/v2/${repository}/manifests/v1`,
    headers: { accept: 'application/vnd.oci.image.manifest.v1+json', ...headers },
  });
  if (res.status !== 200) throw new Error(`HEAD /v2/${repository}/manifests/v1 answered ${res.status} after the push`);
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

export async function run(): Promise<void> {
  const skopeo = await debianPeer('skopeo', 'skopeo');
  if (!skopeo) {
    console.log('registry benchmark skipped: skopeo is needed to push');
    return;
  }
  const distribution = await debianPeer('docker-registry', 'docker-registry');
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-registry-'));
  const layout = join(dir, 'image');
  const database = await benchDatabaseUrl();
  let stratus: Child | undefined;
  try {
    const layerBytes = writeImage(layout);
    const megabytes = layerBytes / 1e6;
    stratus = await startStratus([], { DATA_DIR: join(dir, 'stratus'), DATABASE_URL: database.url });
    const created = await request(stratus.internalPort, {
      method: 'POST',
      path: '/v0/apikeys',
      host: 'apikeys.localhost',
      headers: { 'x-gateway-authentication': IDENTITY },
      body: JSON.stringify({ name: 'bench' }),
    });
    if (created.status !== 201) throw new Error(`POST /v0/apikeys answered ${created.status}: ${created.body}`);
    const { key, secret } = JSON.parse(created.body) as { key: string; secret: string };
    const basic = { authorization: `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}` };
    const peerName = distribution ? `distribution ${versionOf(distribution, ['--version']).split(' ').pop()}` : '';
    console.log(
      `registry benchmark: one ${megabytes.toFixed(0)} MB layer + config, skopeo ${versionOf(skopeo, ['--version']).split(' ').pop()}, store ${stratus.store}, ${ROUNDS} rounds each, alternating`,
    );

    const stratusSeconds: number[] = [];
    const peerSeconds: number[] = [];
    const stratusCpu: number[] = [];
    const peerCpu: number[] = [];
    const runId = randomBytes(3).toString('hex');
    // One untimed push first: a long-running server has compiled its push path already (the first
    // push also loads and compiles the registry's routes).
    await push(skopeo, layout, stratus.port, `bench/warm-up-${runId}`, `${key}:${secret}`);
    for (let round = 0; round < ROUNDS; round++) {
      const repository = `bench/push-${runId}-${round}`;
      const cpuBefore = cpuSeconds(stratus.pid);
      const s = await push(skopeo, layout, stratus.port, repository, `${key}:${secret}`);
      const cpu = cpuSeconds(stratus.pid) - cpuBefore;
      await checkManifest(stratus.port, repository, basic);
      stratusSeconds.push(s);
      stratusCpu.push(cpu);
      console.log(
        `  round ${round + 1}: Stratus ${(megabytes / s).toFixed(1)} MB/s (${s.toFixed(2)} s; server CPU ${cpu.toFixed(2)} s)`,
      );
      if (distribution) {
        const peerDir = join(dir, `distribution-${round}`);
        mkdirSync(peerDir);
        const peer = await startDistribution(distribution, peerDir);
        try {
          const peerCpuBefore = cpuSeconds(peer.pid);
          const p = await push(skopeo, layout, peer.port, repository);
          const cpu = cpuSeconds(peer.pid) - peerCpuBefore;
          await checkManifest(peer.port, repository);
          peerSeconds.push(p);
          peerCpu.push(cpu);
          console.log(
            `  round ${round + 1}: ${peerName} ${(megabytes / p).toFixed(1)} MB/s (${p.toFixed(2)} s; server CPU ${cpu.toFixed(2)} s)`,
          );
        } finally {
          await peer.stop();
          rmSync(peerDir, { recursive: true, force: true });
        }
      }
    }

    const rates = stratusSeconds.map((s) => megabytes / s);
    const peerRates = peerSeconds.map((s) => megabytes / s);
    const figure = mean(rates);
    const peerFigure = peerRates.length ? mean(peerRates) : undefined;
    const cpuPerPush = mean(stratusCpu);
    const peerCpuPerPush = peerCpu.length ? mean(peerCpu) : NaN;
    console.table([
      {
        registry: `Stratus (store ${stratus.store})`,
        'MB/s': figure.toFixed(1),
        rounds: rates.map((r) => r.toFixed(0)).join(' '),
        'server CPU s/push': cpuPerPush.toFixed(2),
      },
      ...(peerFigure !== undefined
        ? [
            {
              registry: peerName,
              'MB/s': peerFigure.toFixed(1),
              rounds: peerRates.map((r) => r.toFixed(0)).join(' '),
              'server CPU s/push': peerCpuPerPush.toFixed(2),
            },
          ]
        : []),
    ]);
    const met = peerFigure !== undefined ? figure >= peerFigure : undefined;
    recordResult({
      bench: 'registry',
      path: `registry push, skopeo copy of a ${megabytes.toFixed(0)} MB layer (store ${stratus.store})`,
      figure,
      unit: 'MB/s',
      ...(peerFigure !== undefined
        ? { peer: { name: peerName, figure: peerFigure } }
        : { peerSkipped: 'docker-registry not installable' }),
      target: "≥ distribution registry's MB/s",
      ...(met !== undefined ? { met } : {}),
      ...(met === false
        ? {
            note:
              `server CPU per push ${cpuPerPush.toFixed(2)} s beside ${peerCpuPerPush.toFixed(2)} s: by profile and ` +
              "--trace-gc, V8 collections started by off-heap memory pressure (one per 64 MiB of the HTTP parser's " +
              'body chunks), SHA-256 on the digest thread and the writes',
          }
        : {}),
    });
  } finally {
    await stratus?.stop();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}
