import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../core/app.ts';
import { FilesErrors } from '../errors.ts';
import { listPrefix } from '../paths.ts';
import { bucketParams, errorBody, fileJson, fileListItemSchema, pathParams, security } from '../schemas.ts';
import { callerOf, sendJson } from './common.ts';
import type { RouteDeps } from './deps.ts';

const tags = ['files'];

export const listSchema = (operationId: string, summary: string, params: typeof bucketParams | typeof pathParams) => ({
  operationId,
  tags,
  security,
  summary,
  description:
    'Files whose name starts with the prefix (byte for byte, every depth), in first-upload order; a trailing `*` is ignored.',
  params,
  response: { 200: Type.Array(fileListItemSchema), 400: errorBody, 401: errorBody, 404: errorBody },
});

/** File listings by prefix: `…/list/<prefix>`, and `…/list` for every file. */
export function registerList(raw: ServiceApp, { files }: RouteDeps): void {
  const list = async (
    request: FastifyRequest<{ Params: { bucket_id: string; '*'?: string } }>,
    reply: FastifyReply,
  ) => {
    const owner = callerOf(request);
    const prefix = listPrefix(request.params['*'] ?? '');
    const found = await files.lookup(request.params.bucket_id, owner, '');
    if (!found.bucket) throw FilesErrors.bucketNotFound();
    const listed = await files.list(request.params.bucket_id, prefix);
    return sendJson(
      reply,
      200,
      listed.map((file) => fileJson(file, false)),
    );
  };
  raw.get(
    '/v1/buckets/:bucket_id/list/*',
    { schema: listSchema('listFilesByPrefix', 'List files by prefix', pathParams) },
    list,
  );
  raw.get('/v1/buckets/:bucket_id/list', { schema: listSchema('listFiles', 'List every file', bucketParams) }, list);
}
