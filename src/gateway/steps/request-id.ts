import { randomUUID } from 'node:crypto';
import { NEXT, type Exchange, type Verdict } from '../exchange.ts';
import { addHeaderAtWriteHead, setRequestHeader } from '../headers.ts';

/** A request id a trusted caller may bring (README: `X-Request-Id`); a UUID is one of these too. */
const WELL_FORMED = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * Public port, first step: a fresh UUID v4 for every request (a client-sent one is replaced, so
 * logs can trust it), answered in `X-Request-Id` on every response, refusals included, and
 * written to the access log; `rewriteHeaders` hands it to the service.
 */
export function assignRequestId(exchange: Exchange): Verdict {
  const id = randomUUID();
  exchange.requestId = id;
  addHeaderAtWriteHead(exchange.res, 'x-request-id', id);
  return NEXT;
}

/**
 * Internal port, first step: a trusted caller's well-formed `X-Request-Id` is kept (a front
 * gateway forwards its own, so both instances log the same id), anything else is replaced by a
 * fresh UUID; the service receives it and the response carries it.
 */
export function acceptRequestId(exchange: Exchange): Verdict {
  const { req } = exchange;
  const sent = req.headers['x-request-id'];
  let id = typeof sent === 'string' && WELL_FORMED.test(sent) ? sent : undefined;
  if (id === undefined) {
    id = randomUUID();
    setRequestHeader(req, 'x-request-id', id);
  }
  exchange.requestId = id;
  addHeaderAtWriteHead(exchange.res, 'x-request-id', id);
  return NEXT;
}
