import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { registerCollectionRoutes } from './collections.ts';
import { requirePresence, type KvNode } from './common.ts';
import { registerHealthRoutes } from './health.ts';
import { registerKeyRoutes } from './keys.ts';
import { registerReplicateRoute } from './replicate.ts';
import { registerStatusRoutes } from './status.ts';

export type { KvCounters, KvNode } from './common.ts';

/** Every endpoint of the node: health checks open to all, every `/v1/…` route behind the presence check. */
export function registerKvRoutes(app: ServiceApp, node: KvNode): void {
  registerHealthRoutes(app, node);

  app.register(async (plain) => {
    const v1 = plain.withTypeProvider<TypeBoxTypeProvider>();
    // A callback hook, not an async one: the check is synchronous, and an async hook costs every
    // request a promise and a turn. A throw reaches the error handler either way.
    v1.addHook('preHandler', (request, _reply, done) => {
      requirePresence(request);
      done();
    });
    registerStatusRoutes(v1, node);
    registerCollectionRoutes(v1, node);
    registerKeyRoutes(v1, node);
    registerReplicateRoute(v1, node);
  });
}
