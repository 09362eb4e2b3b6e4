import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../../core/app.ts';
import { HttpError } from '../../../../core/errors.ts';
import { identityOf } from '../../../../core/identity.ts';
import {
  RegistryError,
  noEndpoint,
  pathNotDecodable,
  registryErrorBody,
  unauthorizedRegistry,
  unsupported,
} from '../../registry/errors.ts';
import { parseRegistryPath, registryPathOf } from '../../registry/paths.ts';
import type { RouteDeps } from '../deps.ts';
import { headBlob } from './blobs.ts';
import { drain } from './common.ts';
import { headManifest } from './manifests/head.ts';
import { putManifest } from './manifests/put.ts';
import { appendChunk } from './uploads/append.ts';
import { cancelUpload } from './uploads/cancel.ts';
import { finishUpload } from './uploads/finish.ts';
import { startUpload } from './uploads/start.ts';
import { uploadStatus } from './uploads/status.ts';

const API_VERSION = 'registry/2.0';

/**
 * The push-only registry (service README, "Registry") under `/v2/`. One wildcard route per
 * method: names contain `/` and digests `:`, so the path is parsed here from its end and handed to
 * its endpoint (one file each, or a small group). The scope has no body parser: blob bodies stream
 * from the socket into the blob store, manifests are read (≤ 4 MiB) by their endpoint.
 */
export async function registerRegistry(app: ServiceApp, deps: RouteDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    scope.addHook('onRequest', async (_request, reply) => {
      reply.header('docker-distribution-api-version', API_VERSION);
    });
    scope.setErrorHandler(
      (error: FastifyError | RegistryError | HttpError, request: FastifyRequest, reply: FastifyReply) => {
        if (error instanceof RegistryError)
          return sendError(request, reply, error.status, error.code, error.message, error.detail, error.headers);
        if (error instanceof HttpError)
          return sendError(
            request,
            reply,
            error.status,
            error.status === 405 ? 'UNSUPPORTED' : 'UNKNOWN',
            error.message,
            null,
            error.headers,
          );
        if ((error as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE')
          return sendError(request, reply, 413, 'SIZE_INVALID', 'request body is too large', null, {});
        request.log.error(
          { err: error, reqId: request.id, method: request.method, url: request.url.split('?')[0] },
          'unhandled registry error',
        );
        return sendError(request, reply, 500, 'UNKNOWN', 'internal error', null, {});
      },
    );

    const handler = (request: FastifyRequest, reply: FastifyReply) => handle(deps, request, reply);
    for (const method of ['GET', 'HEAD', 'POST', 'PATCH', 'PUT', 'DELETE'] as const) {
      scope.route({ method, url: '/v2/*', exposeHeadRoute: false, schema: { hide: true }, handler });
    }
  });
}

/** Routes one `/v2/` request to its endpoint by the parsed path and the method. */
async function handle(deps: RouteDeps, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const identity = identityOf(request);
  if (!identity) {
    drain(request);
    throw unauthorizedRegistry();
  }
  const user = identity.user.id;
  const path = registryPathOf(request.url);
  if (path === null) throw pathNotDecodable();
  const target = parseRegistryPath(request.method, path);
  const method = request.method;
  switch (target.kind) {
    case 'base':
      if (method === 'GET') return reply.code(200).type('application/json').send({});
      if (method === 'HEAD') return reply.code(200).send();
      break;
    case 'catalog':
      throw unsupported('listing the catalog');
    case 'tags':
      throw unsupported('listing tags');
    case 'uploads':
      return startUpload(deps, request, reply, user, target.name);
    case 'upload':
      if (method === 'GET') return uploadStatus(deps, reply, user, target.name, target.uuid);
      if (method === 'PATCH') return appendChunk(deps, request, reply, user, target.name, target.uuid);
      if (method === 'PUT') return finishUpload(deps, request, reply, user, target.name, target.uuid);
      if (method === 'DELETE') return cancelUpload(deps, reply, user, target.name, target.uuid);
      break;
    case 'blob':
      if (method === 'HEAD') return headBlob(deps, reply, user, target.name, target.digest);
      if (method === 'GET') throw unsupported('pulling blobs');
      if (method === 'DELETE') throw unsupported('deleting blobs');
      break;
    case 'manifest':
      if (method === 'HEAD') return headManifest(deps, reply, user, target.name, target.reference);
      if (method === 'PUT') return putManifest(deps, request, reply, user, target.name, target.reference);
      if (method === 'GET') throw unsupported('pulling manifests');
      if (method === 'DELETE') throw unsupported('deleting manifests');
      break;
    case 'unknown':
      break;
  }
  drain(request);
  throw noEndpoint(method, path);
}

function sendError(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  code: string,
  message: string,
  detail: unknown,
  headers: Readonly<Record<string, string>>,
): FastifyReply {
  // A body left half read (too large, wrong digest) is discarded so the connection can carry the
  // next request; Node only does that itself for bodies nobody started reading.
  drain(request);
  void reply.code(status).headers(headers);
  // HEAD errors carry the status only (service README, "Registry").
  if (request.method === 'HEAD') return reply.send();
  return reply.type('application/json').send(registryErrorBody(code, message, detail));
}
