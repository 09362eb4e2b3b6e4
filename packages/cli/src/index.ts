import { parseArgs } from 'node:util';
import { StratusError } from '@stratus/client';
import * as commands from './commands.ts';
import { credentialsPath } from './credentials.ts';
import { CommandError, processIo, UsageError, type CommandIo } from './io.ts';

export { credentialsPath, readCredentials, type Credentials } from './credentials.ts';
export type { CommandIo } from './io.ts';

export const USER_USAGE = `Commands for a platform you use (on the client SDK; credentials in ${'$XDG_CONFIG_HOME/stratus'}):
  login [--url URL] [--email E] [--password P|-]   sign in (prompts for what is missing)
  login --api-key KEY [--secret S]                 sign in with an API key
  logout | whoami
  keys create NAME | keys list | keys revoke KEY
  lambda deploy FILE [--name N] [--path P] [--method M]   create, or update the lambda of that name
         [--env NAME=VALUE]... [--secret NAME=VALUE]... [--logger LOGGER|none]
  lambda list | lambda invoke NAME [--data BODY] [--method M]
  lambda logs NAME [--limit N] [--follow]          recent runs and their console lines, oldest first;
                                                   --follow keeps printing new ones (Ctrl-C stops)
  logs list | logs tail LOGGER [--regex RE]        follow a logger's lines (Ctrl-C stops)
  db import DATABASE COLLECTION FILE|-             NDJSON in, streamed, with progress
  db export DATABASE COLLECTION [FILE]             NDJSON out (stdout without FILE)
  files cp SRC DST                                 one side <bucket>:<path>, the other a local path
  files ls <bucket>:[prefix]
  kv ls [COLLECTION] | kv get COLLECTION KEY | kv set COLLECTION KEY VALUE|-
  config get [KEY] | config set KEY VALUE
Options: --json (one JSON document per answer, no progress), --url URL (or STRATUS_URL) for another platform
`;

type Command = (context: commands.CommandContext) => Promise<void>;

/** The commands, by their first word. */
export const USER_COMMANDS: Readonly<Record<string, Command>> = {
  login: commands.login,
  logout: commands.logout,
  whoami: commands.whoami,
  keys: commands.keys,
  lambda: commands.lambda,
  logs: commands.logs,
  db: commands.db,
  files: commands.files,
  kv: commands.kv,
  config: commands.config,
};

const OPTIONS = {
  json: { type: 'boolean' },
  url: { type: 'string' },
  email: { type: 'string' },
  password: { type: 'string' },
  'api-key': { type: 'string' },
  // login's API secret, and lambda deploy's NAME=VALUE secrets (repeatable).
  secret: { type: 'string', multiple: true },
  env: { type: 'string', multiple: true },
  logger: { type: 'string' },
  limit: { type: 'string' },
  follow: { type: 'boolean' },
  name: { type: 'string' },
  path: { type: 'string' },
  method: { type: 'string' },
  regex: { type: 'string' },
  data: { type: 'string' },
  prefix: { type: 'string' },
} as const;

/**
 * Runs one user command (`argv` without the program name) and returns its exit code: 0 done,
 * 1 the platform refused or could not be reached (its error code and message on stderr, or as
 * JSON with `--json`), 2 a usage mistake.
 */
export async function runUserCommand(argv: readonly string[], io: CommandIo = processIo()): Promise<number> {
  const [name, ...rest] = argv;
  const command = name === undefined ? undefined : USER_COMMANDS[name];
  if (!command) {
    io.stderr.write(USER_USAGE);
    return 2;
  }
  let json = false;
  try {
    const { values, positionals } = parseArgs({
      args: [...rest],
      options: OPTIONS,
      strict: true,
      allowPositionals: true,
    });
    json = values.json === true;
    await command({ args: positionals, flags: values, io, json, credentialsPath: credentialsPath(io.env) });
    return 0;
  } catch (error) {
    if (error instanceof StratusError) {
      io.stderr.write(
        json
          ? `${JSON.stringify({ error: { status: error.status, code: error.code, message: error.message } })}\n`
          : `stratus ${name}: ${error.message} (${error.code}${error.status ? `, ${error.status}` : ''})\n`,
      );
      return 1;
    }
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.stderr.write(`stratus ${name}: ${(error as Error).message}\n\n${USER_USAGE}`);
      return 2;
    }
    if (error instanceof CommandError || (error as NodeJS.ErrnoException).code === 'ENOENT') {
      io.stderr.write(`stratus ${name}: ${(error as Error).message}\n`);
      return 1;
    }
    throw error;
  }
}
