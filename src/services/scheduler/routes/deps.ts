import type { FastifyRequest } from 'fastify';
import type { SchedulerEvents } from '../events.ts';
import type { SchedulerRepository } from '../repository.ts';

/** What every route of the scheduler is given by index.ts. */
export interface RouteDeps {
  repository: SchedulerRepository;
  events: SchedulerEvents;
  /** onRequest hook of private routes: 401 before anything else is looked at. */
  requireKey: (request: FastifyRequest) => Promise<void>;
  now: () => number;
}
