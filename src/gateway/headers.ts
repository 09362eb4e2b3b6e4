import type { IncomingMessage } from 'node:http';

/**
 * Removes headers from both `req.headers` and `req.rawHeaders`: Fastify and user code read
 * either, so a forged value must be gone from both (DESIGN §6).
 */
export function removeRequestHeaders(req: IncomingMessage, names: readonly string[]): void {
  const lower = names.map((n) => n.toLowerCase());
  // Most requests carry none of them: leave rawHeaders untouched then.
  if (lower.every((name) => req.headers[name] === undefined)) return;
  for (const name of lower) delete req.headers[name];
  const raw = req.rawHeaders;
  let write = 0;
  for (let read = 0; read + 1 < raw.length; read += 2) {
    const name = raw[read] as string;
    if (lower.includes(name.toLowerCase())) continue;
    raw[write] = name;
    raw[write + 1] = raw[read + 1] as string;
    write += 2;
  }
  raw.length = write;
}

/** Sets a header in both `req.headers` and `req.rawHeaders`, replacing any previous value. */
export function setRequestHeader(req: IncomingMessage, name: string, value: string): void {
  removeRequestHeaders(req, [name]);
  req.headers[name.toLowerCase()] = value;
  req.rawHeaders.push(name, value);
}
