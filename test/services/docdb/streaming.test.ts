// Streaming over a real HTTP server on 127.0.0.1 (docdb.md §1.3, §6.1–6.4): insert answers
// interleave with the request body, client disconnects, large finds, errors mid-stream.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { DocumentStore } from '../../../src/services/docdb/repository/index.ts';
import { docdbService } from '../../../src/services/docdb/index.ts';
import { asUser, startTestService, type TestService } from '../../helpers/service.ts';
import { parseLines } from './fixtures.ts';
import { deferred, within } from '../../helpers/waiting.ts';

let service: TestService;
let port: number;
let C: string;
const headers = asUser('stream-user');

before(async () => {
  service = await startTestService(docdbService);
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  port = (service.app.server.address() as AddressInfo).port;
  const created = await call('POST', '/v1/databases', JSON.stringify({ name: 'streams' }));
  assert.equal(created.status, 201, created.text);
  C = `/v1/databases/${(JSON.parse(created.text) as { id: string }).id}/collections`;
});
after(async () => {
  await service.close();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One whole request and its whole answer. */
function call(method: string, path: string, body?: string | Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { ...headers, 'content-type': 'application/json' },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.setTimeout(30_000, () => req.destroy(new Error('request timed out')));
    req.end(body);
  });
}

/**
 * A request whose body is written step by step (chunked) while its answer is read line by line:
 * `nextLine` resolves with each complete line of the answer as it arrives.
 */
class Conversation {
  readonly req: http.ClientRequest;
  readonly response: Promise<http.IncomingMessage>;
  private buffered = '';
  private lines: string[] = [];
  private waiters: ((line: string | null) => void)[] = [];
  private ended = false;
  readonly done: Promise<void>;

  constructor(path: string) {
    this.req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path,
      headers: { ...headers, 'content-type': 'application/x-ndjson', 'transfer-encoding': 'chunked' },
      agent: false,
    });
    this.req.on('error', () => {});
    this.response = new Promise((resolve) => this.req.once('response', resolve));
    this.done = this.response.then(
      (res) =>
        new Promise<void>((resolve) => {
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            this.buffered += chunk;
            let at: number;
            while ((at = this.buffered.indexOf('\n')) >= 0) {
              this.lines.push(this.buffered.slice(0, at));
              this.buffered = this.buffered.slice(at + 1);
            }
            this.wake();
          });
          res.on('end', () => {
            this.ended = true;
            this.wake();
            resolve();
          });
          res.on('error', () => {
            this.ended = true;
            this.wake();
            resolve();
          });
        }),
    );
    this.req.flushHeaders();
  }

  private wake(): void {
    while (this.waiters.length > 0 && (this.lines.length > 0 || this.ended))
      this.waiters.shift()!(this.lines.shift() ?? null);
  }

  send(text: string): void {
    this.req.write(text);
  }

  end(text?: string): void {
    this.req.end(text);
  }

  /** The next line of the answer, or null at its end; fails after `ms`. */
  nextLine(ms = 5000): Promise<string | null> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no line within ${ms} ms`)), ms);
      this.waiters.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
      this.wake();
    });
  }
}

const findAll = async (collection: string): Promise<unknown[]> => {
  const answer = await call('POST', `${C}/${collection}:find`, '{"limit":-1}');
  assert.equal(answer.status, 200, answer.text);
  return parseLines(answer.text);
};

describe('insert answers interleave with the request body', () => {
  it(':insert — each line comes back before the next document is sent', async () => {
    const talk = new Conversation(`${C}/live:insert`);
    talk.send('{"id":"1"}\n');
    const res = await talk.response;
    assert.equal(res.statusCode, 201);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.equal(res.headers['transfer-encoding'], 'chunked');
    assert.deepEqual(JSON.parse((await talk.nextLine())!), { id: '1' });
    // Committed already: another request sees it while this one is still open.
    assert.deepEqual(await findAll('live'), [{ id: '1' }]);
    // A value split across chunks, with a multi-byte character split too.
    const second = Buffer.from('{"id":"2","text":"ñ😀"}\n');
    talk.req.write(second.subarray(0, 17));
    await new Promise((resolve) => setTimeout(resolve, 20));
    talk.req.write(second.subarray(17));
    assert.deepEqual(JSON.parse((await talk.nextLine())!), { id: '2', text: 'ñ😀' });
    talk.send('{"id":"3"}');
    // A top-level value is complete at its closing brace, before any line break.
    assert.deepEqual(JSON.parse((await talk.nextLine())!), { id: '3' });
    talk.end();
    assert.equal(await talk.nextLine(), null);
    await talk.done;
    assert.deepEqual(await findAll('live'), [{ id: '1' }, { id: '2', text: 'ñ😀' }, { id: '3' }]);
  });

  it(':insertFullduplex — 200 with the first line, then interleaved', async () => {
    const talk = new Conversation(`${C}/live-fd:insertFullduplex`);
    talk.send('{"n":1}');
    const res = await talk.response;
    assert.equal(res.statusCode, 200);
    assert.equal(await talk.nextLine(), '{"n":1}');
    talk.send('\n{"n":2}\n');
    assert.equal(await talk.nextLine(), '{"n":2}');
    talk.send('{"n":');
    talk.send('3}');
    assert.equal(await talk.nextLine(), '{"n":3}');
    talk.end();
    assert.equal(await talk.nextLine(), null);
  });

  it(':insertStream — 202 and its headers at once, before any document', async () => {
    const talk = new Conversation(`${C}/live-st:insertStream`);
    const res = await talk.response;
    assert.equal(res.statusCode, 202);
    assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.equal(res.headers['transfer-encoding'], 'chunked');
    talk.send('{"n":1}\n');
    assert.equal(await talk.nextLine(), '{"n":1}');
    talk.send('[]\n');
    assert.equal(typeof JSON.parse((await talk.nextLine())!), 'string');
    talk.send('{"n":2}\n');
    assert.equal(await talk.nextLine(), '{"n":2}');
    // (A value is complete at its closing bracket: only then can it be found malformed.)
    talk.send('{oops}\n');
    assert.equal(typeof JSON.parse((await talk.nextLine())!), 'string');
    assert.equal(await talk.nextLine(), null, 'a malformed value ends the stream');
    talk.end();
  });

  it('an error after the first line is appended and the answer ends, while the client is still sending', async () => {
    const talk = new Conversation(`${C}/live-err:insert`);
    talk.send('{"id":"1"}\n');
    assert.equal((await talk.response).statusCode, 201);
    assert.equal(await talk.nextLine(), '{"id":"1"}');
    talk.send('{bad}\n');
    const error = JSON.parse((await talk.nextLine())!) as { error: { status: number; code: string } };
    assert.equal(error.error.status, 400);
    assert.equal(error.error.code, 'invalid_json');
    assert.equal(await talk.nextLine(), null);
    talk.req.destroy();
    assert.deepEqual(await findAll('live-err'), [{ id: '1' }]);
  });
});

describe('whole bodies over a real socket', () => {
  it('`{"id":"1"}\\n{bad` followed by a lot more: 201 with both lines, delivered intact', async () => {
    const rest = Buffer.alloc(4 * 1024 * 1024, 'x');
    const answer = await call('POST', `${C}/whole-err:insert`, Buffer.concat([Buffer.from('{"id":"1"}\n{bad'), rest]));
    assert.equal(answer.status, 201);
    const lines = parseLines(answer.text) as Record<string, unknown>[];
    assert.deepEqual(lines[0], { id: '1' });
    assert.equal((lines[1] as { error: { code: string } }).error.code, 'invalid_json');
    assert.equal(lines.length, 2);
    // The connection was not left in a broken state for the server.
    assert.equal((await call('GET', `${C}/whole-err`)).status, 200);
    // Likewise with a long answer still on its way out when the error comes.
    const many = Array.from({ length: 4000 }, (_, i) => `{"id":"m${i}","pad":"${'p'.repeat(500)}"}\n`).join('');
    const long = await call('POST', `${C}/whole-err2:insert`, Buffer.concat([Buffer.from(`${many}{bad}\n`), rest]));
    assert.equal(long.status, 201);
    const longLines = parseLines(long.text) as Record<string, unknown>[];
    assert.equal(longLines.length, 4001);
    assert.equal(longLines[3999]!.id, 'm3999');
    assert.equal((longLines[4000] as { error: { code: string } }).error.code, 'invalid_json');
  });

  it('a first document over 10 MiB → 413 envelope; a later one → an error line', async () => {
    const huge = Buffer.from(JSON.stringify({ blob: 'x'.repeat(10 * 1024 * 1024 + 1) }));
    const first = await call('POST', `${C}/whole-huge:insert`, Buffer.concat([huge, Buffer.from('\n{"id":"after"}')]));
    assert.equal(first.status, 413, first.text.slice(0, 200));
    assert.equal((JSON.parse(first.text) as { error: { code: string } }).error.code, 'payload_too_large');
    const later = await call('POST', `${C}/whole-huge:insert`, Buffer.concat([Buffer.from('{"id":"small"}\n'), huge]));
    assert.equal(later.status, 201);
    const lines = parseLines(later.text);
    assert.deepEqual(lines[0], { id: 'small' });
    assert.equal((lines[1] as { error: { status: number } }).error.status, 413);
  });

  it('a non-streaming body over 10 MiB → 413 envelope', async () => {
    const huge = JSON.stringify({ filter: { x: 'y'.repeat(10 * 1024 * 1024 + 1) } });
    const answer = await call('POST', `${C}/whole-huge:find`, huge);
    assert.equal(answer.status, 413, answer.text.slice(0, 200));
    assert.equal((JSON.parse(answer.text) as { error: { code: string } }).error.code, 'payload_too_large');
    const defaults = await call(
      'POST',
      `${C}/whole-huge:setDefaults`,
      JSON.stringify({ x: 'y'.repeat(10 * 1024 * 1024 + 1) }),
    );
    assert.equal(defaults.status, 413);
  });
});

/**
 * Watches the service's traversals from the server side: counts the batches read from the store
 * and the documents handed to the service, holds the traversal once batch `holdAt` has been read
 * (before handing it over) until `release()`, and tells when the traversal has ended.
 */
function watchTraversals(holdAt: number) {
  const original = DocumentStore.prototype.traverse;
  const held = deferred();
  const gate = deferred();
  const ended = deferred();
  let read = 0;
  let handedOver = 0;
  DocumentStore.prototype.traverse = async function* (this: DocumentStore, ...args: Parameters<typeof original>) {
    try {
      for await (const batch of original.apply(this, args)) {
        read++;
        if (read === holdAt) {
          held.resolve();
          await gate.promise;
        }
        handedOver += batch.length;
        yield batch;
      }
    } finally {
      ended.resolve();
    }
  };
  return {
    get read() {
      return read;
    },
    get handedOver() {
      return handedOver;
    },
    held: held.promise,
    ended: ended.promise,
    release: () => gate.resolve(),
    restore: () => {
      DocumentStore.prototype.traverse = original;
    },
  };
}

/**
 * Resolves when the server's response to the next request for `path` closes: whether it had
 * finished, and what `sample` returned at that very moment (before the service can react).
 */
function serverSideClose<T>(path: string, sample: () => T): Promise<{ finished: boolean; atClose: T }> {
  return new Promise((resolve) => {
    const server = service.app.server;
    const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (req.url !== path) return;
      server.off('request', onRequest);
      res.once('close', () => resolve({ finished: res.writableFinished, atClose: sample() }));
    };
    server.on('request', onRequest);
  });
}

describe('large finds and disconnects', () => {
  const COUNT = 20_000;

  before(async () => {
    const body = Array.from({ length: COUNT }, (_, i) => `{"i":${i},"pad":"${'p'.repeat(40)}"}\n`).join('');
    const answer = await call('POST', `${C}/big:insertFullduplex`, body);
    assert.equal(answer.status, 200);
  });

  it(`streams ${COUNT.toLocaleString('en')} documents with limit -1, in order, chunked`, async () => {
    const answer = await call('POST', `${C}/big:find`, '{"limit":-1}');
    assert.equal(answer.status, 200);
    assert.equal(answer.headers['content-type'], 'application/json');
    assert.equal(answer.headers['transfer-encoding'], 'chunked');
    const lines = parseLines(answer.text) as { i: number }[];
    assert.equal(lines.length, COUNT);
    for (let i = 0; i < COUNT; i++) assert.equal(lines[i]!.i, i);
    // A small answer goes out in one piece with a Content-Length.
    const small = await call('POST', `${C}/big:find`, '{"limit":2}');
    assert.equal(small.headers['content-length'], String(Buffer.byteLength(small.text)));
  });

  it('a client that disconnects mid-find stops it; the server carries on', async () => {
    for (const body of ['{"limit":-1}', '{"limit":-1,"filter":{"i":{"$ge":0}}}']) {
      const received = await new Promise<number>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: `${C}/big:find`,
            headers: { ...headers, 'content-type': 'application/json' },
            agent: false,
          },
          (res) => {
            let bytes = 0;
            res.once('data', (chunk: Buffer) => {
              bytes += chunk.length;
              // Stop reading and hang up after the first chunk.
              res.pause();
              req.destroy();
              resolve(bytes);
            });
            res.on('error', () => {});
          },
        );
        req.on('error', (error) =>
          (error as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(error),
        );
        req.end(body);
      });
      assert.ok(received > 0);
    }
    // The server is fine and still answers complete finds.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const answer = await call('POST', `${C}/big:find`, '{"limit":3}');
    assert.deepEqual(
      (parseLines(answer.text) as { i: number }[]).map((d) => d.i),
      [0, 1, 2],
    );
  });

  it('a disconnect stops a find even while nothing matches (nothing is being written)', async () => {
    for (const action of ['find', 'remove']) {
      const path = `${C}/big:${action}`;
      // Hold the scan before its second batch: the server is mid-scan, with 18 batches to go.
      const watch = watchTraversals(2);
      try {
        const req = http.request({
          host: '127.0.0.1',
          port,
          method: 'POST',
          path,
          headers: { ...headers, 'content-type': 'application/json' },
          agent: false,
        });
        req.on('error', () => {});
        const cut = serverSideClose(path, () => watch.read);
        req.end('{"limit":-1,"filter":{"i":-1}}');
        await within(watch.held, `${action}: the scan to reach its second batch`);
        req.destroy();
        const { finished, atClose: readAtClose } = await within(cut, `${action}: the server to see the disconnect`);
        assert.equal(finished, false, `${action}: the answer was cut, not finished`);
        // Let the scan go on at full speed: only the disconnect can stop it now.
        watch.release();
        await within(watch.ended, `${action}: the scan to end`);
        assert.equal(readAtClose, 2);
        assert.equal(
          watch.read,
          readAtClose,
          `${action}: no batch is read once the server has seen the client go (of ${COUNT / 1000})`,
        );
      } finally {
        watch.restore();
      }
    }
    const answer = await call('POST', `${C}/big:find`, '{"limit":1,"skip":19999}');
    assert.deepEqual(
      (parseLines(answer.text) as { i: number }[]).map((d) => d.i),
      [19999],
    );
  });

  it('a slow reader gets everything (back-pressure)', async () => {
    const lines = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: `${C}/big:find`,
          headers: { ...headers, 'content-type': 'application/json' },
          agent: false,
        },
        (res) => {
          let text = '';
          let paused = 0;
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
            if (paused++ < 5) {
              res.pause();
              setTimeout(() => res.resume(), 30);
            }
          });
          res.on('end', () => resolve(parseLines(text).length));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end('{"limit":-1,"skip":5000}');
    });
    assert.equal(lines, COUNT - 5000);
  });

  it('a client that disconnects mid-insert keeps what was committed; the server carries on', async () => {
    const insertCut = serverSideClose(`${C}/cut:insert`, () => undefined);
    const talk = new Conversation(`${C}/cut:insert`);
    talk.send('{"id":"1"}\n{"id":"2"}\n');
    assert.equal((await talk.response).statusCode, 201);
    assert.equal(await talk.nextLine(), '{"id":"1"}');
    assert.equal(await talk.nextLine(), '{"id":"2"}');
    talk.send('{"id":"3","partial":');
    await new Promise((resolve) => setTimeout(resolve, 20));
    talk.req.destroy();
    await talk.done;
    assert.equal((await within(insertCut, 'the server to see the disconnect')).finished, false);
    assert.deepEqual(await findAll('cut'), [{ id: '1' }, { id: '2' }]);
    // Likewise during a long patch: what was done stays done, nothing breaks, and nothing is
    // patched after the server has seen the client go. The scan is held before its second batch
    // until then, so the server cannot get ahead of the disconnect.
    const path = `${C}/big:patch`;
    const watch = watchTraversals(2);
    try {
      const cut = serverSideClose(path, () => watch.handedOver);
      const firstLines = new Promise<void>((resolve) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path,
            headers: { ...headers, 'content-type': 'application/json' },
            agent: false,
          },
          (res) => {
            res.once('data', () => {
              req.destroy();
              resolve();
            });
            res.on('error', () => {});
          },
        );
        req.on('error', () => {});
        req.end('{"limit":-1,"patch":{"seen":true}}');
      });
      await within(firstLines, 'the first patched documents to come back');
      const { finished, atClose: handedOverAtClose } = await within(cut, 'the server to see the disconnect');
      assert.equal(finished, false, 'the answer was cut, not finished');
      watch.release();
      await within(watch.ended, 'the patch to end');
      assert.ok(
        handedOverAtClose < COUNT,
        `${handedOverAtClose} documents were handed to the patch before the disconnect`,
      );
      const count = await call('POST', `${C}/big:find`, '{"limit":-1,"filter":{"seen":true}}');
      const patched = parseLines(count.text) as { i: number }[];
      assert.ok(patched.length > 0, 'the answer the client saw was committed');
      assert.ok(
        patched.length <= handedOverAtClose,
        `patched ${patched.length}, but only ${handedOverAtClose} were handed over before the disconnect`,
      );
      // Patched in order from the start, each at most once.
      for (let i = 0; i < patched.length; i++) assert.equal(patched[i]!.i, i);
    } finally {
      watch.restore();
    }
    const total = await call('GET', `${C}/big`);
    assert.equal((JSON.parse(total.text) as { total: number }).total, COUNT);
  });
});
