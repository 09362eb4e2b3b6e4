// Hop-by-hop headers (src/gateway/README.md: Hop-by-hop headers; RFC 9110, section 7.6.1): what
// a proxy must not forward, for the gateway's and the run service's container traffic alike.

const HOP_BY_HOP: readonly string[] = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];

const NONE: readonly string[] = Object.freeze([]);

export type HeaderMap = Record<string, string | string[] | number | undefined>;

/**
 * Names (lower case) of the hop-by-hop headers present in `headers`, those named in `Connection`
 * included. Keys must be lower case, as in `req.headers` and undici's parsed headers. Returns a
 * shared empty array when there is none, so the common case allocates nothing.
 */
export function hopByHopHeaderNames(headers: Readonly<HeaderMap>): readonly string[] {
  let names: string[] | null = null;
  for (const name of HOP_BY_HOP) {
    if (headers[name] !== undefined) (names ??= []).push(name);
  }
  const connection = headers.connection;
  if (connection !== undefined) {
    const values = Array.isArray(connection) ? connection : [String(connection)];
    for (const value of values) {
      for (const token of value.split(',')) {
        const name = token.trim().toLowerCase();
        if (name !== '' && headers[name] !== undefined && !names?.includes(name)) (names ??= []).push(name);
      }
    }
  }
  return names ?? NONE;
}
