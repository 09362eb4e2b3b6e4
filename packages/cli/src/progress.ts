/** Where a progress bar is drawn: a terminal's stream (stderr), so stdout stays the command's output. */
export interface ProgressSink {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${UNITS[unit]}`;
}

/**
 * A one-line progress bar, redrawn at most every 100 ms, on terminals only: piped or with
 * `--json`, nothing is drawn, so scripts read clean output. `total` null: the size is unknown,
 * and the count alone is shown.
 */
export class ProgressBar {
  private lastDraw = 0;
  private drawn = false;

  constructor(
    private readonly sink: ProgressSink,
    private readonly label: string,
    private readonly total: number | null,
    private readonly now: () => number = Date.now,
  ) {}

  get enabled(): boolean {
    return this.sink.isTTY === true;
  }

  update(done: number): void {
    if (!this.enabled) return;
    const time = this.now();
    if (this.drawn && time - this.lastDraw < 100 && (this.total === null || done < this.total)) return;
    this.lastDraw = time;
    this.drawn = true;
    this.sink.write(`\r${this.line(done)}`);
  }

  /** Ends the line (the last figure stays on screen). */
  finish(done: number): void {
    if (!this.enabled) return;
    this.sink.write(`\r${this.line(done)}\n`);
  }

  line(done: number): string {
    const width = Math.max(10, Math.min(40, (this.sink.columns ?? 80) - this.label.length - 30));
    if (this.total === null || this.total === 0) return `${this.label} ${formatBytes(done)}`;
    const share = Math.min(1, done / this.total);
    const filled = Math.round(share * width);
    const bar = `${'#'.repeat(filled)}${'-'.repeat(width - filled)}`;
    return `${this.label} [${bar}] ${Math.floor(share * 100)}% ${formatBytes(done)}/${formatBytes(this.total)}`;
  }
}
