import { execFile } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { LoadResult } from './lib.ts';
import { debianPeer } from './peers.ts';

const run = promisify(execFile);

export interface WrkOptions {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /**
   * Or a pool of requests sent in turn (random keys), each formatted once in the script's `init`
   * with `headers`; `method` and `body` are then ignored.
   */
  requests?: { method: string; path: string; body?: string }[];
  /** Open connections (default 50). */
  connections?: number;
  /** wrk threads (default 1: on a 2-core machine the other core belongs to the server). */
  threads?: number;
  seconds: number;
}

/** wrk (Debian's), installed when missing; undefined (with a line saying why) when it cannot be had. */
export function wrkPath(): Promise<string | undefined> {
  return debianPeer('wrk', 'wrk');
}

/** "1.23ms" / "850.00us" / "1.02s" → milliseconds. */
function milliseconds(text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!match) return NaN;
  const value = Number(match[1]);
  return { us: value / 1000, ms: value, s: value * 1000, m: value * 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm'];
}

/** Reads wrk's `--latency` report. */
export function parseWrk(name: string, output: string): LoadResult {
  const rate = Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1] ?? NaN);
  const percentile = (p: string) => milliseconds(new RegExp(`^\\s*${p}%\\s+(\\S+)`, 'm').exec(output)?.[1] ?? '');
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  const statuses: Record<string, number> = {};
  if (non2xx) statuses['non-2xx'] = non2xx;
  let errors = 0;
  if (socket) {
    for (const [i, kind] of ['connect', 'read', 'write', 'timeout'].entries()) {
      const n = Number(socket[i + 1]);
      if (n) statuses[kind] = n;
      errors += n;
    }
  }
  if (!Number.isFinite(rate)) throw new Error(`wrk printed no rate:\n${output}`);
  return { name, requestsPerSecond: rate, p50: percentile('50'), p99: percentile('99'), errors, non2xx, statuses };
}

/**
 * One bounded wrk run against loopback. Methods, headers and bodies other than a plain GET go
 * through a Lua script (wrk's own way: `wrk.method`, `wrk.body`, `wrk.headers`).
 */
export async function wrk(wrkBinary: string, name: string, options: WrkOptions): Promise<LoadResult> {
  const host = new URL(options.url).hostname;
  if (host !== '127.0.0.1' && host !== 'localhost' && host !== '[::1]')
    throw new Error(`wrk only targets loopback, not ${host}`);
  const dir = mkdtempSync(join(tmpdir(), 'stratus-wrk-'));
  try {
    const script = join(dir, 'request.lua');
    writeFileSync(
      script,
      options.requests ? poolScript(options.requests, options.headers ?? {}) : fixedScript(options),
    );
    const { stdout } = await run(
      wrkBinary,
      [
        `-t${options.threads ?? 1}`,
        `-c${options.connections ?? 50}`,
        // wrk takes whole seconds.
        `-d${Math.max(1, Math.round(options.seconds))}s`,
        '--timeout',
        '10s',
        '--latency',
        '-s',
        script,
        options.url,
      ],
      { timeout: (options.seconds + 30) * 1000, maxBuffer: 16 * 1024 * 1024 },
    );
    return parseWrk(name, stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One fixed request: wrk's own `wrk.method`, `wrk.body` and `wrk.headers`. */
function fixedScript(options: WrkOptions): string {
  return [
    `wrk.method = ${JSON.stringify(options.method ?? 'GET')}`,
    options.body !== undefined ? `wrk.body = ${JSON.stringify(options.body)}` : '',
    ...Object.entries(options.headers ?? {}).map(
      ([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`,
    ),
  ].join('\n');
}

/** A pool of requests sent in turn, each formatted once in `init` (a Lua `request` function). */
function poolScript(requests: NonNullable<WrkOptions['requests']>, headers: Record<string, string>): string {
  // wrk.format adds its own Host unless the table has "Host" (capitalised) already.
  const fields = Object.entries(headers).map(
    ([k, v]) => `[${JSON.stringify(k.toLowerCase() === 'host' ? 'Host' : k)}] = ${JSON.stringify(v)}`,
  );
  const rows = requests.map(
    (r) =>
      `{${JSON.stringify(r.method)}, ${JSON.stringify(r.path)}, ${r.body === undefined ? 'nil' : JSON.stringify(r.body)}}`,
  );
  return `local pool = {\n${rows.join(',\n')}\n}
local headers = {${fields.join(', ')}}
local formatted = {}
local at = 0
init = function(args)
  for i, r in ipairs(pool) do
    local h = {}
    for k, v in pairs(headers) do h[k] = v end
    formatted[i] = wrk.format(r[1], r[2], h, r[3])
  end
end
request = function()
  at = at % #formatted + 1
  return formatted[at]
end
`;
}
