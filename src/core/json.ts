// JSON values as the document database and the key-value node hold them. Numbers are doubles as
// in JSON.parse, except integer literals beyond Number.MAX_SAFE_INTEGER, which are kept exact as
// bigint (the document database's `unixnano()` values and client-supplied big integers survive a
// round trip; see src/services/docdb/README.md).

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

export function isJsonObject(v: JsonValue | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Sets an own data property. A plain assignment of `__proto__` would change the object's prototype
 * instead; JSON.parse defines it as an ordinary member, and so do we.
 */
export function setMember(object: JsonObject, key: string, value: JsonValue): void {
  if (key === '__proto__') {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

/** A deep copy that keeps key order and `__proto__` members as data. */
export function cloneJson(value: JsonValue): JsonValue {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(cloneJson);
  const copy: JsonObject = {};
  for (const key of Object.keys(value)) setMember(copy, key, cloneJson(value[key] as JsonValue));
  return copy;
}

/**
 * How deep objects and arrays may nest in a stored value (a document, a kv value, a task payload).
 * JSON.parse accepts any depth, but the serializer and every recursive walk (index keys, merge
 * patch, equality, bigint checks, Ajv) would overflow the call stack somewhere past a few thousand
 * levels; a limit turns that into a 400 instead of a 500. One bound for every service.
 */
export const MAX_NESTING = 1000;

/** How deep a request body may nest: a value of MAX_NESTING levels one level inside its wrapper. */
export const MAX_BODY_NESTING = MAX_NESTING + 1;

/**
 * Whether the JSON text's objects and arrays nest more than `limit` levels (a scan of the text,
 * strings skipped; malformed text is left to the parser). Runs before parsing, so nothing
 * recursive ever sees a deeper value; a text shorter than `limit` cannot be deeper and is not read.
 */
export function jsonTextDeeperThan(text: string, limit: number): boolean {
  if (text.length <= limit) return false;
  let depth = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      for (i++; i < length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > limit) return true;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return false;
}

/** The error a too-deep body raises (a 400 wherever it is caught by the app's error handler). */
export class JsonTooDeepError extends Error {
  constructor(limit: number) {
    super(`JSON nested more than ${limit} levels deep`);
  }
}

/**
 * `parseJson` for request bodies: refuses text nested deeper than `limit` (MAX_BODY_NESTING by
 * default) with a JsonTooDeepError before parsing it.
 */
export function parseJsonBody(text: string, limit = MAX_BODY_NESTING): JsonValue {
  if (jsonTextDeeperThan(text, limit)) throw new JsonTooDeepError(limit);
  return parseJson(text);
}

/** Whether objects and arrays in `value` nest more than `limit` levels deep (iterative: any depth is safe). */
export function nestedDeeperThan(value: JsonValue, limit: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const stack: { value: JsonValue; depth: number }[] = [{ value, depth: 1 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if (top.depth > limit) return true;
    const container = top.value as JsonObject | JsonValue[];
    const children = Array.isArray(container) ? container : Object.values(container);
    for (const child of children)
      if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: top.depth + 1 });
  }
  return false;
}

// Only an integer literal of 16 or more digits can exceed MAX_SAFE_INTEGER (16 digits), so texts
// without such a run, nearly all of them, take the native parser.
const LONG_DIGIT_RUN = /[0-9]{16}/;

export function parseJson(text: string): JsonValue {
  if (!LONG_DIGIT_RUN.test(text)) return JSON.parse(text) as JsonValue;
  return new ExactParser(text).parse();
}

export function stringifyJson(value: JsonValue): string {
  // Checking first is far cheaper than letting the native serializer throw on a bigint (capturing
  // the error's stack costs several times the whole serialization).
  return containsBigInt(value) ? stringifyExact(value) : JSON.stringify(value);
}

function containsBigInt(value: JsonValue): boolean {
  if (typeof value === 'bigint') return true;
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (containsBigInt(value[i] as JsonValue)) return true;
    return false;
  }
  // for-in walks V8's enum cache without allocating a key array.
  for (const key in value) if (containsBigInt(value[key] as JsonValue)) return true;
  return false;
}

/** Only the members on the way to a bigint are written here; everything else goes native. */
function stringifyExact(value: JsonValue): string {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value !== 'object' || value === null || !containsBigInt(value)) return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      out += stringifyExact(value[i] as JsonValue);
    }
    return out + ']';
  }
  let out = '{';
  let first = true;
  for (const key of Object.keys(value)) {
    if (!first) out += ',';
    first = false;
    out += JSON.stringify(key) + ':' + stringifyExact(value[key] as JsonValue);
  }
  return out + '}';
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

const enum Char {
  Tab = 0x09,
  Lf = 0x0a,
  Cr = 0x0d,
  Space = 0x20,
  Quote = 0x22,
  Plus = 0x2b,
  Comma = 0x2c,
  Minus = 0x2d,
  Dot = 0x2e,
  Zero = 0x30,
  One = 0x31,
  Nine = 0x39,
  Colon = 0x3a,
  UpperE = 0x45,
  OpenBracket = 0x5b,
  Backslash = 0x5c,
  CloseBracket = 0x5d,
  LowerE = 0x65,
  OpenBrace = 0x7b,
  CloseBrace = 0x7d,
}

type Frame =
  { array: JsonValue[]; object?: undefined; key?: undefined } | { array?: undefined; object: JsonObject; key: string };

/**
 * Strict JSON (RFC 8259, exactly what JSON.parse accepts) with exact big integers. Iterative, with
 * an explicit stack, so deep nesting that JSON.parse accepts does not overflow the call stack.
 */
class ExactParser {
  private pos = 0;

  constructor(private readonly text: string) {}

  parse(): JsonValue {
    const text = this.text;
    const stack: Frame[] = [];
    for (;;) {
      let value: JsonValue;
      this.skipWhitespace();
      const c = text.charCodeAt(this.pos);
      if (c === Char.OpenBrace) {
        this.pos++;
        this.skipWhitespace();
        if (text.charCodeAt(this.pos) === Char.CloseBrace) {
          this.pos++;
          value = {};
        } else {
          stack.push({ object: {}, key: this.parseKey() });
          continue;
        }
      } else if (c === Char.OpenBracket) {
        this.pos++;
        this.skipWhitespace();
        if (text.charCodeAt(this.pos) === Char.CloseBracket) {
          this.pos++;
          value = [];
        } else {
          stack.push({ array: [] });
          continue;
        }
      } else if (c === Char.Quote) {
        value = this.parseString();
      } else if (c === Char.Minus || (c >= Char.Zero && c <= Char.Nine)) {
        value = this.parseNumber();
      } else if (text.startsWith('true', this.pos)) {
        this.pos += 4;
        value = true;
      } else if (text.startsWith('false', this.pos)) {
        this.pos += 5;
        value = false;
      } else if (text.startsWith('null', this.pos)) {
        this.pos += 4;
        value = null;
      } else {
        throw this.unexpected();
      }

      // Attach the finished value to its container; closing a container finishes another value.
      for (;;) {
        const frame = stack[stack.length - 1];
        if (frame === undefined) {
          this.skipWhitespace();
          if (this.pos !== text.length) throw this.unexpected();
          return value;
        }
        if (frame.array !== undefined) frame.array.push(value);
        else setMember(frame.object, frame.key, value);
        this.skipWhitespace();
        const next = text.charCodeAt(this.pos);
        if (next === Char.Comma) {
          this.pos++;
          if (frame.object !== undefined) frame.key = this.parseKey();
          break;
        }
        if (frame.array !== undefined ? next !== Char.CloseBracket : next !== Char.CloseBrace) throw this.unexpected();
        this.pos++;
        stack.pop();
        value = frame.array ?? frame.object;
      }
    }
  }

  /** A member name and its colon. */
  private parseKey(): string {
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) !== Char.Quote) throw this.unexpected();
    const key = this.parseString();
    this.skipWhitespace();
    if (this.text.charCodeAt(this.pos) !== Char.Colon) throw this.unexpected();
    this.pos++;
    return key;
  }

  private skipWhitespace(): void {
    const text = this.text;
    let pos = this.pos;
    for (;;) {
      const c = text.charCodeAt(pos);
      if (c === Char.Space || c === Char.Lf || c === Char.Cr || c === Char.Tab) pos++;
      else break;
    }
    this.pos = pos;
  }

  private parseString(): string {
    const text = this.text;
    let pos = this.pos + 1; // past the opening quote
    let chunkStart = pos;
    let out = '';
    for (;;) {
      const c = text.charCodeAt(pos);
      if (c === Char.Quote) {
        this.pos = pos + 1;
        return out + text.slice(chunkStart, pos);
      }
      if (c === Char.Backslash) {
        out += text.slice(chunkStart, pos);
        const e = text.charCodeAt(pos + 1);
        switch (e) {
          case 0x22:
            out += '"';
            break;
          case 0x5c:
            out += '\\';
            break;
          case 0x2f:
            out += '/';
            break;
          case 0x62:
            out += '\b';
            break;
          case 0x66:
            out += '\f';
            break;
          case 0x6e:
            out += '\n';
            break;
          case 0x72:
            out += '\r';
            break;
          case 0x74:
            out += '\t';
            break;
          case 0x75: {
            let code = 0;
            for (let k = pos + 2; k < pos + 6; k++) {
              const digit = hexValue(text.charCodeAt(k));
              if (digit < 0) {
                this.pos = k;
                throw this.unexpected();
              }
              code = code * 16 + digit;
            }
            // Lone surrogates are kept, as JSON.parse keeps them.
            out += String.fromCharCode(code);
            pos += 4;
            break;
          }
          default:
            this.pos = pos + 1;
            throw this.unexpected();
        }
        pos += 2;
        chunkStart = pos;
      } else if (c < Char.Space || Number.isNaN(c)) {
        // Raw control characters and the end of the text are both errors inside a string.
        this.pos = pos;
        throw this.unexpected();
      } else {
        pos++;
      }
    }
  }

  private parseNumber(): number | bigint {
    const text = this.text;
    const start = this.pos;
    let pos = start;
    if (text.charCodeAt(pos) === Char.Minus) pos++;
    const first = text.charCodeAt(pos);
    if (first === Char.Zero) {
      pos++;
    } else if (first >= Char.One && first <= Char.Nine) {
      pos = skipDigits(text, pos + 1);
    } else {
      this.pos = pos;
      throw this.unexpected();
    }
    const integerDigits = pos - start - (text.charCodeAt(start) === Char.Minus ? 1 : 0);
    let integer = true;
    if (text.charCodeAt(pos) === Char.Dot) {
      integer = false;
      const end = skipDigits(text, pos + 1);
      if (end === pos + 1) {
        this.pos = end;
        throw this.unexpected();
      }
      pos = end;
    }
    const e = text.charCodeAt(pos);
    if (e === Char.LowerE || e === Char.UpperE) {
      integer = false;
      pos++;
      const sign = text.charCodeAt(pos);
      if (sign === Char.Plus || sign === Char.Minus) pos++;
      const end = skipDigits(text, pos);
      if (end === pos) {
        this.pos = end;
        throw this.unexpected();
      }
      pos = end;
    }
    this.pos = pos;
    const literal = text.slice(start, pos);
    // Number() rounds decimal literals exactly as JSON.parse does.
    if (!integer || integerDigits < 16) return Number(literal);
    const big = BigInt(literal);
    return big > MAX_SAFE || big < -MAX_SAFE ? big : Number(big);
  }

  private unexpected(): SyntaxError {
    if (this.pos >= this.text.length) return new SyntaxError('Unexpected end of JSON input');
    return new SyntaxError(
      `Unexpected token ${JSON.stringify(this.text.charAt(this.pos))} in JSON at position ${this.pos}`,
    );
  }
}

function skipDigits(text: string, pos: number): number {
  for (;;) {
    const c = text.charCodeAt(pos);
    if (c >= Char.Zero && c <= Char.Nine) pos++;
    else return pos;
  }
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/**
 * What is wrong with JSON text, without any of the text: V8's message repeats a stretch of it
 * around the error, and a body may carry a password or a secret, so a 400 names the position only.
 */
export function jsonSyntaxProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : '';
  if (message.startsWith('Unexpected end of JSON input')) return 'it ends early';
  const position = /at position (\d+)/.exec(message)?.[1];
  return position === undefined ? 'a syntax error' : `a syntax error at position ${position}`;
}
