import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { BlobGoneError, BlobRefs } from '../../src/store/blob/refs.ts';
import { migrateStore, openStore, type Store } from '../../src/store/index.ts';
import { SqlWork } from '../../src/store/sql-work.ts';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';

// Runs on the database STRATUS_TEST_DB names (SQLite by default, PostgreSQL with test:pg), with the
// blob store that database goes with (a directory, or PostgreSQL chunks).
let database: TestDatabase;
let store: Store;
let clock = 1_000_000;
let refs: BlobRefs;
let work: SqlWork;

before(async () => {
  database = await createTestDatabase();
  store = await openStore({ dataDir: database.dataDir, databaseUrl: database.databaseUrl, sqliteSynchronous: 'FULL' });
  await migrateStore(store, []);
  refs = new BlobRefs(store.sql, store.blobs, { graceMs: 1000, now: () => clock });
  work = new SqlWork(store.sql);
});
after(async () => {
  await refs.stop();
  await store.close();
  await database.cleanup();
});

let counter = 0;
async function putBlob(text = `blob ${testDialect} ${counter++} ${Math.random()}`): Promise<string> {
  const info = await store.blobs.put(Readable.from([Buffer.from(text)]));
  assert.equal(info.sha256, createHash('sha256').update(text).digest('hex'));
  return info.sha256;
}

async function reference(sha256: string, holder: string): Promise<void> {
  const pin = await refs.pin(sha256);
  await work.write(() => refs.addWork(pin, holder));
}

const exists = async (sha256: string) => (await store.blobs.stat(sha256)) !== null;

describe(`blob references (${testDialect})`, () => {
  test('a referenced blob survives sweeps; losing its last reference deletes it once due', async () => {
    const sha = await putBlob();
    await reference(sha, 'test:a');
    await reference(sha, 'test:b');
    await reference(sha, 'test:b'); // idempotent
    assert.equal(await refs.countRefs(sha), 2);
    clock += 10_000;
    assert.equal(await refs.sweep(), 0);
    assert.ok(await exists(sha));

    await work.write(() => refs.removeWork(sha, 'test:a'));
    clock += 10_000;
    assert.equal(await refs.sweep(), 0, 'still referenced by test:b');
    assert.ok(await exists(sha));

    await work.write(() => refs.removeWork(sha, 'test:b'));
    assert.equal(await refs.sweep(), 0, 'not due yet: the grace period protects readers');
    assert.ok(await exists(sha));
    clock += 999;
    assert.equal(await refs.sweep(), 0);
    clock += 1;
    assert.equal(await refs.sweep(), 1);
    assert.equal(await exists(sha), false);
    assert.equal(await refs.sweep(), 0, 'the candidate is gone too');
  });

  test('a pin that never becomes a reference (failed write) leaves a candidate: the blob is swept', async () => {
    const sha = await putBlob();
    await refs.pin(sha);
    clock += 1000;
    assert.equal(await refs.sweep(), 1);
    assert.equal(await exists(sha), false);
  });

  test('a newer candidate restarts the grace period', async () => {
    const sha = await putBlob();
    await refs.markCandidate(sha);
    clock += 600;
    await refs.markCandidate(sha);
    clock += 600;
    assert.equal(await refs.sweep(), 0, 'the first is due but the second is not');
    assert.ok(await exists(sha));
    clock += 600;
    assert.equal(await refs.sweep(), 1);
    assert.equal(await exists(sha), false);
  });

  test('pin fails with BlobGoneError when the blob was deleted (a put that raced a sweep)', async () => {
    const sha = await putBlob();
    await store.blobs.delete(sha);
    await assert.rejects(refs.pin(sha), BlobGoneError);
  });

  test('adding after the pin was swept fails with BlobGoneError and rolls the write back', async () => {
    const sha = await putBlob();
    const pin = await refs.pin(sha);
    clock += 1000;
    assert.equal(await refs.sweep(), 1);
    await assert.rejects(
      work.write(function* () {
        yield* refs.addWork(pin, 'test:late');
      }),
      BlobGoneError,
    );
    assert.equal(await refs.countRefs(sha), 0);
  });

  test('a swept pin still becomes a reference when another reference kept the blob', async () => {
    const sha = await putBlob();
    await reference(sha, 'keeper');
    const pin = await refs.pin(sha);
    clock += 1000;
    assert.equal(await refs.sweep(), 0, 'referenced: the sweep only drops the due pin');
    await work.write(() => refs.addWork(pin, 'second'));
    assert.equal(await refs.countRefs(sha), 2);
    assert.ok(await exists(sha));
  });

  test('removeHoldersWork drops every reference of the holders; only unreferenced blobs go', async () => {
    const one = await putBlob();
    const two = await putBlob();
    await reference(one, 'bucket:1');
    await reference(two, 'bucket:2');
    await reference(two, 'other-service:9');
    const removed = await work.write(() => refs.removeHoldersWork(['bucket:1', 'bucket:2', 'bucket:none']));
    assert.equal(removed, 2);
    clock += 1000;
    assert.equal(await refs.sweep(), 1);
    assert.equal(await exists(one), false);
    assert.ok(await exists(two), 'another holder still references it');
    assert.equal(await refs.countRefs(two), 1);
  });

  test('adding and sweeping exclude each other: concurrent adds and sweeps never leave a reference to a missing blob', async () => {
    for (let round = 0; round < 20; round++) {
      const sha = await putBlob(`contended ${testDialect} ${round}`);
      await refs.markCandidate(sha);
      clock += 1000;
      // The write pins and references while a sweep finds the old, due candidate.
      const adding = (async () => {
        try {
          await reference(sha, `race:${round}`);
          return true;
        } catch (error) {
          assert.ok(error instanceof BlobGoneError, String(error));
          return false;
        }
      })();
      const [added] = await Promise.all([adding, refs.sweep()]);
      const referenced = (await refs.countRefs(sha)) > 0;
      assert.equal(referenced, added);
      if (referenced) assert.ok(await exists(sha), `round ${round}: a reference points at a deleted blob`);
    }
  });

  test('the background sweeper runs on its interval and stops', async () => {
    const background = new BlobRefs(store.sql, store.blobs, { graceMs: 0, sweepIntervalMs: 10 });
    const sha = await putBlob();
    await background.markCandidate(sha);
    background.start();
    const deadline = Date.now() + 5000;
    while (await exists(sha)) {
      assert.ok(Date.now() < deadline, 'the sweeper did not run');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await background.stop();
    const kept = await putBlob();
    await background.markCandidate(kept);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.ok(await exists(kept), 'a stopped sweeper deletes nothing');
  });
});
