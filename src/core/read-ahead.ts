// Reading a byte stream ahead of its consumer, with a bound on what is held.

/** Default bound on the bytes read ahead: 8 MiB. */
export const READ_AHEAD_BYTES = 8 * 1024 * 1024;

export interface ReadAheadOptions {
  /** Bytes pulled from the source ahead of the consumer (default 8 MiB); past this the source is not read. */
  aheadBytes?: number;
  /**
   * When several chunks are waiting, join them into one piece of at most this many bytes (fewer,
   * larger calls for the consumer). A single chunk is never split. Omitted: chunks pass one by one.
   */
  joinBytes?: number;
}

/**
 * Pulls `source` ahead of its consumer, holding up to `aheadBytes` (plus the one chunk that crosses
 * the bound): reading the next chunks (a socket, file reads on the thread pool) overlaps with the
 * consumer hashing and writing the current one, and a slow consumer slows the source down.
 *
 * Order is preserved. A source error surfaces at the consumer's next read (chunks still waiting
 * are dropped: the consumer's work fails anyway). When the consumer stops early (`return()`, a
 * throw in its `for await`) the source is ended with its own `return()`, without waiting for a
 * read still under way.
 */
export async function* readAhead(
  source: AsyncIterable<Uint8Array>,
  options: ReadAheadOptions = {},
): AsyncGenerator<Uint8Array, void, undefined> {
  const { aheadBytes = READ_AHEAD_BYTES, joinBytes = 0 } = options;
  const iterator = source[Symbol.asyncIterator]();
  const queue: Uint8Array[] = [];
  let queued = 0;
  let done = false;
  let failure: { error: unknown } | null = null;
  let wake: (() => void) | null = null;
  let stopped = false;
  const notify = () => {
    const resume = wake;
    wake = null;
    resume?.();
  };
  let filling = false;
  const fill = async () => {
    if (filling) return;
    filling = true;
    try {
      while (!stopped && !done && failure === null && queued < aheadBytes) {
        const next = await iterator.next();
        if (next.done) done = true;
        else {
          queue.push(next.value);
          queued += next.value.byteLength;
        }
        notify();
      }
    } catch (error) {
      // The source is finished once it threw: it is not read (nor returned) again.
      done = true;
      failure = { error };
      notify();
    } finally {
      filling = false;
    }
  };
  try {
    for (;;) {
      if (failure) throw (failure as { error: unknown }).error;
      void fill();
      if (queue.length > 0) {
        let piece = queue.shift()!;
        if (queue.length > 0 && piece.byteLength < joinBytes) {
          const parts = [piece];
          let size = piece.byteLength;
          while (queue.length > 0 && size + queue[0]!.byteLength <= joinBytes) {
            const next = queue.shift()!;
            parts.push(next);
            size += next.byteLength;
          }
          if (parts.length > 1) piece = Buffer.concat(parts, size);
        }
        queued -= piece.byteLength;
        yield piece;
        continue;
      }
      if (done) {
        if (failure) continue;
        return;
      }
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    stopped = true;
    if (!done) void Promise.resolve(iterator.return?.()).catch(() => {});
  }
}
