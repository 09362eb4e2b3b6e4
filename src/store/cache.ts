/**
 * A least-recently-used map of text values bounded by their total length, for read caches of
 * serialized records. Values are strings so that a hit can be sent without serializing again.
 */
export class TextCache {
  private readonly entries = new Map<string, string>();
  private size = 0;

  constructor(private readonly maxChars: number) {}

  get(key: string): string | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      // Re-insert to mark as most recently used (Map keeps insertion order).
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  set(key: string, value: string): void {
    this.delete(key);
    if (value.length > this.maxChars) return;
    this.entries.set(key, value);
    this.size += value.length;
    for (const [oldest, old] of this.entries) {
      if (this.size <= this.maxChars) break;
      this.entries.delete(oldest);
      this.size -= old.length;
    }
  }

  delete(key: string): void {
    const old = this.entries.get(key);
    if (old === undefined) return;
    this.entries.delete(key);
    this.size -= old.length;
  }

  get chars(): number {
    return this.size;
  }

  get count(): number {
    return this.entries.size;
  }
}
