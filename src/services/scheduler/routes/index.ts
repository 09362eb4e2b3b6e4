import type { ServiceApp } from '../../../core/app.ts';
import type { RouteDeps } from './deps.ts';
import { registerDeadRoutes } from './dead/routes.ts';
import { registerOpenApi } from './openapi.ts';
import { registerCreateScheduler } from './schedulers/create.ts';
import { registerDeleteScheduler } from './schedulers/delete.ts';
import { registerGetScheduler } from './schedulers/get.ts';
import { registerSchedulerHealth } from './schedulers/health.ts';
import { registerListSchedulers } from './schedulers/list.ts';
import { registerUpdateScheduler } from './schedulers/update.ts';
import { registerAcknowledgeTask } from './tasks/acknowledge.ts';
import { registerEnqueueTask } from './tasks/enqueue.ts';
import { registerExtendLease } from './tasks/extend.ts';
import { registerListTasks } from './tasks/list.ts';
import { registerRescheduleTask } from './tasks/reschedule.ts';
import { registerReserveTask } from './tasks/reserve.ts';
import { registerTaskStream } from './tasks/stream.ts';

/** Every route of the scheduler (README), in the order the OpenAPI document lists them. */
export function registerRoutes(app: ServiceApp, deps: RouteDeps): void {
  // Schedulers: CRUD and health.
  registerListSchedulers(app, deps);
  registerCreateScheduler(app, deps);
  registerGetScheduler(app, deps);
  registerUpdateScheduler(app, deps);
  registerDeleteScheduler(app, deps);
  registerSchedulerHealth(app, deps);

  // Tasks: enqueue, lists and the snapshot stream, reserve, and what a worker does with a lease.
  registerEnqueueTask(app, deps);
  registerListTasks(app, deps);
  registerTaskStream(app, deps);
  registerReserveTask(app, deps);
  registerAcknowledgeTask(app, deps);
  registerExtendLease(app, deps);
  registerRescheduleTask(app, deps);

  // Dead letters: tasks whose platform deliveries all failed (README: Delivery).
  registerDeadRoutes(app, deps);

  registerOpenApi(app);
}
