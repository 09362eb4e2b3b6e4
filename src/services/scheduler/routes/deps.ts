import type { FastifyRequest } from 'fastify';
import type { SealingKey } from '../../../core/sealing.ts';
import type { ServiceCalls } from '../../context.ts';
import type { SchedulerEvents } from '../events.ts';
import type { SchedulerRepository } from '../repository.ts';

/** What every route of the scheduler is given by index.ts. */
export interface RouteDeps {
  repository: SchedulerRepository;
  events: SchedulerEvents;
  /** onRequest hook of private routes: 401 before anything else is looked at. */
  requireKey: (request: FastifyRequest) => Promise<void>;
  now: () => number;
  /** Seals webhook secrets (README: Delivery). */
  sealing: SealingKey;
  /** The platform's services, to check a lambda target; absent when the scheduler is built alone. */
  services: ServiceCalls | undefined;
}
