import { IDENTITY_HEADER } from '../../core/identity.ts';
import { NEXT, refuse, type Exchange, type Verdict } from '../exchange.ts';
import { underPrefix } from '../policy.ts';

/** The route's policy (`require` or `optional`), by host label and path. */
export function decidePolicy(exchange: Exchange): Verdict {
  exchange.policy = exchange.ctx.policy(exchange.label, exchange.path);
  return NEXT;
}

/**
 * Internal port: a `require` route needs an identity header. The key-value node checks that
 * credentials are present itself (403 `forbidden`), so there `require` is the public port's rule only.
 */
export function requireIdentityHeader(exchange: Exchange): Verdict {
  if (
    exchange.policy === 'require' &&
    exchange.service !== 'kv' &&
    exchange.req.headers[IDENTITY_HEADER] === undefined
  ) {
    return refuse(exchange, 401, 'unauthorized', 'authentication required');
  }
  return NEXT;
}

/** Public port: the key-value replication feed carries every tenant, so only the internal port serves it. */
export function refuseKvFeed(exchange: Exchange): Verdict {
  if (exchange.service === 'kv' && underPrefix(exchange.path, '/v1/replicate')) {
    return refuse(
      exchange,
      403,
      'forbidden',
      'the replication feed carries every tenant: replicas follow a parent on its internal port',
    );
  }
  return NEXT;
}
