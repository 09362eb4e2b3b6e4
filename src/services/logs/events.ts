import { MAX_BODY_NESTING, jsonTextDeeperThan } from '../../core/json.ts';
import { LogsErrors } from './errors.ts';

/** One event as stored (one JSON line) and streamed (README: events). */
export interface StoredEvent {
  ts: string;
  project_id: string;
  metadata: Record<string, unknown>;
  message: string;
}

function toEvent(value: unknown, where: string, ts: string): StoredEvent {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw LogsErrors.eventNotObject(where);
  const { project_id: projectId, message, ...metadata } = value as Record<string, unknown>;
  if (typeof projectId !== 'string' || projectId === '') throw LogsErrors.eventProjectIdInvalid(where);
  if (typeof message !== 'string') throw LogsErrors.eventMessageNotString(where);
  return { ts, project_id: projectId, metadata, message };
}

function parseJson(text: string, where: string): unknown {
  // Metadata is stored as JSON text again: nothing deeper than a body may be than reaches the serializer.
  if (jsonTextDeeperThan(text, MAX_BODY_NESTING)) throw LogsErrors.eventNestedTooDeep(where, MAX_BODY_NESTING);
  try {
    return JSON.parse(text);
  } catch {
    throw LogsErrors.eventMalformedJson(where);
  }
}

/**
 * Parses an events body, all or nothing (README: events). The encoding is told by the first
 * non-whitespace byte (`{` NDJSON, a digit logframe); `Content-Type: application/x-ndjson` forces
 * NDJSON. Errors name the line (NDJSON) or byte offset (logframe).
 */
export function parseEvents(body: Buffer, contentType: string | undefined, ts: string): StoredEvent[] {
  const text = body.toString('utf8');
  const first = text.trimStart()[0];
  if (first === undefined) return [];
  const ndjson = (contentType ?? '').toLowerCase().startsWith('application/x-ndjson') || first === '{';
  if (ndjson) {
    const events: StoredEvent[] = [];
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = (lines[i] ?? '').trim();
      if (line === '') continue;
      events.push(toEvent(parseJson(line, `line ${i + 1}`), `line ${i + 1}`, ts));
    }
    return events;
  }
  if (!/[0-9]/.test(first)) throw LogsErrors.eventsEncodingUnknown();
  const events: StoredEvent[] = [];
  let at = 0;
  // Skip leading whitespace only before the first frame.
  while (at < body.length && (body[at] === 0x20 || body[at] === 0x0a || body[at] === 0x0d || body[at] === 0x09)) at++;
  while (at < body.length) {
    const where = `frame at byte ${at}`;
    const header = /^(\d{1,10}):(\d{1,10}):/.exec(body.subarray(at, at + 24).toString('latin1'));
    if (!header) throw LogsErrors.frameHeaderExpected(where);
    const metaLength = Number(header[1]);
    const messageLength = Number(header[2]);
    const start = at + header[0].length;
    const end = start + metaLength + messageLength;
    if (end + 1 > body.length) throw LogsErrors.frameTruncated(where);
    if (body[end] !== 0x0a) throw LogsErrors.frameNewlineMissing(where);
    const meta = parseJson(body.subarray(start, start + metaLength).toString('utf8'), where);
    if (typeof meta !== 'object' || meta === null || Array.isArray(meta))
      throw LogsErrors.frameMetadataNotObject(where);
    const message = body.subarray(start + metaLength, end).toString('utf8');
    events.push(toEvent({ ...(meta as Record<string, unknown>), message }, where, ts));
    at = end + 1;
  }
  return events;
}
