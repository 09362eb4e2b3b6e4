import type { Readable } from 'node:stream';
import { HttpError, validationError } from '../../core/errors.ts';
import { MiB } from '../../core/app.ts';
import { isJsonObject, parseJson, type JsonObject, type JsonValue } from './query/json.ts';

export const BODY_LIMIT = 10 * MiB;

export const invalidJson = () => new HttpError(400, 'invalid_json', 'Malformed JSON');

/**
 * Reads a whole (non-streaming) JSON body, up to 10 MiB. Null for an empty or blank body.
 * Numbers beyond 2^53 stay exact (docdb.md §1.3).
 */
export async function readJsonBody(stream: Readable): Promise<JsonValue | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > BODY_LIMIT) {
      stream.destroy();
      throw new HttpError(413, 'payload_too_large', `body exceeds ${BODY_LIMIT} bytes`);
    }
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return parseJson(text);
  } catch {
    throw invalidJson();
  }
}

/** A required JSON object body: empty → invalid_json, anything else → validation_error. */
export function requireObject(body: JsonValue | undefined, what = 'body'): JsonObject {
  if (body === undefined) throw invalidJson();
  if (!isJsonObject(body)) throw validationError(`${what} must be a JSON object`);
  return body;
}

/** Field readers for bodies whose unknown fields are ignored (docdb.md §1.2). */
export const fields = {
  string(body: JsonObject, name: string, options: { required?: boolean; nonEmpty?: boolean } = {}): string | undefined {
    const value = body[name];
    if (value === undefined || (value === null && !options.required)) {
      if (options.required) throw validationError(`'${name}' is required`);
      return undefined;
    }
    if (typeof value !== 'string') throw validationError(`'${name}' must be a string`);
    if (options.nonEmpty && value === '') throw validationError(`'${name}' must not be empty`);
    return value;
  },
  integer(body: JsonObject, name: string, fallback: number): number {
    const value = body[name];
    if (value === undefined || value === null) return fallback;
    if (typeof value === 'bigint') return Number(value);
    if (typeof value !== 'number' || !Number.isInteger(value)) throw validationError(`'${name}' must be an integer`);
    return value;
  },
  boolean(body: JsonObject, name: string, fallback: boolean): boolean {
    const value = body[name];
    if (value === undefined || value === null) return fallback;
    if (typeof value !== 'boolean') throw validationError(`'${name}' must be a boolean`);
    return value;
  },
  object(body: JsonObject, name: string): JsonObject | undefined {
    const value = body[name];
    if (value === undefined || value === null) return undefined;
    if (!isJsonObject(value)) throw validationError(`'${name}' must be an object`);
    return value;
  },
};
