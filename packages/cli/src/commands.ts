import { createReadStream, createWriteStream, openAsBlob } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createClient, StratusError, type StratusClient } from '@stratus/client';
import { readCredentials, removeCredentials, writeCredentials, type Credentials } from './credentials.ts';
import { CommandError, print, readAll, table, UsageError, type CommandIo } from './io.ts';
import { ProgressBar } from './progress.ts';

/** What every command gets: its arguments after the command words, the flags, and where to write. */
export interface CommandContext {
  args: string[];
  flags: Record<string, string | boolean | undefined>;
  io: CommandIo;
  /** `--json`: machine-readable output, no progress bars. */
  json: boolean;
  credentialsPath: string;
}

const DEFAULT_URL = 'http://localhost:8080';

function flag(context: CommandContext, name: string): string | undefined {
  const value = context.flags[name];
  return typeof value === 'string' ? value : undefined;
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

export async function lambda(context: CommandContext): Promise<void> {
  const { client } = await signedIn(context);
  const action = arg(context, 0, 'lambda action (deploy, list or invoke)');
  if (action === 'deploy') {
    const file = arg(context, 1, 'the file to deploy');
    const code = await readAll(createReadStream(file));
    const name = flag(context, 'name') ?? basename(file).replace(/\.[^.]*$/, '');
    const path = flag(context, 'path');
    const method = flag(context, 'method');
    // Deploying a name that exists replaces its code (and path or method when given).
    const existing = (await client.lambda.list()).find((l) => l.name === name);
    const deployed = existing
      ? await client.lambda.update(existing.id, { code, ...(path && { path }), ...(method && { method }) })
      : await client.lambda.create({ name, code, ...(path && { path }), ...(method && { method }) });
    print(
      context.io,
      context.json,
      deployed,
      () =>
        `${existing ? 'Updated' : 'Deployed'} ${deployed.name} (${deployed.id}): ${deployed.method} ${deployed.path}`,
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
  } else throw new UsageError(`unknown lambda action ${action}`);
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
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once('SIGINT', stop);
  try {
    const lines = client.logs.logger(found.id).follow({ ...(regex !== undefined && { regex }), signal: abort.signal });
    for await (const line of lines)
      context.io.stdout.write(context.json ? `${JSON.stringify({ line })}\n` : `${line}\n`);
  } catch (error) {
    if (!abort.signal.aborted) throw error;
  } finally {
    process.removeListener('SIGINT', stop);
  }
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
