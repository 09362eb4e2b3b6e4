import { randomUUID } from 'node:crypto';

/** A UUID v4 from the platform's cryptographic random source, optionally prefixed (`sched-…`). */
export function newId(prefix?: string): string {
  return prefix ? `${prefix}-${randomUUID()}` : randomUUID();
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

export function isUuidV4(value: string): boolean {
  return UUID_V4.test(value);
}

/** RFC 3339 UTC with second precision, as the references show (`2026-06-21T10:00:00Z`). */
export function rfc3339(date: Date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
