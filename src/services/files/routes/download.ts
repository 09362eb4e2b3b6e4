import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../core/app.ts';
import { BINARY, type RouteDocs } from '../../../core/openapi.ts';
import { ifRangeHolds, notModified, parseRange, type Validators } from '../conditions.ts';
import { FilesErrors } from '../errors.ts';
import { checkFilePath } from '../paths.ts';
import type { FileRecord } from '../repository.ts';
import { downloadQuery, errorBody, fileJson, fileSchema, pathDoc, pathParams, security } from '../schemas.ts';
import { httpDate, nsToMs } from '../timestamps.ts';
import { blobFileOf } from '../../../store/blob/types.ts';
import { readFirstPiece, sendBlobFile } from '../send.ts';
import { callerOf, closeIfBodyUnread, header, sendJson } from './common.ts';
import type { RouteDeps } from './deps.ts';

const tags = ['files'];

export const downloadSchema = {
  tags,
  security,
  operationId: 'downloadFile',
  summary: 'Download a file (Range, If-None-Match, If-Modified-Since, If-Range), or its metadata with ?metadata',
  description: pathDoc,
  params: pathParams,
  querystring: downloadQuery,
  response: { 200: fileSchema, 400: errorBody, 401: errorBody, 404: errorBody, 416: errorBody },
  openapi: {
    responses: {
      // The content is sent with the file's own mime_type; ?metadata answers the File as JSON.
      200: { 'application/octet-stream': BINARY, 'application/json': null },
      206: { 'application/octet-stream': BINARY },
      304: {},
    },
  } satisfies RouteDocs,
};
export const headSchema = {
  tags,
  security,
  operationId: 'headFile',
  summary: 'The headers of the corresponding GET, without a body',
  description: pathDoc,
  params: pathParams,
};

function validators(file: FileRecord): Validators {
  const lastModified = httpDate(file.updatedNs);
  return { etag: `"${file.sha256}"`, lastModified, lastModifiedSeconds: Math.floor(nsToMs(file.updatedNs) / 1000) };
}

/** GET and HEAD of a file: its content (Range and conditional requests), or its metadata with ?metadata. */
export function registerDownload(raw: ServiceApp, { files, blobs, metrics }: RouteDeps): void {
  async function findOrThrow(request: FastifyRequest, bucketId: string, path: string): Promise<FileRecord> {
    const found = await files.lookup(bucketId, callerOf(request), path);
    if (!found.bucket) throw FilesErrors.bucketNotFound();
    if (!found.file) throw FilesErrors.fileNotFound();
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
    if (
      notModified(
        {
          'if-none-match': header(request, 'if-none-match'),
          'if-modified-since': header(request, 'if-modified-since'),
        },
        v,
      )
    ) {
      return reply.code(304).send();
    }
    let range = parseRange(header(request, 'range'), file.size);
    if (!ifRangeHolds(header(request, 'if-range'), v)) range = { kind: 'full' };
    if (range.kind === 'unsatisfiable') throw FilesErrors.rangeNotSatisfiable(file.size);
    const slice =
      range.kind === 'partial'
        ? { start: range.start, end: range.end }
        : file.size > 0
          ? { start: 0, end: file.size - 1 }
          : null;
    reply.code(range.kind === 'partial' ? 206 : 200).type(file.mimeType);
    reply.header('content-length', String(slice ? slice.end - slice.start + 1 : 0));
    if (range.kind === 'partial') reply.header('content-range', `bytes ${range.start}-${range.end}/${file.size}`);
    if (!withBody) return reply.send();

    const stream = await blobs.get(file.sha256, range.kind === 'partial' ? (slice ?? undefined) : undefined);
    if (stream === null) {
      // Only a replacement swept between the lookup and the read (after the grace period) can
      // do this: then the client retries. The same content missing is data loss: a 500.
      const again = await findOrThrow(request, params.bucket_id, path);
      if (again.sha256 !== file.sha256) throw FilesErrors.fileChanged();
      throw new Error(`blob ${file.sha256} of file ${file.id} is missing`);
    }
    // Counted once the whole answer is out: a download the client leaves early is not.
    if (metrics && slice) {
      const bytes = slice.end - slice.start + 1;
      reply.raw.once('finish', () => metrics.files('out', bytes));
    }
    const blobFile = blobFileOf(stream);
    if (blobFile) {
      // A local file: sent from reused buffers (send.ts). The head is what Fastify would write;
      // the first piece is read before committing to it, so a read error still answers 500.
      let first;
      try {
        first = await readFirstPiece(blobFile);
      } catch (error) {
        (stream as Readable).destroy();
        throw error;
      }
      reply.hijack();
      closeIfBodyUnread(request, reply);
      const res = reply.raw;
      for (const [name, value] of Object.entries(reply.getHeaders()))
        if (value !== undefined) res.setHeader(name, value);
      res.statusCode = reply.statusCode;
      try {
        await sendBlobFile(res, blobFile, first);
      } catch (error) {
        // The head promised the full length: cutting the connection tells the client.
        request.log.warn({ err: error }, 'file download failed after its head was sent');
        res.destroy();
      } finally {
        // Closes the file handle (the stream was never read).
        (stream as Readable).destroy();
      }
      return reply;
    }
    // Returned as a stream: Fastify pipes it with back-pressure and destroys it if the client leaves.
    return reply.send(stream);
  }

  raw.get('/v1/buckets/:bucket_id/files/*', { exposeHeadRoute: false, schema: downloadSchema }, (request, reply) =>
    download(request, reply, true),
  );
  raw.head('/v1/buckets/:bucket_id/files/*', { schema: headSchema }, (request, reply) =>
    download(request, reply, false),
  );
}
