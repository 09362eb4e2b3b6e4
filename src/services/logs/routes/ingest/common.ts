import type { FastifyRequest } from 'fastify';
import { Pacer } from '../../../../core/pacer.ts';
import { LogsErrors } from '../../errors.ts';
import type { RouteDeps } from '../deps.ts';

/** Newlines searched for between looks at the clock (a body of nothing but newlines is the slow case). */
const LINES_PER_LOOK = 1 << 16;

/**
 * A raw body's lines; a final segment without `\n` gets one (README: raw lines, and the
 * decisions). A 64 MiB body of empty lines is 64 million searches, so the count yields to the
 * event loop as it goes.
 */
export async function asLines(body: Buffer): Promise<{ data: Buffer; lines: number }> {
  const pacer = new Pacer();
  let lines = 0;
  for (let at = body.indexOf(10); at !== -1; at = body.indexOf(10, at + 1)) {
    if (++lines % LINES_PER_LOOK === 0) await pacer.pace();
  }
  if (body.length > 0 && body[body.length - 1] !== 10)
    return { data: Buffer.concat([body, Buffer.from('\n')]), lines: lines + 1 };
  return { data: body, lines };
}

/** The bytes of a body read by the ingest scope's parser (none: empty). */
export function rawBody(request: FastifyRequest): Buffer {
  return Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
}

/** What one ingest appends: the bytes to store and the lines or events they hold. */
export interface Batch {
  data: Buffer;
  count: number;
}

/**
 * One ingest of `received` body bytes into logger `loggerId`, counted in its stats (README: stats)
 * even when there is nothing to store (`batch` null). The batch, made while the ingest counts as
 * running, is appended all or nothing (a logger gone meanwhile is a 404), then announced to the
 * logger's followers.
 */
export async function ingest(
  request: FastifyRequest,
  { loggers, hub, stats, limits, metrics }: RouteDeps,
  loggerId: string,
  kind: 'raw' | 'event',
  received: number,
  batch: (() => Promise<Batch>) | null,
): Promise<void> {
  const counters = stats.of(loggerId);
  counters.totalIngests++;
  counters.bytesReceived += received;
  metrics?.logsIngestedBytes(received);
  if (batch === null) return;
  counters.concurrentIngests++;
  try {
    const { data, count } = await batch();
    if ((await loggers.append(loggerId, kind, data, count, limits.maxBytes)) === null)
      throw LogsErrors.loggerNotFound();
  } finally {
    counters.concurrentIngests--;
  }
  await hub.announce(loggerId).catch((error: unknown) => request.log.warn({ err: error }, 'logs append not announced'));
}
