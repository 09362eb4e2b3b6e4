import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../core/app.ts';
import { HttpError, notFound, serviceUnavailable } from '../../../core/errors.ts';
import { BlobGoneError, type BlobRefs } from '../../../store/blob/refs.ts';
import type { BlobStore } from '../../../store/blob/types.ts';
import { ifRangeHolds, notModified, parseRange, type Validators } from '../conditions.ts';
import { fileJson, type FileRecord, type FileRepository } from '../files.ts';
import { jsonArray } from '../json.ts';
import { checkFilePath, listPrefix } from '../paths.ts';
import { chooseMediaType } from '../sniff.ts';
import { httpDate, nsToMs } from '../timestamps.ts';
import { disconnectSignal, payloadTooLarge, receiveBody } from '../upload.ts';
import { bucketParams, callerOf, errorBody, fileListItemSchema, fileSchema, pathParams, sendJson } from './common.ts';

export interface FileRouteDeps {
  files: FileRepository;
  blobs: BlobStore;
  refs: BlobRefs;
  maxUploadBytes: number;
}

const tags = ['files'];
const security = [{ gatewayIdentity: [] }];
const pathDoc = 'The path after `/files/` is the file name, percent-decoded; it may contain `/`.';

function validators(file: FileRecord): Validators {
  const lastModified = httpDate(file.updatedNs);
  return { etag: `"${file.sha256}"`, lastModified, lastModifiedSeconds: Math.floor(nsToMs(file.updatedNs) / 1000) };
}

/** One header value (a repeated header counts as absent rather than guessing). */
function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * File endpoints (files.md §4). They live in a scope without body parsers: an upload's body is
 * the raw request stream, consumed by the handler (never buffered, never cut by Fastify's
 * bodyLimit; the upload limit is enforced here).
 */
export function registerFileRoutes(raw: ServiceApp, deps: FileRouteDeps): void {
  const { files, blobs, refs, maxUploadBytes } = deps;

  async function findOrThrow(request: FastifyRequest, bucketId: string, path: string): Promise<FileRecord> {
    const found = await files.lookup(bucketId, callerOf(request), path);
    if (!found.bucket) throw notFound('bucket not found');
    if (!found.file) throw notFound('file not found');
    return found.file;
  }

  /** GET and HEAD: the same status and headers; GET streams the content (or the metadata). */
  async function download(request: FastifyRequest, reply: FastifyReply, withBody: boolean) {
    callerOf(request);
    const params = request.params as { bucket_id: string; '*': string };
    const query = request.query as { metadata?: string };
    const path = checkFilePath(params['*']);
    const file = await findOrThrow(request, params.bucket_id, path);
    // HEAD …?metadata answers the headers of the JSON (Node sends no body for HEAD).
    if (query.metadata !== undefined) return sendJson(reply, 200, fileJson(file));

    const v = validators(file);
    reply.header('etag', v.etag).header('last-modified', v.lastModified).header('accept-ranges', 'bytes');
    // Uploaded content is never the platform's own page: browsers must not sniff it into HTML, and
    // an HTML file opened from files.<domain> runs sandboxed in an opaque origin, so its scripts
    // cannot call the platform's APIs with the owner's credentials (platform origins get CORS).
    reply.header('x-content-type-options', 'nosniff').header('content-security-policy', 'sandbox');
    if (notModified({ 'if-none-match': header(request, 'if-none-match'), 'if-modified-since': header(request, 'if-modified-since') }, v)) {
      return reply.code(304).send();
    }
    let range = parseRange(header(request, 'range'), file.size);
    if (!ifRangeHolds(header(request, 'if-range'), v)) range = { kind: 'full' };
    if (range.kind === 'unsatisfiable') {
      throw new HttpError(416, 'range_not_satisfiable', `range not satisfiable for ${file.size} bytes`, { 'content-range': `bytes */${file.size}` });
    }
    const slice = range.kind === 'partial' ? { start: range.start, end: range.end } : file.size > 0 ? { start: 0, end: file.size - 1 } : null;
    reply.code(range.kind === 'partial' ? 206 : 200).type(file.mimeType);
    reply.header('content-length', String(slice ? slice.end - slice.start + 1 : 0));
    if (range.kind === 'partial') reply.header('content-range', `bytes ${range.start}-${range.end}/${file.size}`);
    if (!withBody) return reply.send();

    const stream = await blobs.get(file.sha256, range.kind === 'partial' ? slice ?? undefined : undefined);
    if (stream === null) {
      // Only a replacement swept between the lookup and the read (after the grace period) can
      // do this: then the client retries. The same content missing is data loss: a 500.
      const again = await findOrThrow(request, params.bucket_id, path);
      if (again.sha256 !== file.sha256) throw serviceUnavailable('the file changed while it was being read; retry');
      throw new Error(`blob ${file.sha256} of file ${file.id} is missing`);
    }
    // Returned as a stream: Fastify pipes it with back-pressure and destroys it if the client leaves.
    return reply.send(stream);
  }

  raw.get(
    '/v1/buckets/:bucket_id/files/*',
    {
      exposeHeadRoute: false,
      schema: {
        tags,
        security,
        summary: 'Download a file (Range, If-None-Match, If-Modified-Since, If-Range), or its metadata with ?metadata',
        description: pathDoc,
        params: pathParams,
        querystring: Type.Object({ metadata: Type.Optional(Type.String({ description: 'presence flag: answer the File object as JSON' })) }),
        response: { 200: fileSchema, 400: errorBody, 401: errorBody, 404: errorBody, 416: errorBody },
      },
    },
    (request, reply) => download(request, reply, true),
  );

  raw.head(
    '/v1/buckets/:bucket_id/files/*',
    { schema: { tags, security, summary: 'The headers of the corresponding GET, without a body', description: pathDoc, params: pathParams } },
    (request, reply) => download(request, reply, false),
  );

  raw.put(
    '/v1/buckets/:bucket_id/files/*',
    {
      schema: {
        tags,
        security,
        summary: 'Upload a file: the raw body is the content (201 new, 200 replaced)',
        description: `${pathDoc} The body is streamed to storage while its size, MD5 and SHA-256 are computed; it replaces any previous content atomically. Over the upload limit → 413.`,
        params: pathParams,
        response: { 200: fileSchema, 201: fileSchema, 400: errorBody, 401: errorBody, 404: errorBody, 413: errorBody, 503: errorBody },
      },
    },
    async (request, reply) => {
      const owner = callerOf(request);
      const path = checkFilePath(request.params['*']);
      const bucketId = request.params.bucket_id;
      // Cheap checks before reading a byte: the bucket, and a declared length over the limit.
      const found = await files.lookup(bucketId, owner, path);
      if (!found.bucket) throw notFound('bucket not found');
      const declared = header(request, 'content-length');
      if (declared !== undefined && Number(declared) > maxUploadBytes) throw payloadTooLarge(maxUploadBytes);

      const disconnect = disconnectSignal(request.raw, reply.raw);
      let received;
      try {
        received = await receiveBody(request.raw, blobs, { maxBytes: maxUploadBytes, signal: disconnect.signal, ...(declared !== undefined && /^\d+$/.test(declared) ? { sizeHint: Number(declared) } : {}) });
      } finally {
        disconnect.dispose();
      }
      const pin = await refs.pin(received.sha256).catch((error: unknown) => {
        if (error instanceof BlobGoneError) throw serviceUnavailable('storage changed during the upload; retry');
        throw error;
      });
      let result;
      try {
        result = await files.commitUpload(bucketId, owner, path, {
          pin,
          size: received.size,
          md5: received.md5,
          mimeType: chooseMediaType(received.head, header(request, 'content-type')),
        });
      } catch (error) {
        // The pin stays behind as a deletion candidate: the blob goes with the sweeper.
        if (error instanceof BlobGoneError) throw serviceUnavailable('storage changed during the upload; retry');
        throw error;
      }
      if (result.kind === 'no_bucket') throw notFound('bucket not found');
      return sendJson(reply, result.kind === 'created' ? 201 : 200, fileJson(result.file));
    },
  );

  raw.delete(
    '/v1/buckets/:bucket_id/files/*',
    { schema: { tags, security, summary: 'Delete a file (204)', description: pathDoc, params: pathParams, response: { 204: Type.Null({ description: 'no body' }), 400: errorBody, 401: errorBody, 404: errorBody } } },
    async (request, reply) => {
      const owner = callerOf(request);
      const path = checkFilePath(request.params['*']);
      const outcome = await files.delete(request.params.bucket_id, owner, path);
      if (outcome === 'no_bucket') throw notFound('bucket not found');
      if (outcome === 'no_file') throw notFound('file not found');
      return reply.code(204).send(null);
    },
  );

  const listSchema = (summary: string, params: typeof bucketParams | typeof pathParams) => ({
    tags,
    security,
    summary,
    description: 'Files whose name starts with the prefix (byte for byte, every depth), in first-upload order; a trailing `*` is ignored.',
    params,
    response: { 200: Type.Array(fileListItemSchema), 400: errorBody, 401: errorBody, 404: errorBody },
  });
  const list = async (request: FastifyRequest<{ Params: { bucket_id: string; '*'?: string } }>, reply: FastifyReply) => {
    const owner = callerOf(request);
    const prefix = listPrefix(request.params['*'] ?? '');
    const found = await files.lookup(request.params.bucket_id, owner, '');
    if (!found.bucket) throw notFound('bucket not found');
    const listed = await files.list(request.params.bucket_id, prefix);
    return sendJson(reply, 200, jsonArray(listed.map((file) => fileJson(file, false))));
  };
  raw.get('/v1/buckets/:bucket_id/list/*', { schema: listSchema('List files by prefix', pathParams) }, list);
  raw.get('/v1/buckets/:bucket_id/list', { schema: listSchema('List every file', bucketParams) }, list);

  methodNotAllowed(raw, '/v1/buckets/:bucket_id/files/*', ['GET', 'PUT', 'DELETE']);
  methodNotAllowed(raw, '/v1/buckets/:bucket_id/list/*', ['GET']);
  methodNotAllowed(raw, '/v1/buckets/:bucket_id/list', ['GET']);
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * Explicit 405s for the other methods of a raw-body path. The app's generic 405 answers from the
 * not-found handler, which runs after the root scope's JSON parser has read the body: a binary
 * body sent with the wrong method would be a 400 `invalid_json` there instead of a 405.
 */
export function methodNotAllowed(raw: ServiceApp, url: string, allowed: readonly string[]): void {
  // A GET route answers HEAD too (Fastify exposes it, or this service registers its own).
  const others = METHODS.filter((m) => !allowed.includes(m) && !(m === 'HEAD' && allowed.includes('GET')));
  const allow = [...allowed, ...(allowed.includes('GET') && !allowed.includes('HEAD') ? ['HEAD'] : [])].join(', ');
  raw.route({
    method: others,
    url,
    schema: { hide: true },
    handler: async (request) => {
      throw new HttpError(405, 'method_not_allowed', `method ${request.method} is not allowed on ${request.url.split('?')[0]}`, { allow });
    },
  });
}
