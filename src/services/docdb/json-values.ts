// Incremental splitter for the document insert endpoints (README: Inserts): turns a body byte
// stream into the texts of its top-level JSON values without buffering the whole body. It only
// finds boundaries (string/escape state and bracket depth); the caller JSON.parses each text.
//
// It works on bytes: every boundary byte (brackets, quotes, whitespace) is ASCII and can never occur
// inside a multi-byte UTF-8 sequence, so each value's bytes are decoded once, whole, and characters
// split across chunks come out intact.

export class JsonStreamError extends Error {
  constructor(
    readonly code: 'invalid_json' | 'payload_too_large',
    message: string,
  ) {
    super(message);
    this.name = 'JsonStreamError';
  }
}

export interface JsonValuesOptions {
  /** Largest accepted single value, in bytes (UTF-8). */
  maxValueBytes: number;
}

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

const enum Mode {
  Between, // between top-level values, skipping whitespace
  Container, // inside an object/array, outside strings
  InnerString, // inside a string within an object/array
  TopString, // inside a top-level string value
  Scalar, // inside a top-level number/literal/garbage run
}

/** Scanner state carried from one chunk to the next, so no byte is scanned twice. */
class Splitter {
  private mode = Mode.Between;
  private depth = 0;
  /** The previous chunk ended on an unescaped backslash inside a string. */
  private escaped = false;
  /** Bytes of the unfinished value from earlier chunks. */
  private pieces: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes of input before the current chunk, for error positions. */
  private offset = 0;

  constructor(private readonly maxValueBytes: number) {}

  /** Appends the values completed in `buf` to `out`; returns the error that stops the stream, if any. */
  push(buf: Buffer, out: string[]): JsonStreamError | undefined {
    const n = buf.length;
    // Where the current value starts in this chunk (0 when it began in an earlier one).
    let start = 0;
    let i = 0;
    while (i < n) {
      switch (this.mode) {
        case Mode.Between: {
          const c = buf[i]!;
          if (c === SPACE || c === LF || c === CR || c === TAB) {
            i++;
            break;
          }
          start = i++;
          if (c === OPEN_BRACE || c === OPEN_BRACKET) {
            this.depth = 1;
            this.mode = Mode.Container;
          } else if (c === QUOTE) {
            this.mode = Mode.TopString;
          } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
            return new JsonStreamError(
              'invalid_json',
              `unexpected '${String.fromCharCode(c)}' at byte ${this.offset + start}`,
            );
          } else {
            this.mode = Mode.Scalar;
          }
          break;
        }
        case Mode.Container: {
          let depth = this.depth;
          let j = i;
          for (; j < n; j++) {
            const c = buf[j]!;
            if (c === QUOTE) {
              this.mode = Mode.InnerString;
              break;
            }
            if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
            else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) {
              this.mode = Mode.Between;
              break;
            }
          }
          this.depth = depth;
          i = j + 1;
          if (this.mode === Mode.Between) {
            const err = this.emit(buf, start, i, out);
            if (err) return err;
          }
          break;
        }
        case Mode.InnerString:
        case Mode.TopString: {
          const q = this.closingQuote(buf, i);
          if (q < 0) {
            i = n;
            break;
          }
          i = q + 1;
          if (this.mode === Mode.InnerString) {
            this.mode = Mode.Container;
          } else {
            this.mode = Mode.Between;
            const err = this.emit(buf, start, i, out);
            if (err) return err;
          }
          break;
        }
        case Mode.Scalar: {
          let j = i;
          for (; j < n; j++) {
            const c = buf[j]!;
            if (
              c === SPACE ||
              c === LF ||
              c === CR ||
              c === TAB ||
              c === OPEN_BRACE ||
              c === OPEN_BRACKET ||
              c === QUOTE
            ) {
              break;
            }
          }
          i = j;
          if (j < n) {
            this.mode = Mode.Between;
            const err = this.emit(buf, start, j, out);
            if (err) return err;
          }
          break;
        }
      }
    }

    if (this.mode !== Mode.Between) {
      // The value goes on in the next chunk: keep only its bytes, and give up as soon as it is too big.
      const total = this.pendingBytes + n - start;
      if (total > this.maxValueBytes) return this.tooLarge();
      // A tail is copied so the rest of the chunk is not retained; a whole chunk is kept as it is.
      this.pieces.push(start === 0 ? buf : Buffer.from(buf.subarray(start)));
      this.pendingBytes = total;
    }
    this.offset += n;
    return undefined;
  }

  /** End of input: a pending scalar is complete; anything else unfinished is an error. */
  end(out: string[]): JsonStreamError | undefined {
    if (this.mode === Mode.Scalar) {
      this.mode = Mode.Between;
      // Its bytes were already size-checked in push().
      out.push(this.takePending(Buffer.alloc(0), 0, 0));
      return undefined;
    }
    if (this.mode !== Mode.Between) return new JsonStreamError('invalid_json', 'unexpected end of JSON input');
    return undefined;
  }

  private emit(buf: Buffer, start: number, end: number, out: string[]): JsonStreamError | undefined {
    if (this.pendingBytes + end - start > this.maxValueBytes) return this.tooLarge();
    out.push(this.pieces.length === 0 ? buf.toString('utf8', start, end) : this.takePending(buf, start, end));
    return undefined;
  }

  private takePending(buf: Buffer, start: number, end: number): string {
    const pieces = this.pieces;
    if (end > start) pieces.push(buf.subarray(start, end));
    const text = Buffer.concat(pieces, this.pendingBytes + end - start).toString('utf8');
    this.pieces = [];
    this.pendingBytes = 0;
    return text;
  }

  private tooLarge(): JsonStreamError {
    // Drop what was collected: the stream stops here.
    this.pieces = [];
    this.pendingBytes = 0;
    return new JsonStreamError('payload_too_large', `document exceeds ${this.maxValueBytes} bytes`);
  }

  /**
   * Index of the quote closing the current string, scanning from `i`, or -1 if it is not in this
   * chunk (then `escaped` records whether the chunk ended mid-escape).
   */
  private closingQuote(buf: Buffer, i: number): number {
    const n = buf.length;
    if (this.escaped) {
      // The first byte here is the character escaped by the previous chunk's last backslash.
      this.escaped = false;
      i++;
    }
    // Jump from quote to quote (Buffer#indexOf is native and beat a byte loop even on short
    // strings); a quote is escaped iff an odd run of backslashes precedes it. Runs are counted back
    // no further than `i`, whose byte is not escaped.
    let from = i;
    for (;;) {
      const q = buf.indexOf(QUOTE, from);
      const stop = q < 0 ? n : q;
      let k = stop - 1;
      while (k >= i && buf[k] === BACKSLASH) k--;
      const odd = (stop - 1 - k) % 2 === 1;
      if (q < 0) {
        this.escaped = odd;
        return -1;
      }
      if (!odd) return q;
      from = q + 1;
    }
  }
}

/**
 * Yields the texts of the complete top-level JSON values in `source`, in order, in batches: each
 * yielded array holds the values completed by the chunks read so far (never empty). Values are
 * separated by optional whitespace (space, tab, CR, LF). When the input goes wrong the values
 * before the problem are yielded first, and the next pull throws JsonStreamError.
 */
export async function* jsonValues(
  source: AsyncIterable<Buffer | string>,
  options: JsonValuesOptions,
): AsyncGenerator<string[], void, undefined> {
  const splitter = new Splitter(options.maxValueBytes);
  // A string chunk may end between the two halves of a surrogate pair: hold the high half back so
  // the pair is encoded together.
  let highSurrogate = '';
  for await (const chunk of source) {
    let buf: Buffer;
    if (typeof chunk === 'string') {
      let text = highSurrogate + chunk;
      highSurrogate = '';
      const last = text.charCodeAt(text.length - 1);
      if (last >= 0xd800 && last <= 0xdbff) {
        highSurrogate = text.slice(-1);
        text = text.slice(0, -1);
      }
      buf = Buffer.from(text, 'utf8');
    } else if (highSurrogate) {
      buf = Buffer.concat([Buffer.from(highSurrogate, 'utf8'), chunk]);
      highSurrogate = '';
    } else {
      buf = chunk;
    }
    if (buf.length === 0) continue;
    const out: string[] = [];
    const err = splitter.push(buf, out);
    if (out.length > 0) yield out;
    if (err) throw err;
  }
  const out: string[] = [];
  let err = highSurrogate ? splitter.push(Buffer.from(highSurrogate, 'utf8'), out) : undefined;
  if (!err) err = splitter.end(out);
  if (out.length > 0) yield out;
  if (err) throw err;
}
