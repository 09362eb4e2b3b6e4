import { Type } from 'typebox';
import { named, SIGNED_IN } from '../../core/openapi.ts';
import { errorBody } from '../../core/schemas.ts';
import { validationError } from '../../core/errors.ts';
import type { JsonObject } from '../../core/json.ts';
import type { BucketRecord, FileRecord } from './repository.ts';
import { rfc3339Ns } from './timestamps.ts';

/**
 * What the API takes and answers: the route schemas (and so the OpenAPI document), the bucket
 * input rules the schemas do not express, and the Bucket and File JSON built from records.
 */

export const MAX_BUCKET_NAME_LENGTH = 64;
export const MAX_DESCRIPTION_LENGTH = 4096;
const BUCKET_NAME = /^[A-Za-z0-9_-]*$/;

export const security = SIGNED_IN;
export const pathDoc = 'The path after `/files/` is the file name, percent-decoded; it may contain `/`.';

export { errorBody };

export const bucketSchema = named(
  'Bucket',
  Type.Object({
    id: Type.String({ description: 'bucket-<uuid v4>' }),
    project_id: Type.String(),
    created_timestamp: Type.Integer({ description: 'nanoseconds since the Unix epoch (exact integer)' }),
    owners: Type.Array(Type.String()),
    name: Type.String(),
    description: Type.String(),
  }),
);

export const bucketListItemSchema = named(
  'BucketListItem',
  Type.Object({
    id: Type.String(),
    name: Type.String(),
    description: Type.String(),
    created_timestamp: Type.Integer(),
    created_h: Type.String({ description: 'RFC 3339 UTC' }),
    owners: Type.Array(Type.String()),
  }),
);

export const createBucketBody = Type.Object(
  {
    name: Type.Optional(
      Type.String({
        description: `trimmed; at most ${MAX_BUCKET_NAME_LENGTH} of A–Z a–z 0–9 _ -; empty → the bucket id`,
      }),
    ),
    description: Type.Optional(Type.String({ description: `at most ${MAX_DESCRIPTION_LENGTH} characters` })),
  },
  { additionalProperties: false },
);

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
export const fileSchema = named('File', Type.Object({ ...fileFields, uuid: Type.String() }));
export const fileListItemSchema = named('FileListItem', Type.Object(fileFields));

export const bucketParams = Type.Object({ bucket_id: Type.String() });
export const pathParams = Type.Object({ bucket_id: Type.String(), '*': Type.String() });
export const downloadQuery = Type.Object({
  metadata: Type.Optional(Type.String({ description: 'presence flag: answer the File object as JSON' })),
});

/** Validates create input; returns the trimmed name ('' = use the id). */
export function checkBucketInput(input: { name?: unknown; description?: unknown }): {
  name: string;
  description: string;
} {
  const name = input.name === undefined ? '' : input.name;
  const description = input.description === undefined ? '' : input.description;
  if (typeof name !== 'string') throw validationError('name must be a string');
  if (typeof description !== 'string') throw validationError('description must be a string');
  const trimmed = name.trim();
  if (trimmed.length > MAX_BUCKET_NAME_LENGTH)
    throw validationError(`name must be at most ${MAX_BUCKET_NAME_LENGTH} characters`);
  if (!BUCKET_NAME.test(trimmed)) throw validationError('name may only contain A-Z, a-z, 0-9, _ and -');
  if ([...description].length > MAX_DESCRIPTION_LENGTH)
    throw validationError(`description must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
  if (description.includes('\u0000')) throw validationError('description must not contain NUL');
  return { name: trimmed, description };
}

/** The Bucket object; `created_timestamp` stays a bigint for core's exact JSON writing. */
export function bucketJson(bucket: BucketRecord): JsonObject {
  return {
    id: bucket.id,
    project_id: bucket.projectId,
    created_timestamp: bucket.createdNs,
    owners: bucket.owners,
    name: bucket.name,
    description: bucket.description,
  };
}

/** A bucket list item: with `created_h`, without `project_id`. */
export function bucketListItemJson(bucket: BucketRecord): JsonObject {
  return {
    id: bucket.id,
    name: bucket.name,
    description: bucket.description,
    created_timestamp: bucket.createdNs,
    created_h: rfc3339Ns(bucket.createdNs),
    owners: bucket.owners,
  };
}

/** The File object (timestamps stay bigints for core's exact JSON writing); list items leave out `uuid`. */
export function fileJson(file: FileRecord, withUuid = true): JsonObject {
  return {
    id: file.id,
    ...(withUuid ? { uuid: file.uuid } : {}),
    created_timestamp: file.createdNs,
    updated_timestamp: file.updatedNs,
    owners: file.owners,
    status: 'available',
    size: file.size,
    name: file.name,
    bucket: file.bucketId,
    hash_md5: file.md5,
    hash_sha256: file.sha256,
    mime_type: file.mimeType,
  };
}
