import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chooseMediaType, declaredType, detectContentType } from '../../../src/services/files/sniff.ts';
import { checkFilePath, listPrefix } from '../../../src/services/files/paths.ts';
import { ifRangeHolds, notModified, parseRange } from '../../../src/services/files/conditions.ts';
import { createNanoClock, rfc3339Ns } from '../../../src/services/files/timestamps.ts';
import { stringifyJson } from '../../../src/core/json.ts';

const b = (text: string) => Buffer.from(text, 'latin1');

describe('detectContentType (the WHATWG table, as Go implements it)', () => {
  const cases: [string, Buffer, string][] = [
    ['empty', b(''), 'text/plain; charset=utf-8'],
    ['binary', Buffer.from([1, 2, 3]), 'application/octet-stream'],
    ['html, mixed case', b('<HtMl><bOdY>blah blah blah</body></html>'), 'text/html; charset=utf-8'],
    ['html after whitespace', b('   <!DOCTYPE HTML>...'), 'text/html; charset=utf-8'],
    ['html comment', b('<!-- comment -->'), 'text/html; charset=utf-8'],
    ['html tag needs a terminator', b('<HTMLX>'), 'text/plain; charset=utf-8'],
    ['<p> tag', b('<p>paragraph</p>'), 'text/html; charset=utf-8'],
    ['xml', b('\n<?xml version="1.0"?><a/>'), 'text/xml; charset=utf-8'],
    ['pdf', b('%PDF-1.4\n'), 'application/pdf'],
    ['postscript', b('%!PS-Adobe-3.0'), 'application/postscript'],
    ['utf-16be bom', Buffer.from([0xfe, 0xff, 0, 0x41]), 'text/plain; charset=utf-16be'],
    ['utf-16le bom', Buffer.from([0xff, 0xfe, 0x41, 0]), 'text/plain; charset=utf-16le'],
    ['utf-8 bom', Buffer.from([0xef, 0xbb, 0xbf, 0x41]), 'text/plain; charset=utf-8'],
    ['gif87', b('GIF87a'), 'image/gif'],
    ['gif89', b('GIF89a...'), 'image/gif'],
    ['png', b('\x89PNG\x0D\x0A\x1A\x0A'), 'image/png'],
    ['jpeg', b('\xFF\xD8\xFF\xE0'), 'image/jpeg'],
    ['bmp', b('BM...'), 'image/bmp'],
    ['ico', b('\x00\x00\x01\x00'), 'image/x-icon'],
    ['cursor', b('\x00\x00\x02\x00'), 'image/x-icon'],
    ['webp', b('RIFF\x00\x00\x00\x00WEBPVP8 '), 'image/webp'],
    ['wave', b('RIFF\x24\x00\x00\x00WAVEfmt '), 'audio/wave'],
    ['avi', b('RIFF\x24\x00\x00\x00AVI LIST'), 'video/avi'],
    ['aiff', b('FORM\x00\x00\x00\x00AIFFCOMM'), 'audio/aiff'],
    ['basic audio', b('.snd\x00\x00'), 'audio/basic'],
    ['ogg', b('OggS\x00\x02'), 'application/ogg'],
    ['midi', b('MThd\x00\x00\x00\x06\x00\x01'), 'audio/midi'],
    ['mp3 with id3', b('ID3\x03\x00'), 'audio/mpeg'],
    ['mp4', b('\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom<\x06t\xbfmdat'), 'video/mp4'],
    [
      'mp4 brand not mp4',
      b('\x00\x00\x00\x18ftypqt  \x00\x00\x00\x00qt  qt  \x00\x00\x00\x00'),
      'application/octet-stream',
    ],
    ['webm', b('\x1A\x45\xDF\xA3\x01'), 'video/webm'],
    ['eot', Buffer.concat([Buffer.alloc(34, 7), b('LP')]), 'application/vnd.ms-fontobject'],
    ['ttf', b('\x00\x01\x00\x00\x00'), 'font/ttf'],
    ['otf', b('OTTO\x00'), 'font/otf'],
    ['ttc', b('ttcf\x00'), 'font/collection'],
    ['woff', b('wOFF\x00'), 'font/woff'],
    ['woff2', b('wOF2\x00'), 'font/woff2'],
    ['gzip', b('\x1F\x8B\x08\x00'), 'application/x-gzip'],
    ['zip', b('PK\x03\x04\x14'), 'application/zip'],
    ['rar 4', b('Rar!\x1A\x07\x00'), 'application/x-rar-compressed'],
    ['rar 5', b('Rar!\x1A\x07\x01\x00'), 'application/x-rar-compressed'],
    ['wasm', b('\x00asm\x01\x00\x00\x00'), 'application/wasm'],
    ['text with a control byte', b('hello\x01'), 'application/octet-stream'],
    ['text with tabs and newlines', b('a\tb\nc\r\n\x0c'), 'text/plain; charset=utf-8'],
    ['utf-8 text', Buffer.from('héllo wörld ✓'), 'text/plain; charset=utf-8'],
  ];
  for (const [name, data, expected] of cases) test(name, () => assert.equal(detectContentType(data), expected));

  test('only the first 512 bytes count', () => {
    assert.equal(
      detectContentType(Buffer.concat([Buffer.alloc(512, 0x61), Buffer.from([1])])),
      'text/plain; charset=utf-8',
    );
    assert.equal(
      detectContentType(Buffer.concat([Buffer.alloc(511, 0x61), Buffer.from([1])])),
      'application/octet-stream',
    );
  });
});

describe('chooseMediaType (decision 36)', () => {
  test('binary signature wins over the declared type', () =>
    assert.equal(chooseMediaType(b('%PDF-'), 'text/plain'), 'application/pdf'));
  test('declared textual types are kept for text content', () => {
    assert.equal(chooseMediaType(b('{"a":1}'), 'application/json'), 'application/json');
    assert.equal(chooseMediaType(b('{"a":1}'), 'Application/JSON; charset=utf-8'), 'application/json; charset=utf-8');
    assert.equal(chooseMediaType(b('x: 1'), 'application/yaml'), 'application/yaml');
    assert.equal(chooseMediaType(b('<svg/>'), 'image/svg+xml'), 'image/svg+xml');
    assert.equal(chooseMediaType(b('a'), 'text/plain'), 'text/plain; charset=utf-8');
  });
  test('text content declared as a non-textual type is text/plain', () =>
    assert.equal(chooseMediaType(b('abc'), 'image/png'), 'text/plain; charset=utf-8'));
  test('unrecognised content takes the declared type, else octet-stream', () => {
    assert.equal(chooseMediaType(Buffer.from([1, 2]), 'application/x-thing'), 'application/x-thing');
    assert.equal(chooseMediaType(Buffer.from([1, 2]), undefined), 'application/octet-stream');
    assert.equal(chooseMediaType(Buffer.from([1, 2]), 'bogus'), 'application/octet-stream');
  });
  test('declaredType rejects malformed values', () => {
    assert.equal(declaredType('text/plain\r\nx: y'), null);
    assert.equal(declaredType('a b/c'), null);
    assert.equal(declaredType(' TEXT/CSV ; charset=UTF-8'), 'text/csv ; charset=UTF-8');
  });
});

describe('paths, conditions, ranges, timestamps', () => {
  test('checkFilePath', () => {
    for (const ok of ['a', 'a/b/c.txt', '.hidden', 'a/.b', '...', 'x'.repeat(1024), 'ü'.repeat(512)])
      assert.equal(checkFilePath(ok), ok);
    for (const bad of [
      '',
      '/a',
      'a/',
      'a//b',
      '.',
      '..',
      'a/./b',
      'a/../b',
      'a\u0000',
      'x'.repeat(1025),
      'ü'.repeat(513),
    ]) {
      assert.throws(() => checkFilePath(bad), /file path/, JSON.stringify(bad.slice(0, 20)));
    }
  });
  test('listPrefix strips one trailing *', () => {
    assert.equal(listPrefix('*'), '');
    assert.equal(listPrefix('notes/*'), 'notes/');
    assert.equal(listPrefix('a**'), 'a*');
    assert.throws(() => listPrefix('a\u0000'));
  });
  test('parseRange', () => {
    assert.deepEqual(parseRange('bytes=0-0', 1), { kind: 'partial', start: 0, end: 0 });
    assert.deepEqual(parseRange('bytes=0-99999999999999999999', 10), { kind: 'partial', start: 0, end: 9 });
    assert.deepEqual(parseRange('bytes=99999999999999999999-', 10), { kind: 'unsatisfiable' });
    assert.deepEqual(parseRange('BYTES = 2-3', 10), { kind: 'partial', start: 2, end: 3 });
    assert.deepEqual(parseRange('bytes=-', 10), { kind: 'full' });
    assert.deepEqual(parseRange(undefined, 10), { kind: 'full' });
  });
  test('conditions', () => {
    const v = {
      etag: '"abc"',
      lastModified: 'Sat, 21 Jun 2025 12:01:00 GMT',
      lastModifiedSeconds: Date.parse('Sat, 21 Jun 2025 12:01:00 GMT') / 1000,
    };
    assert.equal(notModified({ 'if-none-match': '"x", W/"abc"' }, v), true);
    assert.equal(notModified({ 'if-none-match': '"abcd"' }, v), false);
    assert.equal(notModified({ 'if-modified-since': 'Sat, 21 Jun 2025 12:01:00 GMT' }, v), true);
    assert.equal(notModified({ 'if-modified-since': 'Sat, 21 Jun 2025 12:00:59 GMT' }, v), false);
    assert.equal(ifRangeHolds('"abc"', v), true);
    assert.equal(ifRangeHolds('W/"abc"', v), false);
    assert.equal(ifRangeHolds('Sat, 21 Jun 2025 12:01:00 GMT', v), true);
    assert.equal(ifRangeHolds('Sat, 21 Jun 2025 12:01:01 GMT', v), false);
    assert.equal(ifRangeHolds('garbage', v), false);
  });
  test('timestamps: strictly increasing, exact in JSON, RFC 3339 with the fraction', () => {
    const clock = createNanoClock(() => 1_000);
    assert.deepEqual([clock(), clock(), clock()], [1_000_000_000n, 1_000_000_001n, 1_000_000_002n]);
    assert.equal(rfc3339Ns(1782045600000000000n), '2026-06-21T12:40:00Z');
    assert.equal(rfc3339Ns(1782045600120000000n), '2026-06-21T12:40:00.12Z');
    assert.equal(
      stringifyJson({ t: 9007199254740993n, s: 'x"y', a: ['1'] }),
      '{"t":9007199254740993,"s":"x\\"y","a":["1"]}',
    );
  });
});
