/**
 * A map bounded by the total size of its values (`sizeOf`, for instance a string's length), for
 * read caches of records. Eviction is "second chance" FIFO: a hit only sets a flag (no reordering
 * on the read path, which runs on every request); when space is needed, the oldest entry is
 * dropped unless it was hit since it was last considered, in which case it moves to the back once.
 */
export class SizedCache<V> {
  private readonly entries = new Map<string, { value: V; hit: boolean }>();
  private size = 0;

  constructor(
    private readonly maxSize: number,
    private readonly sizeOf: (value: V) => number,
  ) {}

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    entry.hit = true;
    return entry.value;
  }

  set(key: string, value: V): void {
    this.delete(key);
    const size = this.sizeOf(value);
    if (size > this.maxSize) return;
    this.entries.set(key, { value, hit: false });
    this.size += size;
    while (this.size > this.maxSize) {
      const [oldestKey, oldest] = this.entries.entries().next().value as [string, { value: V; hit: boolean }];
      this.entries.delete(oldestKey);
      // The entry just set always stays; one read since it was last considered earns another round.
      if (oldest.hit || oldestKey === key) {
        oldest.hit = false;
        this.entries.set(oldestKey, oldest);
      } else {
        this.size -= this.sizeOf(oldest.value);
      }
    }
  }

  delete(key: string): void {
    const old = this.entries.get(key);
    if (old === undefined) return;
    this.entries.delete(key);
    this.size -= this.sizeOf(old.value);
  }

  clear(): void {
    this.entries.clear();
    this.size = 0;
  }

  /** The total size of the values held. */
  get total(): number {
    return this.size;
  }

  get count(): number {
    return this.entries.size;
  }
}

/**
 * Text values bounded by their total length, for read caches of serialized records: a hit can be
 * sent without serializing again.
 */
export class TextCache extends SizedCache<string> {
  constructor(maxChars: number) {
    super(maxChars, (value) => value.length);
  }

  get chars(): number {
    return this.total;
  }
}
