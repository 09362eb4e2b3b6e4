import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  DraftError,
  actualView,
  envBody,
  envRowsOf,
  hostUrl,
  newVolumeRow,
  shortDigest,
  targetText,
  volumeRowsOf,
  volumesBody,
} from '../../../src/services/console/ui/src/run-change.ts';

const DIGEST = `sha256:${'ab'.repeat(32)}`;

describe('container page: env and volume lists from the rows', () => {
  it('sends the env rows as the whole list, keys trimmed, values as typed', () => {
    const rows = envRowsOf([
      { key: 'MODE', desired_value: 'production' },
      { key: 'PORT', desired_value: '8080' },
    ]);
    assert.deepEqual(
      rows.map((r) => [r.name, r.value]),
      [
        ['MODE', 'production'],
        ['PORT', '8080'],
      ],
    );
    rows[0]!.name = ' MODE ';
    rows[1]!.value = ' spaced ';
    assert.deepEqual(envBody(rows), [
      { key: 'MODE', desired_value: 'production' },
      { key: 'PORT', desired_value: ' spaced ' },
    ]);
    assert.deepEqual(envBody([]), [], 'no rows clear the list');
  });

  it('says what is wrong with an env row before sending', () => {
    const row = (name: string) => ({ key: 0, name, value: 'v' });
    assert.throws(() => envBody([row('')]), DraftError);
    assert.throws(() => envBody([row('1BAD')]), /letters, digits and _/);
    assert.throws(() => envBody([row('A-B')]), DraftError);
    assert.throws(() => envBody([row('A'), row('A')]), /listed twice/);
  });

  it('sends volumes with their mode, and refuses unnamed, doubled or relative ones', () => {
    const rows = volumeRowsOf([
      { name: 'data', target: '/data', mode: 'rw' },
      { name: 'conf', target: '/etc/app', mode: 'ro' },
    ]);
    assert.deepEqual(volumesBody(rows), [
      { name: 'data', target: '/data', mode: 'rw' },
      { name: 'conf', target: '/etc/app', mode: 'ro' },
    ]);
    assert.equal(newVolumeRow().mode, 'rw');
    assert.throws(() => volumesBody([{ ...newVolumeRow(), target: '/x' }]), /name/);
    assert.throws(() => volumesBody([{ ...newVolumeRow(), name: 'a', target: 'relative' }]), /absolute/);
    assert.throws(
      () =>
        volumesBody([
          { ...newVolumeRow(), name: 'a', target: '/a' },
          { ...newVolumeRow(), name: 'a', target: '/b' },
        ]),
      /listed twice/,
    );
  });
});

describe('container page: how states read', () => {
  it('shortens digests and names what runs', () => {
    assert.equal(shortDigest(DIGEST), 'sha256:abababababab');
    assert.equal(shortDigest(null), '');
    assert.equal(targetText({ reference: 'v1', digest: DIGEST }), 'v1');
    assert.equal(targetText({ reference: null, digest: DIGEST }), 'sha256:abababababab');
    assert.equal(targetText({ reference: null, digest: null }), '—');
  });

  it('shows running as ok, failed and exited as errors with why, unknown as muted', () => {
    const at = '2026-01-01T00:00:00Z';
    const base = { reference: 'v1', digest: DIGEST, applied_at: at };
    assert.deepEqual(actualView({ ...base, state: 'running' }, 'podman'), {
      label: 'running',
      tone: 'ok',
      note: null,
    });
    assert.deepEqual(actualView({ ...base, state: 'failed', message: 'exec: not found' }, 'podman'), {
      label: 'failed',
      tone: 'bad',
      note: 'exec: not found',
    });
    assert.equal(actualView({ ...base, state: 'exited', exit_code: 3 }, 'podman').label, 'exited (code 3)');
    assert.deepEqual(actualView({ ...base, state: 'unknown' }, 'recording'), {
      label: 'unknown',
      tone: 'muted',
      note: 'the recording driver runs nothing',
    });
    assert.equal(actualView({ ...base, state: 'unknown', message: 'engine down' }, 'podman').note, 'engine down');
    assert.equal(actualView(null, 'podman').tone, 'muted');
    assert.equal(actualView({ ...base, state: 'starting' }, 'podman').tone, 'plain');
  });

  it("links a host with the page's scheme and port", () => {
    assert.equal(hostUrl('app.run.localhost', { protocol: 'http:', port: '8080' }), 'http://app.run.localhost:8080/');
    assert.equal(hostUrl('app.run.example.com', { protocol: 'https:', port: '' }), 'https://app.run.example.com/');
  });
});
