import type { IncomingMessage } from 'node:http';

/**
 * Removes headers (names given in lower case) from both `req.headers` and `req.rawHeaders`:
 * Fastify and user code read either, so a forged value must be gone from both (DESIGN §6).
 */
export function removeRequestHeaders(req: IncomingMessage, names: readonly string[]): void {
  // Most requests carry none of them: leave rawHeaders untouched then (this runs on every request).
  let present = false;
  for (const name of names) {
    if (req.headers[name] !== undefined) {
      present = true;
      delete req.headers[name];
    }
  }
  if (!present) return;
  const raw = req.rawHeaders;
  let write = 0;
  for (let read = 0; read + 1 < raw.length; read += 2) {
    const name = raw[read] as string;
    if (names.includes(name.toLowerCase())) continue;
    raw[write] = name;
    raw[write + 1] = raw[read + 1] as string;
    write += 2;
  }
  raw.length = write;
}

/** Sets a header (name in lower case) in both `req.headers` and `req.rawHeaders`, replacing any previous value. */
export function setRequestHeader(req: IncomingMessage, name: string, value: string): void {
  if (req.headers[name] !== undefined) removeRequestHeaders(req, [name]);
  req.headers[name] = value;
  req.rawHeaders.push(name, value);
}
