import { HttpError } from '../../../../core/errors.ts';
import { isJsonObject, type JsonObject } from '../../../../core/json.ts';
import { parseBody, readBodyText, requireObject } from '../../body.ts';
import { DocdbErrors } from '../../errors.ts';
import { LineResponse } from '../../lines.ts';
import { jsonEquals, mergePatch } from '../../query/merge-patch.ts';
import type { WriteOutcome } from '../../repository/index.ts';
import { existing, type ActionContext } from '../collections/common.ts';
import { parseTraversal, traversalFields, traverse } from './pipeline.ts';

/**
 * `:find`, `:patch` and `:remove`: NDJSON of the selected documents (as found, after their patch,
 * or as removed). Nothing is written before the body, collection, index and filter have passed;
 * a failure after that is an error line (README: Traversal).
 */
export async function traversalAction(action: 'find' | 'patch' | 'remove', context: ActionContext): Promise<void> {
  const { reply, documents, filters } = context;
  const text = await readBodyText(context.stream);
  // A find asked before in the same words, its collection unchanged since, answers as it did
  // (repository/answers.ts): that text passed every check below, and every change that could fail
  // one (the collection or the index dropped) drops the answer.
  const answers = action === 'find' ? await documents.findAnswers(context.databaseId, context.name) : null;
  const cached = answers?.byQuery.get(text);
  if (cached !== undefined) {
    reply.hijack();
    const out = new LineResponse(reply.raw, 200);
    out.pushLines(cached);
    out.end();
    return;
  }
  const body = requireObject(parseBody(text));
  // Body types first, then the collection and index (404), then the filter (README: Traversal, step 1).
  traversalFields(body);
  let patch: JsonObject | null = null;
  if (action === 'patch') {
    if (body.patch === undefined) throw DocdbErrors.fieldRequired('patch');
    if (!isJsonObject(body.patch)) throw DocdbErrors.fieldType('patch', 'an object');
    patch = body.patch;
  }
  const collection = await existing(context);
  const traversal = parseTraversal(body, collection);
  reply.hijack();
  const out = new LineResponse(reply.raw, 200);
  const stop = () => out.closed;
  // A btree traversal could meet a document again after a concurrent patch moved it ahead of the
  // traversal's position; the seqs already handled are remembered for those (full scans and map
  // lookups walk by seq, where a document never moves, so they keep no such set).
  const seen = traversal.source.kind === 'btree' ? new Set<number>() : undefined;
  try {
    if (action === 'find') {
      await traverse(
        documents,
        filters,
        collection,
        traversal,
        async (selected) => {
          for (const document of selected) {
            seen?.add(document.seq);
            out.push(document.body);
          }
          await out.flush();
          return !stop();
        },
        { stopped: stop, skipSeqs: seen },
      );
      const whole = out.unsent;
      if (whole !== null && !stop()) documents.answers.remember(answers!, text, whole);
    } else {
      const upToSeq = await documents.lastSeq();
      const change = (document: JsonObject): JsonObject | null => {
        const next = mergePatch(document, patch!);
        return jsonEquals(next, document) ? null : next;
      };
      await traverse(
        documents,
        filters,
        collection,
        traversal,
        async (selected) => {
          const seqs = selected.map((document) => document.seq);
          const outcomes: WriteOutcome[] =
            action === 'patch'
              ? await documents.patch(collection, seqs, change)
              : await documents.remove(collection, seqs);
          for (const outcome of outcomes) {
            if (!outcome.ok) {
              out.fail(outcome.error);
              return false;
            }
            seen?.add(outcome.seq);
            out.push(outcome.text);
          }
          await out.flush();
          return !stop();
        },
        { upToSeq, skipSeqs: seen, stopped: stop },
      );
    }
    out.end();
  } catch (error) {
    out.fail(error instanceof HttpError ? error : DocdbErrors.internal());
    if (!(error instanceof HttpError)) context.request.log.error({ err: error }, `docdb ${action} failed`);
  }
}
