/**
 * Every error a service answers travels as an HttpError and leaves as the envelope
 * `{"error":{"status":N,"code":"…","message":"…"}}` (README: Addressing).
 */
export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  /** Extra headers for the error response (for example `Allow` on a 405). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: number, code: string, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

export interface ErrorEnvelope {
  error: { status: number; code: string; message: string };
}

export function envelope(status: number, code: string, message: string): ErrorEnvelope {
  return { error: { status, code, message } };
}

export const badRequest = (code: string, message: string) => new HttpError(400, code, message);
export const validationError = (message: string) => new HttpError(400, 'validation_error', message);
export const unauthorized = (message = 'authentication required') => new HttpError(401, 'unauthorized', message);
export const forbidden = (message = 'forbidden') => new HttpError(403, 'forbidden', message);
export const notFound = (message = 'not found') => new HttpError(404, 'not_found', message);
export const conflict = (message: string) => new HttpError(409, 'conflict', message);
export const serviceUnavailable = (message: string) => new HttpError(503, 'service_unavailable', message);

/** Default codes for statuses raised without one (by Fastify or a plugin). */
export function defaultCode(status: number): string {
  switch (status) {
    case 400:
      return 'bad_request';
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 405:
      return 'method_not_allowed';
    case 406:
      return 'not_acceptable';
    case 409:
      return 'conflict';
    case 411:
      return 'length_required';
    case 413:
      return 'payload_too_large';
    case 414:
      return 'uri_too_long';
    case 415:
      return 'unsupported_media_type';
    case 416:
      return 'range_not_satisfiable';
    case 429:
      return 'too_many_requests';
    case 501:
      return 'not_implemented';
    case 502:
      return 'bad_gateway';
    case 503:
      return 'service_unavailable';
    case 504:
      return 'gateway_timeout';
    default:
      return status >= 500 ? 'internal_error' : 'bad_request';
  }
}
