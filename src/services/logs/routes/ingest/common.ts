import type { FastifyRequest } from 'fastify';
import { Pacer } from '../../../../core/pacer.ts';

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
