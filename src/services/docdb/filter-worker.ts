// A worker thread of docdb (started by filtering.ts): evaluates a filter on documents too large,
// or filters too heavy, to be evaluated on the event loop.
import { parentPort } from 'node:worker_threads';
import { parseJson } from '../../core/json.ts';
import type { FilterJob, FilterJobReply } from './filtering.ts';
import { compileFilter, type Predicate } from './query/filter.ts';

const port = parentPort;
if (!port) throw new Error('filter-worker.ts runs as a worker thread');

/** Compiled filters by their JSON text: a traversal sends the same one with every document. */
const compiled = new Map<string, Predicate>();
const MAX_CACHED = 16;

function predicateOf(filter: string): Predicate {
  let predicate = compiled.get(filter);
  if (!predicate) {
    predicate = compileFilter(parseJson(filter));
    if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value as string);
    compiled.set(filter, predicate);
  }
  return predicate;
}

port.on('message', (job: FilterJob) => {
  let reply: FilterJobReply;
  try {
    reply = { ok: true, matched: predicateOf(job.filter)(parseJson(job.body)) };
  } catch (error) {
    reply = { ok: false, message: (error as Error).message };
  }
  port.postMessage(reply);
});
