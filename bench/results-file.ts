import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { formatFigure, ratioOf, type ResultRow } from './results.ts';

/** The machine line of RESULTS.md: CPU model, cores, memory, kernel, Node. */
export function machineLine(): string {
  const model = cpus()[0]?.model.trim() ?? 'unknown CPU';
  let os: string = process.platform;
  try {
    os = /PRETTY_NAME="([^"]+)"/.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? os;
  } catch {
    // not Linux: keep the platform name
  }
  return `${model}, ${cpus().length} cores, ${Math.round(totalmem() / 1024 ** 3)} GiB, ${os}, Node ${process.version}`;
}

/** The commit measured, with "+ local changes" when the tree is not clean. */
export function commitLine(): string {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim();
    return dirty ? `${sha} + local changes` : sha;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The Markdown of RESULTS.md from the rows the benches recorded. */
export function resultsMarkdown(
  rows: ResultRow[],
  run: { date: string; commit: string; machine: string; durationS: number; failures: string[]; skipped: string[] },
): string {
  const lines = [
    '# Benchmark results',
    '',
    `Written by \`npm run bench -- all\`; how to read it and how each peer is set up: [README.md](README.md).`,
    '',
    `- Machine: ${run.machine}`,
    `- Date: ${run.date}`,
    `- Commit: ${run.commit}`,
    `- Whole run: ${Math.round(run.durationS / 60)} min`,
    '',
    '| bench | path | Stratus | p50 / p99 ms | peer or baseline | its figure | its p50 / p99 ms | ratio | target | met |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const row of rows) {
    const ratio = ratioOf(row);
    const latency = (p50?: number, p99?: number) => (p50 !== undefined ? `${p50} / ${p99 ?? '–'}` : '');
    lines.push(
      `| ${[
        row.bench,
        row.path,
        `${formatFigure(row.figure, row.unit)} ${row.unit}`,
        latency(row.p50, row.p99),
        row.peer?.name ?? (row.peerSkipped ? `skipped: ${row.peerSkipped}` : '—'),
        row.peer ? `${formatFigure(row.peer.figure, row.unit)} ${row.unit}` : '',
        latency(row.peer?.p50, row.peer?.p99),
        ratio !== undefined ? ratio.toFixed(2) : '',
        row.target ?? '',
        row.target ? (row.met ? 'yes' : '**no**') : '',
      ]
        .map(cell)
        .join(' | ')} |`,
    );
  }
  const notes = rows.filter((row) => row.note);
  if (notes.length) {
    lines.push('', '## Notes', '');
    for (const row of notes) lines.push(`- **${row.bench}, ${row.path}:** ${cell(row.note!)}`);
  }
  if (run.skipped.length) {
    lines.push('', '## Peers skipped', '');
    for (const line of run.skipped) lines.push(`- ${cell(line)}`);
  }
  if (run.failures.length) {
    lines.push('', '## Benches that failed', '');
    for (const line of run.failures) lines.push(`- ${cell(line)}`);
  }
  return lines.join('\n') + '\n';
}
