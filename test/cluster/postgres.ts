import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { TestDatabase } from '../helpers/database.ts';
import { openPostgres } from '../../src/store/db.ts';
import { freePort } from './haproxy.ts';

const exec = promisify(execFile);

/**
 * A PostgreSQL server of a test's own, for faults that must not touch the shared one (a restart):
 * Debian's binaries (/usr/lib/postgresql/<newest>/bin), a cluster initialised in a temp directory
 * owned by the `postgres` user (the server refuses to run as root), listening on a free loopback
 * port only, trust authentication (nothing but loopback reaches it), with the `stratus` role and
 * database. Stopped with `pg_ctl stop` (its postmaster killed by process id if that fails) and
 * its directory removed by `close()`.
 */
export class PrivatePostgres {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly bin: string,
  ) {}

  /** postgres://stratus@127.0.0.1:<port>/stratus */
  get url(): string {
    return `postgres://stratus@127.0.0.1:${this.port}/stratus`;
  }

  private get dataDir(): string {
    return join(this.dir, 'data');
  }

  static async start(): Promise<PrivatePostgres> {
    const root = '/usr/lib/postgresql';
    const version = readdirSync(root)
      .filter((name) => /^\d+$/.test(name))
      .sort((a, b) => Number(b) - Number(a))[0];
    if (!version) throw new Error(`no PostgreSQL under ${root} (bash .ci/start-postgres.sh installs it)`);
    const { stdout } = await exec('id', ['-u', 'postgres']);
    const uid = Number(stdout.trim());
    const dir = mkdtempSync(join(tmpdir(), 'stratus-pg-'));
    chownSync(dir, uid, uid);
    const server = new PrivatePostgres(await freePort(), dir, join(root, version, 'bin'));
    process.once('exit', server.abandon);
    try {
      await server.asPostgres('initdb', ['-D', server.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8']);
      await server.asPostgres('pg_ctl', [
        '-D',
        server.dataDir,
        '-l',
        join(dir, 'server.log'),
        '-w',
        '-t',
        '30',
        '-o',
        // Loopback TCP only; its Unix socket in its own directory, not the shared server's.
        `-c listen_addresses=127.0.0.1 -p ${server.port} -k ${dir}`,
        'start',
      ]);
      const admin = new pg.Client({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres' });
      await admin.connect();
      try {
        await admin.query('create role stratus login');
        await admin.query('create database stratus owner stratus');
      } finally {
        await admin.end();
      }
    } catch (error) {
      await server.close();
      throw error;
    }
    return server;
  }

  private asPostgres(program: string, args: string[]) {
    return exec('runuser', ['-u', 'postgres', '--', join(this.bin, program), ...args], { timeout: 60_000 });
  }

  /** `pg_ctl restart -m fast`: every connection is closed, the server is down for a moment. */
  async restart(): Promise<void> {
    // pg_ctl restart starts the server again with the options it was started with (postmaster.opts).
    await this.asPostgres('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      join(this.dir, 'server.log'),
      '-w',
      '-t',
      '30',
      '-m',
      'fast',
      'restart',
    ]);
  }

  /** The server's log so far (for a failure message). */
  log(): string {
    try {
      return readFileSync(join(this.dir, 'server.log'), 'utf8');
    } catch {
      return '';
    }
  }

  /** The whole `stratus` database as a test database for the cluster harness (public schema). */
  testDatabase(): TestDatabase {
    const dataDir = mkdtempSync(join(tmpdir(), 'stratus-test-'));
    const url = this.url;
    return {
      dataDir,
      databaseUrl: url,
      connect: () => openPostgres(url, 5),
      async cleanup() {
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }

  /** A test process that exits without close(): immediate shutdown of the postmaster, by its process id. */
  private readonly abandon = () => {
    const pid = Number(this.postmasterPid());
    if (pid > 0)
      try {
        process.kill(pid, 'SIGQUIT');
      } catch {
        // already gone
      }
  };

  /** Stops the server (fast shutdown; its postmaster killed by process id if that fails) and removes it. */
  async close(): Promise<void> {
    process.off('exit', this.abandon);
    try {
      await this.asPostgres('pg_ctl', ['-D', this.dataDir, '-w', '-t', '30', '-m', 'fast', 'stop']);
    } catch {
      const pid = Number(this.postmasterPid());
      if (pid > 0)
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private postmasterPid(): string | undefined {
    try {
      return readFileSync(join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0];
    } catch {
      return undefined;
    }
  }
}
