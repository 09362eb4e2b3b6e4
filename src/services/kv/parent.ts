import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { Settings } from '../../config.ts';
import { IDENTITY_HEADER } from '../../core/identity.ts';

/**
 * The headers a replica sends its parent. Credentials: `KV_PARENT_HEADERS`, else an identity
 * naming this node (enough for the presence check on a trusted network). Host: a parent given
 * by IP address or as `localhost` is taken to be a Stratus process, whose ports route by host
 * name, so the request names `kv.<domain>`; a named parent keeps its own host.
 */
export function parentHeaders(
  settings: Pick<Settings, 'kvParentUrl' | 'kvParentHeaders' | 'kvNodeName' | 'domain'>,
): Record<string, string> {
  const headers: Record<string, string> =
    Object.keys(settings.kvParentHeaders).length > 0
      ? { ...settings.kvParentHeaders }
      : { [IDENTITY_HEADER]: JSON.stringify({ user: { id: `kv-node:${settings.kvNodeName}` } }) };
  if (settings.kvParentUrl && !Object.keys(headers).some((name) => name.toLowerCase() === 'host')) {
    const url = new URL(settings.kvParentUrl);
    const hostname = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(hostname) !== 0 || hostname === 'localhost')
      headers.host = `kv.${settings.domain}${url.port ? `:${url.port}` : ''}`;
  }
  return headers;
}

/** Starts a request to the parent (`path` includes the query). */
export function requestParent(
  parentUrl: string,
  method: string,
  path: string,
  headers: Record<string, string>,
): http.ClientRequest {
  const url = new URL(`${parentUrl}${path}`);
  return (url.protocol === 'https:' ? https : http).request(url, { method, headers });
}

/** One request to the parent with a body and a time limit: its status and body text. */
export function callParent(
  parentUrl: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string | undefined,
  timeoutMs: number,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = requestParent(parentUrl, method, path, {
      ...headers,
      ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
    });
    request.setTimeout(timeoutMs, () => request.destroy(new Error(`the parent did not answer within ${timeoutMs} ms`)));
    request.on('error', reject);
    request.on('response', (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      response.on('error', reject);
    });
    request.end(body);
  });
}
