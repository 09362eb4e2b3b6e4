import { errorFromEnvelope } from './errors.ts';

/** One Server-Sent Events message. */
export interface ServerSentEvent {
  /** The `event:` field; `message` when the frame names none. */
  event: string;
  /** The `data:` lines joined with `\n`. */
  data: string;
  /** The `id:` field, when the frame has one. */
  id?: string;
}

/**
 * The text lines of a byte stream, decoded as UTF-8, without their `\n` (a trailing `\r` too).
 * Cancelling the iteration (break, return, throw) cancels the stream, so the fetch behind it ends.
 */
export async function* textLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let newline = buffered.indexOf('\n');
      while (newline !== -1) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        yield line.endsWith('\r') ? line.slice(0, -1) : line;
        newline = buffered.indexOf('\n');
      }
    }
    buffered += decoder.decode();
    if (buffered.length > 0) yield buffered.endsWith('\r') ? buffered.slice(0, -1) : buffered;
    finished = true;
  } finally {
    // An early exit cancels the body, which aborts the request underneath.
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/**
 * The JSON values of an NDJSON body, one per non-empty line. A line that is the platform's error
 * envelope (a failure after the stream had begun) is thrown as a StratusError.
 */
export async function* ndjsonValues<T>(
  body: ReadableStream<Uint8Array>,
  status: number,
  requestId?: string,
): AsyncGenerator<T, void, undefined> {
  for await (const line of textLines(body)) {
    if (line.trim() === '') continue;
    const value: unknown = JSON.parse(line);
    const error = errorFromEnvelope(value, status, requestId);
    if (error) throw error;
    yield value as T;
  }
}

/** The messages of a `text/event-stream` body (comments and `retry:` are skipped). */
export async function* serverSentEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<ServerSentEvent, void, undefined> {
  let event = '';
  let data: string[] = [];
  let id: string | undefined;
  for await (const line of textLines(body)) {
    if (line === '') {
      if (data.length > 0)
        yield { event: event || 'message', data: data.join('\n'), ...(id === undefined ? {} : { id }) };
      event = '';
      data = [];
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id') id = value;
  }
}
