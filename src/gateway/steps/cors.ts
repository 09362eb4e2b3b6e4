import { DONE, NEXT, type Exchange, type Verdict } from '../exchange.ts';
import { applyCors, corsGrant, type CorsGrant } from '../origins.ts';

/**
 * Public port: CORS (root README.md, CORS). Every answer to a request with an `Origin` varies by
 * it; a granted origin gets the allow headers and its preflights are answered here (204), ending
 * the exchange. Platform origins need no lookup; others wait for a cached project lookup.
 */
export function answerCors(exchange: Exchange): Verdict | Promise<Verdict> {
  const { req, res, ctx } = exchange;
  const origin = req.headers.origin;
  if (origin === undefined) return NEXT;
  res.setHeader('vary', 'Origin');
  const grant = corsGrant(origin, {
    domain: ctx.domain,
    credentialed: ctx.credentialedOrigins ?? [],
    projects: ctx.projects,
  });
  const apply = (granted: CorsGrant): Verdict => (applyCors(req, res, granted) ? DONE : NEXT);
  return typeof grant === 'object' && grant !== null ? grant.then(apply) : apply(grant);
}
