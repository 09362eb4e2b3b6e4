import { Type } from 'typebox';
import type { ServiceApp } from '../../../../core/app.ts';
import { errorBody, loggerRecord } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

export const listLoggersSchema = {
  tags: ['loggers'],
  operationId: 'listLoggers',
  security: SIGNED_IN,
  summary: "List the caller's loggers in creation order",
  response: { 200: Type.Array(loggerRecord), 401: errorBody },
};

/** `GET /v1/loggers`: the loggers the caller's identity owns. */
export function registerListLoggers(app: ServiceApp, { loggers, access }: RouteDeps): void {
  app.get('/v1/loggers', { schema: listLoggersSchema }, async (request) =>
    loggers.listOwnedBy(access.requireUser(request)),
  );
}
