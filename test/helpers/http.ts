import http from 'node:http';

export interface HttpResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json<T = unknown>(): T;
}

/**
 * One HTTP/1.1 request over a real socket to 127.0.0.1. Unlike fetch, it can set `Host`, which is
 * how the gateway picks a service.
 */
export function request(
  port: number,
  options: { method?: string; path?: string; host?: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.host) headers.host = options.host;
    if (options.body !== undefined) headers['content-length'] = String(Buffer.byteLength(options.body));
    const req = http.request(
      { host: '127.0.0.1', port, method: options.method ?? 'GET', path: options.path ?? '/', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: <T>() => JSON.parse(text) as T });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('request timed out')));
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

/** A loopback port nothing listens on (for "upstream unreachable" cases). */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
