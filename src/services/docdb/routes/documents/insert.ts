import { HttpError } from '../../../../core/errors.ts';
import { parseJson, type JsonValue } from '../../../../core/json.ts';
import { BODY_LIMIT, discardRest, readChunks } from '../../body.ts';
import { DocdbErrors } from '../../errors.ts';
import { JsonStreamError, jsonValues } from '../../json-values.ts';
import { LineResponse } from '../../lines.ts';
import { DEFAULT_DEFAULTS } from '../../repository/index.ts';
import { checkCollectionName, type ActionContext } from '../collections/common.ts';

// insert, insertFullduplex, insertStream (README: Inserts).

const STREAM_HEADERS = {
  'content-type': 'text/plain; charset=utf-8',
  'x-content-type-options': 'nosniff',
  'access-control-allow-origin': '*',
};

/**
 * Inserts the documents of a streamed body, batch by batch as they are parsed: each batch is one
 * transaction, and its lines are written once it committed. A missing collection is created first
 * (`insert`: with the default defaults; the other two: without defaults).
 */
export async function insertAction(
  context: ActionContext,
  kind: 'insert' | 'insertFullduplex' | 'insertStream',
): Promise<void> {
  const { reply, documents, databaseId, name, stream } = context;
  checkCollectionName(name);
  const collection = await documents.ensureCollection(databaseId, name, kind === 'insert' ? DEFAULT_DEFAULTS : null);
  reply.hijack();
  const streaming = kind === 'insertStream';
  const out = new LineResponse(
    reply.raw,
    streaming ? 202 : kind === 'insert' ? 201 : 200,
    streaming ? STREAM_HEADERS : undefined,
  );
  if (streaming) await out.flush(true);
  let sawValue = false;
  const values = mergedAhead(jsonValues(readChunks(stream), { maxValueBytes: BODY_LIMIT }));
  try {
    for await (const texts of values) {
      sawValue = true;
      // Parse the batch; a malformed value ends it (and, outside insertStream, the request).
      const parsed: JsonValue[] = [];
      let failure: HttpError | null = null;
      for (const text of texts) {
        try {
          parsed.push(parseJson(text));
        } catch {
          failure = DocdbErrors.malformedJson();
          break;
        }
      }
      const outcomes = parsed.length > 0 ? await documents.insert(collection, parsed, !streaming) : [];
      for (const outcome of outcomes) {
        if (outcome.ok) out.push(outcome.text);
        else if (streaming) out.push(JSON.stringify(outcome.error.message));
        else {
          failure = outcome.error;
          break;
        }
      }
      if (failure) {
        if (streaming) out.push(JSON.stringify(failure.message));
        else out.fail(failure);
        if (streaming) out.end();
        discardRest(stream);
        return;
      }
      await out.flush(true);
      if (out.closed) {
        stream.destroy();
        return;
      }
    }
    if (!sawValue && !streaming) out.setStatus(kind === 'insert' ? 204 : 200);
    // Ended once a large load is known to the query planner, so the finds that follow plan well.
    await documents.insertsSettled(collection.id);
    out.end();
  } catch (error) {
    const failure = error instanceof JsonStreamError ? streamError(error) : error instanceof HttpError ? error : null;
    // A client that hangs up mid-body ends the request stream with ECONNRESET: not a service error.
    const clientGone = out.closed || (error as { code?: unknown } | null)?.code === 'ECONNRESET';
    if (!failure && !clientGone) context.request.log.error({ err: error }, `docdb ${kind} failed`);
    const reported = failure ?? DocdbErrors.internal();
    if (streaming) {
      out.push(JSON.stringify(reported.message));
      out.end();
    } else out.fail(reported);
    discardRest(stream);
  }
}

/** The answer for a body the splitter gave up on: malformed, or a value over the per-document limit. */
function streamError(error: JsonStreamError): HttpError {
  return error.code === 'payload_too_large'
    ? DocdbErrors.valueTooLarge(error.message)
    : DocdbErrors.malformedValue(error.message);
}

/** Reads of the body kept under way while a batch is being written. */
const READS_AHEAD = 8;
/** Most values merged into one batch. */
const MAX_MERGED_VALUES = 10_000;

/**
 * The body's batches with the body read ahead: while the caller writes one batch (a transaction),
 * up to `READS_AHEAD` more pieces are read and split, and those already there when it asks again
 * come as one batch. Where a transaction costs about as much as its rows (PostgreSQL), the body is
 * then split while the database works, and batches grow with the database's pace. An error comes
 * in its place, after every batch before it.
 */
async function* mergedAhead(
  values: AsyncGenerator<string[], void, undefined>,
): AsyncGenerator<string[], void, undefined> {
  interface Read {
    promise: Promise<IteratorResult<string[], void>>;
    /** Set once the read has settled (a rejected read is only awaited in its turn). */
    settled?: { result?: IteratorResult<string[], void>; failed?: true };
  }
  const reads: Read[] = [];
  const ask = () => {
    const read: Read = { promise: values.next() };
    read.promise.then(
      (result) => (read.settled = { result }),
      () => (read.settled = { failed: true }),
    );
    reads.push(read);
  };
  try {
    for (;;) {
      while (reads.length < READS_AHEAD) ask();
      const first = await reads.shift()!.promise;
      if (first.done) return;
      const texts = [...first.value];
      // What has arrived meanwhile joins this batch; a failed read waits for its turn.
      while (texts.length < MAX_MERGED_VALUES && reads[0]?.settled?.result) {
        const { result } = reads.shift()!.settled!;
        if (result!.done) {
          yield texts;
          return;
        }
        texts.push(...result!.value);
      }
      yield texts;
    }
  } finally {
    // Not awaited: it would wait behind the reads under way, which a full-duplex client that has
    // stopped sending never completes.
    void values.return(undefined).catch(() => undefined);
  }
}
