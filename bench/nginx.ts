import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopper, type Child } from './lib.ts';
import { debianPeer, versionOf } from './peers.ts';

/** A free loopback port (the kernel's pick, released at once). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface NginxOptions {
  /** Serve this folder's files (sendfile on), at `/`. */
  root?: string;
  /** Or proxy everything to this loopback port over kept-alive upstream connections. */
  proxyTo?: number;
  /** Worker processes (default 1: one core for the server, like a Node process). */
  workers?: number;
}

/**
 * nginx (Debian's) in the foreground with a configuration of its own in a temporary folder, on
 * a free loopback port; undefined (with a line saying why) when nginx cannot be had. Access logs
 * are off, as they are for Stratus in the benches (ACCESS_LOG unset).
 */
export async function startNginx(options: NginxOptions): Promise<(Child & { version: string }) | undefined> {
  const binary = await debianPeer('nginx', 'nginx');
  if (!binary) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'stratus-nginx-'));
  const port = await freePort();
  const location = options.proxyTo
    ? `location / {
        proxy_pass http://upstream;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $http_host;
        proxy_buffering on;
        proxy_request_buffering off;
        client_max_body_size 0;
      }`
    : `location / { root ${JSON.stringify(options.root ?? dir)}; sendfile on; tcp_nopush on; }`;
  writeFileSync(
    join(dir, 'nginx.conf'),
    `daemon off;
master_process on;
worker_processes ${options.workers ?? 1};
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${join(dir, 'body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
  keepalive_requests 1000000;
  ${options.proxyTo ? `upstream upstream { server 127.0.0.1:${options.proxyTo}; keepalive 64; keepalive_requests 1000000; }` : ''}
  server {
    listen 127.0.0.1:${port};
    ${location}
  }
}
`,
  );
  const child = spawn(binary, ['-c', join(dir, 'nginx.conf'), '-p', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  // nginx prints nothing when it is up: wait for the port to take a connection.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (up) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`nginx did not start on port ${port}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const stop = stopper(child);
  return {
    port,
    internalPort: 0,
    pid: child.pid!,
    version: versionOf(binary, ['-v']).replace(/^nginx version: /, ''),
    async stop() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
