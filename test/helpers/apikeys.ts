import assert from 'node:assert/strict';
import { request } from './http.ts';

export interface ApiKeyPair {
  key: string;
  secret: string;
}

/**
 * A platform API key made through `port` as the caller `headers` name: the gateway identity on
 * the internal port, a session bearer on the public one (POST /v0/apikeys on apikeys.<domain>).
 */
export async function createApiKey(port: number, headers: Record<string, string>, name: string): Promise<ApiKeyPair> {
  const created = await request(port, {
    method: 'POST',
    path: '/v0/apikeys',
    host: 'apikeys.localhost',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  assert.equal(created.status, 201, created.text);
  const { key, secret } = created.json<ApiKeyPair>();
  return { key, secret };
}

/** The key as Basic credentials, as container tools send it to the registry. */
export function basicAuth({ key, secret }: ApiKeyPair): { authorization: string } {
  return { authorization: `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}` };
}
