import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * Removes headers (names given in lower case) from both `req.headers` and `req.rawHeaders`:
 * Fastify and user code read either, so a forged value must be gone from both (root README.md,
 * Addressing: the public port removes client-sent identity headers).
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

/** Sets several headers (`name, value, name, value…`, names in lower case) in one pass. */
export function setRequestHeaders(req: IncomingMessage, ...pairs: string[]): void {
  const headers = req.headers;
  const replaced: string[] = [];
  for (let i = 0; i < pairs.length; i += 2) if (headers[pairs[i]!] !== undefined) replaced.push(pairs[i]!);
  if (replaced.length > 0) removeRequestHeaders(req, replaced);
  for (let i = 0; i < pairs.length; i += 2) headers[pairs[i]!] = pairs[i + 1]!;
  req.rawHeaders.push(...pairs);
}

type WriteHead = ServerResponse['writeHead'];

/**
 * Adds a header to the response when its head is written, unless the handler set one itself.
 * Setting it with `res.setHeader` beforehand would be simpler but pushes every response onto
 * Node's slower path that merges pre-set headers with the ones `writeHead` receives (measured:
 * several microseconds a request); this joins the object the handler passes instead.
 */
export function addHeaderAtWriteHead(res: ServerResponse, name: string, value: string): void {
  const writeHead = res.writeHead as (this: ServerResponse, ...args: unknown[]) => ServerResponse;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]): ServerResponse {
    res.writeHead = writeHead as WriteHead;
    const last = args[args.length - 1];
    if (args.length > 1 && Array.isArray(last)) {
      // Raw header arrays are rare; let Node merge (slow path, but correct).
      if (!this.hasHeader(name)) this.setHeader(name, value);
    } else if (args.length > 1 && typeof last === 'object' && last !== null) {
      const headers = last as Record<string, unknown>;
      if (headers[name] === undefined && !this.hasHeader(name)) headers[name] = value;
    } else if (!this.hasHeader(name)) {
      args.push({ [name]: value });
    }
    return writeHead.apply(this, args);
  } as WriteHead;
}

export { hopByHopHeaderNames, type HeaderMap } from '../core/hop-by-hop.ts';
