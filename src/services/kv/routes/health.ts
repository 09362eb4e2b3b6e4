import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { KvErrors } from '../errors.ts';
import { errorBody, health } from '../schemas.ts';
import { parentLink, roleOf, type KvNode } from './common.ts';
import { ANONYMOUS } from '../../../core/openapi.ts';

const healthSchema = (operationId: string, summary: string) => ({
  operationId,
  security: ANONYMOUS,
  tags: ['health'],
  summary,
  response: { 200: health, 500: errorBody },
});

const readySchema = {
  tags: ['health'],
  operationId: 'getReadiness',
  security: ANONYMOUS,
  summary: 'Ready: state loaded and, on a replica, connected with a complete baseline; 503 otherwise',
  response: { 200: Type.Unknown(), 503: Type.Unknown() },
};

/** The health checks, public on both ports. State is loaded before the node listens, so started = alive. */
export function registerHealthRoutes(app: ServiceApp, node: KvNode): void {
  const alive = async (reply: FastifyReply) => {
    try {
      await node.repository.totals();
    } catch {
      throw KvErrors.storageUnreadable();
    }
    return reply.send({ ok: true, node: node.name, role: roleOf(node) });
  };

  app.get(
    '/livez',
    { schema: healthSchema('getLiveness', 'Alive: the node can read its storage') },
    async (_request, reply) => alive(reply),
  );
  app.get('/healthz', { schema: healthSchema('getHealth', 'Same as /livez') }, async (_request, reply) => alive(reply));
  app.get(
    '/startupz',
    { schema: healthSchema('getStartup', 'Started: local state is loaded (it is before the node listens)') },
    async (_request, reply) => alive(reply),
  );

  app.get('/readyz', { schema: readySchema }, async (_request, reply) => {
    const { ready, connected } = await parentLink(node);
    return reply.code(ready ? 200 : 503).send({
      ok: ready,
      node: node.name,
      role: roleOf(node),
      ready,
      status: ready ? 'ok' : 'unavailable',
      parent_connected: connected,
      checks: { wal_replayed: true, parent_connected: connected },
    });
  });
}
