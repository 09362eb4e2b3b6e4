import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, resolve, sep } from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { envelope } from '../../core/errors.ts';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * Serves the built web console from `root` for GET and HEAD requests no route took: a file when the path names one; otherwise, for a browser asking for a page, `index.html`
 * (the single-page app routes itself). `/fakeapi/…` keeps its strict 404. Hashed assets are cached
 * for a year; `index.html` is always revalidated so a new build is picked up.
 */
export function consoleFiles(root: string): (request: FastifyRequest, reply: FastifyReply) => Promise<boolean> {
  const base = resolve(root);
  return async (request, reply) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return false;
    let path: string;
    try {
      path = decodeURIComponent((request.url.split('?')[0] ?? '/').replace(/\/+$/, '/'));
    } catch {
      return false;
    }
    if (path.startsWith('/fakeapi/') || path === '/fakeapi') return false;
    const file = resolve(join(base, path));
    // Never outside the build directory, whatever `..` the path holds.
    if (file !== base && !file.startsWith(base + sep)) return false;
    const found = await stat(file).catch(() => null);
    if (found?.isFile()) return send(reply, file, found.size, path.startsWith('/assets/'), request.method === 'HEAD');
    const accept = String(request.headers.accept ?? '');
    if (extname(path) !== '' || !(accept.includes('text/html') || accept.includes('*/*') || accept === ''))
      return false;
    const index = join(base, 'index.html');
    const page = await stat(index).catch(() => null);
    if (!page?.isFile()) {
      await reply
        .code(503)
        .send(
          envelope(
            503,
            'console_not_built',
            'the web console is not built: run `npm run build:console` (npm install does it)',
          ),
        );
      return true;
    }
    return send(reply, index, page.size, false, request.method === 'HEAD');
  };
}

async function send(
  reply: FastifyReply,
  file: string,
  size: number,
  immutable: boolean,
  headOnly: boolean,
): Promise<boolean> {
  reply
    .header('content-type', TYPES[extname(file)] ?? 'application/octet-stream')
    .header('content-length', size)
    .header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
    .header('x-content-type-options', 'nosniff');
  await reply.code(200).send(headOnly ? '' : createReadStream(file));
  return true;
}
