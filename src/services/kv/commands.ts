import { isJsonObject, parseJson, stringifyJson, type JsonValue } from '../../core/json.ts';

/**
 * A change as it travels down the replication tree: one NDJSON line of `/v1/replicate`.
 * `value` is kept as exact JSON text, so integers beyond 2^53 cross every hop unchanged.
 * `project` is '' for the default project and is then left out of the line.
 */
export type Command =
  | {
      type: 'SET';
      project: string;
      collection: string;
      seq: number;
      key: string;
      value: string;
      version: number;
      timestamp: number;
    }
  | {
      type: 'DELETE';
      project: string;
      collection: string;
      seq: number;
      key: string;
      version: number;
      timestamp: number;
    }
  | { type: 'CREATE_COLLECTION'; project: string; collection: string; timestamp: number }
  | { type: 'DROP_COLLECTION'; project: string; collection: string; timestamp: number };

/** Stream-only markers (not stored in the log). */
export type Marker =
  | { type: 'BASELINE_BEGIN' | 'BASELINE_END'; project: string; collection: string; snapshotSeq: number }
  | { type: 'PING'; timestamp: number };

export type StreamLine = Command | Marker;

/** Integer Unix seconds, the replication `timestamp`. */
export function unixSeconds(ms = Date.now()): number {
  return Math.floor(ms / 1000);
}

/** RFC 3339 UTC of a replication timestamp: `updatedAt` (second precision everywhere, so replicas agree). */
export function isoSeconds(timestamp: number): string {
  // toISOString always ends in `.sssZ`: cut the milliseconds without a regular expression.
  return `${new Date(timestamp * 1000).toISOString().slice(0, -5)}Z`;
}

/** A key's answer (a GET, an item of a list): `value` is exact JSON text, put in as it is. */
export function entryJson(e: { key: string; value: string; version: number; updatedAt: number }): string {
  return `{"key":${JSON.stringify(e.key)},"value":${e.value},"version":${e.version},"updatedAt":"${isoSeconds(e.updatedAt)}"}`;
}

const q = JSON.stringify;

/** The NDJSON line of a command or marker, with its newline. */
export function encodeLine(line: StreamLine): string {
  const project = 'project' in line && line.project !== '' ? `,"project":${q(line.project)}` : '';
  switch (line.type) {
    case 'SET':
      return `{"type":"SET","collection":${q(line.collection)}${project},"seq":${line.seq},"key":${q(line.key)},"value":${line.value},"version":${line.version},"timestamp":${line.timestamp}}\n`;
    case 'DELETE':
      return `{"type":"DELETE","collection":${q(line.collection)}${project},"seq":${line.seq},"key":${q(line.key)},"version":${line.version},"timestamp":${line.timestamp}}\n`;
    case 'CREATE_COLLECTION':
    case 'DROP_COLLECTION':
      return `{"type":"${line.type}","collection":${q(line.collection)}${project},"timestamp":${line.timestamp}}\n`;
    case 'BASELINE_BEGIN':
    case 'BASELINE_END':
      return `{"type":"${line.type}","collection":${q(line.collection)}${project},"snapshotSeq":${line.snapshotSeq}}\n`;
    case 'PING':
      return `{"type":"PING","timestamp":${line.timestamp}}\n`;
  }
}

export class BadLineError extends Error {}

function field<T>(
  object: Record<string, JsonValue>,
  name: string,
  check: (v: JsonValue | undefined) => v is T & JsonValue,
): T {
  const value = object[name];
  if (!check(value)) throw new BadLineError(`replication line without a valid ${name}`);
  return value;
}
const isString = (v: JsonValue | undefined): v is string => typeof v === 'string';
const isCount = (v: JsonValue | undefined): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** Parses one line from a parent; throws BadLineError for anything malformed. */
export function decodeLine(text: string): StreamLine {
  let parsed: JsonValue;
  try {
    parsed = parseJson(text);
  } catch {
    throw new BadLineError('replication line is not JSON');
  }
  if (!isJsonObject(parsed)) throw new BadLineError('replication line is not an object');
  const type = field(parsed, 'type', isString);
  if (type === 'PING') return { type, timestamp: field(parsed, 'timestamp', isCount) };
  const collection = field(parsed, 'collection', isString);
  const project = parsed.project === undefined ? '' : field(parsed, 'project', isString);
  switch (type) {
    case 'SET': {
      if (!('value' in parsed)) throw new BadLineError('SET without a value');
      const value = stringifyJson(parsed.value as JsonValue);
      return {
        type,
        project,
        collection,
        seq: field(parsed, 'seq', isCount),
        key: field(parsed, 'key', isString),
        value,
        version: field(parsed, 'version', isCount),
        timestamp: field(parsed, 'timestamp', isCount),
      };
    }
    case 'DELETE':
      return {
        type,
        project,
        collection,
        seq: field(parsed, 'seq', isCount),
        key: field(parsed, 'key', isString),
        version: field(parsed, 'version', isCount),
        timestamp: field(parsed, 'timestamp', isCount),
      };
    case 'CREATE_COLLECTION':
    case 'DROP_COLLECTION':
      return { type, project, collection, timestamp: field(parsed, 'timestamp', isCount) };
    case 'BASELINE_BEGIN':
    case 'BASELINE_END':
      return { type, project, collection, snapshotSeq: field(parsed, 'snapshotSeq', isCount) };
    default:
      throw new BadLineError(`unknown replication line type ${JSON.stringify(type)}`);
  }
}
