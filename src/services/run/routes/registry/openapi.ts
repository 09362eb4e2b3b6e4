import { BINARY, SIGNED_IN, type OpenApiDocument, type OpenApiOperation } from '../../../../core/openapi.ts';

/**
 * The registry's endpoints in the run service's document. They are served by one catch-all route
 * per method (`/v2/*`, registry/index.ts), which the generated document cannot describe, so they
 * are written out here: the push side of the OCI Distribution Specification that the registry
 * implements (service README, Registry). Pulls, deletes, the catalog and tag lists answer 405
 * `UNSUPPORTED` and are not listed. Nor is the version check `GET /v2/`: container clients make it
 * themselves, and a path with a trailing slash is an error to OpenAPI linters. Uploads start at
 * `/blobs/uploads`, which the registry takes with or without the specification's trailing slash.
 */

const ERRORS = 'RegistryErrors';
const errorsRef = { $ref: `#/components/schemas/${ERRORS}` };
const errorsSchema = {
  type: 'object',
  description: 'OCI Distribution error body',
  required: ['errors'],
  properties: {
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['code', 'message'],
        properties: { code: { type: 'string' }, message: { type: 'string' }, detail: {} },
      },
    },
  },
};

const header = (description: string) => ({ description, schema: { type: 'string' } });
const failure = (description: string) => ({ description, content: { 'application/json': { schema: errorsRef } } });
const path = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});
const NAME = {
  ...path('name', "Repository name; may contain '/' (OCI name grammar)"),
  allowReserved: true,
};
const DIGEST = path('digest', 'Content digest, `sha256:<64 hex>`');
const UUID = path('uuid', 'Upload session id from the Location of the upload start');
const REFERENCE = path('reference', 'Tag or digest');
const DIGEST_QUERY = {
  name: 'digest',
  in: 'query',
  required: false,
  description: 'The digest of the whole blob: completes the upload',
  schema: { type: 'string' },
};
const BLOB_BODY = { content: { 'application/octet-stream': { schema: BINARY } } };
const COMMON = { 401: failure('No credentials: `WWW-Authenticate: Basic`'), 404: failure('Unknown upload or blob') };
const UPLOAD_HEADERS = {
  Location: header('Where to send the next chunk'),
  Range: header('Bytes received so far, `0-<last>`'),
  'Docker-Upload-UUID': header('The upload session id'),
};
const CREATED_HEADERS = { Location: header('The blob or manifest'), 'Docker-Content-Digest': header('Its digest') };

const operation = (operationId: string, summary: string, rest: Partial<OpenApiOperation>): OpenApiOperation => ({
  operationId,
  summary,
  tags: ['registry'],
  security: SIGNED_IN,
  ...rest,
});

/** Adds the registry's paths and its error body to the run service's document. */
export function describeRegistry(document: OpenApiDocument): void {
  document.components ??= {};
  document.components.schemas = { ...document.components.schemas, [ERRORS]: errorsSchema };
  document.paths['/v2/{name}/blobs/uploads'] = {
    post: operation('startBlobUpload', 'Start a blob upload, or upload a whole blob at once with `?digest=`', {
      parameters: [NAME, DIGEST_QUERY],
      requestBody: { required: false, ...BLOB_BODY },
      responses: {
        201: { description: 'The whole blob was stored (monolithic upload)', headers: CREATED_HEADERS },
        202: { description: 'An upload session was opened', headers: UPLOAD_HEADERS },
        400: failure('Bad name or digest, or the content does not match the digest'),
        ...COMMON,
      },
    }),
  };
  document.paths['/v2/{name}/blobs/uploads/{uuid}'] = {
    get: operation('getBlobUploadStatus', 'How many bytes of an upload arrived', {
      parameters: [NAME, UUID],
      responses: { 204: { description: 'Upload in progress', headers: UPLOAD_HEADERS }, ...COMMON },
    }),
    patch: operation('appendBlobChunk', 'Append a chunk (`Content-Range` optional, in order)', {
      parameters: [NAME, UUID],
      requestBody: { required: true, ...BLOB_BODY },
      responses: {
        202: { description: 'The chunk was appended', headers: UPLOAD_HEADERS },
        416: failure('The chunk does not start where the upload ends'),
        ...COMMON,
      },
    }),
    put: operation(
      'finishBlobUpload',
      'Finish an upload with the digest of the whole blob (and an optional last chunk)',
      {
        parameters: [NAME, UUID, { ...DIGEST_QUERY, required: true }],
        requestBody: { required: false, ...BLOB_BODY },
        responses: {
          201: { description: 'The blob is stored under its digest', headers: CREATED_HEADERS },
          400: failure('The content does not match the digest'),
          ...COMMON,
        },
      },
    ),
    delete: operation('cancelBlobUpload', 'Cancel an upload', {
      parameters: [NAME, UUID],
      responses: { 204: { description: 'Cancelled' }, ...COMMON },
    }),
  };
  document.paths['/v2/{name}/blobs/{digest}'] = {
    head: operation('checkBlob', 'Whether the repository has a blob (lets clients skip uploads)', {
      parameters: [NAME, DIGEST],
      responses: {
        200: { description: 'Present', headers: { 'Docker-Content-Digest': header('Its digest') } },
        ...COMMON,
      },
    }),
  };
  document.paths['/v2/{name}/manifests/{reference}'] = {
    head: operation('checkManifest', 'Whether a manifest exists under a tag or digest', {
      parameters: [NAME, REFERENCE],
      responses: {
        200: { description: 'Present', headers: { 'Docker-Content-Digest': header('Its digest') } },
        ...COMMON,
      },
    }),
    put: operation('putManifest', 'Push an image manifest or index under a tag or its digest (at most 4 MiB)', {
      parameters: [NAME, REFERENCE],
      requestBody: {
        required: true,
        content: {
          'application/vnd.oci.image.manifest.v1+json': { schema: { type: 'object' } },
          'application/vnd.oci.image.index.v1+json': { schema: { type: 'object' } },
          'application/vnd.docker.distribution.manifest.v2+json': { schema: { type: 'object' } },
          'application/vnd.docker.distribution.manifest.list.v2+json': { schema: { type: 'object' } },
        },
      },
      responses: {
        201: { description: 'Stored', headers: CREATED_HEADERS },
        400: failure('Invalid manifest, or a blob it names is missing'),
        ...COMMON,
      },
    }),
  };
}
