/**
 * Every failure the client reports: an error answer of the platform (its envelope
 * `{"error":{"status","code","message"}}`), an error line inside a stream, or a network failure
 * (status 0, code `network_error`).
 */
export class StratusError extends Error {
  override readonly name = 'StratusError';
  /** The HTTP status; 0 when no answer arrived (network failure). */
  readonly status: number;
  /** The platform's error code (`not_found`, `validation_error`, …) or `network_error`. */
  readonly code: string;
  /** The answer's `X-Request-Id`, to quote when reporting a problem. */
  readonly requestId: string | undefined;

  constructor(status: number, code: string, message: string, options: { requestId?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = status;
    this.code = code;
    this.requestId = options.requestId;
  }
}

interface ErrorEnvelope {
  error: { status?: unknown; code?: unknown; message?: unknown };
}

function isErrorEnvelope(value: unknown): value is ErrorEnvelope {
  return (
    typeof value === 'object' &&
    value !== null &&
    'error' in value &&
    typeof (value as { error: unknown }).error === 'object' &&
    (value as { error: unknown }).error !== null
  );
}

/** A StratusError from a parsed error envelope, or null when the value is not one. */
export function errorFromEnvelope(value: unknown, fallbackStatus: number, requestId?: string): StratusError | null {
  if (!isErrorEnvelope(value)) return null;
  const { status, code, message } = value.error;
  return new StratusError(
    typeof status === 'number' ? status : fallbackStatus,
    typeof code === 'string' ? code : 'error',
    typeof message === 'string' ? message : `request failed with status ${fallbackStatus}`,
    { requestId },
  );
}

/** The StratusError for a non-2xx response; reads (and so consumes) its body. */
export async function errorFromResponse(response: Response): Promise<StratusError> {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  const text = await response.text().catch(() => '');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return (
    errorFromEnvelope(parsed, response.status, requestId) ??
    // Not the platform's envelope (a proxy in between, or the registry's OCI form): keep the text.
    new StratusError(response.status, codeForStatus(response.status), text.slice(0, 500) || response.statusText, {
      requestId,
    })
  );
}

function codeForStatus(status: number): string {
  switch (status) {
    case 400:
      return 'bad_request';
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 409:
      return 'conflict';
    case 429:
      return 'too_many_requests';
    default:
      return status >= 500 ? 'server_error' : 'error';
  }
}

/** True for the abort the caller asked for (their signal), which is passed on as is, never wrapped. */
export function isAbortError(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    'name' in error &&
    ((error as { name: unknown }).name === 'AbortError' || (error as { name: unknown }).name === 'TimeoutError')
  );
}
