import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpError } from '../../src/core/errors.ts';
import { Exchange, NEXT, type GatewayContext, type Step } from '../../src/gateway/exchange.ts';
import { runSteps } from '../../src/gateway/pipeline.ts';
import { StoreUnreachableError } from '../../src/store/unreachable.ts';

/** Serves every request through `steps` on a loopback port and answers one GET. */
async function answer(
  steps: Step[],
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string; logged: number }> {
  let logged = 0;
  const ctx = { logger: { error: () => logged++ } } as unknown as GatewayContext;
  const server = http.createServer((req, res) => runSteps(steps, new Exchange(ctx, req, res)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/`);
    return {
      status: response.status,
      headers: Object.fromEntries(response.headers),
      body: await response.text(),
      logged,
    };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const waitThenFail =
  (error: unknown): Step =>
  async () => {
    await new Promise((resolve) => setImmediate(resolve));
    throw error;
  };

describe('gateway steps', () => {
  it('answer a coded error thrown by a step that waited with its status, code and headers', async () => {
    const reply = await answer([() => NEXT, waitThenFail(new StoreUnreachableError(new Error('ECONNREFUSED')))]);
    assert.equal(reply.status, 503);
    assert.equal(reply.headers['retry-after'], '1');
    assert.deepEqual(JSON.parse(reply.body), {
      error: { status: 503, code: 'store_unreachable', message: 'the database cannot be reached; try again shortly' },
    });
    assert.equal(reply.logged, 0);
    const taken = await answer([waitThenFail(new HttpError(409, 'conflict', 'taken'))]);
    assert.equal(taken.status, 409);
  });

  it('answer any other failure as a logged 500 that says nothing of it', async () => {
    const reply = await answer([waitThenFail(new Error('password=hunter2'))]);
    assert.equal(reply.status, 500);
    assert.deepEqual(JSON.parse(reply.body), {
      error: { status: 500, code: 'internal_error', message: 'internal error' },
    });
    assert.equal(reply.logged, 1);
  });
});
