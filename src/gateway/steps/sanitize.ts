import { IDENTITY_HEADER, PROJECT_HEADER } from '../../core/identity.ts';
import { TRIGGER_HEADER } from '../../core/trigger.ts';
import { NEXT, refuse, type Exchange, type Verdict } from '../exchange.ts';
import { hopByHopHeaderNames, removeRequestHeaders } from '../headers.ts';

/** Client-sent identity and trigger headers never pass the public port: only the platform sets them. */
const FORGEABLE_HEADERS = [IDENTITY_HEADER, PROJECT_HEADER, TRIGGER_HEADER];

/** Headers only the gateway sets; a client naming one in `Connection` is refused (400). */
const INJECTED_HEADERS = new Set([IDENTITY_HEADER, PROJECT_HEADER, TRIGGER_HEADER]);

/**
 * Public port, first step, whatever the route: strips client-sent identity headers, then removes
 * hop-by-hop headers and any header the client named in `Connection`, before the gateway injects
 * anything (so a client cannot have an injected header dropped by naming it). `Connection` naming
 * a header the gateway injects is a 400. Transfer-Encoding stays: Node has already decoded the
 * body, and Fastify reads the header to know one is coming.
 */
export function stripClientHeaders(exchange: Exchange): Verdict {
  const req = exchange.req;
  removeRequestHeaders(req, FORGEABLE_HEADERS);
  const names = hopByHopHeaderNames(req.headers);
  if (names.length === 0) return NEXT;
  const connection = req.headers.connection;
  if (
    connection !== undefined &&
    connection.split(',').some((token) => INJECTED_HEADERS.has(token.trim().toLowerCase()))
  ) {
    return refuse(exchange, 400, 'bad_request', 'the Connection header may not name a header the gateway sets');
  }
  removeRequestHeaders(
    req,
    names.filter((name) => name !== 'transfer-encoding'),
  );
  return NEXT;
}
