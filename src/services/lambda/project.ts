import type { FastifyRequest } from 'fastify';
import { PROJECT_HEADER } from '../../core/identity.ts';

/** The project of the host the request came through (set by the gateway), or null. */
export function projectOf(request: FastifyRequest): string | null {
  const v = request.headers[PROJECT_HEADER];
  return typeof v === 'string' && v.length > 0 ? v : null;
}
