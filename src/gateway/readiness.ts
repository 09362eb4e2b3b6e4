import type { IncomingMessage, ServerResponse } from 'node:http';
import { Type } from 'typebox';
import type { ServiceApp } from '../core/app.ts';
import { envelope } from '../core/errors.ts';
import type { SqlDatabase } from '../store/sql/types.ts';
import { first } from '../store/sql-work.ts';
import { resolveRoute } from './routing.ts';
import { ANONYMOUS } from '../core/openapi.ts';

/** The readiness path, answered on every host but service and project hosts (README: Shutdown and readiness). */
export const READINESS_PATH = '/readyz';
/** A store that does not answer `select 1` within this is unreachable. */
const STORE_TIMEOUT_MS = 2_000;
/** A store check's result is reused this long, so frequent health checks cost one query a second. */
const STORE_CHECK_TTL_MS = 1_000;

export interface ReadinessAnswer {
  status: 200 | 503;
  body: { status: 'ready' } | ReturnType<typeof envelope>;
}

/**
 * Whether this instance should get traffic: 200 while serving, 503 from the moment a shutdown
 * begins (SIGTERM/SIGINT) and while the store does not answer a trivial query in time.
 */
export class Readiness {
  #draining = false;
  #checked: { at: number; ok: boolean } | undefined;
  #checking: Promise<boolean> | undefined;

  constructor(
    private readonly database: SqlDatabase,
    /** The platform domain: service and project hosts keep their own `/readyz` paths (kv has one). */
    private readonly domain: string,
  ) {}

  /**
   * Whether a raw request is the readiness check: GET or HEAD of `/readyz` (any query) on
   * `gateway.<domain>`, `api.<domain>`, the bare domain, an IP address or any host outside the
   * domain (what a balancer sends), not on a service or project host.
   */
  isCheck(req: IncomingMessage): boolean {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const url = req.url ?? '';
    if (url !== READINESS_PATH && !url.startsWith(`${READINESS_PATH}?`)) return false;
    const target = resolveRoute(req.headers.host, '/', this.domain);
    return target.kind !== 'service' && target.kind !== 'project';
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** From now on every answer is 503 `draining`. */
  drain(): void {
    this.#draining = true;
  }

  async answer(): Promise<ReadinessAnswer> {
    if (this.#draining) return notReady('draining', 'this instance is shutting down');
    const storeOk = await this.#storeOk();
    if (this.#draining) return notReady('draining', 'this instance is shutting down');
    if (!storeOk) return notReady('store_unreachable', `the store did not answer within ${STORE_TIMEOUT_MS} ms`);
    return { status: 200, body: { status: 'ready' } };
  }

  /** `select 1`, one at a time, its answer reused for a second. */
  #storeOk(): Promise<boolean> {
    const checked = this.#checked;
    if (checked && Date.now() - checked.at < STORE_CHECK_TTL_MS) return Promise.resolve(checked.ok);
    this.#checking ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), STORE_TIMEOUT_MS);
        timer.unref();
      });
      const query = this.database
        .read(() => first<{ one: number }>('select 1 as one'))
        .then(
          (row) => row !== undefined,
          () => false,
        );
      const ok = await Promise.race([query, timeout]);
      clearTimeout(timer);
      this.#checked = { at: Date.now(), ok };
      this.#checking = undefined;
      return ok;
    })();
    return this.#checking;
  }
}

function notReady(code: string, message: string): ReadinessAnswer {
  return { status: 503, body: envelope(503, code, message) };
}

/**
 * Answers the readiness check on a raw response, before routing and authentication (the listener
 * calls it when `isCheck`), so it costs no more than the store check; not counted in the stats.
 */
export function answerReadinessRequest(readiness: Readiness, req: IncomingMessage, res: ServerResponse): void {
  readiness.answer().then(
    ({ status, body }) => {
      const text = JSON.stringify(body);
      res.writeHead(status, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(text),
        'cache-control': 'no-store',
      });
      res.end(req.method === 'HEAD' ? undefined : text);
    },
    () => res.destroy(),
  );
}

const readySchema = {
  operationId: 'getReadiness',
  security: ANONYMOUS,
  summary: 'Readiness for a load balancer: 200 while serving, 503 while shutting down or without the store',
  description:
    "Answered before routing and authentication on gateway.<domain>, api.<domain>, the bare domain, an IP address and any host outside the domain (what a load balancer sends); service and project hosts keep their own paths (kv.<domain>/readyz is the key-value node's). HEAD works too. 503 `draining` from the moment the instance receives SIGTERM or SIGINT, 503 `store_unreachable` when the store does not answer a trivial query within 2 s (checked at most once a second). Not counted in /v0/stats.",
  response: {
    200: Type.Object({ status: Type.Literal('ready') }, { description: 'Serving' }),
    503: Type.Object(
      { error: Type.Object({ status: Type.Integer(), code: Type.String(), message: Type.String() }) },
      { description: 'draining or store_unreachable' },
    ),
  },
};

/** The gateway app's `GET /readyz`: the same answer, for in-process callers and the OpenAPI document. */
export function registerReadiness(app: ServiceApp, readiness: Readiness): void {
  app.get(READINESS_PATH, { schema: readySchema }, async (_request, reply) => {
    const { status, body } = await readiness.answer();
    return reply.code(status).header('cache-control', 'no-store').send(body);
  });
}
