import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { JsonStreamError, jsonValues } from '../../../src/services/docdb/json-values.ts';

const MAX = 1024 * 1024;

async function* from(chunks: Iterable<Buffer | string>): AsyncGenerator<Buffer | string> {
  for (const chunk of chunks) yield chunk;
}

interface Outcome {
  batches: string[][];
  error?: JsonStreamError;
}

async function run(chunks: Iterable<Buffer | string>, maxValueBytes = MAX): Promise<Outcome> {
  const batches: string[][] = [];
  try {
    for await (const batch of jsonValues(from(chunks), { maxValueBytes })) batches.push(batch);
  } catch (err) {
    assert.ok(err instanceof JsonStreamError, `unexpected error ${String(err)}`);
    return { batches, error: err };
  }
  return { batches };
}

/** The values of a well-formed input, flattened, asserting no batch is empty and nothing threw. */
async function values(chunks: Iterable<Buffer | string>, maxValueBytes = MAX): Promise<string[]> {
  const { batches, error } = await run(chunks, maxValueBytes);
  assert.equal(error, undefined, error?.message);
  for (const batch of batches) assert.ok(batch.length > 0, 'empty batch');
  return batches.flat();
}

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

/** Every split of `buf` into two and three chunks, plus one byte per chunk. */
function* splits(buf: Buffer): Generator<Buffer[]> {
  const n = buf.length;
  for (let i = 0; i <= n; i++) yield [buf.subarray(0, i), buf.subarray(i)];
  for (let i = 1; i < n; i++) {
    for (let j = i + 1; j < n; j++) yield [buf.subarray(0, i), buf.subarray(i, j), buf.subarray(j)];
  }
  yield Array.from({ length: n }, (_, k) => buf.subarray(k, k + 1));
}

describe('jsonValues', () => {
  it('splits NDJSON', async () => {
    assert.deepEqual(await values(['{"a":1}\n{"b":2}\n{"c":[3]}\n']), ['{"a":1}', '{"b":2}', '{"c":[3]}']);
    // No trailing newline, blank lines in between.
    assert.deepEqual(await values(['{"a":1}\n\n\n{"b":2}']), ['{"a":1}', '{"b":2}']);
  });

  it('yields a single object', async () => {
    assert.deepEqual(await values(['{"name":"x","tags":["a","b"],"n":{"m":null}}']), [
      '{"name":"x","tags":["a","b"],"n":{"m":null}}',
    ]);
  });

  it('splits pretty-printed multi-line objects', async () => {
    const docs = [{ a: 1, b: { c: [1, 2, { d: 'e' }] } }, { x: 'y' }, {}];
    const text = docs.map((d) => JSON.stringify(d, null, 2)).join('\n');
    const got = await values([text]);
    assert.deepEqual(
      got,
      docs.map((d) => JSON.stringify(d, null, 2)),
    );
    assert.deepEqual(
      got.map((t) => JSON.parse(t) as unknown),
      docs,
    );
  });

  it('splits objects written back to back', async () => {
    assert.deepEqual(await values(['{"a":1}{"b":2}[3]{}']), ['{"a":1}', '{"b":2}', '[3]', '{}']);
    assert.deepEqual(await values([' \t{"a":1} \t {"b":2}\t ']), ['{"a":1}', '{"b":2}']);
  });

  it('yields top-level arrays and scalars as their own texts', async () => {
    assert.deepEqual(await values(['1 2 "x" null [1]']), ['1', '2', '"x"', 'null', '[1]']);
    assert.deepEqual(await values(['-1.5e3\ntrue\nfalse']), ['-1.5e3', 'true', 'false']);
    // A scalar ends at the next opening bracket or quote too.
    assert.deepEqual(await values(['1{"a":1}true"s"[]null[2]3']), [
      '1',
      '{"a":1}',
      'true',
      '"s"',
      '[]',
      'null',
      '[2]',
      '3',
    ]);
    assert.deepEqual(await values(['"a""b"']), ['"a"', '"b"']);
    // Garbage is a run of non-whitespace; closing brackets after it belong to it.
    assert.deepEqual(await values(['abc {"a":1} x}y']), ['abc', '{"a":1}', 'x}y']);
  });

  it('ignores brackets, escaped quotes and backslashes inside strings', async () => {
    const cases = [
      '{"s":"}\\"{"}',
      '{"s":"\\\\"}',
      '{"s":"\\\\\\"]"}',
      '{"a":["]","[","{",{"b":"}}"}]}',
      '{"k}":"v{","\\"":"\\\\\\\\"}',
      '"top \\" { ["',
    ];
    for (const text of cases) {
      JSON.parse(text); // the fixtures themselves are valid JSON
      assert.deepEqual(await values([text + '\n' + text]), [text, text]);
    }
  });

  it('handles long strings and runs of backslashes', async () => {
    const long = {
      s: 'x'.repeat(40) + '"' + '\\'.repeat(3) + '"' + 'y'.repeat(50) + '\\' + '}{][' + 'é😀'.repeat(10) + '\\"',
      t: '\\'.repeat(41),
      u: '"'.repeat(37),
    };
    const text = JSON.stringify(long);
    // Brackets right after a long run of backslashes: miscounting the run would put them outside a string.
    const backslashes = JSON.stringify({ t: '\\'.repeat(41), x: '}}}', y: ['\\'.repeat(40) + '"', ']]'] });
    const input = bytes(`${text}\n${text}{"z":"${'q'.repeat(70)}"}${backslashes}`);
    const expected = [text, text, `{"z":"${'q'.repeat(70)}"}`, backslashes];
    for (let i = 0; i <= input.length; i++) {
      assert.deepEqual(await values([input.subarray(0, i), input.subarray(i)]), expected, `split at ${i}`);
    }
    assert.deepEqual(await values(Array.from({ length: input.length }, (_, k) => input.subarray(k, k + 1))), expected);
  });

  it('gives the same values for every chunk split, including inside escapes and UTF-8 characters', async () => {
    const text = '{"a":"é\\"}"}\r\n[1,{"b":"😀\\\\"}] 42 "x\\u00e9😀"\n{\n  "c": "ü[{"\n}{"d":null}tru';
    const expected = [
      '{"a":"é\\"}"}',
      '[1,{"b":"😀\\\\"}]',
      '42',
      '"x\\u00e9😀"',
      '{\n  "c": "ü[{"\n}',
      '{"d":null}',
      'tru',
    ];
    const input = bytes(text);
    let count = 0;
    for (const chunks of splits(input)) {
      const got = await values(chunks);
      assert.deepEqual(got, expected, `chunks ${JSON.stringify(chunks.map((c) => c.length))}`);
      count++;
    }
    assert.ok(count > 2000);
  });

  it('handles string chunks split anywhere, including between surrogate halves', async () => {
    const text = '{"e":"😀é"}\n"😀"{"f":"\\\\😀"}';
    const expected = ['{"e":"😀é"}', '"😀"', '{"f":"\\\\😀"}'];
    for (let i = 0; i <= text.length; i++) {
      assert.deepEqual(await values([text.slice(0, i), text.slice(i)]), expected, `split at ${i}`);
      // Mixed with a Buffer after the string chunk (a lone low surrogate has no UTF-8 encoding).
      const low = text.charCodeAt(i);
      if (!(low >= 0xdc00 && low <= 0xdfff)) {
        assert.deepEqual(await values([text.slice(0, i), bytes(text.slice(i))]), expected, `mixed split at ${i}`);
      }
    }
    assert.deepEqual(await values(text.split('')), expected);
  });

  it('round-trips random documents with random chunking', async () => {
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const alphabet = ['a', 'b', '"', '\\', '{', '}', '[', ']', ' ', '\n', 'é', '😀', '\u0001', ',', ':'];
    const str = (): string => Array.from({ length: rand(60) }, () => alphabet[rand(alphabet.length)]).join('');
    const value = (level: number): unknown => {
      const kind = level > 2 ? rand(3) : rand(5);
      if (kind === 0) return str();
      if (kind === 1) return rand(1000) - 500;
      if (kind === 2) return [null, true, false][rand(3)];
      if (kind === 3) return Array.from({ length: rand(4) }, () => value(level + 1));
      return Object.fromEntries(Array.from({ length: rand(4) }, () => [str(), value(level + 1)]));
    };
    const seps = ['', ' ', '\n', '\r\n', '\t', '\n\n  '];
    for (let round = 0; round < 50; round++) {
      const docs = Array.from({ length: 20 }, () => ({ k: value(0), s: str() }));
      const texts = docs.map((d) => JSON.stringify(d, null, rand(2) === 0 ? undefined : 2));
      const input = bytes(texts.map((t) => t + seps[rand(seps.length)]).join(''));
      const chunks: Buffer[] = [];
      for (let at = 0; at < input.length;) {
        const size = 1 + rand(40);
        chunks.push(input.subarray(at, at + size));
        at += size;
      }
      const got = await values(chunks);
      assert.deepEqual(got, texts);
      assert.deepEqual(
        got.map((t) => JSON.parse(t) as unknown),
        docs,
      );
    }
  });

  it('yields the values before a malformed one, then throws invalid_json on the next pull', async () => {
    const gen = jsonValues(from(['{"id":"1"}\n{bad']), { maxValueBytes: MAX });
    assert.deepEqual(await gen.next(), { value: ['{"id":"1"}'], done: false });
    await assert.rejects(gen.next(), (err: unknown) => {
      assert.ok(err instanceof JsonStreamError);
      assert.ok(err instanceof Error);
      assert.equal(err.code, 'invalid_json');
      assert.equal(err.message, 'unexpected end of JSON input');
      return true;
    });
    assert.deepEqual(await gen.next(), { value: undefined, done: true });
  });

  it('throws invalid_json at end of input inside an unfinished value', async () => {
    for (const text of ['{', '{"a":"x', '{"a":"x\\', '[[1]', '"abc', '"abc\\"', '{"a":{}']) {
      const { batches, error } = await run([text]);
      assert.deepEqual(batches, [], text);
      assert.equal(error?.code, 'invalid_json', text);
      assert.equal(error.message, 'unexpected end of JSON input');
    }
    // Split over chunks, after complete values.
    const { batches, error } = await run(['{"a":1}\n{"b":', '"x"']);
    assert.deepEqual(batches, [['{"a":1}']]);
    assert.equal(error?.code, 'invalid_json');
  });

  it('throws invalid_json on a stray closing bracket, after the values before it', async () => {
    {
      const { batches, error } = await run(['{"a":1}\n}\n{"b":2}']);
      assert.deepEqual(batches, [['{"a":1}']]);
      assert.equal(error?.code, 'invalid_json');
      assert.match(error.message, /unexpected '}' at byte 8/);
    }
    {
      const { batches, error } = await run([']']);
      assert.deepEqual(batches, []);
      assert.equal(error?.code, 'invalid_json');
    }
    {
      // Found in a later chunk: the earlier chunk's values were already yielded, nothing after it is.
      const { batches, error } = await run(['{"a":1}', '{"b":[2]}}', '{"c":3}']);
      assert.deepEqual(batches, [['{"a":1}'], ['{"b":[2]}']]);
      assert.equal(error?.code, 'invalid_json');
      assert.match(error.message, /at byte 16/);
    }
  });

  it('throws payload_too_large mid-value without reading the rest of a huge value', async () => {
    const chunkSize = 10_000;
    const total = 1000; // 10 MB of value
    let pulled = 0;
    async function* source(): AsyncGenerator<Buffer> {
      yield bytes('{"small":1}\n{"big":"');
      for (let k = 0; k < total; k++) {
        pulled++;
        yield Buffer.alloc(chunkSize, 0x61);
      }
      yield bytes('"}\n');
    }
    const batches: string[][] = [];
    await assert.rejects(
      (async () => {
        for await (const batch of jsonValues(source(), { maxValueBytes: 100_000 })) batches.push(batch);
      })(),
      (err: unknown) => {
        assert.ok(err instanceof JsonStreamError);
        assert.equal(err.code, 'payload_too_large');
        assert.equal(err.message, 'document exceeds 100000 bytes');
        return true;
      },
    );
    assert.deepEqual(batches, [['{"small":1}']]);
    assert.equal(pulled, 10); // 8 bytes of `{"big":"` + 10 chunks pass 100,000 bytes
  });

  it('accepts a value of exactly maxValueBytes and rejects one byte more', async () => {
    const fits = `{"s":"${'x'.repeat(92)}"}`; // 100 bytes
    const over = `{"s":"${'x'.repeat(93)}"}`;
    assert.equal(Buffer.byteLength(fits), 100);
    assert.deepEqual(await values([fits + '\n' + fits], 100), [fits, fits]);
    const { batches, error } = await run([fits + '\n' + over + '\n' + fits], 100);
    assert.deepEqual(batches, [[fits]]);
    assert.equal(error?.code, 'payload_too_large');
    // Bytes, not characters: 49 two-byte characters plus the quotes.
    const wide = `"${'é'.repeat(49)}"`;
    assert.deepEqual(await values([wide], 100), [wide]);
    assert.equal((await run([`"${'é'.repeat(50)}"`], 100)).error?.code, 'payload_too_large');
    // Scalars count too, including one that ends at end of input.
    assert.equal((await run(['1'.repeat(101)], 100)).error?.code, 'payload_too_large');
    assert.equal((await run(['1'.repeat(60), '1'.repeat(41)], 100)).error?.code, 'payload_too_large');
    assert.deepEqual(await values(['1'.repeat(60), '1'.repeat(40)], 100), ['1'.repeat(100)]);
    // Whitespace between values does not count.
    assert.deepEqual(await values([' '.repeat(500) + fits + ' '.repeat(500)], 100), [fits]);
  });

  it('yields nothing for empty or whitespace-only input', async () => {
    assert.deepEqual(await run([]), { batches: [] });
    assert.deepEqual(await run(['']), { batches: [] });
    assert.deepEqual(await run([Buffer.alloc(0), '', Buffer.alloc(0)]), { batches: [] });
    assert.deepEqual(await run([' \t\r\n', '\n\n', '   ']), { batches: [] });
  });

  it('accepts CRLF line endings', async () => {
    assert.deepEqual(await values(['{"a":1}\r\n{"b":2}\r\n']), ['{"a":1}', '{"b":2}']);
    assert.deepEqual(await values(['{\r\n  "a": 1\r\n}\r\n3\r\n']), ['{\r\n  "a": 1\r\n}', '3']);
    // The CR and LF in different chunks.
    assert.deepEqual(await values(['{"a":1}\r', '\n{"b":2}\r', '\n']), ['{"a":1}', '{"b":2}']);
  });

  it('yields the values completed by one chunk together, and never an empty batch', async () => {
    const { batches } = await run(['{"a":1}\n{"b":2}\n{"c":3}\n{"d"', ':4}\n{"e":5}\n', '{"f"', ':', '6}', '  \n']);
    assert.deepEqual(batches, [['{"a":1}', '{"b":2}', '{"c":3}'], ['{"d":4}', '{"e":5}'], ['{"f":6}']]);
    // A trailing scalar completes at end of input, in a batch of its own.
    assert.deepEqual((await run(['{"a":1} 12', '34'])).batches, [['{"a":1}'], ['1234']]);
    assert.deepEqual((await run(['{"a":1} 12', '34 '])).batches, [['{"a":1}'], ['1234']]);
  });

  it('stops reading the source when the consumer stops', async () => {
    let finished = false;
    async function* source(): AsyncGenerator<string> {
      try {
        for (;;) yield '{"a":1}\n';
      } finally {
        finished = true;
      }
    }
    let seen = 0;
    for await (const batch of jsonValues(source(), { maxValueBytes: MAX })) {
      seen += batch.length;
      if (seen >= 3) break;
    }
    assert.equal(seen, 3);
    assert.ok(finished);
  });

  it('splits 200,000 small NDJSON documents', async () => {
    const count = 200_000;
    const lines: string[] = [];
    for (let k = 0; k < count; k++) lines.push(`{"id":"${k}","name":"user ${k}","n":${k % 97},"tags":["a","b"]}`);
    const body = bytes(lines.join('\n') + '\n');
    const chunks: Buffer[] = [];
    for (let at = 0; at < body.length; at += 65_536) chunks.push(body.subarray(at, at + 65_536));
    let k = 0;
    let batches = 0;
    for await (const batch of jsonValues(from(chunks), { maxValueBytes: MAX })) {
      batches++;
      for (const text of batch) {
        if (text !== lines[k]) assert.equal(text, lines[k], `document ${k}`);
        k++;
      }
    }
    assert.equal(k, count);
    assert.equal(batches, chunks.length);
  });
});
