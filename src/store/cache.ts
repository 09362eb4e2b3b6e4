/**
 * A map of text values bounded by their total length, for read caches of serialized records.
 * Values are strings so that a hit can be sent without serializing again. Eviction is "second
 * chance" FIFO: a hit only sets a flag (no reordering on the read path, which runs on every
 * request); when space is needed, the oldest entry is dropped unless it was hit since it was last
 * considered, in which case it moves to the back once.
 */
export class TextCache {
  private readonly entries = new Map<string, { value: string; hit: boolean }>();
  private size = 0;

  constructor(private readonly maxChars: number) {}

  get(key: string): string | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    entry.hit = true;
    return entry.value;
  }

  set(key: string, value: string): void {
    this.delete(key);
    if (value.length > this.maxChars) return;
    this.entries.set(key, { value, hit: false });
    this.size += value.length;
    while (this.size > this.maxChars) {
      const [oldestKey, oldest] = this.entries.entries().next().value as [string, { value: string; hit: boolean }];
      this.entries.delete(oldestKey);
      // The entry just set always stays; one read since it was last considered earns another round.
      if (oldest.hit || oldestKey === key) {
        oldest.hit = false;
        this.entries.set(oldestKey, oldest);
      } else {
        this.size -= oldest.value.length;
      }
    }
  }

  delete(key: string): void {
    const old = this.entries.get(key);
    if (old === undefined) return;
    this.entries.delete(key);
    this.size -= old.value.length;
  }

  clear(): void {
    this.entries.clear();
    this.size = 0;
  }

  get chars(): number {
    return this.size;
  }

  get count(): number {
    return this.entries.size;
  }
}
