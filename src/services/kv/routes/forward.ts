import type { FastifyReply, FastifyRequest } from 'fastify';
import { PROJECT_HEADER } from '../../../core/identity.ts';
import { isJsonObject, parseJson, stringifyJson, type JsonValue } from '../../../core/json.ts';
import type { Command } from '../commands.ts';
import { KvErrors } from '../errors.ts';
import { callParent } from '../parent.ts';
import { json, type KvNode } from './common.ts';

/** How long a replica waits for its parent to answer a forwarded write (README: 10 s). */
const FORWARD_TIMEOUT_MS = 10_000;

/**
 * A write on a replica: sent to the parent as it came; a 4xx is passed back unchanged, an
 * unreachable (or failing) parent is 502, and on success the change is applied locally with the
 * parent's seq and version so a read here sees it at once.
 */
export async function forward(
  node: KvNode,
  request: FastifyRequest,
  reply: FastifyReply,
  project: string,
  command: (answer: { seq: number; version: number }) => Command,
): Promise<FastifyReply> {
  const headers: Record<string, string> = { ...node.parentHeaders, 'content-type': 'application/json' };
  if (project !== '') headers[PROJECT_HEADER] = project;
  let status: number;
  let text: string;
  try {
    const body = request.body === undefined ? undefined : stringifyJson(request.body as JsonValue);
    ({ status, text } = await callParent(
      node.parentUrl!,
      request.method,
      request.raw.url ?? '/',
      headers,
      body,
      FORWARD_TIMEOUT_MS,
    ));
  } catch (error) {
    request.log.warn({ err: error, parent: node.parentUrl }, 'kv write not forwarded');
    throw KvErrors.parentUnreachable();
  }
  if (status >= 500) throw KvErrors.parentFailed(status);
  if (status >= 200 && status < 300) {
    let answer: JsonValue;
    try {
      answer = parseJson(text);
    } catch {
      throw KvErrors.parentUnreadable();
    }
    const seq = isJsonObject(answer) && typeof answer.seq === 'number' ? answer.seq : 0;
    const version = isJsonObject(answer) && typeof answer.version === 'number' ? answer.version : 0;
    await node.repository.applyForwarded(command({ seq, version }));
    node.counters.writes++;
  }
  return json(reply, text, status);
}
