import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadSettings, SettingsError } from '../../../src/config.ts';
import {
  keyFingerprint,
  LambdaSecrets,
  readOrCreateKeyFile,
  SECRETS_KEY_FILE,
  SecretsKeyMismatch,
  SecretsUnreadable,
} from '../../../src/services/lambda/secrets.ts';

const VALUES = { API_TOKEN: 'tok-3f9a1c-very-secret', EMPTY: '', UNICODE: 'päss 🔑', __proto__x: 'p' };

describe('lambda secrets at rest', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-secrets-'));
    dirs.push(dir);
    return dir;
  };
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('round-trips, with a fresh IV per seal and no plaintext in the sealed text', () => {
    const secrets = new LambdaSecrets(randomBytes(32));
    const one = secrets.seal('lambda-1', VALUES);
    const two = secrets.seal('lambda-1', VALUES);
    assert.notEqual(one, two);
    assert.deepEqual(secrets.open('lambda-1', one), VALUES);
    assert.deepEqual(secrets.open('lambda-1', two), VALUES);
    for (const value of ['tok-3f9a1c-very-secret', 'API_TOKEN', Buffer.from('tok-3f9a1c').toString('base64')]) {
      assert.ok(!one.includes(value), value);
    }
    // An own __proto__ member survives as a member, not as a prototype.
    const proto = JSON.parse('{"__proto__":"x"}') as Record<string, string>;
    const opened = secrets.open('l', secrets.seal('l', proto));
    assert.equal(Object.getPrototypeOf(opened), Object.prototype);
    assert.deepEqual(Object.entries(opened), [['__proto__', 'x']]);
  });

  it('names the key: another key gives a clear error naming LAMBDA_SECRETS_KEY', () => {
    const sealed = new LambdaSecrets(randomBytes(32)).seal('lambda-1', VALUES);
    const other = new LambdaSecrets(randomBytes(32));
    assert.throws(
      () => other.open('lambda-1', sealed),
      (error: Error) =>
        error instanceof SecretsKeyMismatch &&
        error.message ===
          'the secrets of lambda lambda-1 were encrypted with another key: every instance needs the same LAMBDA_SECRETS_KEY',
    );
  });

  it('refuses a tampered ciphertext, IV or fingerprint-preserving change, and a value moved to another lambda', () => {
    const secrets = new LambdaSecrets(randomBytes(32));
    const sealed = secrets.seal('lambda-1', VALUES);
    const [version, fingerprint, iv, body] = sealed.split('.') as [string, string, string, string];
    const flip = (text: string, at: number) => {
      const bytes = Buffer.from(text, 'base64url');
      bytes[at] = bytes[at]! ^ 1;
      return bytes.toString('base64url');
    };
    const tampered = [
      [version, fingerprint, iv, flip(body, 0)].join('.'),
      [version, fingerprint, iv, flip(body, Buffer.from(body, 'base64url').length - 1)].join('.'),
      [version, fingerprint, flip(iv, 3), body].join('.'),
      [version, fingerprint, iv, body.slice(0, 10)].join('.'),
      'v2.' + [fingerprint, iv, body].join('.'),
      'garbage',
    ];
    for (const text of tampered) {
      assert.throws(() => secrets.open('lambda-1', text), SecretsUnreadable, text);
    }
    assert.throws(
      () => secrets.open('lambda-2', sealed),
      (error: Error) => error instanceof SecretsUnreadable && /lambda lambda-2 cannot be decrypted/.test(error.message),
    );
    // Nothing of the values is in the messages.
    try {
      secrets.open('lambda-2', sealed);
    } catch (error) {
      assert.ok(!(error as Error).message.includes('tok-3f9a1c'));
    }
  });

  it('fingerprints a key as the first 8 bytes of its SHA-256', () => {
    const key = Buffer.alloc(32, 7);
    assert.match(keyFingerprint(key), /^[0-9a-f]{16}$/);
    assert.equal(keyFingerprint(key), keyFingerprint(Buffer.alloc(32, 7)));
    assert.notEqual(keyFingerprint(key), keyFingerprint(Buffer.alloc(32, 8)));
    const sealed = new LambdaSecrets(key).seal('l', {});
    assert.equal(sealed.split('.')[1], keyFingerprint(key));
  });

  it('reads LAMBDA_SECRETS_KEY as 64 hex characters or base64 of 32 bytes, never echoing a bad value', () => {
    const key = randomBytes(32);
    const read = (value: string) => loadSettings({}, { LAMBDA_SECRETS_KEY: value }, '/nonexistent').lambdaSecretsKey;
    assert.equal(loadSettings({}, {}, '/nonexistent').lambdaSecretsKey, undefined);
    assert.deepEqual(read(key.toString('hex')), key);
    assert.deepEqual(read(key.toString('hex').toUpperCase()), key);
    assert.deepEqual(read(key.toString('base64')), key);
    assert.deepEqual(read(key.toString('base64').replace(/=$/, '')), key);
    assert.deepEqual(read(key.toString('base64url')), key);
    assert.deepEqual(read(` ${key.toString('hex')}\n`), key);
    for (const bad of [
      'not-a-key-at-all',
      key.toString('hex').slice(0, 62),
      key.toString('hex') + 'ab',
      randomBytes(31).toString('base64'),
      randomBytes(33).toString('base64'),
      randomBytes(16).toString('hex'),
      'g'.repeat(64),
    ]) {
      assert.throws(
        () => read(bad),
        (error: Error) =>
          error instanceof SettingsError &&
          error.message.includes('LAMBDA_SECRETS_KEY') &&
          !error.message.includes(bad),
        bad,
      );
    }
  });

  it('creates the key file on first need with mode 0600, and reuses it', () => {
    const dataDir = join(tempDir(), 'data');
    const secrets = LambdaSecrets.fromSettings({ dataDir, lambdaSecretsKey: undefined });
    const path = join(dataDir, SECRETS_KEY_FILE);
    assert.throws(() => statSync(path), /ENOENT/, 'no key file before one is needed');
    const sealed = secrets.seal('lambda-1', VALUES);
    const stat = statSync(path);
    assert.equal(stat.mode & 0o777, 0o600);
    assert.equal(stat.size, 32);
    assert.deepEqual(readdirSync(dataDir), [SECRETS_KEY_FILE], 'no temporary file is left');
    // Another process on the same data directory reads the same key.
    const again = LambdaSecrets.fromSettings({ dataDir, lambdaSecretsKey: undefined });
    assert.deepEqual(again.open('lambda-1', sealed), VALUES);
    assert.equal(readOrCreateKeyFile(path).created, false);
    // The setting wins over the file.
    const configured = LambdaSecrets.fromSettings({ dataDir, lambdaSecretsKey: randomBytes(32) });
    assert.throws(() => configured.open('lambda-1', sealed), SecretsKeyMismatch);
  });

  it('never overwrites a key file another process created first', () => {
    const path = join(tempDir(), SECRETS_KEY_FILE);
    const first = readOrCreateKeyFile(path);
    assert.equal(first.created, true);
    const second = readOrCreateKeyFile(path);
    assert.equal(second.created, false);
    assert.deepEqual(second.key, first.key);
    assert.deepEqual(readFileSync(path), first.key);
  });

  it('gives processes racing to create the key file one key', async () => {
    const path = join(tempDir(), 'nested', SECRETS_KEY_FILE);
    const module = new URL('../../../src/services/lambda/secrets.ts', import.meta.url).href;
    // Each process waits for the same moment before it looks, so they really race.
    const startAt = Date.now() + 3000;
    const script = `const { readOrCreateKeyFile } = await import(${JSON.stringify(module)});
      while (Date.now() < ${startAt});
      const { key, created } = readOrCreateKeyFile(${JSON.stringify(path)});
      process.stdout.write(JSON.stringify({ key: key.toString('hex'), created }));`;
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script]),
      ),
    );
    const answers = results.map((r) => JSON.parse(r.stdout) as { key: string; created: boolean });
    assert.equal(new Set(answers.map((a) => a.key)).size, 1);
    assert.equal(answers.filter((a) => a.created).length, 1);
    assert.equal(readFileSync(path).toString('hex'), answers[0]!.key);
    assert.equal(statSync(path).mode & 0o777, 0o600);
  });

  it('reports where the key file is not a key', () => {
    const path = join(tempDir(), SECRETS_KEY_FILE);
    writeFileSync(path, 'short');
    assert.throws(() => readOrCreateKeyFile(path), /must hold exactly 32 bytes/);
    const created: string[] = [];
    const dataDir = tempDir();
    const secrets = LambdaSecrets.fromSettings({ dataDir, lambdaSecretsKey: undefined }, (p) => created.push(p));
    secrets.seal('l', {});
    secrets.seal('l', {});
    assert.deepEqual(created, [join(dataDir, SECRETS_KEY_FILE)]);
  });
});
