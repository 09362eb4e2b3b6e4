import type { ServerResponse } from 'node:http';
import { envelope, type HttpError } from '../../core/errors.ts';
import { ndjsonLine, writeLines } from '../../core/stream.ts';

/** Above this many buffered bytes the response starts streaming (chunked) before `flush` is asked. */
const SEND_AT_ONCE_BYTES = 64 * 1024;

/**
 * An NDJSON (or text) response written line by line on a hijacked reply: lines are buffered until
 * `flush`, so a small answer goes out in one piece with a Content-Length and a long one streams
 * chunked. Writes wait for 'drain' (back-pressure) and stop once the client has gone.
 */
export class LineResponse {
  private pending = '';
  private started = false;
  private ended = false;
  private gone = false;
  // Aborts when the response closes: a write waiting for 'drain' stops waiting. Made by the first
  // write that can wait: aborting one on every close (a DOMException each) cost a small answer
  // several per cent of its CPU.
  private closing: AbortController | undefined;

  constructor(
    private readonly res: ServerResponse,
    private status: number,
    private readonly headers: Record<string, string> = { 'content-type': 'application/json' },
  ) {
    res.once('close', () => {
      if (!res.writableFinished) this.gone = true;
      this.closing?.abort();
    });
  }

  /** The client disconnected: stop working. */
  get closed(): boolean {
    return this.gone || this.res.destroyed;
  }

  /** True once any line (or the head) has been sent: the status can no longer change. */
  get committed(): boolean {
    return this.started || this.pending.length > 0;
  }

  setStatus(status: number): void {
    if (!this.started) this.status = status;
  }

  push(line: string): void {
    this.pending += line;
    this.pending += '\n';
  }

  /** Appends whole lines (each ending in `\n`) as `push` makes them: an answer kept from an earlier one. */
  pushLines(text: string): void {
    this.pending += text;
  }

  /** The whole answer so far while none of it has been sent, else null. */
  get unsent(): string | null {
    return this.started ? null : this.pending;
  }

  /** Sends what is buffered (starting the response if needed) and waits while the client catches up. */
  async flush(force = false): Promise<void> {
    if (this.closed || this.ended) return;
    if (!force && !this.started && this.pending.length < SEND_AT_ONCE_BYTES) return;
    if (!this.started) {
      this.started = true;
      this.res.writeHead(this.status, this.headers);
      // writeHead only queues the head; with nothing to write yet, send it now (insertStream
      // answers 202 at once, before any document).
      if (this.pending.length === 0) this.res.flushHeaders();
    }
    if (this.pending.length === 0) return;
    const chunk = this.pending;
    this.pending = '';
    // `closed` was false above, so the response has not closed yet and this controller will hear of it.
    this.closing ??= new AbortController();
    await writeLines(this.res, chunk, this.closing.signal);
  }

  /** Ends the response; a response never started goes out whole with a Content-Length. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.closed) return;
    if (!this.started) {
      this.started = true;
      const empty = this.status === 204 || this.status === 304;
      this.res.writeHead(
        this.status,
        empty ? this.headers : { ...this.headers, 'content-length': String(Buffer.byteLength(this.pending)) },
      );
    }
    this.res.end(this.pending);
    this.pending = '';
  }

  /** Answers with an error envelope when nothing was sent yet. */
  fail(error: HttpError): void {
    if (this.committed) {
      this.pending += ndjsonLine(envelope(error.status, error.code, error.message));
      this.end();
      return;
    }
    this.status = error.status;
    this.pending = ndjsonLine(envelope(error.status, error.code, error.message));
    this.end();
  }
}
