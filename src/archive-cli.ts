import { parseArgs } from 'node:util';
import type { Settings } from './config.ts';
import { instancesMigrations } from './instances/index.ts';
import { AVAILABLE_SERVICES } from './services/index.ts';
import { exportArchive } from './store/archive/export.ts';
import { ArchiveError } from './store/archive/format.ts';
import { importArchive } from './store/archive/import.ts';
import { describeStore, dialectName, storeMigrations } from './store/index.ts';
import type { MigrationSet } from './store/migrate.ts';

/** `stratus export` and `stratus import` (src/store/archive/README.md; root README: Moving between SQLite and PostgreSQL). */

export const ARCHIVE_USAGE = `  export --to DIR|FILE.tar|- [--include-secrets-key]
             write a consistent snapshot of the whole store (every table's rows and every
             referenced blob) to a new directory, a tar file, or a tar stream on stdout (-),
             while the platform keeps serving; --include-secrets-key puts the key that seals
             lambda and webhook secrets in the archive too
  import --from DIR|FILE.tar
             load an archive into an empty store (DATA_DIR, or DATABASE_URL), after checking
             every file against its manifest; all or nothing
`;

const ARCHIVE_OPTIONS = {
  to: { type: 'string' },
  from: { type: 'string' },
  'include-secrets-key': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Every migration set of this build, the store's and the instance registry's included. */
export function buildMigrationSets(): MigrationSet[] {
  const sets = [storeMigrations, instancesMigrations, ...[...AVAILABLE_SERVICES.values()].map((s) => s.migrations)];
  return [...new Map(sets.map((set) => [set.owner, set])).values()];
}

const number = (n: number) => n.toLocaleString('en-US');

/**
 * Runs `stratus export|import <args>`. `settingsOptions` and `settingsFrom` are the CLI's own
 * store options (--data-dir, --database-url, --config, …) and how it reads settings from them.
 */
export async function runArchiveCommand(
  command: 'export' | 'import',
  args: string[],
  settingsOptions: Readonly<Record<string, { type: 'string' }>>,
  settingsFrom: (values: Record<string, string | boolean | undefined>) => Settings,
): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { ...settingsOptions, ...ARCHIVE_OPTIONS },
    strict: true,
    allowPositionals: false,
  });
  const help =
    `Usage: stratus ${command} [options]\n${ARCHIVE_USAGE}` +
    'The store is the one `stratus serve` would use: --data-dir PATH (DATA_DIR), --database-url URL\n' +
    '(DATABASE_URL), --config PATH. README.md: Moving between SQLite and PostgreSQL.\n';
  if (values.help) {
    process.stdout.write(help);
    return 0;
  }
  const missing = command === 'export' ? typeof values.to !== 'string' : typeof values.from !== 'string';
  if (missing) {
    process.stderr.write(`stratus ${command}: ${command === 'export' ? '--to' : '--from'} is required\n\n${help}`);
    return 2;
  }
  const settings = settingsFrom(values);
  try {
    if (command === 'export') {
      // The archive may be on stdout: everything else goes to stderr.
      process.stdout.on('error', () => {});
      const { manifest, where } = await exportArchive({
        settings,
        to: values.to!,
        stdout: process.stdout,
        includeSecretsKey: values['include-secrets-key'] === true,
        warn: (message) => process.stderr.write(`stratus: warning: ${message}\n`),
      });
      const rows = manifest.tables.reduce((sum, table) => sum + table.rows, 0);
      process.stderr.write(
        `exported ${manifest.tables.length} tables (${number(rows)} rows) and ${manifest.blobs.count} blobs ` +
          `(${number(manifest.blobs.bytes)} bytes) from ${describeStore(settings)} to ${where}` +
          `${manifest.secretsKey.included ? ', with the secrets key' : ''}; ` +
          `${manifest.excludedTables.length} tables left out (manifest.json: excludedTables)\n`,
      );
      return 0;
    }
    if (values['include-secrets-key']) throw new ArchiveError('--include-secrets-key is an export option');
    const summary = await importArchive({ settings, from: values.from!, migrationSets: buildMigrationSets() });
    const { manifest } = summary;
    process.stdout.write(
      `imported ${manifest.tables.length} tables (${number(summary.rows)} rows) and ${manifest.blobs.count} blobs ` +
        `(${number(manifest.blobs.bytes)} bytes) into ${describeStore(settings)}, ` +
        `from a ${dialectName(manifest.source.dialect)} store exported by Stratus ${manifest.stratusVersion} at ${manifest.createdAt}\n`,
    );
    for (const note of summary.notes) process.stdout.write(`${note}\n`);
    for (const warning of summary.warnings) process.stderr.write(`stratus: warning: ${warning}\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof ArchiveError)) throw error;
    process.stderr.write(`stratus ${command}: ${error.message}\n`);
    return 1;
  }
}
