/**
 * Content sniffing: the WHATWG MIME-sniffing table as Go's `net/http.DetectContentType`
 * implements it, over at most the first 512 bytes, plus the choice between the sniffed type and
 * the type the client declared (the README's decisions on declared types).
 */

export const SNIFF_LENGTH = 512;
export const TEXT_PLAIN = 'text/plain; charset=utf-8';
export const OCTET_STREAM = 'application/octet-stream';

type Matcher = (data: Uint8Array, firstNonWS: number) => boolean;
interface Signature {
  readonly match: Matcher;
  readonly type: string;
}

const bytes = (text: string): Uint8Array => Uint8Array.from(text, (c) => c.charCodeAt(0));

function startsWith(data: Uint8Array, prefix: Uint8Array, at = 0): boolean {
  if (data.length - at < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (data[at + i] !== prefix[i]) return false;
  return true;
}

/** A prefix after any leading whitespace (Go's exactSig). */
function exact(sig: string, type: string): Signature {
  const pattern = bytes(sig);
  return { type, match: (data, ws) => startsWith(data, pattern, ws) };
}

/** Masked pattern (WHATWG pattern matching algorithm), optionally after leading whitespace. */
function masked(mask: string, pat: string, type: string, skipWS = false): Signature {
  const m = bytes(mask);
  const p = bytes(pat);
  return {
    type,
    match: (data, ws) => {
      const at = skipWS ? ws : 0;
      if (data.length - at < p.length) return false;
      for (let i = 0; i < p.length; i++) if ((data[at + i]! & m[i]!) !== p[i]) return false;
      return true;
    },
  };
}

/** Case-insensitive tag, after whitespace, followed by a tag-terminating byte (space or `>`). */
function html(tag: string): Signature {
  const pattern = bytes(tag);
  return {
    type: 'text/html; charset=utf-8',
    match: (data, ws) => {
      if (data.length - ws < pattern.length + 1) return false;
      for (let i = 0; i < pattern.length; i++) {
        const want = pattern[i]!;
        let got = data[ws + i]!;
        if (want >= 0x41 && want <= 0x5a) got &= 0xdf;
        if (got !== want) return false;
      }
      const next = data[ws + pattern.length];
      return next === 0x20 || next === 0x3e;
    },
  };
}

const MP4_FTYP = bytes('ftyp');
const MP4_BRAND = bytes('mp4');
const mp4: Signature = {
  type: 'video/mp4',
  match: (data) => {
    if (data.length < 12) return false;
    const boxSize = ((data[0]! << 24) >>> 0) + (data[1]! << 16) + (data[2]! << 8) + data[3]!;
    if (data.length < boxSize || boxSize % 4 !== 0) return false;
    if (!startsWith(data, MP4_FTYP, 4)) return false;
    for (let st = 8; st < boxSize; st += 4) {
      if (st === 12) continue; // the major brand's version number
      if (startsWith(data, MP4_BRAND, st)) return true;
    }
    return false;
  },
};

const text: Signature = {
  type: TEXT_PLAIN,
  match: (data, ws) => {
    for (let i = ws; i < data.length; i++) {
      const b = data[i]!;
      if (b <= 0x08 || b === 0x0b || (b >= 0x0e && b <= 0x1a) || (b >= 0x1c && b <= 0x1f)) return false;
    }
    return true;
  },
};

const ZERO34 = '\x00'.repeat(34);

/** In Go's order: the first match wins; plain text is last. */
const SIGNATURES: readonly Signature[] = [
  ...[
    '<!DOCTYPE HTML',
    '<HTML',
    '<HEAD',
    '<SCRIPT',
    '<IFRAME',
    '<H1',
    '<DIV',
    '<FONT',
    '<TABLE',
    '<A',
    '<STYLE',
    '<TITLE',
    '<B',
    '<BODY',
    '<BR',
    '<P',
    '<!--',
  ].map(html),
  masked('\xFF\xFF\xFF\xFF\xFF', '<?xml', 'text/xml; charset=utf-8', true),
  exact('%PDF-', 'application/pdf'),
  exact('%!PS-Adobe-', 'application/postscript'),
  // Byte-order marks.
  masked('\xFF\xFF\x00\x00', '\xFE\xFF\x00\x00', 'text/plain; charset=utf-16be'),
  masked('\xFF\xFF\x00\x00', '\xFF\xFE\x00\x00', 'text/plain; charset=utf-16le'),
  masked('\xFF\xFF\xFF\x00', '\xEF\xBB\xBF\x00', TEXT_PLAIN),
  // Images.
  exact('\x00\x00\x01\x00', 'image/x-icon'),
  exact('\x00\x00\x02\x00', 'image/x-icon'),
  exact('BM', 'image/bmp'),
  exact('GIF87a', 'image/gif'),
  exact('GIF89a', 'image/gif'),
  masked('\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF\xFF\xFF', 'RIFF\x00\x00\x00\x00WEBPVP', 'image/webp'),
  exact('\x89PNG\x0D\x0A\x1A\x0A', 'image/png'),
  exact('\xFF\xD8\xFF', 'image/jpeg'),
  // Audio and video.
  masked('\xFF\xFF\xFF\xFF', '.snd', 'audio/basic'),
  masked('\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF', 'FORM\x00\x00\x00\x00AIFF', 'audio/aiff'),
  masked('\xFF\xFF\xFF', 'ID3', 'audio/mpeg'),
  masked('\xFF\xFF\xFF\xFF\xFF', 'OggS\x00', 'application/ogg'),
  masked('\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF', 'MThd\x00\x00\x00\x06', 'audio/midi'),
  masked('\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF', 'RIFF\x00\x00\x00\x00AVI ', 'video/avi'),
  masked('\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF', 'RIFF\x00\x00\x00\x00WAVE', 'audio/wave'),
  mp4,
  exact('\x1A\x45\xDF\xA3', 'video/webm'),
  // Fonts.
  masked(`${ZERO34}\xFF\xFF`, `${ZERO34}LP`, 'application/vnd.ms-fontobject'),
  exact('\x00\x01\x00\x00', 'font/ttf'),
  exact('OTTO', 'font/otf'),
  exact('ttcf', 'font/collection'),
  exact('wOFF', 'font/woff'),
  exact('wOF2', 'font/woff2'),
  // Archives.
  exact('\x1F\x8B\x08', 'application/x-gzip'),
  exact('PK\x03\x04', 'application/zip'),
  exact('Rar!\x1A\x07\x00', 'application/x-rar-compressed'),
  exact('Rar!\x1A\x07\x01\x00', 'application/x-rar-compressed'),
  exact('\x00asm', 'application/wasm'),
  text,
];

function isWhitespace(b: number): boolean {
  return b === 0x09 || b === 0x0a || b === 0x0c || b === 0x0d || b === 0x20;
}

/** Go's `DetectContentType`: a type for the first 512 bytes, `application/octet-stream` when nothing matches. */
export function detectContentType(head: Uint8Array): string {
  const data = head.length > SNIFF_LENGTH ? head.subarray(0, SNIFF_LENGTH) : head;
  let ws = 0;
  while (ws < data.length && isWhitespace(data[ws]!)) ws++;
  for (const signature of SIGNATURES) if (signature.match(data, ws)) return signature.type;
  return OCTET_STREAM;
}

/** Media types whose content is text, for which a declared type beats the sniffed `text/plain`. */
function isTextual(essence: string): boolean {
  return (
    essence.startsWith('text/') ||
    essence.endsWith('+json') ||
    essence.endsWith('+xml') ||
    [
      'application/json',
      'application/xml',
      'application/javascript',
      'application/ecmascript',
      'application/x-ndjson',
      'application/yaml',
      'application/x-yaml',
      'application/toml',
      'application/sql',
      'application/graphql',
      'image/svg+xml',
    ].includes(essence)
  );
}

/** A declared Content-Type, normalised, or null when absent or not a syntactically valid type. */
export function declaredType(header: string | undefined): string | null {
  if (header === undefined) return null;
  const value = header.trim();
  // type/subtype with optional parameters; tokens per RFC 9110 (no spaces, no control characters).
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*;.*)?$/.test(value)) return null;
  // No control characters (header values with them are invalid and would be echoed back).
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f) return null;
  }
  return value.replace(/^[^;]+/, (essence) => essence.toLowerCase());
}

/**
 * The stored media type: a binary signature found in the content wins; content
 * recognisable only as UTF-8 text keeps a declared textual type (`application/json`, `text/css`,
 * …); content matching nothing takes the declared type; else what sniffing found, and
 * `application/octet-stream` last.
 */
export function chooseMediaType(head: Uint8Array, contentType: string | undefined): string {
  const sniffed = detectContentType(head);
  const declared = declaredType(contentType);
  if (declared === null) return sniffed;
  const essence = declared.split(';')[0]!.trim();
  if (sniffed === OCTET_STREAM) return declared;
  if (sniffed === TEXT_PLAIN && isTextual(essence)) {
    // `text/plain` itself is answered with the charset the content has, as a client that declared plain text expects.
    return essence === 'text/plain' && !declared.includes(';') ? TEXT_PLAIN : declared;
  }
  return sniffed;
}
