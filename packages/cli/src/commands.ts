import { createReadStream, createWriteStream, openAsBlob } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createClient, StratusError, type LambdaInvocation, type StratusClient } from '@stratus/client';
import { readCredentials, removeCredentials, writeCredentials, type Credentials } from './credentials.ts';
import { CommandError, print, readAll, table, UsageError, type CommandIo } from './io.ts';
import { ProgressBar } from './progress.ts';

/** What every command gets: its arguments after the command words, the flags, and where to write. */
export interface CommandContext {
  args: string[];
  /** A flag given more than once where that is allowed (`--env`, `--secret`) is a list. */
  flags: Record<string, string | boolean | string[] | undefined>;
  io: CommandIo;
  /** `--json`: machine-readable output, no progress bars. */
  json: boolean;
  credentialsPath: string;
}

const DEFAULT_URL = 'http://localhost:8080';

/** A flag's value; of a flag that may be repeated, the last one given. */
function flag(context: CommandContext, name: string): string | undefined {
  const value = context.flags[name];
  if (Array.isArray(value)) return value.at(-1);
  return typeof value === 'string' ? value : undefined;
}

/** Every value of a repeatable flag, in order. */
function flagList(context: CommandContext, name: string): string[] {
  const value = context.flags[name];
  if (Array.isArray(value)) return value;
  return typeof value === 'string' ? [value] : [];
}

/**
 * `NAME=VALUE` flags (`--env`, `--secret`) as an object, split at the first `=`; a later name wins.
 * A mistake names the flag, never the text given, which may be a secret.
 */
function assignments(context: CommandContext, name: string): Record<string, string> | undefined {
  const given = flagList(context, name);
  if (given.length === 0) return undefined;
  const values: Record<string, string> = {};
  for (const text of given) {
    const equals = text.indexOf('=');
    if (equals <= 0) throw new UsageError(`--${name} takes NAME=VALUE`);
    values[text.slice(0, equals)] = text.slice(equals + 1);
  }
  return values;
}

/** A count flag (`--limit`): a positive whole number, or undefined when not given. */
function countFlag(context: CommandContext, name: string): number | undefined {
  const text = flag(context, name);
  if (text === undefined) return undefined;
  if (!/^[1-9][0-9]*$/.test(text)) throw new UsageError(`--${name} takes a positive whole number`);
  return Number(text);
}

/** Resolves after `ms`, or at once when `signal` is aborted. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

/** Runs `body` with a signal that Ctrl-C (SIGINT) aborts; ending that way is no failure. */
async function untilInterrupted(body: (signal: AbortSignal) => Promise<void>): Promise<void> {
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once('SIGINT', stop);
  try {
    await body(abort.signal);
  } catch (error) {
    if (!abort.signal.aborted) throw error;
  } finally {
    process.removeListener('SIGINT', stop);
  }
}

function arg(context: CommandContext, index: number, name: string): string {
  const value = context.args[index];
  if (value === undefined) throw new UsageError(`missing ${name}`);
  return value;
}

/** The item of `list` whose id or name is `target` (databases, buckets, loggers and lambdas are named either way). */
async function byIdOrName<T extends { id: string; name: string }>(
  list: Promise<T[]>,
  target: string,
  kind: string,
): Promise<T> {
  const found = (await list).find((item) => item.id === target || item.name === target);
  if (!found) throw new CommandError(`no ${kind} named ${target}`);
  return found;
}

/** A client for the stored credentials (`--url` or `STRATUS_URL` overrides the stored URL). */
async function signedIn(context: CommandContext): Promise<{ client: StratusClient; credentials: Credentials }> {
  const credentials = await readCredentials(context.credentialsPath);
  if (!credentials) throw new CommandError('not signed in: run stratus login first');
  const url = flag(context, 'url') ?? context.io.env.STRATUS_URL ?? credentials.url;
  const client = createClient({
    url,
    token: credentials.token,
    apiKey: credentials.apiKey,
    secret: credentials.secret,
  });
  return { client, credentials };
}

/** Asks on the terminal; the answer is not echoed when `secret`. */
async function prompt(io: CommandIo, question: string, secret: boolean): Promise<string> {
  if (!io.stdin.isTTY) throw new UsageError(`${question.replace(/: $/, '')} is needed (pass it as a flag)`);
  const input = io.stdin as unknown as NodeJS.ReadableStream;
  const output = new Writable({
    write(chunk: Buffer, _encoding, done) {
      // Only the question itself is shown for a secret, never what is typed.
      if (!secret || chunk.toString() === question) io.stderr.write(chunk.toString());
      done();
    },
  });
  const lines = createInterface({ input, output, terminal: true });
  try {
    return await new Promise<string>((resolve) => lines.question(question, resolve));
  } finally {
    lines.close();
    if (secret) io.stderr.write('\n');
  }
}

// ---------------------------------------------------------------------------------------------
// Signing in

export async function login(context: CommandContext): Promise<void> {
  const url = flag(context, 'url') ?? context.io.env.STRATUS_URL ?? DEFAULT_URL;
  const apiKey = flag(context, 'api-key');
  if (apiKey !== undefined) {
    const secret = flag(context, 'secret') ?? (await prompt(context.io, 'API secret: ', true));
    const client = createClient({ url, apiKey, secret });
    // A key that does not verify is refused here, not on the first real command.
    const me = await client.auth.me();
    await writeCredentials({ url, apiKey, secret, email: me.email }, context.credentialsPath);
    print(
      context.io,
      context.json,
      { url, email: me.email, credential: 'api_key' },
      () => `Signed in to ${url} as ${me.email} (API key)`,
    );
    return;
  }
  const email = flag(context, 'email') ?? (await prompt(context.io, 'Email: ', false));
  let password = flag(context, 'password');
  if (password === '-') password = (await readAll(context.io.stdin)).replace(/\r?\n$/, '');
  password ??= await prompt(context.io, 'Password: ', true);
  const client = createClient({ url });
  const result = await client.auth.login(email, password);
  await writeCredentials({ url, token: result.token, email: result.user.email }, context.credentialsPath);
  print(
    context.io,
    context.json,
    { url, email: result.user.email, credential: 'session' },
    () => `Signed in to ${url} as ${result.user.email}`,
  );
}

export async function logout(context: CommandContext): Promise<void> {
  const credentials = await readCredentials(context.credentialsPath);
  if (credentials?.token) {
    // Ends the session on the platform too; a session that is already gone is no failure here.
    await createClient({ url: credentials.url, token: credentials.token })
      .auth.logout()
      .catch((error: unknown) => {
        if (!(error instanceof StratusError && error.status === 401)) throw error;
      });
  }
  await removeCredentials(context.credentialsPath);
  print(context.io, context.json, { signed_out: true }, () => 'Signed out');
}

export async function whoami(context: CommandContext): Promise<void> {
  const { client, credentials } = await signedIn(context);
  const me = await client.auth.me();
  print(
    context.io,
    context.json,
    { url: credentials.url, ...me },
    () => `${me.email} (${me.id}) on ${credentials.url}`,
  );
}

// ---------------------------------------------------------------------------------------------
// API keys

export async function keys(context: CommandContext): Promise<void> {
  const { client } = await signedIn(context);
  const action = arg(context, 0, 'keys action (create, list or revoke)');
  if (action === 'create') {
    const created = await client.apikeys.keys.create({ name: arg(context, 1, 'key name') });
    print(context.io, context.json, created, () =>
      [`key:    ${created.key}`, `secret: ${created.secret}`, 'The secret is shown only now.'].join('\n'),
    );
  } else if (action === 'list') {
    const list = await client.apikeys.keys.list();
    print(context.io, context.json, list, () =>
      table(
        ['KEY', 'NAME'],
        list.map((k) => [k.key, k.name]),
      ),
    );
  } else if (action === 'revoke') {
    const revoked = await client.apikeys.keys.revoke(arg(context, 1, 'key'));
    print(context.io, context.json, revoked, () => `Revoked ${revoked.key}`);
  } else throw new UsageError(`unknown keys action ${action}`);
}

// ---------------------------------------------------------------------------------------------
// Lambdas

/** How often `lambda logs --follow` asks for new invocations of a lambda without a logger. */
export const LAMBDA_LOGS_POLL_MS = 1000;

/** `--logger NAME|ID` as a logger id, `--logger none` as null; undefined when not given. */
async function loggerFlag(context: CommandContext, client: StratusClient): Promise<string | null | undefined> {
  const target = flag(context, 'logger');
  if (target === undefined) return undefined;
  if (target === 'none') return null;
  return (await byIdOrName(client.logs.loggers.list(), target, 'logger')).id;
}

/** One invocation for people: a header line, then its console lines indented (a line per line of a message). */
function invocationText(invocation: LambdaInvocation): string {
  const i = invocation;
  const header = `${i.started_at} ${i.trigger} ${i.status} ${i.duration_ms}ms ${i.id}${i.error ? ` error ${i.error.code}: ${i.error.message}` : ''}`;
  const lines = i.logs.flatMap((line) => line.message.split(/\r?\n/).map((text) => `  ${line.level} ${text}`));
  return [header, ...lines].join('\n');
}

export async function lambda(context: CommandContext): Promise<void> {
  const { client } = await signedIn(context);
  const action = arg(context, 0, 'lambda action (deploy, list, invoke or logs)');
  if (action === 'deploy') {
    const file = arg(context, 1, 'the file to deploy');
    // The flags are checked before the file is read or anything is asked of the platform.
    const env = assignments(context, 'env');
    const secrets = assignments(context, 'secret');
    const code = await readAll(createReadStream(file));
    const name = flag(context, 'name') ?? basename(file).replace(/\.[^.]*$/, '');
    const path = flag(context, 'path');
    const method = flag(context, 'method');
    const loggerId = await loggerFlag(context, client);
    const settings = {
      ...(path && { path }),
      ...(method && { method }),
      ...(env && { env }),
      ...(secrets && { secrets }),
      ...(loggerId !== undefined && { logger_id: loggerId }),
    };
    // Deploying a name that exists replaces its code (and path or method when given); the names
    // given with --env and --secret are set, the others kept.
    const existing = (await client.lambda.list()).find((l) => l.name === name);
    const deployed = existing
      ? await client.lambda.update(existing.id, { code, ...settings })
      : await client.lambda.create({ name, code, ...settings });
    // The answer names the secrets and never holds their values.
    print(context.io, context.json, deployed, () =>
      [
        `${existing ? 'Updated' : 'Deployed'} ${deployed.name} (${deployed.id}): ${deployed.method} ${deployed.path}`,
        ...(env || Object.keys(deployed.env).length > 0 ? [`env: ${Object.keys(deployed.env).join(', ') || '-'}`] : []),
        ...(secrets || deployed.secrets.length > 0 ? [`secrets: ${deployed.secrets.join(', ') || '-'}`] : []),
        ...(loggerId !== undefined || deployed.logger_id !== null ? [`logger: ${deployed.logger_id ?? 'none'}`] : []),
      ].join('\n'),
    );
  } else if (action === 'list') {
    const list = await client.lambda.list();
    print(context.io, context.json, list, () =>
      table(
        ['ID', 'NAME', 'METHOD', 'PATH'],
        list.map((l) => [l.id, l.name, l.method, l.path]),
      ),
    );
  } else if (action === 'invoke') {
    const found = await byIdOrName(client.lambda.list(), arg(context, 1, 'lambda name or id'), 'lambda');
    const body = flag(context, 'data');
    const result = await client.lambda.invoke(found.id, {
      method: flag(context, 'method') ?? (body === undefined ? 'GET' : 'POST'),
      ...(body !== undefined && { body }),
    });
    print(context.io, context.json, result, () =>
      [...result.logs.map((line) => `# ${line.level}: ${line.message}`), `${result.status}`, result.body].join('\n'),
    );
  } else if (action === 'logs') {
    await lambdaLogs(context, client);
  } else throw new UsageError(`unknown lambda action ${action}`);
}

/**
 * `lambda logs NAME [--limit N] [--follow]`: the lambda's recent invocations, oldest first, each
 * with its console lines. `--follow` streams the lambda's logger when it has one, else asks the
 * history for new invocations every second; Ctrl-C ends it.
 */
async function lambdaLogs(context: CommandContext, client: StratusClient): Promise<void> {
  const target = arg(context, 1, 'lambda name or id');
  const limit = countFlag(context, 'limit');
  const follow = context.flags.follow === true;
  const found = await byIdOrName(client.lambda.list(), target, 'lambda');
  const write = (invocation: LambdaInvocation) =>
    context.io.stdout.write(`${context.json ? JSON.stringify(invocation) : invocationText(invocation)}\n`);
  if (!follow) {
    const list = (await client.lambda.invocations(found.id, { limit })).reverse();
    if (context.json) context.io.stdout.write(`${JSON.stringify(list)}\n`);
    else for (const invocation of list) write(invocation);
    return;
  }
  const lambda = await client.lambda.get(found.id);
  if (lambda.logger_id !== null) {
    const loggerId = lambda.logger_id;
    await untilInterrupted(async (signal) => {
      for await (const line of client.logs.logger(loggerId).follow({ signal }))
        context.io.stdout.write(context.json ? `${JSON.stringify({ line })}\n` : `${line}\n`);
    });
    return;
  }
  await untilInterrupted(async (signal) => {
    // The ids of the last answer: the history is newest first and only drops its oldest, so an
    // invocation not among them is new.
    let seen = new Set<string>();
    while (!signal.aborted) {
      const list = await client.lambda.invocations(found.id, { limit, signal });
      for (const invocation of [...list].reverse()) if (!seen.has(invocation.id)) write(invocation);
      seen = new Set(list.map((invocation) => invocation.id));
      await sleep(LAMBDA_LOGS_POLL_MS, signal);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Logs

export async function logs(context: CommandContext): Promise<void> {
  const { client } = await signedIn(context);
  const action = arg(context, 0, 'logs action (tail or list)');
  if (action === 'list') {
    const list = await client.logs.loggers.list();
    print(context.io, context.json, list, () =>
      table(
        ['ID', 'NAME'],
        list.map((l) => [l.id, l.name]),
      ),
    );
    return;
  }
  if (action !== 'tail') throw new UsageError(`unknown logs action ${action}`);
  const found = await byIdOrName(client.logs.loggers.list(), arg(context, 1, 'logger name or id'), 'logger');
  const regex = flag(context, 'regex');
  await untilInterrupted(async (signal) => {
    const lines = client.logs.logger(found.id).follow({ ...(regex !== undefined && { regex }), signal });
    for await (const line of lines)
      context.io.stdout.write(context.json ? `${JSON.stringify({ line })}\n` : `${line}\n`);
  });
}

// ---------------------------------------------------------------------------------------------
// Document database

export async function db(context: CommandContext): Promise<void> {
  const { client } = await signedIn(context);
  const action = arg(context, 0, 'db action (import or export)');
  const { id } = await byIdOrName(client.docdb.databases.list(), arg(context, 1, 'database name or id'), 'database');
  const collection = client.docdb.database(id).collection(arg(context, 2, 'collection'));
  if (action === 'import') {
    const file = arg(context, 3, 'NDJSON file (- for stdin)');
    const size = file === '-' ? null : (await stat(file)).size;
    const bar = new ProgressBar(
      context.json ? { write: () => true } : context.io.stderr,
      `import ${basename(file)}`,
      size,
    );
    let read = 0;
    async function* documents(): AsyncGenerator<Record<string, unknown>> {
      const source = file === '-' ? context.io.stdin : createReadStream(file);
      const lines = createInterface({ input: Readable.from(source), crlfDelay: Infinity });
      let number = 0;
      for await (const line of lines) {
        number++;
        read += Buffer.byteLength(line) + 1;
        bar.update(read);
        if (line.trim() === '') continue;
        try {
          yield JSON.parse(line) as Record<string, unknown>;
        } catch {
          throw new CommandError(`line ${number} of ${file} is not JSON`);
        }
      }
    }
    let stored = 0;
    for await (const _document of collection.insertEach(documents())) stored++;
    bar.finish(read);
    print(context.io, context.json, { imported: stored }, () => `Imported ${stored} documents`);
  } else if (action === 'export') {
    const file = context.args[3];
    const out = file === undefined || file === '-' ? null : createWriteStream(file);
    const bar = new ProgressBar(
      context.json || out === null ? { write: () => true } : context.io.stderr,
      'export',
      null,
    );
    let count = 0;
    const write = (text: string) =>
      out
        ? new Promise<void>((resolve, reject) => out.write(text, (error) => (error ? reject(error) : resolve())))
        : context.io.stdout.write(text);
    for await (const document of collection.find({})) {
      await write(`${JSON.stringify(document)}\n`);
      bar.update(++count);
    }
    if (out) await new Promise<void>((resolve) => out.end(resolve));
    bar.finish(count);
    if (out) print(context.io, context.json, { exported: count, file }, () => `Exported ${count} documents to ${file}`);
  } else throw new UsageError(`unknown db action ${action}`);
}

// ---------------------------------------------------------------------------------------------
// Files

/** `<bucket>:<path>` names a file in a bucket (by bucket name or id); anything else is local. */
function remote(spec: string): { bucket: string; path: string } | null {
  const colon = spec.indexOf(':');
  // A Windows drive letter (`C:\…`) is local.
  if (colon <= 1 || spec.startsWith('.') || spec.startsWith('/')) return null;
  return { bucket: spec.slice(0, colon), path: spec.slice(colon + 1).replace(/^\/+/, '') };
}

/** A bucket's id by its name or id. */
async function bucket(client: StratusClient, target: string): Promise<string> {
  return (await byIdOrName(client.files.buckets.list(), target, 'bucket')).id;
}

export async function files(context: CommandContext): Promise<void> {
  const { client } = await signedIn(context);
  const action = arg(context, 0, 'files action (cp or ls)');
  const quiet = { write: () => true };
  if (action === 'ls') {
    const target = remote(arg(context, 1, '<bucket>:[prefix]')) ?? { bucket: context.args[1]!, path: '' };
    const list = await client.files.bucket(await bucket(client, target.bucket)).list(target.path);
    print(context.io, context.json, list, () =>
      table(
        ['SIZE', 'PATH'],
        list.map((f) => [String(f.size), f.name]),
      ),
    );
    return;
  }
  if (action !== 'cp') throw new UsageError(`unknown files action ${action}`);
  const source = arg(context, 1, 'source');
  const target = arg(context, 2, 'destination');
  const from = remote(source);
  const to = remote(target);
  if ((from === null) === (to === null)) throw new UsageError('one of source and destination must be <bucket>:<path>');
  if (to) {
    const size = (await stat(source)).size;
    const path = to.path === '' || to.path.endsWith('/') ? `${to.path}${basename(source)}` : to.path;
    const bar = new ProgressBar(context.json ? quiet : context.io.stderr, basename(source), size);
    const stored = await client.files
      .bucket(await bucket(client, to.bucket))
      .upload(path, await openAsBlob(source), { onProgress: (p) => bar.update(p.loaded) });
    bar.finish(size);
    print(context.io, context.json, stored, () => `Uploaded ${source} to ${to.bucket}:${path}`);
    return;
  }
  const response = await client.files.bucket(await bucket(client, from!.bucket)).fetch(from!.path);
  const length = response.headers.get('content-length');
  const bar = new ProgressBar(
    context.json ? quiet : context.io.stderr,
    basename(from!.path),
    length === null ? null : Number(length),
  );
  let received = 0;
  const counted = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      received += chunk.byteLength;
      bar.update(received);
      controller.enqueue(chunk);
    },
  });
  const destination = target.endsWith('/') ? `${target}${basename(from!.path)}` : target;
  await pipeline(
    Readable.fromWeb((response.body ?? new Blob([]).stream()).pipeThrough(counted) as never),
    createWriteStream(destination),
  );
  bar.finish(received);
  print(
    context.io,
    context.json,
    { file: destination, bytes: received },
    () => `Downloaded ${source} to ${destination}`,
  );
}

// ---------------------------------------------------------------------------------------------
// Key-value and config

/** A value as typed: JSON when it parses, else the text itself (`kv set prefs theme dark`). */
function valueOf(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export async function kv(context: CommandContext): Promise<void> {
  const { client } = await signedIn(context);
  const action = arg(context, 0, 'kv action (get, set or ls)');
  if (action === 'ls') {
    const name = context.args[1];
    if (name === undefined) {
      const collections = await client.kv.listCollections();
      print(context.io, context.json, collections, () => collections.join('\n'));
    } else {
      const page = await client.kv
        .collection(name)
        .list({ ...(flag(context, 'prefix') !== undefined && { prefix: flag(context, 'prefix') }) });
      print(context.io, context.json, page, () => page.items.map((entry) => entry.key).join('\n'));
    }
    return;
  }
  const collection = client.kv.collection(arg(context, 1, 'collection'));
  const key = arg(context, 2, 'key');
  if (action === 'get') {
    const entry = await collection.get(key);
    print(context.io, context.json, entry, () =>
      typeof entry.value === 'string' ? entry.value : JSON.stringify(entry.value),
    );
  } else if (action === 'set') {
    let text = arg(context, 3, 'value (- for stdin)');
    if (text === '-') text = await readAll(context.io.stdin);
    // The collection is made on first use, as `mkdir -p` would.
    await client.kv.createCollection(context.args[1]!).catch((error: unknown) => {
      if (!(error instanceof StratusError && error.status === 409)) throw error;
    });
    const written = await collection.set(key, valueOf(text));
    print(context.io, context.json, written, () => `Set ${context.args[1]}/${key}`);
  } else throw new UsageError(`unknown kv action ${action}`);
}

export async function config(context: CommandContext): Promise<void> {
  const { client } = await signedIn(context);
  const action = arg(context, 0, 'config action (get or set)');
  if (action === 'get') {
    const entries = await client.config.get();
    const key = context.args[1];
    if (key === undefined) {
      print(context.io, context.json, entries, () =>
        Object.entries(entries)
          .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
          .join('\n'),
      );
    } else {
      if (!(key in entries)) throw new StratusError(404, 'not_found', `no config entry ${key}`);
      const value = (entries as Record<string, unknown>)[key];
      print(context.io, context.json, { [key]: value }, () =>
        typeof value === 'string' ? value : JSON.stringify(value),
      );
    }
  } else if (action === 'set') {
    const key = arg(context, 1, 'key');
    const value = valueOf(arg(context, 2, 'value'));
    const entries = await client.config.patch({ [key]: value });
    print(context.io, context.json, entries, () => `Set ${key}`);
  } else throw new UsageError(`unknown config action ${action}`);
}
