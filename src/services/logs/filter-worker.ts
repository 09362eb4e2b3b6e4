// A worker thread of the logs service (started by filters.ts): matches slices of stored lines
// against patterns and parses large event bodies, so neither runs on the event loop.
import { parentPort } from 'node:worker_threads';
import { HttpError } from '../../core/errors.ts';
import { encodeEvents, type FilterRequest, type FilterReply } from './filters.ts';
import { parseEvents } from './events.ts';
import { matchLines } from './matching.ts';
import { compilePattern, type Pattern } from './patterns.ts';

const port = parentPort;
if (!port) throw new Error('filter-worker.ts runs as a worker thread');

/** Compiled patterns by their sources: a stream sends the same ones with every slice. */
const compiled = new Map<string, Pattern[]>();
const MAX_CACHED = 64;

function patternsOf(sources: string[]): Pattern[] {
  const key = sources.join('\u0000');
  let patterns = compiled.get(key);
  if (!patterns) {
    patterns = sources.map(compilePattern);
    if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value as string);
    compiled.set(key, patterns);
  }
  return patterns;
}

function handle(request: FilterRequest): FilterReply {
  try {
    if (request.op === 'match') {
      const bytes = matchLines(
        Buffer.from(request.data.buffer, request.data.byteOffset, request.data.byteLength),
        request.kind,
        patternsOf(request.sources),
      );
      return { ok: true, bytes, count: 0 };
    }
    const events = parseEvents(
      Buffer.from(request.body.buffer, request.body.byteOffset, request.body.byteLength),
      request.contentType,
      request.ts,
    );
    return { ok: true, bytes: encodeEvents(events), count: events.length };
  } catch (error) {
    if (error instanceof HttpError)
      return { ok: false, status: error.status, code: error.code, message: error.message };
    return { ok: false, status: 500, code: 'internal_error', message: 'internal error' };
  }
}

port.on('message', (request: FilterRequest) => {
  const reply = handle(request);
  port.postMessage(reply, reply.ok ? [reply.bytes.buffer as ArrayBuffer] : []);
});
