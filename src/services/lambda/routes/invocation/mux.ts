import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../../core/app.ts';
import { LambdaErrors } from '../../errors.ts';
import { ownerParams, ownerPathParams } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { ANY, invocationErrors, tags } from './common.ts';
import { SIGNED_IN_OR_ANONYMOUS, type RouteDocs } from '../../../../core/openapi.ts';

/** The mux route path: what follows `/mux/{owner}`, with a leading slash; never the query. */
function muxPath(url: string): string {
  const path = url.split('?')[0] ?? '/';
  const slash = path.indexOf('/', '/mux/'.length);
  const rest = slash < 0 ? '/' : path.slice(slash);
  try {
    return decodeURIComponent(rest);
  } catch {
    return rest;
  }
}

export const ownerMuxRootSchema = {
  tags,
  operationId: 'runOwnerRoot',
  security: SIGNED_IN_OR_ANONYMOUS,
  summary: "Owner router (the route path '/')",
  openapi: {
    // Whatever the lambda answers: its status, headers and body.
    responses: { 200: { '*/*': { description: "The lambda's response" } } },
  } satisfies RouteDocs,
  params: ownerParams,
  response: invocationErrors,
};
export const ownerMuxSchema = {
  tags,
  operationId: 'runOwnerRoute',
  security: SIGNED_IN_OR_ANONYMOUS,
  summary: 'Owner router: owner, then method, then path',
  openapi: {
    // Whatever the lambda answers: its status, headers and body.
    responses: { 200: { '*/*': { description: "The lambda's response" } } },
  } satisfies RouteDocs,
  params: ownerPathParams,
  response: invocationErrors,
};

/** `/mux/{owner_id}` and `/mux/{owner_id}/*`, any method: the owner's lambda for the method and path (README: Invocation, mux). */
export function registerOwnerMux(app: ServiceApp, { repository, invoker }: RouteDeps): void {
  const mux = async (request: FastifyRequest, reply: FastifyReply) => {
    const { owner_id } = request.params as { owner_id: string };
    const path = muxPath(request.url);
    const lambda = await repository.route({ owner: owner_id }, request.method, path);
    if (!lambda) throw LambdaErrors.noRoute(request.method, path);
    return invoker.serve(lambda, request, reply, path, request.body, 'mux');
  };
  app.route({ method: [...ANY], url: '/mux/:owner_id', schema: ownerMuxRootSchema, handler: mux });
  app.route({ method: [...ANY], url: '/mux/:owner_id/*', schema: ownerMuxSchema, handler: mux });
}
