import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { RE2JS } from 're2js';
import { SLICE_BYTES } from '../../../src/services/logs/filters.ts';
import { matchCandidates, matchLines } from '../../../src/services/logs/matching.ts';
import { compilePattern, compilePatterns } from '../../../src/services/logs/patterns.ts';
import type { TestService } from '../../helpers/service.ts';
import { as, call, createKey, createLogger, jsonOf, startLogs, withKey } from './helpers.ts';

// Issue 26: a pattern with a literal every matching line must hold is decided by searching the
// stored bytes for it and testing only the lines around hits. The answers must be exactly those of
// RE2 on every line: these tests compare both, on lines made to trip the search up.

/** What RE2 says, line by line, on the decoded lines: the reference. */
function reference(data: Buffer, kind: 'raw' | 'event', sources: string[]): Buffer {
  const compiled = sources.map((source) => RE2JS.compile(source));
  const kept: Buffer[] = [];
  let start = 0;
  while (start < data.length) {
    let end = data.indexOf(10, start);
    if (end === -1) end = data.length;
    const line = data.toString('utf8', start, end);
    let text = line;
    if (kind === 'event') {
      try {
        const message = (JSON.parse(line) as { message?: unknown }).message;
        text = typeof message === 'string' ? message : '';
      } catch {
        text = '';
      }
    }
    if (compiled.every((re) => re.test(text))) kept.push(data.subarray(start, Math.min(end + 1, data.length)));
    start = end + 1;
  }
  return Buffer.concat(kept);
}

const LINES = [
  'ERROR at the start',
  'plain info line',
  'an error in lower case',
  'Error, mixed case',
  'a.b with a dot',
  'axb without one',
  'price $5 (approx) [sic] a+b?',
  'user=17 ERROR',
  'WARN 42 disk',
  'WRN 7 short',
  'café ERROR é',
  'Kelvin \u212a and long \u017f',
  'kelvin k and s',
  'SPEED 9',
  '',
  'tail ERROR',
];

function rawData(): Buffer {
  const pieces: Buffer[] = LINES.map((line) => Buffer.from(`${line}\n`));
  // Bytes that are not UTF-8 just before a literal, and a truncated sequence just after one.
  pieces.push(Buffer.concat([Buffer.from([0xe2, 0x82]), Buffer.from('ERROR bad bytes '), Buffer.from([0xc3, 0x0a])]));
  pieces.push(Buffer.from('last line ERROR\n'));
  return Buffer.concat(pieces);
}

const PATTERNS: string[][] = [
  ['ERROR'],
  ['(?i)error'],
  ['(?i)ERROR', 'user'],
  ['(?i)kelvin'],
  ['(?i)speed'],
  ['(?i)k'],
  ['a\\.b'],
  ['\\$5 \\(approx\\) \\[sic\\] a\\+b\\?'],
  ['ERR[O]R|WA?RN [0-9]+'],
  ['ERROR|WARN|FATAL'],
  ['^ERROR'],
  ['ERROR$'],
  ['^$'],
  ['ERROR', 'é'],
  ['caf.'],
  ['x+'],
  ['\u212a'],
];

describe('literal search', () => {
  test('patterns know their needles, fold case only where RE2 would, and never claim one that is not required', () => {
    const needles = (source: string) => compilePattern(source).needles?.map(String) ?? null;
    assert.deepEqual(needles('ERROR'), ['ERROR']);
    assert.deepEqual(needles('^probe '), ['probe ']);
    assert.deepEqual(needles('a\\.b'), ['a.b']);
    assert.deepEqual(needles('ERROR|WARN|FATAL'), ['ERROR', 'WARN', 'FATAL']);
    assert.deepEqual(needles('ERR[O]R|WA?RN [0-9]+'), ['ERROR', 'RN ']);
    // Case-insensitive, optional or unsearchable: no needle.
    assert.equal(needles('(?i)error'), null);
    assert.equal(needles('ERROR|x*'), null);
    assert.equal(needles('\ufffd'), null);
    assert.equal(compilePattern('(?i)error').folded, 'error');
    // RE2 folds k with the Kelvin sign and s with the long s: those are left to RE2.
    assert.equal(compilePattern('(?i)kelvin').folded, null);
    assert.equal(compilePattern('(?i)speed').folded, null);
    assert.equal(compilePattern('ERROR').exact, true);
    assert.equal(compilePattern('^ERROR').exact, false);
  });

  test('raw lines: the same lines as RE2 on every line, inline and not', () => {
    const data = rawData();
    for (const sources of PATTERNS) {
      const patterns = compilePatterns(sources);
      const expected = reference(data, 'raw', sources);
      assert.ok(
        Buffer.from(matchLines(data, 'raw', patterns)).equals(expected),
        `matchLines ${JSON.stringify(sources)}: ${JSON.stringify(Buffer.from(matchLines(data, 'raw', patterns)).toString('latin1'))}`,
      );
      const inline = matchCandidates(data, 'raw', patterns, 1024, 1 << 20);
      if (inline !== null) assert.ok(Buffer.from(inline).equals(expected), `inline ${JSON.stringify(sources)}`);
    }
    // The case-insensitive literal matches every case, and RE2's folds of k and s too.
    const folded = Buffer.from(matchLines(data, 'raw', compilePatterns(['(?i)error']))).toString('latin1');
    assert.match(folded, /an error in lower case/);
    assert.match(folded, /Error, mixed case/);
    assert.match(Buffer.from(matchLines(data, 'raw', compilePatterns(['(?i)kelvin k']))).toString(), /\u212a/);
  });

  test('events: the message is tested, wherever else the literal appears', () => {
    const events = [
      ...LINES.map((message, i) => JSON.stringify({ message, n: i, tag: i % 2 === 0 ? 'ERROR' : 'error' })),
      JSON.stringify({ message: 'say "ERROR" \\ here', n: 99 }),
    ];
    const data = Buffer.from(`${events.join('\n')}\n`);
    for (const sources of [...PATTERNS, ['say "ERROR"'], ['\\\\ here']]) {
      const patterns = compilePatterns(sources);
      const expected = reference(data, 'event', sources);
      assert.ok(Buffer.from(matchLines(data, 'event', patterns)).equals(expected), `events ${JSON.stringify(sources)}`);
      const inline = matchCandidates(data, 'event', patterns, 1024, 1 << 20);
      if (inline !== null) assert.ok(Buffer.from(inline).equals(expected), `inline events ${JSON.stringify(sources)}`);
    }
  });

  test('too many candidates for the event loop: the inline search declines, the whole match stays exact', () => {
    const data = Buffer.from('x\n'.repeat(5000));
    const patterns = compilePatterns(['x']);
    assert.equal(matchCandidates(data, 'raw', patterns, 1024, 1 << 20), null);
    assert.equal(Buffer.from(matchLines(data, 'raw', patterns)).length, data.length);
    // No needle at all: not for the inline search.
    assert.equal(matchCandidates(data, 'raw', compilePatterns(['(?i)x|y*']), 1024, 1 << 20), null);
  });
});

describe('literal search through the filter stream', () => {
  let service: TestService;
  before(async () => {
    service = await startLogs({ maxIngestBytes: 16 * 1024 * 1024 });
  });
  after(async () => {
    await service.close();
  });
  const query = (patterns: string[]) => patterns.map((p) => `regex=${encodeURIComponent(p)}`).join('&');
  const filter = async (id: string, patterns: string[], kind = 'filter') => {
    const response = await call(service, 'GET', `/v1/loggers/${id}/${kind}?${query(patterns)}`, as('alice'));
    assert.equal(response.statusCode, 200);
    return response.rawPayload;
  };

  test('hits on the first and last lines, and on both sides of every slice boundary of a large chunk', async () => {
    const logger = await createLogger(service, 'alice');
    // ~3.5 slices of 100-byte lines; a hit on the lines that end and begin each slice.
    const lines: string[] = [];
    let bytes = 0;
    for (let i = 0; bytes < 3.5 * SLICE_BYTES; i++) {
      const line = `${String(i).padStart(8, '0')} ${'y'.repeat(89)}`;
      lines.push(line);
      bytes += line.length + 1;
    }
    const boundaries = new Set<number>([0, lines.length - 1]);
    for (let slice = 1; slice * SLICE_BYTES < bytes; slice++) {
      const at = Math.floor((slice * SLICE_BYTES) / 100);
      for (const i of [at - 2, at - 1, at, at + 1]) boundaries.add(i);
    }
    for (const i of boundaries) lines[i] = `Needle.${i} ${lines[i]!.slice(12)}`;
    const body = `${lines.join('\n')}\n`;
    jsonOf(
      await call(
        service,
        'POST',
        `/v1/loggers/${logger.id}/ingest`,
        { ...as('alice'), 'content-type': 'application/octet-stream' },
        body,
      ),
    );
    // A second chunk whose last line has no newline (one is added) and holds the needle.
    jsonOf(
      await call(
        service,
        'POST',
        `/v1/loggers/${logger.id}/ingest`,
        { ...as('alice'), 'content-type': 'application/octet-stream' },
        'first Needle.x\nmiddle\nlast Needle.y',
      ),
    );
    const all = `${body}first Needle.x\nmiddle\nlast Needle.y\n`.split('\n').slice(0, -1);
    const expect = (keep: (line: string) => boolean) =>
      all
        .filter(keep)
        .map((line) => `${line}\n`)
        .join('');
    assert.equal(
      (await filter(logger.id, ['Needle.'])).toString(),
      expect((line) => line.includes('Needle.')),
    );
    assert.equal(
      (await filter(logger.id, ['(?i)needle\\.'])).toString(),
      expect((line) => line.includes('Needle.')),
    );
    // The dot escaped: a literal dot; and a prefix: only lines that start with it.
    assert.equal(
      (await filter(logger.id, ['^Needle\\.1'])).toString(),
      expect((line) => line.startsWith('Needle.1')),
    );
    assert.equal((await filter(logger.id, ['(?i)NEEDLE$'])).toString(), '');
    assert.equal((await filter(logger.id, ['needle'])).toString(), '');

    // Events: the same search, the message decides.
    const key = await createKey(service, logger.id, 'alice');
    const events = all.map((message, i) => JSON.stringify({ project_id: 'p', message, n: i }));
    jsonOf(await call(service, 'POST', '/v1/ingest/events', withKey(key), events.join('\n')));
    const messages = (await filter(logger.id, ['(?i)NEEDLE\\.'], 'events'))
      .toString()
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { message: string }).message);
    assert.deepEqual(
      messages,
      all.filter((line) => line.includes('Needle.')),
    );
  });
});
