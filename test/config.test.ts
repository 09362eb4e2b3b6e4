import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSettings, SettingsError } from '../src/config.ts';

describe('settings', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-settings-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('has the documented defaults', () => {
    const s = loadSettings({}, {}, dir);
    assert.equal(s.port, 8080);
    assert.equal(s.internalPort, 8081);
    assert.equal(s.domain, 'localhost');
    assert.equal(s.dataDir, './data');
    assert.equal(s.databaseUrl, undefined);
    assert.equal(s.signup, 'closed');
    assert.equal(s.cookieSecure, true);
    assert.equal(s.services, null);
    assert.equal(s.sqliteSynchronous, 'FULL');
  });

  it('takes flags over env over the config file over defaults', () => {
    const file = join(dir, 'precedence.json');
    writeFileSync(file, JSON.stringify({ port: 7000, internalPort: 7001, domain: 'file.test', logLevel: 'warn' }));
    const s = loadSettings({ config: file, port: '9000' }, { PORT: '8000', INTERNAL_PORT: '8001' }, dir);
    assert.equal(s.port, 9000);
    assert.equal(s.internalPort, 8001);
    assert.equal(s.domain, 'file.test');
    assert.equal(s.logLevel, 'warn');
  });

  it('reads stratus.config.json from the working directory, with SSO providers', () => {
    const cwd = mkdtempSync(join(dir, 'cwd-'));
    writeFileSync(
      join(cwd, 'stratus.config.json'),
      JSON.stringify({
        signup: 'open',
        services: ['config', 'apikeys'],
        auth: { providers: [{ name: 'idp', issuer: 'https://idp.test', clientId: 'c', clientSecret: 's' }] },
      }),
    );
    const s = loadSettings({}, {}, cwd);
    assert.equal(s.signup, 'open');
    assert.deepEqual(s.services, ['config', 'apikeys']);
    assert.deepEqual(s.authProviders, [{ name: 'idp', issuer: 'https://idp.test', clientId: 'c', clientSecret: 's' }]);
  });

  it('parses lists and booleans from the environment', () => {
    const s = loadSettings({}, { SCHEDULER_API_KEYS: 'a, b,,c', COOKIE_SECURE: 'false', SERVICES: 'config' }, dir);
    assert.deepEqual(s.schedulerApiKeys, ['a', 'b', 'c']);
    assert.equal(s.cookieSecure, false);
    assert.deepEqual(s.services, ['config']);
  });

  it('reads byte sizes with and without units', () => {
    const defaults = loadSettings({}, {}, dir);
    assert.equal(defaults.logsMaxBytes, 1024 ** 3);
    assert.equal(defaults.logsMaxIngestBytes, 64 * 1024 ** 2);
    assert.equal(defaults.filesMaxUploadBytes, 10 * 1024 ** 3);
    assert.equal(defaults.runMaxBlobBytes, 10 * 1024 ** 3);
    assert.equal(defaults.runDriver, 'recording');
    assert.equal(defaults.consoleDemo, false);
    assert.equal(loadSettings({}, { CONSOLE_DEMO: '1' }, dir).consoleDemo, true);
    const s = loadSettings(
      {},
      { LOGS_MAX_BYTES: '64MiB', LOGS_MAX_INGEST_BYTES: '1048576', FILES_MAX_UPLOAD_BYTES: '2 GB' },
      dir,
    );
    assert.equal(s.logsMaxBytes, 64 * 1024 ** 2);
    assert.equal(s.logsMaxIngestBytes, 1048576);
    assert.equal(s.filesMaxUploadBytes, 2e9);
    for (const bad of ['0', '-5', '1.5GiB', '12 parsecs']) {
      assert.throws(
        () => loadSettings({}, { LOGS_MAX_BYTES: bad }, dir),
        (e: unknown) =>
          e instanceof SettingsError && /LOGS_MAX_BYTES: .* must be a positive size in bytes/.test(e.message),
      );
    }
  });

  it('reads the SQLite page cache and memory-map sizes, where 0 turns the map off', () => {
    const defaults = loadSettings({}, {}, dir);
    assert.equal(defaults.sqliteCacheBytes, 32 * 1024 ** 2);
    assert.equal(defaults.sqliteMmapBytes, 0);
    const s = loadSettings({}, { SQLITE_CACHE: '64MiB', SQLITE_MMAP: '1GiB' }, dir);
    assert.equal(s.sqliteCacheBytes, 64 * 1024 ** 2);
    assert.equal(s.sqliteMmapBytes, 1024 ** 3);
    assert.equal(loadSettings({}, { SQLITE_MMAP: '0' }, dir).sqliteMmapBytes, 0);
    assert.throws(() => loadSettings({}, { SQLITE_CACHE: '0' }, dir), /SQLITE_CACHE: .* must be a positive size/);
    assert.throws(() => loadSettings({}, { SQLITE_MMAP: '-1' }, dir), /SQLITE_MMAP: .* must be a positive size/);
  });

  it('reads IDLE_MEMORY_RELEASE as whole seconds, 0 turning the release off', () => {
    assert.equal(loadSettings({}, {}, dir).idleMemoryReleaseSeconds, 0, 'off unless asked for');
    assert.equal(loadSettings({}, { IDLE_MEMORY_RELEASE: '30' }, dir).idleMemoryReleaseSeconds, 30);
    assert.equal(loadSettings({}, { IDLE_MEMORY_RELEASE: '0' }, dir).idleMemoryReleaseSeconds, 0);
    assert.throws(() => loadSettings({}, { IDLE_MEMORY_RELEASE: '-1' }, dir), /IDLE_MEMORY_RELEASE/);
  });

  it('reads the key-value node settings', () => {
    const defaults = loadSettings({}, {}, dir);
    assert.equal(defaults.kvParentUrl, undefined);
    assert.ok(defaults.kvNodeName.length > 0);
    assert.deepEqual(defaults.kvParentHeaders, {});
    const s = loadSettings(
      { kvParentUrl: 'http://127.0.0.2:8081/', kvNodeName: 'edge-1' },
      { KV_PARENT_HEADERS: '{"Api-Key":"k","Api-Secret":"s"}' },
      dir,
    );
    assert.equal(s.kvParentUrl, 'http://127.0.0.2:8081');
    assert.equal(s.kvNodeName, 'edge-1');
    assert.deepEqual(s.kvParentHeaders, { 'Api-Key': 'k', 'Api-Secret': 's' });
    const file = join(dir, 'kv.json');
    writeFileSync(file, JSON.stringify({ kvParentHeaders: { apikey: 'a', secret: 'b' } }));
    assert.deepEqual(loadSettings({ config: file }, {}, dir).kvParentHeaders, { apikey: 'a', secret: 'b' });
    assert.throws(() => loadSettings({}, { KV_PARENT_URL: 'ftp://x' }, dir), /KV_PARENT_URL must be an http/);
    assert.throws(
      () => loadSettings({}, { KV_PARENT_HEADERS: '{"a":1}' }, dir),
      /KV_PARENT_HEADERS must be a JSON object/,
    );
  });

  it('reads the metrics token and the access-log switch, never repeating a bad token', () => {
    const defaults = loadSettings({}, {}, dir);
    assert.equal(defaults.metricsToken, undefined);
    assert.equal(defaults.accessLog, true);
    const set = loadSettings({}, { METRICS_TOKEN: 'scrape-0123456789abcdef', ACCESS_LOG: 'off' }, dir);
    assert.equal(set.metricsToken, 'scrape-0123456789abcdef');
    assert.equal(set.accessLog, false);
    for (const bad of ['short-token', 'has a space in it, 16+ chars'])
      assert.throws(
        () => loadSettings({}, { METRICS_TOKEN: bad }, dir),
        (e: unknown) => e instanceof SettingsError && /METRICS_TOKEN/.test(e.message) && !e.message.includes(bad),
      );
  });

  it('rejects bad values with messages that name their source', () => {
    const cases: [Parameters<typeof loadSettings>[0], NodeJS.ProcessEnv, RegExp][] = [
      [{ port: 'abc' }, {}, /--port: "abc" is not a port/],
      [{}, { PORT: '70000' }, /PORT: "70000"/],
      [{}, { DATABASE_URL: 'mysql://x' }, /DATABASE_URL must be a postgres/],
      [{}, { SIGNUP: 'maybe' }, /SIGNUP: "maybe" must be one of open, closed/],
      [{ services: 'config,nope' }, {}, /unknown service "nope"/],
      [{}, { COOKIE_SECURE: 'perhaps' }, /COOKIE_SECURE/],
      [{ domain: 'bad domain' }, {}, /--domain/],
      [{ config: join(dir, 'missing.json') }, {}, /does not exist/],
    ];
    for (const [flags, env, message] of cases)
      assert.throws(
        () => loadSettings(flags, env, dir),
        (e: unknown) => e instanceof SettingsError && message.test(e.message),
      );
  });

  it('rejects a config file with unknown keys or bad JSON', () => {
    const unknown = join(dir, 'unknown.json');
    writeFileSync(unknown, '{"prot": 1}');
    assert.throws(() => loadSettings({ config: unknown }, {}, dir), /unknown setting "prot"/);
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{');
    assert.throws(() => loadSettings({ config: broken }, {}, dir), /not valid JSON/);
  });
});
