import { parseArgs } from 'node:util';
import { ARCHIVE_USAGE, runArchiveCommand } from './archive-cli.ts';
import { loadSettings, SettingsError, type FlagValues } from './config.ts';
import { VERSION } from './core/version.ts';
import { releaseMemoryWhenIdle } from './idle-memory.ts';
import { createLogger, migrateAll, startPlatform } from './platform.ts';
import { runUsersCommand, USERS_OPTIONS } from './services/auth/index.ts';
import { BACKUP_OPTIONS, runBackupCommand } from './store/backup.ts';
import { describeStore } from './store/index.ts';

const USAGE = `Usage: stratus <command> [options]

Commands to run the platform:
  serve      run the gateway and services (all available services unless --services)
  migrate    apply every service's database migrations and exit
${ARCHIVE_USAGE.trimEnd()}
  users add --email EMAIL --password PASSWORD [--nick NICK]
             create a user (\`--password -\` reads it from stdin) and print its id
  backup --to DIR
             copy the embedded store (database, blobs, secrets key file) into
             DIR, new or empty, while the platform serves; not on PostgreSQL
  restore --from DIR
             restore a backup into --data-dir, which must be new or empty
  version    print the version

Options (each also settable by environment variable or stratus.config.json):
  --services a,b,…      services to run in this process            SERVICES
  --port N              public port (0 picks a free one)           PORT (8080)
  --host ADDR           address the public port binds              HOST (0.0.0.0)
  --internal-port N     internal port (0 = free one)               INTERNAL_PORT (8081)
  --internal-host ADDR  address the internal port binds            INTERNAL_HOST (127.0.0.1)
  --domain NAME         hosts are <name>.<domain>                  DOMAIN (localhost)
  --data-dir PATH       embedded store directory                   DATA_DIR (./data)
  --database-url URL    PostgreSQL instead of the embedded store   DATABASE_URL
  --log-level LEVEL     fatal|error|warn|info|debug|trace|silent   LOG_LEVEL (info)
  --kv-parent URL       make the key-value node a replica of URL   KV_PARENT_URL
  --kv-node-name NAME   the key-value node's name                  KV_NODE_NAME (host name)
  --shutdown-timeout S  on SIGTERM/SIGINT, seconds in-flight requests SHUTDOWN_TIMEOUT (10)
                        get before their connections are cut
  --shutdown-delay S    on SIGTERM/SIGINT, seconds to serve on while   SHUTDOWN_DELAY (0)
                        readiness says 503, before draining
  --config PATH         JSON config file (default ./stratus.config.json)
`;

const FLAG_NAMES = {
  services: 'services',
  port: 'port',
  host: 'host',
  'internal-port': 'internalPort',
  'internal-host': 'internalHost',
  domain: 'domain',
  'data-dir': 'dataDir',
  'database-url': 'databaseUrl',
  'log-level': 'logLevel',
  'kv-parent': 'kvParentUrl',
  'kv-node-name': 'kvNodeName',
  'shutdown-timeout': 'shutdownTimeout',
  'shutdown-delay': 'shutdownDelay',
  config: 'config',
} as const;

const SETTINGS_OPTIONS = Object.fromEntries(Object.keys(FLAG_NAMES).map((name) => [name, { type: 'string' as const }]));

function flagValues(values: Record<string, string | boolean | undefined>): FlagValues {
  const flags: FlagValues = {};
  for (const [name, key] of Object.entries(FLAG_NAMES)) {
    const value = values[name];
    if (typeof value === 'string') flags[key] = value;
  }
  return flags;
}

function parseFlags(args: string[]): FlagValues {
  const { values } = parseArgs({ args, options: SETTINGS_OPTIONS, strict: true, allowPositionals: false });
  return flagValues(values);
}

/** What `stratus` takes from the user CLI (packages/cli). */
interface UserCommands {
  USER_COMMANDS: Readonly<Record<string, unknown>>;
  USER_USAGE: string;
  runUserCommand(argv: readonly string[]): Promise<number>;
}

/**
 * The commands for a platform one uses (login, keys, lambda, …), from the `@stratus/cli`
 * workspace package: loaded by name when asked for, so serving never loads the client and the
 * platform's build (rootDir `src`) does not compile the package's source.
 */
async function userCommands(): Promise<UserCommands> {
  const name = '@stratus/cli';
  return (await import(name)) as UserCommands;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n${(await userCommands()).USER_USAGE}`);
    return command ? 0 : 2;
  }
  if (command === 'version' || command === '--version') {
    process.stdout.write(`${VERSION} (Node ${process.version})\n`);
    return 0;
  }
  if (command === 'users') {
    const { values, positionals } = parseArgs({
      args: rest,
      options: { ...SETTINGS_OPTIONS, ...USERS_OPTIONS },
      strict: true,
      allowPositionals: true,
    });
    const { email, password, nick } = values as { email?: string; password?: string; nick?: string };
    return runUsersCommand({ positionals, email, password, nick }, loadSettings(flagValues(values)));
  }
  if (command === 'backup' || command === 'restore') {
    const { values } = parseArgs({ args: rest, options: { ...SETTINGS_OPTIONS, ...BACKUP_OPTIONS }, strict: true });
    return runBackupCommand(command, values, loadSettings(flagValues(values)));
  }
  if (command === 'export' || command === 'import')
    return runArchiveCommand(command, rest, SETTINGS_OPTIONS, (values) => loadSettings(flagValues(values)));
  if (command !== 'serve' && command !== 'migrate') {
    const user = await userCommands();
    if (Object.hasOwn(user.USER_COMMANDS, command)) return user.runUserCommand(argv);
    process.stderr.write(`stratus: unknown command "${command}"\n\n${USAGE}\n${user.USER_USAGE}`);
    return 2;
  }
  const settings = loadSettings(parseFlags(rest));
  if (command === 'migrate') {
    const applied = await migrateAll(settings);
    process.stdout.write(
      applied.length > 0
        ? `applied ${applied.length} migrations:\n${applied.map((m) => `  ${m}\n`).join('')}`
        : 'database is up to date\n',
    );
    return 0;
  }
  const logger = createLogger(settings);
  const platform = await startPlatform(settings, logger);
  const stopReleasing = releaseMemoryWhenIdle({
    intervalMs: settings.idleMemoryReleaseSeconds * 1000,
    onRelease: ({ rssBefore, rssAfter, pauseMs }) =>
      logger.debug({ rssBefore, rssAfter, pauseMs: Math.round(pauseMs) }, 'gave memory back after going idle'),
  });
  // The first SIGTERM or SIGINT drains (README.md: Rolling restarts): readiness answers 503, the
  // ports stop accepting, streams end resumably, in-flight requests get SHUTDOWN_TIMEOUT seconds.
  // Later signals are ignored (bin/stratus.js forwards a terminal's Ctrl-C the child also got).
  // Installed before the ready line, so a signal sent as soon as it appears is a graceful one.
  const stopped = new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return void logger.info({ signal }, 'already shutting down');
      stopping = true;
      stopReleasing();
      logger.info({ signal, timeoutSeconds: settings.shutdownTimeout }, 'shutting down');
      platform.close().then(resolve, (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        resolve();
      });
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });
  const where = describeStore(settings);
  process.stdout.write(
    `stratus ${VERSION} ready: public port ${platform.publicPort} (${settings.host}), internal port ${platform.internalPort} (${settings.internalHost}); ` +
      `services ${platform.services.join(',')}; store ${where}; Node ${process.version}\n`,
  );
  await stopped;
  await new Promise<void>((resolve) => logger.flush(() => resolve()));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof SettingsError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`stratus: ${(error as Error).message}\n`);
      process.exit(2);
    }
    process.stderr.write(`stratus: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
