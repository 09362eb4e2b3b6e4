import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { BlobGoneError, BlobRefs, STALE_TOMBSTONE_MS } from '../../src/store/blob/refs.ts';
import type { BlobStore } from '../../src/store/blob/types.ts';
import { migrateStore, openStore, type Store } from '../../src/store/index.ts';
import { all, run } from '../../src/store/sql-work.ts';
import type { SqlDatabase } from '../../src/store/sql/types.ts';
import { createTestDatabase, testDialect, type TestDatabase } from '../helpers/database.ts';
import { deferred, within } from '../helpers/waiting.ts';

// Runs on the database STRATUS_TEST_DB names (SQLite by default, PostgreSQL with test:pg), with the
// blob store that database goes with (a directory, or PostgreSQL chunks).
let database: TestDatabase;
let store: Store;
let clock = 1_000_000;
let refs: BlobRefs;
let port: SqlDatabase;

before(async () => {
  database = await createTestDatabase();
  store = await openStore({ dataDir: database.dataDir, databaseUrl: database.databaseUrl, sqliteSynchronous: 'FULL' });
  await migrateStore(store, []);
  refs = new BlobRefs(store.sql, store.blobs, { graceMs: 1000, now: () => clock });
  port = store.sql.database;
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
  await port.write(() => refs.addWork(pin, holder));
}

const exists = async (sha256: string) => (await store.blobs.stat(sha256)) !== null;
const tombstones = async () =>
  (await port.read(() => all<{ sha256: string }>('select sha256 from stratus_blob_doomed'))).map((row) => row.sha256);
/** What a sweeper that died between deciding on a blob and deleting it leaves behind. */
const leaveTombstone = (sha256: string) =>
  port.write(() => run('insert into stratus_blob_doomed (sha256, since_ms) values (?, ?)', sha256, clock));
/** The blob store, but deleting `gated` waits for `release` once it has announced itself on `deleting`. */
function gatedBlobs(gated: string, deleting: { resolve(): void }, release: Promise<void>): BlobStore {
  return {
    put: (source, options) => store.blobs.put(source, options),
    stat: (sha256) => store.blobs.stat(sha256),
    get: (sha256, range) => store.blobs.get(sha256, range),
    async delete(sha256) {
      if (sha256 === gated) {
        deleting.resolve();
        await release;
      }
      return store.blobs.delete(sha256);
    },
  };
}
/** Sweeps what earlier tests left due, so a test counts only its own deletions. */
async function sweepLeftovers(): Promise<void> {
  clock += 1000;
  await refs.sweep();
}

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

    await port.write(() => refs.removeWork(sha, 'test:a'));
    clock += 10_000;
    assert.equal(await refs.sweep(), 0, 'still referenced by test:b');
    assert.ok(await exists(sha));

    await port.write(() => refs.removeWork(sha, 'test:b'));
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
      port.write(function* () {
        yield* refs.addWork(pin, 'test:late');
      }),
      BlobGoneError,
    );
    assert.equal(await refs.countRefs(sha), 0);
  });

  for (const { kept, by, refsAfter } of [
    { kept: 'another reference', by: 'keeper', refsAfter: 2 },
    { kept: 'the same holder', by: 'same', refsAfter: 1 },
  ])
    test(`a swept pin still becomes a reference when ${kept} kept the blob`, async () => {
      const sha = await putBlob();
      await reference(sha, by);
      const pin = await refs.pin(sha);
      clock += 1000;
      assert.equal(await refs.sweep(), 0, 'referenced: the sweep only drops the due pin');
      await port.write(() => refs.addWork(pin, by === 'keeper' ? 'second' : by));
      assert.equal(await refs.countRefs(sha), refsAfter);
      assert.ok(await exists(sha));
    });

  test('a put with candidateDueAt pins new content in the database store; pinPut takes that pin or pins anew', async () => {
    const text = `pinned at put ${testDialect} ${Math.random()}`;
    const first = await store.blobs.put(Readable.from([Buffer.from(text)]), { candidateDueAt: refs.candidateDueAt() });
    const candidates = async () =>
      (
        await port.read(() =>
          all<{ id: number | string }>('select id from stratus_blob_candidates where sha256 = ?', first.sha256),
        )
      ).map((row) => Number(row.id));
    if (store.sql.database.dialect === 'postgres') {
      assert.equal(typeof first.candidate, 'number');
      assert.deepEqual(await candidates(), [first.candidate]);
    } else assert.equal(first.candidate, undefined, 'the directory store keeps no rows');
    // The same content again is stored already: no candidate comes with it, pinPut pins it.
    const again = await store.blobs.put(Readable.from([Buffer.from(text)]), { candidateDueAt: refs.candidateDueAt() });
    assert.equal(again.candidate, undefined);
    const pin = await refs.pinPut(first);
    const second = await refs.pinPut(again);
    assert.notEqual(second.id, pin.id);
    if (first.candidate !== undefined) assert.equal(pin.id, first.candidate);
    await port.write(() => refs.addWork(pin, 'test:pinned-at-put'));
    await port.write(() => refs.addWork(second, 'test:pinned-after'));
    assert.equal(await refs.countRefs(first.sha256), 2);
    assert.deepEqual(await candidates(), [], 'both pins became references');
  });

  test('small puts that end together: each stored whole, new content pinned once, a repeat pinned by pinPut', async () => {
    const texts = Array.from({ length: 40 }, (_, i) => `together ${testDialect} ${i % 30} ${counter}`);
    texts.push('');
    counter++;
    const infos = await Promise.all(
      texts.map((text) =>
        store.blobs.put(Readable.from([Buffer.from(text)]), { candidateDueAt: refs.candidateDueAt() }),
      ),
    );
    for (const [i, info] of infos.entries()) {
      assert.equal(info.sha256, createHash('sha256').update(texts[i]!).digest('hex'));
      assert.equal(info.size, Buffer.byteLength(texts[i]!));
      const stream = await store.blobs.get(info.sha256);
      const chunks: Buffer[] = [];
      for await (const chunk of stream!) chunks.push(Buffer.from(chunk as Buffer));
      assert.equal(Buffer.concat(chunks).toString(), texts[i]);
    }
    if (store.sql.database.dialect === 'postgres') {
      // Each new hash came back pinned by exactly one of its puts (the empty blob was stored before by an earlier test or now).
      const pinnedBy = new Map<string, number>();
      for (const info of infos)
        if (info.candidate !== undefined) pinnedBy.set(info.sha256, (pinnedBy.get(info.sha256) ?? 0) + 1);
      for (const sha of new Set(infos.slice(0, 40).map((info) => info.sha256))) assert.equal(pinnedBy.get(sha), 1, sha);
    }
    const pins = await Promise.all(infos.map((info) => refs.pinPut(info)));
    await port.write(function* () {
      for (const [i, pin] of pins.entries()) yield* refs.addWork(pin, `test:together-${i}`);
    });
    assert.equal(await refs.countRefs(infos[0]!.sha256), 2, 'content 0 was put twice (i and i + 30)');
    assert.equal(await refs.countRefs(infos[25]!.sha256), 1);
  });

  test('a put over a tombstone of its hash takes no pin with it: pinPut waits the tombstone out like pin', async () => {
    const text = `tombstoned ${testDialect} ${Math.random()}`;
    const sha = createHash('sha256').update(text).digest('hex');
    await leaveTombstone(sha);
    const info = await store.blobs.put(Readable.from([Buffer.from(text)]), { candidateDueAt: refs.candidateDueAt() });
    assert.equal(info.candidate, undefined);
    await assert.rejects(refs.pinPut(info), BlobGoneError);
    await port.write(() => run('delete from stratus_blob_doomed where sha256 = ?', sha));
  });

  test('removeHoldersWork drops every reference of the holders; only unreferenced blobs go', async () => {
    const one = await putBlob();
    const two = await putBlob();
    await reference(one, 'bucket:1');
    await reference(two, 'bucket:2');
    await reference(two, 'other-service:9');
    const removed = await port.write(() => refs.removeHoldersWork(['bucket:1', 'bucket:2', 'bucket:none']));
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

  test('a pin racing the deletion of a doomed blob waits for it, then fails with BlobGoneError', async () => {
    // The sweeper has decided (a tombstone) and its blob store is deleting, until the test says.
    const deleting = deferred();
    const release = deferred();
    const sha = await putBlob();
    await sweepLeftovers();
    const sweeper = new BlobRefs(store.sql, gatedBlobs(sha, deleting, release.promise), {
      graceMs: 1000,
      now: () => clock,
    });
    const early = await refs.pin(sha);
    clock += 1000;
    const sweeping = sweeper.sweep();
    await within(deleting.promise, 'the sweeper to delete the blob');
    assert.deepEqual(await tombstones(), [sha]);
    // No transaction is held while the blob store works: other writes go on.
    await within(
      port.write(() => run('delete from stratus_blob_candidates where sha256 = ?', 'none')),
      'a write while a blob is being deleted',
      5000,
    );
    let settled = false;
    const pinning = refs.pin(sha).finally(() => (settled = true));
    pinning.catch(() => {});
    await assert.rejects(
      port.write(() => refs.addWork(early, 'test:doomed')),
      BlobGoneError,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(settled, false, 'the pin waits while the blob is being deleted');
    assert.ok(await exists(sha), 'still stored, but doomed');
    release.resolve();
    await assert.rejects(pinning, BlobGoneError);
    assert.equal(await sweeping, 1);
    assert.equal(await exists(sha), false);
    assert.deepEqual(await tombstones(), []);
    assert.equal(await refs.countRefs(sha), 0);
  });

  test('a tombstone left by a sweeper that died is finished by the next sweep; meanwhile the blob takes no reference', async () => {
    const text = `abandoned ${testDialect} ${Math.random()}`;
    const sha = await putBlob(text);
    await sweepLeftovers();
    const pin = await refs.pin(sha);
    await leaveTombstone(sha);
    await assert.rejects(
      port.write(() => refs.addWork(pin, 'test:abandoned')),
      BlobGoneError,
    );
    // A pin waits for the deletion to end, about two seconds, then gives up.
    const started = performance.now();
    await assert.rejects(refs.pin(sha), BlobGoneError);
    assert.ok(performance.now() - started >= 1500, 'the pin waited for the tombstone to go');
    if (!store.sql.database.soleWriter) {
      // Another instance may still be deleting it: only a stale tombstone is taken over.
      assert.equal(await refs.sweep(), 0);
      assert.ok(await exists(sha));
      clock += STALE_TOMBSTONE_MS;
    }
    // (SQLite: this process is the only writer, so a tombstone none of its sweepers has is abandoned.)
    assert.equal(await refs.sweep(), 1);
    assert.equal(await exists(sha), false);
    assert.deepEqual(await tombstones(), []);
    assert.equal(await refs.countRefs(sha), 0);
    // The hash is usable again: the same content put anew is pinned and referenced.
    assert.equal(await putBlob(text), sha);
    await reference(sha, 'test:again');
    assert.equal(await refs.countRefs(sha), 1);
    assert.ok(await exists(sha));
  });

  test('a tombstone whose sweeper is at work is left to it by the other sweepers', async () => {
    const deleting = deferred();
    const release = deferred();
    const sha = await putBlob();
    await sweepLeftovers();
    const slow = new BlobRefs(store.sql, gatedBlobs(sha, deleting, release.promise), {
      graceMs: 1000,
      now: () => clock,
    });
    await refs.markCandidate(sha);
    clock += 1000;
    const sweeping = slow.sweep();
    await within(deleting.promise, 'the slow sweeper to delete the blob');
    await refs.markCandidate(sha);
    clock += 1000;
    assert.equal(await refs.sweep(), 0, 'the other sweeper leaves the blob to the one deleting it');
    if (testDialect === 'postgres') {
      // Another instance (its own connection) leaves a tombstone younger than STALE_TOMBSTONE_MS alone.
      const other = await database.connect();
      try {
        assert.equal(await new BlobRefs(other, store.blobs, { graceMs: 1000, now: () => clock }).sweep(), 0);
      } finally {
        await other.close();
      }
    }
    assert.deepEqual(await tombstones(), [sha]);
    release.resolve();
    assert.equal(await sweeping, 1);
    assert.deepEqual(await tombstones(), []);
    assert.equal(await exists(sha), false);
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
