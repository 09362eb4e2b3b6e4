import type { IncomingMessage } from 'node:http';
import { IDENTITY_HEADER, PROJECT_HEADER } from '../../core/identity.ts';
import { SESSION_COOKIE } from '../../services/auth/index.ts';
import type { AuthOutcome, Credential } from '../authenticate.ts';
import { NEXT, type Exchange, type Verdict } from '../exchange.ts';
import { removeRequestHeaders, setRequestHeader, setRequestHeaders } from '../headers.ts';

/** The headers that carried each credential: no backend receives a credential the gateway used. */
const CREDENTIAL_HEADERS: Record<Credential, readonly string[]> = {
  api_key: ['api-key', 'api-secret'],
  basic: ['authorization'],
  bearer_session: ['authorization'],
  bearer_jwt: ['authorization'],
  cookie: [],
};

/**
 * The key-value namespace of a public-port caller (kv README): the one project its API key is
 * bound to, else the caller's own user namespace (the user id; project ids and user ids never
 * collide: `project-…` and `user-…`). The node keeps namespaces apart as projects.
 */
function kvNamespace(outcome: Extract<AuthOutcome, { kind: 'authenticated' }>): string {
  return outcome.keyProject ?? outcome.identity.user.id;
}

/** Drops `stratus_session` from the Cookie header so no backend (or lambda) sees a session token. */
function removeSessionCookie(req: IncomingMessage): void {
  const cookie = req.headers.cookie;
  if (!cookie || !cookie.includes(SESSION_COOKIE)) return;
  const kept = cookie
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part !== '' && !part.startsWith(`${SESSION_COOKIE}=`));
  if (kept.length > 0) setRequestHeader(req, 'cookie', kept.join('; '));
  else removeRequestHeaders(req, ['cookie']);
}

/**
 * `X-Forwarded-Prefix`: the `/services/<name>` prefix the gateway stripped, so a service can build
 * links that work where the client is (the console's pages do); a client-sent one never passes.
 */
function forwardPrefix(exchange: Exchange): void {
  if (exchange.prefix !== '') setRequestHeader(exchange.req, 'x-forwarded-prefix', exchange.prefix);
  else if (exchange.req.headers['x-forwarded-prefix'] !== undefined)
    removeRequestHeaders(exchange.req, ['x-forwarded-prefix']);
}

/**
 * Public port: the request as a backend sees it. Credentials the gateway used are removed and the
 * caller injected as the identity header; the session cookie goes; the project (or the key-value
 * namespace) is set; the gateway's `X-Request-Id` (request-id.ts) and `X-Forwarded-*` replace
 * whatever the client sent.
 */
export function rewriteHeaders(exchange: Exchange): Verdict {
  const { req, res } = exchange;
  const outcome = exchange.outcome!;
  if ((outcome.kind === 'anonymous' || outcome.kind === 'authenticated') && outcome.strip)
    removeRequestHeaders(req, outcome.strip);
  if (outcome.kind === 'authenticated') {
    removeRequestHeaders(req, CREDENTIAL_HEADERS[outcome.credential]);
    setRequestHeader(req, IDENTITY_HEADER, outcome.identityJson ?? JSON.stringify(outcome.identity));
    if (outcome.setCookie) res.appendHeader('set-cookie', outcome.setCookie);
  }
  removeSessionCookie(req);
  if (exchange.project) setRequestHeader(req, PROJECT_HEADER, exchange.project.id);
  else if (exchange.service === 'kv' && outcome.kind === 'authenticated')
    setRequestHeader(req, PROJECT_HEADER, kvNamespace(outcome));
  setRequestHeaders(
    req,
    'x-request-id',
    exchange.requestId,
    'x-forwarded-for',
    exchange.ctx.proxies ? exchange.ctx.proxies.forwardedFor(req) : (req.socket.remoteAddress ?? ''),
    'x-forwarded-proto',
    exchange.ctx.proxies ? exchange.ctx.proxies.forwardedProto(req) : 'http',
    'x-forwarded-host',
    req.headers.host ?? '',
  );
  forwardPrefix(exchange);
  return NEXT;
}

/** Internal port: identity headers pass as sent; the project host's project is set (the request id was: request-id.ts). */
export function tagInternalRequest(exchange: Exchange): Verdict {
  const req = exchange.req;
  if (exchange.project) setRequestHeader(req, PROJECT_HEADER, exchange.project.id);
  forwardPrefix(exchange);
  return NEXT;
}
