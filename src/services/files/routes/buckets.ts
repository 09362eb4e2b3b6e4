import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { FilesErrors } from '../errors.ts';
import {
  bucketJson,
  bucketListItemJson,
  bucketListItemSchema,
  bucketParams,
  bucketSchema,
  checkBucketInput,
  createBucketBody,
  errorBody,
  security,
} from '../schemas.ts';
import { callerOf, projectOf, sendJson } from './common.ts';
import type { RouteDeps } from './deps.ts';

const tags = ['buckets'];

export const updateBucketSchema = {
  tags,
  security,
  operationId: 'updateBucket',
  summary: 'Not implemented: always 501 after authentication',
  params: bucketParams,
  response: { 401: errorBody, 501: errorBody },
};
export const listBucketsSchema = {
  tags,
  security,
  operationId: 'listBuckets',
  summary: "List the caller's buckets in creation order",
  response: { 200: Type.Array(bucketListItemSchema), 401: errorBody },
};
export const createBucketSchema = {
  tags,
  security,
  operationId: 'createBucket',
  summary: 'Create a bucket owned by the caller',
  description: 'An empty body is the same as `{}`. A name already used by the caller → 409.',
  body: createBucketBody,
  response: { 201: bucketSchema, 400: errorBody, 401: errorBody, 409: errorBody },
};
export const getBucketSchema = {
  tags,
  security,
  operationId: 'getBucket',
  summary: 'Get a bucket',
  params: bucketParams,
  response: { 200: bucketSchema, 401: errorBody, 404: errorBody },
};
export const deleteBucketSchema = {
  tags,
  security,
  operationId: 'deleteBucket',
  summary: 'Delete a bucket and all its files; answers the bucket as it was',
  params: bucketParams,
  response: { 200: bucketSchema, 401: errorBody, 404: errorBody },
};

/**
 * Bucket endpoints: list, create, get, delete; PATCH answers 501. JSON bodies use the app's parser
 * (any Content-Type); PATCH alone sits in the raw-body scope.
 */
export function registerBucketRoutes(app: ServiceApp, raw: ServiceApp, { buckets }: RouteDeps): void {
  // In the raw-body scope: no body is parsed, so PATCH is 501 whatever it carries.
  raw.patch('/v1/buckets/:bucket_id', { schema: updateBucketSchema }, async (request) => {
    callerOf(request);
    throw FilesErrors.bucketUpdateNotImplemented();
  });

  app.get('/v1/buckets', { schema: listBucketsSchema }, async (request, reply) => {
    const owner = callerOf(request);
    return sendJson(reply, 200, (await buckets.listOwned(owner)).map(bucketListItemJson));
  });

  app.post(
    '/v1/buckets',
    {
      schema: createBucketSchema,
      // Identity first: 401 before any body error.
      onRequest: async (request) => {
        callerOf(request);
      },
      // An empty body means `{}`.
      preValidation: async (request) => {
        if (request.body === undefined || request.body === null) request.body = {};
      },
    },
    async (request, reply) => {
      const owner = callerOf(request);
      const input = checkBucketInput(request.body);
      const bucket = await buckets.create(owner, projectOf(request), input);
      return sendJson(reply, 201, bucketJson(bucket));
    },
  );

  app.get('/v1/buckets/:bucket_id', { schema: getBucketSchema }, async (request, reply) => {
    const bucket = await buckets.getOwned(request.params.bucket_id, callerOf(request));
    if (!bucket) throw FilesErrors.bucketNotFound();
    return sendJson(reply, 200, bucketJson(bucket));
  });

  app.delete('/v1/buckets/:bucket_id', { schema: deleteBucketSchema }, async (request, reply) => {
    const bucket = await buckets.deleteOwned(request.params.bucket_id, callerOf(request));
    if (!bucket) throw FilesErrors.bucketNotFound();
    return sendJson(reply, 200, bucketJson(bucket));
  });
}
