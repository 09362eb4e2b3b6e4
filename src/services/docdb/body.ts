import type { Readable } from 'node:stream';
import { MiB } from '../../core/app.ts';
import {
  MAX_NESTING,
  isJsonObject,
  nestedDeeperThan,
  parseJson,
  type JsonObject,
  type JsonValue,
} from '../../core/json.ts';
import { DocdbErrors } from './errors.ts';

export const BODY_LIMIT = 10 * MiB;

/**
 * Reads a whole (non-streaming) JSON body, up to 10 MiB. Null for an empty or blank body.
 * Numbers beyond 2^53 stay exact (README: Responses).
 */
export async function readJsonBody(stream: Readable): Promise<JsonValue | undefined> {
  return parseBody(await readBodyText(stream));
}

/**
 * A whole (non-streaming) body as text, up to 10 MiB: what `parseBody` reads. Read with listeners,
 * not an async iterator: a small body (a find's) then costs a few microseconds less per request.
 * A body that ends early (the client went away) rejects, as the iterator did.
 */
export function readBodyText(stream: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    if (stream.readableEnded) return resolve('');
    if (stream.destroyed) return reject(new Error('request body closed before its end'));
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= BODY_LIMIT) return void chunks.push(chunk);
      settle();
      discardRest(stream);
      reject(DocdbErrors.bodyTooLarge(BODY_LIMIT));
    };
    const onEnd = () => {
      settle();
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, size).toString('utf8'));
    };
    const onError = (error: Error) => {
      settle();
      reject(error);
    };
    const onClose = () => onError(new Error('request body closed before its end'));
    const settle = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}

/** A body's JSON value; undefined for an empty or blank body. */
export function parseBody(text: string): JsonValue | undefined {
  if (text.trim() === '') return undefined;
  let value: JsonValue;
  try {
    value = parseJson(text);
  } catch {
    throw DocdbErrors.malformedJson();
  }
  // A body wraps document-like values (a patch, pivots, defaults) one level down.
  if (nestedDeeperThan(value, MAX_NESTING + 1)) throw DocdbErrors.bodyTooDeep(MAX_NESTING + 1);
  return value;
}

/**
 * The chunks of a request body. Leaving the loop early does not destroy the stream: destroying a
 * request destroys its socket, and the answer written just before would be cut off (the client
 * sees a reset instead of the 413 or the error line). Call `discardRest` instead.
 */
export function readChunks(stream: Readable): AsyncIterable<Buffer> {
  return { [Symbol.asyncIterator]: () => stream.iterator({ destroyOnReturn: false }) as AsyncIterator<Buffer> };
}

/** Reads and drops what is left of a request body, so the answer reaches the client intact. */
export function discardRest(stream: Readable): void {
  stream.resume();
}

/** A required JSON object body: empty → invalid_json, anything else → validation_error. */
export function requireObject(body: JsonValue | undefined, what = 'body'): JsonObject {
  if (body === undefined) throw DocdbErrors.malformedJson();
  if (!isJsonObject(body)) throw DocdbErrors.notAnObject(what);
  return body;
}

/** Field readers for bodies whose unknown fields are ignored (README: Requests). */
export const fields = {
  string(body: JsonObject, name: string, options: { required?: boolean; nonEmpty?: boolean } = {}): string | undefined {
    const value = body[name];
    if (value === undefined || (value === null && !options.required)) {
      if (options.required) throw DocdbErrors.fieldRequired(name);
      return undefined;
    }
    if (typeof value !== 'string') throw DocdbErrors.fieldType(name, 'a string');
    if (options.nonEmpty && value === '') throw DocdbErrors.fieldEmpty(name);
    return value;
  },
  integer(body: JsonObject, name: string, fallback: number): number {
    const value = body[name];
    if (value === undefined || value === null) return fallback;
    if (typeof value === 'bigint') return Number(value);
    if (typeof value !== 'number' || !Number.isInteger(value)) throw DocdbErrors.fieldType(name, 'an integer');
    return value;
  },
  boolean(body: JsonObject, name: string, fallback: boolean): boolean {
    const value = body[name];
    if (value === undefined || value === null) return fallback;
    if (typeof value !== 'boolean') throw DocdbErrors.fieldType(name, 'a boolean');
    return value;
  },
  object(body: JsonObject, name: string): JsonObject | undefined {
    const value = body[name];
    if (value === undefined || value === null) return undefined;
    if (!isJsonObject(value)) throw DocdbErrors.fieldType(name, 'an object');
    return value;
  },
};
