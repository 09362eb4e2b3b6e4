import type { ServiceApp } from '../../../../core/app.ts';

export const routeTreeSchema = {
  tags: ['service'],
  summary: 'A text tree of the registered routes',
  produces: ['text/plain'],
};

/** `GET /doc`: Fastify's route tree as text (README: Service endpoints). */
export function registerRouteTree(app: ServiceApp): void {
  app.get('/doc', { schema: routeTreeSchema }, async (_request, reply) =>
    reply.type('text/plain; charset=utf-8').send(app.printRoutes({ commonPrefix: false })),
  );
}
