import { type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { freePort, haproxyStats, installHaproxy, startHaproxy, stopHaproxy, type ServerStats } from './haproxy.ts';

export { freePort, type ServerStats } from './haproxy.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { serve, type ServedProcess } from '../helpers/serve.ts';

/**
 * A Stratus cluster on one machine, as deploy/ runs it: N `stratus serve` instances on one shared
 * PostgreSQL schema (a test database of its own), each with its own DATA_DIR and its own loopback
 * ports, behind HAProxy (Debian's, installed when missing) in round-robin mode with HTTP health
 * checks, configured from deploy/haproxy.cfg with only its ports templated. Everything listens on
 * 127.0.0.1 and every process is stopped by its process id.
 *
 * Built for fault tests as well as the end-to-end suite: an instance can be stopped (SIGTERM),
 * killed (SIGKILL), started and restarted by index on the same ports (HAProxy's `server` line keeps
 * pointing at it), `waitForBalancer` waits until HAProxy's health check sees it UP or DOWN, and
 * `startLoad` drives writes through the balancer counting the acknowledged and the failed ones.
 */

/** The settings every instance of a test cluster gets (besides DATABASE_URL and its DATA_DIR). */
export const CLUSTER_ADMIN = { email: 'admin@cluster.test', password: 'cluster admin password' };
export const SCHEDULER_KEY = 'sk-cluster-test';

export interface ClusterOptions {
  /** How many Stratus instances (default 3). */
  instances?: number;
  /** Extra environment for every instance. */
  env?: Record<string, string | undefined>;
  /** Extra `stratus serve` arguments for every instance. */
  args?: string[];
  /**
   * The database to run on (default: a fresh schema of DATABASE_URL's database, createTestDatabase);
   * the cluster's close() calls its cleanup().
   */
  database?: TestDatabase;
}

export interface ClusterInstance {
  readonly index: number;
  /** HAProxy's name for it (`stratus1`, …), also the `X-Stratus-Instance` answer header. */
  readonly name: string;
  readonly publicPort: number;
  readonly internalPort: number;
  readonly running: boolean;
  /** The current process's id (undefined when stopped). */
  readonly pid: number | undefined;
  /** What the current (or last) process printed. */
  output(): string;
}

export interface ClusterResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The instance HAProxy sent the request to (`X-Stratus-Instance`), when it went through it. */
  servedBy: string | undefined;
  json<T = unknown>(): T;
}

export interface RequestOptions {
  method?: string;
  path?: string;
  host?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Default 10 s. */
  timeoutMs?: number;
  agent?: http.Agent;
}

/** Sends one HTTP/1.1 request to a loopback port (Host chosen freely, as the gateway routes by it). */
export function send(port: number, options: RequestOptions): Promise<ClusterResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.host) headers.host = options.host;
    if (options.body !== undefined) headers['content-length'] = String(Buffer.byteLength(options.body));
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers,
        agent: options.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const servedBy = res.headers['x-stratus-instance'];
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text,
            servedBy: typeof servedBy === 'string' ? servedBy : undefined,
            json: <T>() => JSON.parse(text) as T,
          });
        });
        res.on('error', reject);
      },
    );
    let localPort: number | undefined;
    req.on('socket', (socket) => {
      const remember = () => (localPort = socket.localPort);
      if (socket.localPort) remember();
      else socket.once('connect', remember);
    });
    // Which connection failed, to find it in HAProxy's log: its client port, and whether it was kept alive.
    req.on('error', (error) =>
      reject(
        Object.assign(error, {
          message: `${error.message} (${req.reusedSocket ? 'kept-alive' : 'new'} connection from port ${localPort})`,
        }),
      ),
    );
    req.setTimeout(options.timeoutMs ?? 10_000, () => req.destroy(new Error('request timed out')));
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

interface InstanceSlot {
  index: number;
  name: string;
  publicPort: number;
  internalPort: number;
  dataDir: string;
  process: ServedProcess | undefined;
  lastOutput: string;
}

export class Cluster {
  readonly instances: ClusterInstance[];
  private haproxy: ChildProcess | undefined;
  private haproxyLog = '';
  private readonly extras = new Set<ServedProcess>();

  private constructor(
    readonly database: TestDatabase,
    readonly balancerPort: number,
    readonly statsPort: number,
    private readonly slots: InstanceSlot[],
    private readonly env: Record<string, string | undefined>,
    private readonly args: string[],
  ) {
    this.instances = slots.map((slot) => ({
      index: slot.index,
      name: slot.name,
      publicPort: slot.publicPort,
      internalPort: slot.internalPort,
      get running() {
        // A process that exited by itself (a crash) is not running, though the harness did not stop it.
        const child = slot.process?.child;
        return child !== undefined && child.exitCode === null && child.signalCode === null;
      },
      get pid() {
        return slot.process?.child.pid;
      },
      output: () => slot.process?.output() ?? slot.lastOutput,
    }));
  }

  /**
   * Starts the cluster: a fresh PostgreSQL schema (DATABASE_URL must be set), the first instance
   * (it applies the migrations and creates the admin user), the others together, then HAProxy,
   * and waits until HAProxy's health checks see every instance UP. On a failure everything already
   * started is stopped.
   */
  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    if (!options.database && !process.env.DATABASE_URL)
      throw new Error('the cluster harness needs DATABASE_URL (PostgreSQL)');
    const count = options.instances ?? 3;
    await installHaproxy();
    const database = options.database ?? (await createTestDatabase());
    if (!database.databaseUrl) throw new Error('the cluster harness needs a PostgreSQL test database');
    const slots: InstanceSlot[] = [];
    for (let index = 0; index < count; index++) {
      const dataDir = join(database.dataDir, `instance-${index + 1}`);
      mkdirSync(dataDir, { recursive: true });
      slots.push({
        index,
        name: `stratus${index + 1}`,
        publicPort: await freePort(),
        internalPort: await freePort(),
        dataDir,
        process: undefined,
        lastOutput: '',
      });
    }
    const env = {
      DATABASE_URL: database.databaseUrl,
      ADMIN_EMAIL: CLUSTER_ADMIN.email,
      ADMIN_PASSWORD: CLUSTER_ADMIN.password,
      SCHEDULER_API_KEYS: SCHEDULER_KEY,
      // HAProxy connects from 127.0.0.1 and names the client in X-Forwarded-For (deploy/stratus.env.example).
      TRUSTED_PROXIES: '127.0.0.1',
      COOKIE_SECURE: 'false',
      // On SIGTERM, keep serving until HAProxy has taken the instance out (2 failed checks a second
      // apart) before any connection closes: a rolling restart then fails no request (faults.test.ts).
      SHUTDOWN_DELAY: '3',
      ...options.env,
    };
    const cluster = new Cluster(database, await freePort(), await freePort(), slots, env, options.args ?? []);
    try {
      await cluster.startInstance(0);
      await Promise.all(slots.slice(1).map((slot) => cluster.startInstance(slot.index)));
      await cluster.startHaproxy();
      await Promise.all(slots.map((slot) => cluster.waitForBalancer(slot.index, 'UP')));
    } catch (error) {
      await cluster.close();
      throw error;
    }
    return cluster;
  }

  private slot(index: number): InstanceSlot {
    const slot = this.slots[index];
    if (!slot) throw new Error(`no instance ${index} (the cluster has ${this.slots.length})`);
    return slot;
  }

  /** Starts instance `index` on its ports (after a stop or kill). Resolves once it printed its ready line. */
  async startInstance(index: number): Promise<void> {
    const slot = this.slot(index);
    if (slot.process) throw new Error(`${slot.name} is running`);
    slot.process = await serve(
      ['--port', String(slot.publicPort), '--internal-port', String(slot.internalPort), ...this.args],
      { ...this.env, DATA_DIR: slot.dataDir },
    );
  }

  /** SIGTERM (SIGKILL after 5 s, see test/helpers/serve.ts); resolves with the exit code. */
  async stopInstance(index: number): Promise<number | null> {
    const slot = this.slot(index);
    const running = slot.process;
    if (!running) return null;
    const code = await running.stop();
    slot.lastOutput = running.output();
    slot.process = undefined;
    return code;
  }

  /** SIGKILL at once (`kill -9`), as a crash would. */
  async killInstance(index: number): Promise<void> {
    const slot = this.slot(index);
    const running = slot.process;
    if (!running) return;
    await running.kill();
    slot.lastOutput = running.output();
    slot.process = undefined;
  }

  /**
   * Stops (or kills) instance `index`, starts it again on the same ports, and waits until HAProxy
   * has it UP again.
   */
  async restartInstance(index: number, how: 'stop' | 'kill' = 'stop'): Promise<void> {
    if (how === 'kill') await this.killInstance(index);
    else await this.stopInstance(index);
    await this.startInstance(index);
    await this.waitForBalancer(index, 'UP');
  }

  /**
   * Starts one more instance on the cluster's database from `entry`, a script that runs the CLI
   * (test/cluster/newer-schema.ts), with the cluster's settings and a data directory of its own, on
   * free ports: beside the balancer, not behind it. `stop()` it, or close() stops it.
   */
  async startExtra(entry: string, name: string): Promise<ServedProcess> {
    const dataDir = join(this.database.dataDir, name);
    mkdirSync(dataDir, { recursive: true });
    const started = await serve(this.args, { ...this.env, DATA_DIR: dataDir }, entry);
    this.extras.add(started);
    return {
      ...started,
      stop: async () => {
        this.extras.delete(started);
        return started.stop();
      },
    };
  }

  private async startHaproxy(): Promise<void> {
    const haproxy = startHaproxy({
      configPath: join(this.database.dataDir, 'haproxy.cfg'),
      balancer: this.balancerPort,
      stats: this.statsPort,
      servers: this.slots.map((slot) => ({ name: slot.name, port: slot.publicPort })),
      onOutput: (text) => (this.haproxyLog = (this.haproxyLog + text).slice(-8_000_000)),
    });
    this.haproxy = haproxy;
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (haproxy.exitCode !== null) throw new Error(`haproxy exited with ${haproxy.exitCode}:\n${this.haproxyLog}`);
      try {
        await this.stats();
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`haproxy did not start in 15 s (${String(error)}):\n${this.haproxyLog}`);
        await sleep(50);
      }
    }
  }

  /** What HAProxy printed so far (its access log: one line per request, with the instance). */
  haproxyOutput(): string {
    return this.haproxyLog;
  }

  /** HAProxy's view of each instance: health state and counters. */
  stats(): Promise<ServerStats[]> {
    return haproxyStats(this.statsPort);
  }

  /** Waits until HAProxy's health check has instance `index` in `state` (default within 30 s). */
  async waitForBalancer(index: number, state: 'UP' | 'DOWN', timeoutMs = 30_000): Promise<void> {
    const { name } = this.slot(index);
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      last = (await this.stats()).find((row) => row.name === name)?.status ?? 'missing';
      if (last === state) return;
      await sleep(100);
    }
    throw new Error(`haproxy still has ${name} ${last} after ${timeoutMs} ms, not ${state}`);
  }

  /** A request through the balancer. */
  request(options: RequestOptions): Promise<ClusterResponse> {
    return send(this.balancerPort, options);
  }

  /** A request to one instance's public port directly, past the balancer. */
  requestTo(index: number, options: RequestOptions): Promise<ClusterResponse> {
    return send(this.slot(index).publicPort, options);
  }

  /** Stops HAProxy and every instance by process id and drops the test database. */
  async close(): Promise<void> {
    if (this.haproxy) await stopHaproxy(this.haproxy);
    await Promise.all([
      ...this.slots.map((slot) => this.stopInstance(slot.index)),
      ...[...this.extras].map((extra) => extra.stop()),
    ]);
    await this.database.cleanup();
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One write the load generator sends: `key` names what an acknowledged answer promises is stored. */
export interface WriteOp {
  key: string;
  send(agent: http.Agent): Promise<ClusterResponse>;
  /** Whether the answer acknowledges the write (default: any 2xx). */
  acknowledges?(res: ClusterResponse): boolean;
}

/** A write that was not acknowledged, with when it was sent and when it ended (Date.now()). */
export interface FailedWrite {
  key: string;
  reason: string;
  servedBy?: string;
  startedAt: number;
  endedAt: number;
}

export interface LoadReport {
  /** Keys of the writes answered 2xx: each must be found afterwards. */
  acknowledged: string[];
  /** Writes answered otherwise, or not at all (transport error, timeout). */
  failed: FailedWrite[];
  /** Requests sent (acknowledged + failed). */
  sent: number;
  /** Acknowledged writes per instance that answered them. */
  byInstance: Record<string, number>;
  durationMs: number;
}

export interface Load {
  /** Counts so far. */
  progress(): { acknowledged: number; failed: number };
  /** Stops sending, waits for the writes in flight, and reports. */
  stop(): Promise<LoadReport>;
}

/**
 * Sends writes through `concurrency` parallel clients (keep-alive connections) until stopped;
 * `next(n)` makes the n-th write. Counts each write as acknowledged (2xx) or failed.
 */
export function startLoad(options: { concurrency: number; next: (n: number) => WriteOp }): Load {
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const report: LoadReport = { acknowledged: [], failed: [], sent: 0, byInstance: {}, durationMs: 0 };
  const started = Date.now();
  let stopping = false;
  let n = 0;
  const client = async () => {
    while (!stopping) {
      const op = options.next(n++);
      const startedAt = Date.now();
      report.sent++;
      try {
        const res = await op.send(agent);
        if (op.acknowledges ? op.acknowledges(res) : res.status >= 200 && res.status < 300) {
          report.acknowledged.push(op.key);
          const by = res.servedBy ?? 'direct';
          report.byInstance[by] = (report.byInstance[by] ?? 0) + 1;
        } else {
          report.failed.push({
            key: op.key,
            reason: `${res.status} ${res.text.slice(0, 200)}`,
            ...(res.servedBy ? { servedBy: res.servedBy } : {}),
            startedAt,
            endedAt: Date.now(),
          });
        }
      } catch (error) {
        report.failed.push({
          key: op.key,
          reason: error instanceof Error ? error.message : String(error),
          startedAt,
          endedAt: Date.now(),
        });
      }
    }
  };
  const clients = Array.from({ length: options.concurrency }, client);
  return {
    progress: () => ({ acknowledged: report.acknowledged.length, failed: report.failed.length }),
    async stop() {
      stopping = true;
      await Promise.all(clients);
      agent.destroy();
      report.durationMs = Date.now() - started;
      return report;
    },
  };
}

/** What the scheduler write needs from the workers that consume its tasks (scheduler-workers.ts). */
export interface TaskConsumer {
  /** The ids among `ids` that no worker has been handed, after waiting for them for a while. */
  undelivered(ids: string[]): Promise<string[]>;
}

/**
 * Writes for the load generator, one per durable service, each with a `missing` check that reads
 * its acknowledged writes back through the balancer: v0 config objects (public, no credentials),
 * key-value keys, docdb documents, small files, log lines and scheduler tasks (with an API key's
 * headers, or the scheduler key).
 */
export const writes = {
  config(cluster: Cluster, prefix: string) {
    return {
      next: (n: number): WriteOp => {
        const id = `${prefix}-${n}`;
        return {
          key: id,
          send: (agent) =>
            send(cluster.balancerPort, {
              method: 'POST',
              path: '/v0/configs',
              host: 'config.localhost',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ id, entries: { n } }),
              agent,
            }),
        };
      },
      /** The acknowledged ids that cannot be read back. */
      missing: (keys: string[]) =>
        missingOf(
          keys,
          async (id) => (await cluster.request({ path: `/v0/configs/${id}`, host: 'config.localhost' })).status === 200,
        ),
    };
  },
  kv(cluster: Cluster, collection: string, auth: Record<string, string>) {
    return {
      next: (n: number): WriteOp => {
        const key = `k${n}`;
        return {
          key,
          send: (agent) =>
            send(cluster.balancerPort, {
              method: 'POST',
              path: `/v1/collections/${collection}/keys/${key}`,
              host: 'kv.localhost',
              headers: { ...auth, 'content-type': 'application/json' },
              body: JSON.stringify({ value: n }),
              agent,
            }),
        };
      },
      missing: (keys: string[]) =>
        missingOf(keys, async (key) => {
          const res = await cluster.request({
            path: `/v1/collections/${collection}/keys/${key}`,
            host: 'kv.localhost',
            headers: auth,
          });
          return res.status === 200;
        }),
    };
  },
  docdb(cluster: Cluster, database: string, collection: string, auth: Record<string, string>) {
    const path = `/v1/databases/${database}/collections/${collection}`;
    return {
      next: (n: number): WriteOp => {
        const id = `d${n}`;
        return {
          key: id,
          send: (agent) =>
            send(cluster.balancerPort, {
              method: 'POST',
              path: `${path}:insert`,
              host: 'docdb.localhost',
              headers: auth,
              body: JSON.stringify({ id, n }),
              agent,
            }),
          // 201 then a line per document; an error after the status would be a line of its own.
          acknowledges: (res) => res.status === 201 && !res.text.includes('"error"'),
        };
      },
      async missing(keys: string[]): Promise<string[]> {
        const res = await cluster.request({
          method: 'POST',
          path: `${path}:find`,
          host: 'docdb.localhost',
          headers: auth,
          body: '{"limit":-1}',
          timeoutMs: 30_000,
        });
        if (res.status !== 200) throw new Error(`docdb find answered ${res.status}: ${res.text.slice(0, 300)}`);
        const found = new Set(
          res.text
            .split('\n')
            .filter(Boolean)
            .map((line) => (JSON.parse(line) as { id: string }).id),
        );
        return keys.filter((key) => !found.has(key));
      },
    };
  },
  files(cluster: Cluster, bucket: string, prefix: string, auth: Record<string, string>) {
    const path = (key: string) => `/v1/buckets/${bucket}/files/${prefix}/${key}.txt`;
    return {
      next: (n: number): WriteOp => {
        const key = `f${n}`;
        return {
          key,
          send: (agent) =>
            send(cluster.balancerPort, {
              method: 'PUT',
              path: path(key),
              host: 'files.localhost',
              headers: auth,
              body: `file ${key}\n`,
              agent,
            }),
        };
      },
      missing: (keys: string[]) =>
        missingOf(keys, async (key) => {
          const res = await cluster.request({ path: path(key), host: 'files.localhost', headers: auth });
          return res.status === 200 && res.text === `file ${key}\n`;
        }),
    };
  },
  logs(cluster: Cluster, logger: string, prefix: string, auth: Record<string, string>) {
    return {
      next: (n: number): WriteOp => {
        const key = `${prefix}-${n}`;
        return {
          key,
          send: (agent) =>
            send(cluster.balancerPort, {
              method: 'POST',
              path: `/v1/loggers/${logger}/ingest`,
              host: 'logs.localhost',
              headers: auth,
              body: `${key}\n`,
              agent,
            }),
        };
      },
      async missing(keys: string[]): Promise<string[]> {
        // Every stored line of the logger (no follow: the answer ends after the catch-up).
        const res = await cluster.request({
          path: `/v1/loggers/${logger}/filter`,
          host: 'logs.localhost',
          headers: auth,
          timeoutMs: 30_000,
        });
        if (res.status !== 200) throw new Error(`logs filter answered ${res.status}: ${res.text.slice(0, 300)}`);
        const found = new Set(res.text.split('\n'));
        return keys.filter((key) => !found.has(key));
      },
    };
  },
  /** Enqueued tasks are found when a worker is handed them (every task is due at once). */
  scheduler(cluster: Cluster, scheduler: string, prefix: string, auth: Record<string, string>, consumer: TaskConsumer) {
    return {
      next: (n: number): WriteOp => {
        const id = `${prefix}-${n}`;
        return {
          key: id,
          send: (agent) =>
            send(cluster.balancerPort, {
              method: 'POST',
              path: `/schedulers/${scheduler}/tasks`,
              host: 'scheduler.localhost',
              headers: { ...auth, 'content-type': 'application/json' },
              body: JSON.stringify({ id, payload: { n } }),
              agent,
            }),
        };
      },
      missing: (keys: string[]) => consumer.undelivered(keys),
    };
  },
};

async function missingOf(keys: string[], present: (key: string) => Promise<boolean>): Promise<string[]> {
  const missing: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < keys.length) {
        const key = keys[next++]!;
        if (!(await present(key))) missing.push(key);
      }
    }),
  );
  return missing;
}
