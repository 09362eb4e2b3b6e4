import { DONE, NEXT, type Exchange, type Verdict } from '../exchange.ts';
import { applyCors } from '../origins.ts';

/** Public port: CORS for platform origins; their preflights are answered here (204) and end the exchange. */
export function answerCors(exchange: Exchange): Verdict {
  const { req, res, ctx } = exchange;
  return req.headers.origin !== undefined && applyCors(req, res, ctx.domain) ? DONE : NEXT;
}
