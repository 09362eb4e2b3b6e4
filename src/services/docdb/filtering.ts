import { availableParallelism } from 'node:os';
import { parseJson, stringifyJson, type JsonValue } from '../../core/json.ts';
import { DocdbErrors } from './errors.ts';
import { compileFilterPlan, type Predicate } from './query/filter.ts';
import { WorkerPool, WorkerTimeLimitError, startWorker } from '../../core/worker-pool.ts';

/**
 * Where a filter is evaluated. A document costs about (filter weight × its JSON size) to test, and
 * both are chosen by clients, so: cheap documents are tested on the event loop, which the
 * traversal gives a turn every TURN_MS (core/pacer.ts); a document over INLINE_DOCUMENT_BYTES, or one
 * whose cost is over INLINE_COST, is parsed and tested in a worker thread, under a time limit.
 */

/** Documents larger than this (JSON bytes) are parsed and tested in a worker. */
const INLINE_DOCUMENT_BYTES = 1024 * 1024;
/** Filter weight × document bytes above which the test runs in a worker (a few ms at most inline). */
const INLINE_COST = 4 * 1024 * 1024;
/** Longest a worker may spend on one document. */
export const DOCUMENT_FILTER_MS = 10_000;
const POOL_SIZE = Math.max(1, Math.min(4, availableParallelism() - 1));

export interface FilterJob {
  filter: string;
  body: string;
}

export type FilterJobReply = { ok: true; matched: boolean } | { ok: false; message: string };

/** A validated, compiled filter of one request. */
export class Filter {
  readonly predicate: Predicate;
  readonly weight: number;
  private text: string | null = null;

  /** Throws InvalidFilterError for a filter that is not valid or over the size caps. */
  constructor(private readonly value: JsonValue) {
    const plan = compileFilterPlan(value);
    this.predicate = plan.predicate;
    this.weight = plan.weight;
  }

  /** The filter as JSON text, for a worker (made once, on first need). */
  get json(): string {
    this.text ??= stringifyJson(this.value);
    return this.text;
  }
}

export class DocumentFilters {
  private readonly pool = new WorkerPool(() => startWorker(import.meta.url, 'filter-worker'), POOL_SIZE);

  /** Whether the document (its stored JSON text) passes the filter: on the event loop, or null when it must go to a worker. */
  inline(filter: Filter, body: string): boolean | null {
    if (body.length > INLINE_DOCUMENT_BYTES || filter.weight * body.length > INLINE_COST) return null;
    return filter.predicate(parseJson(body));
  }

  /** The same test in a worker thread; a document that takes longer than DOCUMENT_FILTER_MS fails the request. */
  async inWorker(filter: Filter, body: string): Promise<boolean> {
    let reply: FilterJobReply;
    try {
      reply = await this.pool.run<FilterJobReply>(
        { filter: filter.json, body } satisfies FilterJob,
        [],
        DOCUMENT_FILTER_MS,
      );
    } catch (error) {
      if (error instanceof WorkerTimeLimitError) {
        throw DocdbErrors.filterTooSlow(DOCUMENT_FILTER_MS / 1000);
      }
      throw error;
    }
    if (!reply.ok) throw new Error(`docdb filter worker: ${reply.message}`);
    return reply.matched;
  }

  async matches(filter: Filter, body: string): Promise<boolean> {
    return this.inline(filter, body) ?? this.inWorker(filter, body);
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
