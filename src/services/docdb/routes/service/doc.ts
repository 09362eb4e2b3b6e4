import type { ServiceApp } from '../../../../core/app.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

export const routeTreeSchema = {
  tags: ['service'],
  operationId: 'getRouteTree',
  security: ANONYMOUS,
  summary: 'A text tree of the registered routes',
  produces: ['text/plain'],
};

/** `GET /doc`: Fastify's route tree as text (README: Service endpoints). */
export function registerRouteTree(app: ServiceApp): void {
  app.get('/doc', { schema: routeTreeSchema }, async (_request, reply) =>
    reply.type('text/plain; charset=utf-8').send(app.printRoutes({ commonPrefix: false })),
  );
}
