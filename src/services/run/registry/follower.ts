import { readSource, type BlobInfo, type BlobStore } from '../../../store/blob/types.ts';
import type { Upload, UploadPart } from '../repository.ts';
import { readAhead } from '../../../core/read-ahead.ts';
import { coalesce } from './body.ts';

/**
 * An optimisation of chunked uploads, local to one instance. The durable record of an upload is
 * its chunk blobs and SQL row (any instance can finish it by re-reading the chunks); but when the
 * chunks land on this instance, a follower streams each stored chunk into the final blob's `put`
 * as soon as it is appended, so the finishing PUT only has to close that put (and fsync) instead
 * of reading, hashing and writing the whole blob again. Whenever the follower does not match the
 * upload exactly (another instance took a chunk, a restart, an error), the finish falls back to
 * the re-read. It holds no state anyone else relies on.
 */
export class UploadFollower {
  private readonly pushed: UploadPart[] = [];
  private pending: UploadPart[] = [];
  private closed = false;
  private final: AsyncIterable<Uint8Array> | null = null;
  private wake: (() => void) | null = null;
  private readonly controller = new AbortController();
  private idleTimer: NodeJS.Timeout | undefined;
  readonly result: Promise<BlobInfo>;

  constructor(
    private readonly blobs: BlobStore,
    maxBytes: number,
    private readonly idleMs: number,
    private readonly onIdle: () => void,
  ) {
    // A blob pushed in several chunks is taken to be large (the hint only picks where it is stored).
    this.result = blobs.put(readAhead(coalesce(this.source())), {
      maxBytes,
      signal: this.controller.signal,
      sizeHint: Number.MAX_SAFE_INTEGER,
    });
    // Observed by `finish`; a follower that is dropped must not raise an unhandled rejection.
    this.result.catch(() => {});
    this.touch();
  }

  private touch(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.abort();
      this.onIdle();
    }, this.idleMs);
    this.idleTimer.unref();
  }

  private notify(): void {
    const resume = this.wake;
    this.wake = null;
    resume?.();
  }

  private async *source(): AsyncGenerator<Uint8Array, void, undefined> {
    for (;;) {
      const part = this.pending.shift();
      if (part) {
        const stream = await this.blobs.get(part.sha256);
        if (!stream) throw new Error(`chunk ${part.sha256} is missing`);
        yield* readSource(stream);
        continue;
      }
      if (this.closed) {
        if (this.final) yield* this.final;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** A chunk was appended to the upload (in this order). */
  push(part: UploadPart): void {
    if (this.closed) return;
    this.pushed.push(part);
    this.pending.push(part);
    this.touch();
    this.notify();
  }

  /** True when the follower has been given exactly the upload's chunks, in order. */
  matches(upload: Upload): boolean {
    if (this.closed || this.pushed.length !== upload.parts.length) return false;
    return upload.parts.every(
      (part, i) => part.sha256 === this.pushed[i]!.sha256 && part.size === this.pushed[i]!.size,
    );
  }

  /** Ends the stream (after `final`, the finishing request's body, if any) and waits for the blob. */
  finish(final: AsyncIterable<Uint8Array> | null): Promise<BlobInfo> {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.final = final;
    this.closed = true;
    this.notify();
    return this.result;
  }

  /** Stops the put; it stores nothing. */
  abort(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.closed = true;
    this.final = null;
    this.pending = [];
    if (!this.controller.signal.aborted) this.controller.abort(new Error('upload follower stopped'));
    this.notify();
  }
}

/** The followers of this instance's uploads, by upload id. */
export class UploadFollowers {
  private readonly followers = new Map<string, UploadFollower>();

  constructor(
    private readonly blobs: BlobStore,
    private readonly maxBytes: number,
    private readonly idleMs: number,
    private readonly enabled = true,
  ) {}

  /**
   * Records an appended chunk. A follower starts with an upload's second chunk, fed the first one
   * too (it must see every chunk): an upload of one chunk (what `docker push` sends) is finished
   * without copying, so following it would only write its bytes twice. A chunk that does not
   * continue what the follower saw drops it.
   */
  appended(before: Upload, part: UploadPart): void {
    if (!this.enabled || part.size === 0) return;
    let follower = this.followers.get(before.id);
    if (follower && !follower.matches(before)) {
      this.drop(before.id);
      return;
    }
    if (!follower) {
      const first = before.parts[0];
      if (before.parts.length !== 1 || !first) return;
      follower = new UploadFollower(this.blobs, this.maxBytes, this.idleMs, () => this.followers.delete(before.id));
      this.followers.set(before.id, follower);
      follower.push(first);
    }
    follower.push(part);
  }

  /** Hands the follower of an upload over to its finish (and forgets it). */
  take(id: string): UploadFollower | undefined {
    const follower = this.followers.get(id);
    this.followers.delete(id);
    return follower;
  }

  drop(id: string): void {
    this.followers.get(id)?.abort();
    this.followers.delete(id);
  }

  close(): void {
    for (const follower of this.followers.values()) follower.abort();
    this.followers.clear();
  }
}
