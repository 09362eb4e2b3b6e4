import type { Metric, Registry } from 'prom-client';

/** One sample of a family: its labels (already bounded by the caller) and value. */
export interface Sample {
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
  /** `<family>_bucket`, `_sum`, `_count` for histograms; the family's name when absent. */
  readonly metricName?: string;
}

/**
 * A family whose samples are computed when the registry is read: prom-client's own metrics hash
 * and validate their labels on every update (about half a microsecond each, measured here), which
 * the request path cannot afford four times a request. The request path counts into plain objects
 * (`HttpCounts`) and this hands them to the registry at scrape time, in the shape prom-client's
 * own metrics give it (`Registry.getMetricsAsString` reads `get()`).
 */
class CollectedFamily {
  readonly aggregator = 'sum';

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge' | 'histogram',
    private readonly samples: () => Sample[],
  ) {}

  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: this.samples(),
    });
  }

  // What Registry.resetMetrics calls; these families hold nothing of their own.
  reset(): void {}
}

/** Registers a family read at scrape time (see CollectedFamily). */
export function registerCollected(
  registry: Registry,
  name: string,
  help: string,
  type: 'counter' | 'gauge' | 'histogram',
  samples: () => Sample[],
): void {
  // The registry reads name, help, type and get() only; prom-client types a metric as one of its classes.
  registry.registerMetric(new CollectedFamily(name, help, type, samples) as unknown as Metric);
}

/** A histogram's counts kept by hand: `counts[i]` observations at or below `bounds[i]`, the last above all. */
export class Buckets {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  /** The Prometheus samples: cumulative `_bucket` per bound and `+Inf`, `_sum`, `_count`. */
  samples(name: string, labels: Readonly<Record<string, string>>): Sample[] {
    const out: Sample[] = [];
    let cumulative = 0;
    this.bounds.forEach((bound, i) => {
      cumulative += this.counts[i]!;
      out.push({ labels: { ...labels, le: String(bound) }, value: cumulative, metricName: `${name}_bucket` });
    });
    out.push({ labels: { ...labels, le: '+Inf' }, value: this.count, metricName: `${name}_bucket` });
    out.push({ labels, value: this.sum, metricName: `${name}_sum` });
    out.push({ labels, value: this.count, metricName: `${name}_count` });
    return out;
  }
}
