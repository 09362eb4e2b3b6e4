import { HttpError } from '../core/errors.ts';
import { NEXT, sendError, type Exchange, type Step, type Verdict } from './exchange.ts';
import { authenticate, refuseUnauthenticated } from './steps/authenticate.ts';
import { answerCors } from './steps/cors.ts';
import { dispatch } from './steps/dispatch.ts';
import { serveMetrics } from './steps/metrics.ts';
import { decidePolicy, refuseKvFeed, requireIdentityHeader } from './steps/policy.ts';
import { acceptRequestId, assignRequestId } from './steps/request-id.ts';
import { rewriteHeaders, tagInternalRequest } from './steps/rewrite.ts';
import { lookUpProject, route } from './steps/route.ts';
import { stripClientHeaders } from './steps/sanitize.ts';

/**
 * The public port: the request gets its id and client-sent identity headers are stripped first,
 * whatever the route; the caller is authenticated and the gateway's own identity headers injected.
 */
export const PUBLIC_STEPS: readonly Step[] = [
  assignRequestId,
  stripClientHeaders,
  serveMetrics,
  route,
  lookUpProject,
  answerCors,
  decidePolicy,
  refuseKvFeed,
  authenticate,
  refuseUnauthenticated,
  rewriteHeaders,
  dispatch,
];

/** The internal port (trusted callers): routes the same way, no authentication, identity headers pass as sent. */
export const INTERNAL_STEPS: readonly Step[] = [
  acceptRequestId,
  serveMetrics,
  route,
  lookUpProject,
  decidePolicy,
  requireIdentityHeader,
  tagInternalRequest,
  dispatch,
];

/**
 * Runs `steps` from `from` until one stops the exchange. Steps run synchronously while they
 * can (most requests never create a promise); after a step that waits, the rest run when it has
 * finished, and a failure from then on is a 500.
 */
export function runSteps(steps: readonly Step[], exchange: Exchange, from = 0): void {
  for (let i = from; i < steps.length; i++) {
    const verdict = steps[i]!(exchange);
    if (verdict === NEXT) continue;
    if (typeof verdict === 'string') return;
    verdict
      .then((resumed: Verdict) => {
        if (resumed === NEXT) runSteps(steps, exchange, i + 1);
      })
      .catch((error: unknown) => {
        // A step's coded error (the store unreachable: 503) is answered as such; anything else is a 500.
        if (error instanceof HttpError) {
          sendError(exchange.res, error.status, error.code, error.message, error.headers);
          return;
        }
        exchange.ctx.logger.error({ err: error }, 'gateway request failed');
        sendError(exchange.res, 500, 'internal_error', 'internal error');
      });
    return;
  }
}
