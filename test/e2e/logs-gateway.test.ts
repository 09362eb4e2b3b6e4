import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { request } from '../helpers/http.ts';
import { usePlatform } from '../helpers/serve.ts';

const owner = {
  'x-gateway-authentication': JSON.stringify({ user: { id: 'log-owner' } }),
  'content-type': 'application/json',
};

/** Opens a follow stream and resolves with the first chunk of text that contains `expected`. */
function follow(
  port: number,
  path: string,
  headers: Record<string, string>,
  expected: string,
): { opened: Promise<void>; seen: Promise<string>; close(): void } {
  let req: http.ClientRequest | undefined;
  let markOpen: () => void = () => {};
  const opened = new Promise<void>((resolve) => (markOpen = resolve));
  const seen = new Promise<string>((resolve, reject) => {
    req = http.request({ host: '127.0.0.1', port, path, headers: { host: 'logs.localhost', ...headers } }, (res) => {
      markOpen();
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        if (text.includes(expected)) resolve(text);
      });
      res.on('error', () => {});
    });
    req.on('error', reject);
    req.end();
  });
  return { opened, seen, close: () => req?.destroy() };
}

describe('logs through the gateway', () => {
  const platform = usePlatform();

  it('ingests with a logger key on the public port and follows matching lines there', async () => {
    const created = await request(platform.server.internalPort, {
      method: 'POST',
      path: '/v1/loggers',
      host: 'logs.localhost',
      headers: owner,
      body: '{"name":"app"}',
    });
    assert.equal(created.status, 201, created.text);
    const logger = created.json<{ id: string }>().id;
    const keyed = await request(platform.server.internalPort, {
      method: 'POST',
      path: `/v1/loggers/${logger}/apiKeys`,
      host: 'logs.localhost',
      headers: owner,
      body: '{"name":"shipper"}',
    });
    assert.equal(keyed.status, 201, keyed.text);
    const { key, secret } = keyed.json<{ key: string; secret: string }>();
    const credentials = { 'api-key': key, 'api-secret': secret };

    const stream = follow(
      platform.server.publicPort,
      `/v1/loggers/${logger}/filter?regex=ERROR&regex=db&follow=true`,
      credentials,
      'ERROR db down',
    );
    await stream.opened;
    const ingested = await request(platform.server.publicPort, {
      method: 'POST',
      path: `/v1/loggers/${logger}/ingest`,
      host: 'api.localhost',
      headers: { ...credentials, 'content-type': 'text/plain' },
      body: 'INFO db up\nERROR cache cold\nERROR db down\n',
    });
    assert.equal(ingested.status, 200, ingested.text);
    const text = await stream.seen;
    stream.close();
    assert.equal(text, 'ERROR db down\n');

    const anonymous = await request(platform.server.publicPort, {
      path: `/v1/loggers/${logger}/filter?regex=x`,
      host: 'logs.localhost',
    });
    assert.equal(anonymous.status, 401);
  });
});
