import { createHash, randomFillSync, randomUUID } from 'node:crypto';

/**
 * The web APIs V8 alone does not have (URL, URLSearchParams, TextEncoder/TextDecoder, atob/btoa,
 * crypto), done by Node for the sandbox: the prelude (prelude.ts) calls `hostUtility` through one
 * synchronous isolated-vm reference with copied arguments (strings, numbers, ArrayBuffers) and gets
 * copied values back; nothing of the host is reachable from the isolate. None of these depends on
 * the invocation. A problem with the input is thrown as `<ErrorName>: <message>` text, which the
 * prelude turns into that error class inside the isolate.
 */

const URL_PARTS = [
  'href',
  'origin',
  'protocol',
  'username',
  'password',
  'host',
  'hostname',
  'port',
  'pathname',
  'search',
  'hash',
] as const;
/** Every part but `origin` can be set (WHATWG URL). */
const URL_SETTERS = new Set<string>(URL_PARTS.filter((part) => part !== 'origin'));
const DIGESTS: Record<string, string> = {
  'SHA-1': 'sha1',
  'SHA-256': 'sha256',
  'SHA-384': 'sha384',
  'SHA-512': 'sha512',
};
/** crypto.getRandomValues: at most 65,536 bytes a call (Web Crypto, QuotaExceededError beyond). */
const MAX_RANDOM_BYTES = 65_536;
/** Encoding → its labels (as WHATWG Encoding lists them), turned into the label → encoding map the decoder looks up. */
function byLabel(encodings: Record<string, readonly string[]>): Map<string, string> {
  const map = new Map<string, string>();
  for (const [encoding, labels] of Object.entries(encodings)) for (const label of labels) map.set(label, encoding);
  return map;
}
/** Labels a TextDecoder accepts here (WHATWG Encoding names Node decodes without ICU data). */
const DECODER_LABELS = byLabel({
  'utf-8': ['unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'utf-8', 'utf8', 'x-unicode20utf8'],
  'utf-16le': ['csunicode', 'iso-10646-ucs-2', 'ucs-2', 'unicode', 'unicodefeff', 'utf-16', 'utf-16le'],
  'windows-1252': ['ascii', 'cp1252', 'iso-8859-1', 'l1', 'latin1', 'us-ascii', 'windows-1252', 'x-cp1252'],
});

type ErrorKind =
  'TypeError' | 'RangeError' | `DOMException/${'InvalidCharacterError' | 'QuotaExceededError' | 'NotSupportedError'}`;

class Thrown extends Error {
  constructor(kind: ErrorKind, message: string) {
    super(`${kind}: ${message}`);
  }
}

function urlParts(url: URL): string {
  const parts: Record<string, string> = {};
  for (const name of URL_PARTS) parts[name] = url[name];
  return JSON.stringify(parts);
}

function parseUrl(input: string, base: string | undefined): URL {
  const url = URL.parse(input, base);
  if (url === null) throw new Thrown('TypeError', `Invalid URL: ${JSON.stringify(input.slice(0, 200))}`);
  return url;
}

function bytesOf(value: unknown): Uint8Array {
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  throw new Thrown('TypeError', 'expected bytes');
}

/** An ArrayBuffer holding exactly these bytes (the isolate receives a copy). */
function arrayBuffer(bytes: Uint8Array): ArrayBuffer {
  const out = new ArrayBuffer(bytes.byteLength);
  new Uint8Array(out).set(bytes);
  return out;
}

/** One utility call of the sandbox; see the file comment. */
export function hostUtility(op: unknown, a: unknown, b: unknown, c: unknown, d: unknown): unknown {
  try {
    switch (op) {
      case 'url.parse':
        return urlParts(parseUrl(String(a), b === undefined ? undefined : String(b)));
      case 'url.canParse':
        return URL.canParse(String(a), b === undefined ? undefined : String(b));
      case 'url.set': {
        const name = String(b);
        if (!URL_SETTERS.has(name)) throw new Thrown('TypeError', `URL has no settable ${name}`);
        const url = parseUrl(String(a), undefined);
        (url as unknown as Record<string, string>)[name] = String(c);
        return urlParts(url);
      }
      case 'params.parse':
        return JSON.stringify([...new URLSearchParams(String(a))]);
      case 'params.serialize':
        return new URLSearchParams(JSON.parse(String(a)) as [string, string][]).toString();
      case 'text.encode':
        return arrayBuffer(Buffer.from(String(a), 'utf8'));
      case 'text.decoder': {
        const encoding = DECODER_LABELS.get(String(a).trim().toLowerCase());
        if (encoding === undefined) throw new Thrown('RangeError', `The "${String(a)}" encoding is not supported`);
        return encoding;
      }
      case 'text.decode': {
        // a: bytes, b: encoding (from text.decoder), c: fatal, d: ignoreBOM.
        const decoder = new TextDecoder(String(b), { fatal: c === true, ignoreBOM: d === true });
        try {
          return decoder.decode(bytesOf(a));
        } catch {
          throw new Thrown('TypeError', `The encoded data was not valid for encoding ${String(b)}`);
        }
      }
      case 'base64.encode':
        try {
          return btoa(String(a));
        } catch {
          throw new Thrown('DOMException/InvalidCharacterError', 'Invalid character');
        }
      case 'base64.decode':
        try {
          return atob(String(a));
        } catch {
          throw new Thrown('DOMException/InvalidCharacterError', 'The string to be decoded is not correctly encoded.');
        }
      case 'crypto.uuid':
        return randomUUID();
      case 'crypto.random': {
        const length = Number(a);
        if (!Number.isInteger(length) || length < 0) throw new Thrown('TypeError', 'invalid length');
        if (length > MAX_RANDOM_BYTES)
          throw new Thrown(
            'DOMException/QuotaExceededError',
            `The ArrayBufferView's byte length (${length}) exceeds the number of bytes of entropy available via this API (${MAX_RANDOM_BYTES})`,
          );
        return arrayBuffer(randomFillSync(new Uint8Array(length)));
      }
      case 'crypto.digest': {
        const algorithm = DIGESTS[String(a).toUpperCase()];
        if (algorithm === undefined)
          throw new Thrown(
            'DOMException/NotSupportedError',
            `Unrecognized algorithm name ${JSON.stringify(String(a))}`,
          );
        return arrayBuffer(createHash(algorithm).update(bytesOf(b)).digest());
      }
      default:
        throw new Thrown('TypeError', `unknown utility ${String(op)}`);
    }
  } catch (error) {
    if (error instanceof Thrown) throw error;
    if (error instanceof TypeError) throw new Thrown('TypeError', error.message);
    throw new Thrown('TypeError', error instanceof Error ? error.message : String(error));
  }
}
