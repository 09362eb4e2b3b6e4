import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { aptInstall } from '../helpers/apt.ts';

// HAProxy from Debian, run from deploy/haproxy.cfg with its ports templated. Shared by the cluster
// harness (test/cluster/cluster.ts) and the cluster benchmark (bench/cluster.ts).

export const HAPROXY_TEMPLATE = fileURLToPath(new URL('../../deploy/haproxy.cfg', import.meta.url));
export const HAPROXY = '/usr/sbin/haproxy';

export interface HaproxyPorts {
  /** The public frontend's port (127.0.0.1). */
  balancer: number;
  /** The statistics page's port (127.0.0.1). */
  stats: number;
  /** The instances, in order: HAProxy's server name and the instance's public port. */
  servers: { name: string; port: number }[];
}

/**
 * deploy/haproxy.cfg with its ports templated: every `bind` of the public frontend becomes
 * 127.0.0.1:<balancerPort>, the stats listener's 127.0.0.1:<statsPort>, and the `server` lines of
 * the `stratus` backend are replaced by one per instance (127.0.0.1:<its public port>), each with the
 * options the template's first `server` line carries (`check`). Nothing else changes.
 */
export function renderHaproxyConfig(template: string, ports: HaproxyPorts): string {
  const out: string[] = [];
  let section = '';
  let serversWritten = false;
  let sawServer = false;
  for (const line of template.split('\n')) {
    if (/^\S/.test(line) && !line.startsWith('#')) section = line.trim();
    const directive = line.trim().split(/\s+/);
    if (directive[0] === 'bind' && section.startsWith('frontend stratus_public')) {
      out.push(line.replace(/bind\s+\S+/, `bind 127.0.0.1:${ports.balancer}`));
    } else if (directive[0] === 'bind' && section.startsWith('listen stats')) {
      out.push(line.replace(/bind\s+\S+/, `bind 127.0.0.1:${ports.stats}`));
    } else if (directive[0] === 'server' && section.startsWith('backend stratus')) {
      sawServer = true;
      if (serversWritten) continue;
      serversWritten = true;
      const indent = /^\s*/.exec(line)![0];
      const options = directive.slice(3).join(' ');
      for (const server of ports.servers)
        out.push(`${indent}server ${server.name} 127.0.0.1:${server.port}${options ? ` ${options}` : ''}`);
    } else {
      out.push(line);
    }
  }
  if (!sawServer) throw new Error('deploy/haproxy.cfg has no `server` line in `backend stratus`');
  return out.join('\n');
}

/** Installs Debian's haproxy when missing (as test/helpers/apt.ts does for other programs). */
export async function installHaproxy(): Promise<void> {
  await aptInstall('haproxy', () => existsSync(HAPROXY));
}

/**
 * Writes the rendered config to `configPath` and runs HAProxy in the foreground (`-db`), as a
 * child stopped by its process id (and killed if this process exits first). Its output (the access
 * log, one line per request) goes to `onOutput`, or nowhere.
 */
export function startHaproxy(
  options: HaproxyPorts & { configPath: string; onOutput?: (text: string) => void },
): ChildProcess {
  writeFileSync(options.configPath, renderHaproxyConfig(readFileSync(HAPROXY_TEMPLATE, 'utf8'), options));
  const child = spawn(HAPROXY, ['-db', '-f', options.configPath], {
    stdio: ['ignore', options.onOutput ? 'pipe' : 'ignore', 'pipe'],
  });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  child.once('exit', () => process.off('exit', kill));
  let errors = '';
  child.stdout?.on('data', (chunk: Buffer) => options.onOutput?.(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => {
    if (options.onOutput) options.onOutput(chunk.toString());
    else errors = (errors + chunk.toString()).slice(-10_000);
  });
  child.once('exit', (code) => {
    if (code && !options.onOutput) console.error(`haproxy exited with ${code}:\n${errors}`);
  });
  return child;
}

/** SIGTERM to a HAProxy child (SIGKILL after 5 s); resolves when it has exited. */
export async function stopHaproxy(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(force);
}

/** A loopback port free at the time of asking (the OS picks it; the harness binds it soon after). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** One row of HAProxy's statistics (`/stats;csv`) for a server of the `stratus` backend. */
export interface ServerStats {
  name: string;
  /** `UP`, `DOWN`, `UP 1/2`, `DOWN 1/2`, `MAINT`, `no check`. */
  status: string;
  /** Sessions (requests, in HTTP mode with keep-alive each request is counted) sent to it. */
  sessions: number;
  responses2xx: number;
  responses5xx: number;
  /** Answers that failed on the instance's side: closed or broken before a whole response (`eresp`). */
  responseErrors: number;
  /** Transfers the instance aborted (`srv_abrt`). */
  serverAborts: number;
  /** Connections to it that failed (`econ`), each retried (`wretr`) or sent to another instance (`wredis`). */
  connectionErrors: number;
  retries: number;
  redispatches: number;
}

/** The `stratus` backend's servers as HAProxy's statistics page (`/stats;csv` on `statsPort`) shows them. */
export async function haproxyStats(statsPort: number): Promise<ServerStats[]> {
  const text = await new Promise<string>((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: statsPort, path: '/stats;csv', agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () =>
        res.statusCode === 200 ? resolve(body) : reject(new Error(`haproxy stats answered ${res.statusCode}`)),
      );
    });
    req.on('error', reject);
    req.setTimeout(5_000, () => req.destroy(new Error('haproxy stats timed out')));
  });
  const [header, ...rows] = text.trim().split('\n');
  const columns = header!.replace(/^# /, '').split(',');
  const column = (name: string) => columns.indexOf(name);
  return rows
    .map((row) => row.split(','))
    .filter((cells) => cells[column('pxname')] === 'stratus' && /^stratus\d+$/.test(cells[column('svname')] ?? ''))
    .map((cells) => ({
      name: cells[column('svname')]!,
      status: cells[column('status')]!,
      sessions: Number(cells[column('stot')]),
      responses2xx: Number(cells[column('hrsp_2xx')]),
      responses5xx: Number(cells[column('hrsp_5xx')]),
      responseErrors: Number(cells[column('eresp')]),
      serverAborts: Number(cells[column('srv_abrt')]),
      connectionErrors: Number(cells[column('econ')]),
      retries: Number(cells[column('wretr')]),
      redispatches: Number(cells[column('wredis')]),
    }));
}

/** Waits until HAProxy (statistics on `statsPort`) has every server of the backend UP. */
export async function waitForServersUp(statsPort: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const rows = await haproxyStats(statsPort);
      last = rows.map((row) => `${row.name} ${row.status}`).join(', ');
      if (rows.length > 0 && rows.every((row) => row.status === 'UP')) return;
    } catch (error) {
      last = String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`haproxy servers not all UP after ${timeoutMs} ms: ${last}`);
}
