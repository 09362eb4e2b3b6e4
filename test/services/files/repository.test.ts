import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { filesMigrations } from '../../../src/services/files/migrations.ts';
import { BucketRepository, FileRepository, type CommitResult } from '../../../src/services/files/repository.ts';
import { createNanoClock } from '../../../src/services/files/timestamps.ts';
import { BlobGoneError, BlobRefs } from '../../../src/store/blob/refs.ts';
import { migrateStore, openStore, type Store } from '../../../src/store/index.ts';
import { run } from '../../../src/store/sql-work.ts';
import { createTestDatabase, testDialect, type TestDatabase } from '../../helpers/database.ts';

// Commits issued together: on PostgreSQL all but the first two (the writes in flight) share one
// transaction (FileRepository.commitBatch); on SQLite each commits on its own. Outcomes must be
// the same either way.
let database: TestDatabase;
let store: Store;
let refs: BlobRefs;
let buckets: BucketRepository;
let files: FileRepository;
/** Batches that failed as a whole and were redone item by item. */
const redone: unknown[] = [];

before(async () => {
  database = await createTestDatabase();
  store = await openStore({ dataDir: database.dataDir, databaseUrl: database.databaseUrl, sqliteSynchronous: 'FULL' });
  await migrateStore(store, [filesMigrations]);
  refs = new BlobRefs(store.sql, store.blobs);
  const clock = createNanoClock();
  buckets = new BucketRepository(store.sql.database, refs, clock);
  files = new FileRepository(store.sql.database, refs, clock, { onBatchRedone: (error) => redone.push(error) });
});
after(async () => {
  await refs.stop();
  await store.close();
  await database.cleanup();
});

async function stored(text: string) {
  const info = await store.blobs.put(Readable.from([Buffer.from(text)]), { candidateDueAt: refs.candidateDueAt() });
  return { pin: await refs.pinPut(info), size: Buffer.byteLength(text), md5: 'md5', mimeType: 'text/plain' };
}

const kinds = (results: PromiseSettledResult<CommitResult>[]) =>
  results.map((result) => (result.status === 'fulfilled' ? result.value.kind : (result.reason as Error).name));

describe(`files repository: commits issued together (${testDialect})`, () => {
  it('new files, replacements, a repeated path and a missing bucket each get their own outcome', async () => {
    const bucket = await buckets.create('owner', 'project', { name: 'together', description: '' });
    await files.commitUpload(bucket.id, 'owner', 'old.txt', await stored('old content'));
    await files.commitUpload(bucket.id, 'owner', 'same.txt', await stored('same content'));
    const contents = await Promise.all(
      ['a', 'b', 'c', 'old v2', 'same content', 'twice 1', 'twice 2', 'x'].map(stored),
    );
    const calls: [string, string, string][] = [
      [bucket.id, 'owner', 'first-in-flight.txt'],
      [bucket.id, 'owner', 'second-in-flight.txt'],
      [bucket.id, 'owner', 'a.txt'],
      [bucket.id, 'owner', 'old.txt'],
      [bucket.id, 'owner', 'same.txt'],
      [bucket.id, 'owner', 'twice.txt'],
      [bucket.id, 'owner', 'twice.txt'],
      ['no-such-bucket', 'owner', 'x.txt'],
      [bucket.id, 'someone-else', 'x.txt'],
    ];
    const order = [0, 1, 2, 3, 4, 5, 6, 7, 7];
    const results = await Promise.allSettled(
      calls.map(([bucketId, owner, name], i) => files.commitUpload(bucketId, owner, name, contents[order[i]!]!)),
    );
    assert.deepEqual(kinds(results), [
      'created',
      'created',
      'created',
      'replaced',
      'replaced',
      'created',
      'replaced',
      'no_bucket',
      'no_bucket',
    ]);
    const listed = await files.list(bucket.id, '');
    assert.deepEqual(listed.map((file) => file.name).sort(), [
      'a.txt',
      'first-in-flight.txt',
      'old.txt',
      'same.txt',
      'second-in-flight.txt',
      'twice.txt',
    ]);
    const byName = new Map(listed.map((file) => [file.name, file]));
    // The repeated path committed after its first: the last content wins.
    assert.equal(byName.get('twice.txt')!.sha256, contents[6]!.pin.sha256);
    assert.equal(byName.get('old.txt')!.sha256, contents[3]!.pin.sha256);
    // Every file holds one reference to its content; replaced content lost its holder.
    for (const file of listed) assert.equal(await refs.countRefs(file.sha256), 1);
    assert.equal(await refs.countRefs(contents[5]!.pin.sha256), 0, "twice.txt's first content is no longer held");
    assert.deepEqual(redone, [], 'the batch committed as one');
    const first = (results[0] as PromiseFulfilledResult<CommitResult>).value;
    assert.ok(first.kind === 'created' && first.file.uuid.length > 0);
  });

  it('a commit whose blob is being deleted fails alone; the others of its batch commit', async () => {
    const bucket = await buckets.create('owner', 'project', { name: 'one-fails', description: '' });
    const good = await Promise.all(['g1', 'g2', 'g3', 'g4'].map((text) => stored(`${text} ${Math.random()}`)));
    const doomed = await stored(`doomed ${Math.random()}`);
    // What a sweeper deciding on the blob leaves: a tombstone (both databases refuse a reference then).
    await store.sql.database.write(() =>
      run('insert into stratus_blob_doomed (sha256, since_ms) values (?, ?)', doomed.pin.sha256, Date.now()),
    );
    const results = await Promise.allSettled([
      files.commitUpload(bucket.id, 'owner', 'g1', good[0]!),
      files.commitUpload(bucket.id, 'owner', 'g2', good[1]!),
      files.commitUpload(bucket.id, 'owner', 'g3', good[2]!),
      files.commitUpload(bucket.id, 'owner', 'gone', doomed),
      files.commitUpload(bucket.id, 'owner', 'g4', good[3]!),
    ]);
    assert.deepEqual(kinds(results), ['created', 'created', 'created', 'BlobGoneError', 'created']);
    assert.ok((results[3] as PromiseRejectedResult).reason instanceof BlobGoneError);
    // PostgreSQL: the batch holding it failed whole and was redone item by item.
    assert.equal(redone.length, testDialect === 'postgres' ? 1 : 0);
    assert.ok(redone.every((error) => error instanceof BlobGoneError));
    redone.length = 0;
    assert.deepEqual((await files.list(bucket.id, '')).map((file) => file.name).sort(), ['g1', 'g2', 'g3', 'g4']);
  });

  it('many concurrent uploads to distinct paths all land, each holding its content', async () => {
    const bucket = await buckets.create('owner', 'project', { name: 'many', description: '' });
    const contents = await Promise.all(Array.from({ length: 150 }, (_, i) => stored(`many ${i} ${Math.random()}`)));
    const results = await Promise.all(
      contents.map((content, i) => files.commitUpload(bucket.id, 'owner', `f${i}`, content)),
    );
    assert.ok(results.every((result) => result.kind === 'created'));
    assert.deepEqual(redone, []);
    const listed = await files.list(bucket.id, '');
    assert.equal(listed.length, 150);
    for (const [i, content] of contents.entries()) {
      const file = listed.find((f) => f.name === `f${i}`)!;
      assert.equal(file.sha256, content.pin.sha256);
      assert.equal(await refs.countRefs(content.pin.sha256), 1);
    }
  });
});
