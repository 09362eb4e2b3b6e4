import { Authenticator, INVALID_KEY_MESSAGE, type AuthOutcome } from '../authenticate.ts';
import { NEXT, refuse, type Exchange, type Verdict } from '../exchange.ts';

const ANONYMOUS: AuthOutcome = { kind: 'anonymous' };

/**
 * Public port: who is calling. A request with no header that could carry a credential is
 * anonymous at once; a cached API key is checked synchronously; anything else waits for the check.
 */
export function authenticate(exchange: Exchange): Verdict | Promise<Verdict> {
  const { req, ctx } = exchange;
  const authenticator = ctx.authenticator;
  if (!authenticator || !Authenticator.hasCredentials(req)) {
    exchange.outcome = ANONYMOUS;
    return NEXT;
  }
  // Registry pushes reach the run service on api., the bare domain and IP hosts too; a key's
  // scopes are checked against run.<domain> wherever the push came in.
  const scopeHost = exchange.service === 'run' ? `run.${ctx.domain}` : (exchange.host ?? '');
  const outcome = authenticator.authenticate(req, {
    host: scopeHost,
    project: exchange.project,
    keyProjectApplies: exchange.service === 'kv',
  });
  if (!(outcome instanceof Promise)) {
    exchange.outcome = outcome;
    return NEXT;
  }
  return outcome.then((result): Verdict => {
    exchange.outcome = result;
    return NEXT;
  });
}

/**
 * Public port: a failed credential is 401 whatever the route (429 when checks are limited); no
 * credential is 401 on a `require` route.
 */
export function refuseUnauthenticated(exchange: Exchange): Verdict {
  const outcome = exchange.outcome!;
  if (outcome.kind === 'rejected') return refuse(exchange, 401, 'unauthorized', outcome.message);
  if (outcome.kind === 'limited') {
    return refuse(
      exchange,
      429,
      'too_many_requests',
      'too many credential checks from this address or for this key; retry later',
      { 'retry-after': String(outcome.retryAfterSeconds) },
    );
  }
  if (outcome.kind === 'anonymous' && exchange.policy === 'require') {
    // An unknown key is told apart from a wrong secret by neither message nor status.
    return refuse(
      exchange,
      401,
      'unauthorized',
      exchange.req.headers['api-key'] !== undefined ? INVALID_KEY_MESSAGE : 'authentication required',
    );
  }
  return NEXT;
}
