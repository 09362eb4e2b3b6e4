import { createRequire } from 'node:module';

/** One sample line: its name (a histogram's `_bucket`, `_sum`, `_count` included), labels and value. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface PromFamily {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  samples: PromSample[];
}

/** What parse-prometheus-text-format answers (it folds histograms into buckets). */
interface ParsedFamily {
  name: string;
  help: string;
  type: PromFamily['type'];
  metrics: { value?: string; labels?: Record<string, string> }[];
}

// A CommonJS package without types: loaded through require, typed here.
const require = createRequire(import.meta.url);
const parse = require('parse-prometheus-text-format') as (text: string) => ParsedFamily[];

/**
 * The Prometheus text format read by a real parser (parse-prometheus-text-format; it throws on a
 * malformed line): the families with their HELP and TYPE, and every sample. The parser folds a
 * histogram's label sets into one, so each sample line is also parsed on its own.
 */
export function parsePrometheus(text: string): Map<string, PromFamily> {
  const families = new Map<string, PromFamily>();
  for (const family of parse(text))
    families.set(family.name, { name: family.name, help: family.help, type: family.type, samples: [] });
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    // The parser writes a family out at the line after its last: hence the newline.
    const [parsed] = parse(`${line}\n`);
    const metric = parsed?.metrics[0];
    if (!parsed || !metric) throw new Error(`unparsed sample line: ${line}`);
    const sample: PromSample = { name: parsed.name, labels: metric.labels ?? {}, value: Number(metric.value) };
    const family =
      families.get(sample.name) ?? families.get(sample.name.replace(/_(bucket|sum|count)$/, '')) ?? undefined;
    if (!family) throw new Error(`sample ${sample.name} outside any family`);
    family.samples.push(sample);
  }
  return families;
}

/**
 * The sum of a family's values over the samples whose labels include `labels`: a counter's or a
 * gauge's values, a histogram's `_count`s.
 */
export function sampleValue(family: PromFamily | undefined, labels: Record<string, string> = {}): number {
  if (!family) return 0;
  const name = family.type === 'HISTOGRAM' ? `${family.name}_count` : family.name;
  let total = 0;
  for (const sample of family.samples)
    if (sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
      total += sample.value;
  return total;
}
