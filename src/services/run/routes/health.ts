import type { ServiceApp } from '../../../core/app.ts';
import { envelope, type HttpError } from '../../../core/errors.ts';
import { errorBody } from '../../../core/schemas.ts';
import { RunErrors } from '../errors.ts';
import type { RouteDeps } from './deps.ts';
import { ANONYMOUS, type RouteDocs } from '../../../core/openapi.ts';

/** `GET /version` (text), `/healthz` and `/readyz`: public. */
export function registerHealthRoutes(app: ServiceApp, { version, repository, driver }: RouteDeps): void {
  app.get(
    '/version',
    {
      schema: {
        operationId: 'getVersion',
        security: ANONYMOUS,
        summary: 'Service version (plain text)',
        openapi: { responses: { 200: { 'text/plain': { type: 'string' } } } } satisfies RouteDocs,
      },
    },
    async (_request, reply) => reply.type('text/plain; charset=utf-8').send(version),
  );
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'getLiveness',
        security: ANONYMOUS,
        summary: 'Liveness: ok while the process serves',
        openapi: { responses: { 200: { 'text/plain': { type: 'string' } } } } satisfies RouteDocs,
      },
    },
    async (_request, reply) => reply.type('text/plain; charset=utf-8').send('ok'),
  );
  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'getReadiness',
        security: ANONYMOUS,
        summary: 'Readiness: ok once storage is reachable and the driver is ready; 503 not_ready otherwise',
        openapi: {
          responses: { 200: { 'text/plain': { type: 'string' } }, 503: { 'application/json': errorBody } },
        } satisfies RouteDocs,
      },
    },
    async (_request, reply) => {
      let problem: HttpError | null = null;
      try {
        await repository.reachable();
        if (driver.ready && !(await driver.ready())) problem = RunErrors.driverNotReady(driver.name);
      } catch {
        problem = RunErrors.storageUnreachable();
      }
      // Sent here rather than thrown: the answer is typed application/json exactly, as it always was.
      if (problem)
        return reply
          .code(problem.status)
          .type('application/json')
          .send(envelope(problem.status, problem.code, problem.message));
      return reply.type('text/plain; charset=utf-8').send('ok');
    },
  );
}
