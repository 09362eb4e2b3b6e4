import type { Settings } from '../../config.ts';
import { HttpError } from '../../core/errors.ts';
import { migrateStore, openStore } from '../../store/index.ts';
import { characterCount, checkEmail, checkPassword } from './credentials.ts';
import { authMigrations } from './migrations.ts';
import { createUser } from './repository.ts';

export const USERS_USAGE = `Usage: stratus users add --email EMAIL --password PASSWORD [--nick NICK]

  Creates a user who can log in with that email and password, and prints the new user's id.
  --password -    reads the password from the first line of standard input instead
                  (keeps it out of the shell history and the process list)
`;

/** The options `stratus users` adds to the settings flags (for node:util parseArgs). */
export const USERS_OPTIONS = {
  email: { type: 'string' },
  password: { type: 'string' },
  nick: { type: 'string' },
} as const;

export interface UsersCommandInput {
  /** Positional arguments after `users` (the subcommand first). */
  positionals: readonly string[];
  email?: string;
  password?: string;
  nick?: string;
}

export interface UsersCommandIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** The whole of standard input, for `--password -`. */
  readStdin(): Promise<string>;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

const processIo: UsersCommandIo = {
  stdout: process.stdout,
  stderr: process.stderr,
  readStdin: () => readAll(process.stdin),
};

/**
 * `stratus users add`: opens the store, applies the auth migrations, creates the user and prints
 * its id on stdout. Returns the exit code: 0 done, 2 bad usage, bad input or duplicate email. The
 * password is never printed.
 */
export async function runUsersCommand(
  input: UsersCommandInput,
  settings: Settings,
  io: UsersCommandIo = processIo,
): Promise<number> {
  const fail = (message: string, usage = false) => {
    io.stderr.write(`stratus users: ${message}\n${usage ? `\n${USERS_USAGE}` : ''}`);
    return 2;
  };
  const [subcommand, ...extra] = input.positionals;
  if (subcommand !== 'add')
    return fail(subcommand === undefined ? 'missing subcommand' : `unknown subcommand "${subcommand}"`, true);
  if (extra.length > 0) return fail(`unexpected argument "${extra[0]}"`, true);
  if (input.email === undefined) return fail('--email is required', true);
  if (input.password === undefined) return fail('--password is required', true);

  let password = input.password;
  if (password === '-') password = (await io.readStdin()).split(/\r?\n/)[0] ?? '';
  let email: string;
  try {
    email = checkEmail(input.email, '--email');
    checkPassword(password, '--password');
    if (input.nick !== undefined && (characterCount(input.nick) === 0 || characterCount(input.nick) > 200))
      return fail('--nick must have 1–200 characters');
  } catch (error) {
    if (error instanceof HttpError) return fail(error.message);
    throw error;
  }

  const store = await openStore(settings);
  try {
    await migrateStore(store, [authMigrations]);
    const user = await createUser(store.sql, {
      email,
      password,
      ...(input.nick !== undefined && { nick: input.nick }),
    });
    io.stdout.write(`${user.id}\n`);
    return 0;
  } catch (error) {
    if (error instanceof HttpError && error.status === 409) return fail(`a user with email ${email} already exists`);
    throw error;
  } finally {
    await store.close();
  }
}
