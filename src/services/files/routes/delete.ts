import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { FilesErrors } from '../errors.ts';
import { checkFilePath } from '../paths.ts';
import { errorBody, pathDoc, pathParams, security } from '../schemas.ts';
import { callerOf } from './common.ts';
import type { RouteDeps } from './deps.ts';

export const deleteFileSchema = {
  tags: ['files'],
  security,
  operationId: 'deleteFile',
  summary: 'Delete a file (204)',
  description: pathDoc,
  params: pathParams,
  response: { 204: Type.Null({ description: 'no body' }), 400: errorBody, 401: errorBody, 404: errorBody },
};

/** DELETE of a file: 204; its content goes with the blob sweeper once unreferenced. */
export function registerDeleteFile(raw: ServiceApp, { files }: RouteDeps): void {
  raw.delete('/v1/buckets/:bucket_id/files/*', { schema: deleteFileSchema }, async (request, reply) => {
    const owner = callerOf(request);
    const path = checkFilePath(request.params['*']);
    const outcome = await files.delete(request.params.bucket_id, owner, path);
    if (outcome === 'no_bucket') throw FilesErrors.bucketNotFound();
    if (outcome === 'no_file') throw FilesErrors.fileNotFound();
    return reply.code(204).send(null);
  });
}
