import { HttpError } from '../../core/errors.ts';

/**
 * Every coded error the files service answers, with its status and message (the README's
 * decisions table gives the cases). Besides these: 400 `validation_error` naming the broken rule,
 * raised with core's `validationError` by the bucket input rules (schemas.ts), the path and list
 * prefix rules (paths.ts) and the route schemas; 401 `unauthorized` from the identity check; and
 * what the app or Fastify answer themselves (404 for an unknown route, 415 for an unparseable
 * Content-Type on an upload).
 */
export const FilesErrors = {
  bucketNotFound: () => new HttpError(404, 'not_found', 'bucket not found'),
  fileNotFound: () => new HttpError(404, 'not_found', 'file not found'),
  /** The caller already owns a bucket of that name. */
  bucketExists: () => new HttpError(409, 'conflict', 'bucket already exists'),
  /** PATCH on a bucket: owners and name never change. */
  bucketUpdateNotImplemented: () => new HttpError(501, 'not_implemented', 'updating a bucket is not implemented'),
  /** Wrong method on a file or list path; `allow` lists the right ones. */
  methodNotAllowed: (method: string, path: string, allow: string) =>
    new HttpError(405, 'method_not_allowed', `method ${method} is not allowed on ${path}`, { allow }),
  /** A range starting at or past the end of the file (or any range of an empty one). */
  rangeNotSatisfiable: (size: number) =>
    new HttpError(416, 'range_not_satisfiable', `range not satisfiable for ${size} bytes`, {
      'content-range': `bytes */${size}`,
    }),
  /** A declared Content-Length, or the bytes received so far, over the upload limit. */
  payloadTooLarge: (maxBytes: number) =>
    new HttpError(413, 'payload_too_large', `upload exceeds the limit of ${maxBytes} bytes`),
  /** The client went away while its upload was being read. */
  clientDisconnected: () => new HttpError(400, 'client_disconnected', 'the client disconnected during the upload'),
  /** The request stream closed before the end of its body. */
  bodyIncomplete: () => new HttpError(400, 'client_disconnected', 'the request ended before its body was complete'),
  /** The uploaded blob was swept before the upload could reference it (a retry succeeds). */
  storageChanged: () => new HttpError(503, 'service_unavailable', 'storage changed during the upload; retry'),
  /** A download's content was replaced and swept between the lookup and the read (a retry succeeds). */
  fileChanged: () => new HttpError(503, 'service_unavailable', 'the file changed while it was being read; retry'),
} as const;
