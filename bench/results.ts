import { appendFileSync } from 'node:fs';

/**
 * One row of `bench/RESULTS.md`: a path's figure beside its peer (or baseline) measured in the
 * same run, the ratio, the latency percentiles where the path is request-shaped, and the issue's
 * target with whether this run met it. A bench prints each row as it records it; under
 * `npm run bench -- all` the rows are also appended (one JSON line each) to BENCH_RESULTS_FILE,
 * from which the runner writes the table.
 */
export interface ResultRow {
  /** The bench that measured it: `gateway`, `files`, … */
  bench: string;
  /** What was measured: "remote-upstream proxy, GET /version". */
  path: string;
  /** Stratus's figure, in `unit`. */
  figure: number;
  /** `req/s`, `MB/s`, `docs/s`, `MiB` … (higher is better unless `lowerIsBetter`). */
  unit: string;
  /** The peer or baseline measured in the same run, in the same unit; absent when it was skipped. */
  peer?: { name: string; figure: number; p50?: number; p99?: number };
  /** Why the peer is absent (not installable here, …). */
  peerSkipped?: string;
  /** Stratus's latency percentiles in ms, for request-shaped paths. */
  p50?: number;
  p99?: number;
  /** The target as the issue states it, e.g. "≥ 0.9× nginx". */
  target?: string;
  /** Whether this run met the target. */
  met?: boolean;
  /** For rows whose figure is a cost (memory): lower is better. */
  lowerIsBetter?: boolean;
  /** What stands in the way when the target is not met (profile-backed), or how to read the row. */
  note?: string;
}

/** figure ÷ peer, or undefined without a peer. */
export function ratioOf(row: Pick<ResultRow, 'figure' | 'peer'>): number | undefined {
  return row.peer && row.peer.figure > 0 ? row.figure / row.peer.figure : undefined;
}

export function formatFigure(value: number, unit: string): string {
  if (unit === 'req/s' || unit.endsWith('/s') || unit === 'MiB')
    return value >= 100 ? Math.round(value).toLocaleString('en-US') : value.toFixed(1);
  return String(value);
}

/** Prints the row on one line and, under `bench all`, keeps it for RESULTS.md. */
export function recordResult(row: ResultRow): void {
  const ratio = ratioOf(row);
  const parts = [
    `RESULT ${row.bench}: ${row.path}: ${formatFigure(row.figure, row.unit)} ${row.unit}`,
    row.p50 !== undefined ? `p50 ${row.p50} ms p99 ${row.p99} ms` : '',
    row.peer ? `beside ${row.peer.name} ${formatFigure(row.peer.figure, row.unit)} ${row.unit}` : '',
    row.peerSkipped ? `(peer skipped: ${row.peerSkipped})` : '',
    ratio !== undefined ? `ratio ${ratio.toFixed(2)}` : '',
    row.target ? `target ${row.target}: ${row.met ? 'met' : 'NOT met'}` : '',
  ].filter(Boolean);
  console.log(parts.join('; '));
  const file = process.env.BENCH_RESULTS_FILE;
  if (file) appendFileSync(file, JSON.stringify(row) + '\n');
}
