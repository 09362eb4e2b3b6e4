import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { requireIdentity, PROJECT_HEADER } from '../../../core/identity.ts';
import { stringifyJson, type JsonValue } from '../../../core/json.ts';
import type { BlobRefs } from '../../../store/blob/refs.ts';
import type { BlobStore } from '../../../store/blob/types.ts';
import type { BucketRepository } from '../buckets.ts';
import type { FileRepository } from '../files.ts';

/** What the routes work with (built by the service's index.ts). */
export interface FilesRouteDeps {
  buckets: BucketRepository;
  files: FileRepository;
  blobs: BlobStore;
  refs: BlobRefs;
  /** Upload limit in bytes. */
  maxUploadBytes: number;
}

export const security = [{ gatewayIdentity: [] }];
export const pathDoc = 'The path after `/files/` is the file name, percent-decoded; it may contain `/`.';

export const errorBody = Type.Object({ error: Type.Object({ status: Type.Integer(), code: Type.String(), message: Type.String() }) });

export const bucketSchema = Type.Object({
  id: Type.String({ description: 'bucket-<uuid v4>' }),
  project_id: Type.String(),
  created_timestamp: Type.Integer({ description: 'nanoseconds since the Unix epoch (exact integer)' }),
  owners: Type.Array(Type.String()),
  name: Type.String(),
  description: Type.String(),
});

export const bucketListItemSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Type.String(),
  created_timestamp: Type.Integer(),
  created_h: Type.String({ description: 'RFC 3339 UTC' }),
  owners: Type.Array(Type.String()),
});

const fileFields = {
  id: Type.String({ description: 'file-<uuid v4>' }),
  created_timestamp: Type.Integer({ description: 'nanoseconds, first upload to this path' }),
  updated_timestamp: Type.Integer({ description: 'nanoseconds, last upload to this path' }),
  owners: Type.Array(Type.String()),
  status: Type.Literal('available'),
  size: Type.Integer(),
  name: Type.String({ description: 'full path inside the bucket' }),
  bucket: Type.String(),
  hash_md5: Type.String(),
  hash_sha256: Type.String(),
  mime_type: Type.String(),
};
export const fileSchema = Type.Object({ ...fileFields, uuid: Type.String() });
export const fileListItemSchema = Type.Object(fileFields);

export const bucketParams = Type.Object({ bucket_id: Type.String() });
export const pathParams = Type.Object({ bucket_id: Type.String(), '*': Type.String() });

/** The caller's user id (401 without a usable identity). */
export function callerOf(request: FastifyRequest): string {
  return requireIdentity(request).user.id;
}

/** The request's project: X-Project-Id (set by the gateway), else the identity's project, else ''. */
export function projectOf(request: FastifyRequest): string {
  const header = request.headers[PROJECT_HEADER];
  if (typeof header === 'string' && header.length > 0) return header;
  return requireIdentity(request).project?.id ?? '';
}

/**
 * Sends a value as JSON written by core's `stringifyJson`, bypassing the serializer: nanosecond
 * timestamps are bigints above 2^53, written as their exact digits (the serializer cannot).
 */
export function sendJson(reply: FastifyReply, status: number, value: JsonValue): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(stringifyJson(value));
}

/** One header value (a repeated header counts as absent rather than guessing). */
export function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}
