import http from 'node:http';
import { createLogsService, type LogsLimits } from '../../../src/services/logs/index.ts';
import { asUser, call, jsonOf, startTestService, type TestService } from '../../helpers/service.ts';

export { call, jsonOf } from '../../helpers/service.ts';
export { assertError, UUID_V4 } from '../../helpers/envelope.ts';

export function startLogs(limits: Partial<LogsLimits> = {}): Promise<TestService> {
  return startTestService(createLogsService(limits));
}

export const as = asUser;

export function withKey(key: { key: string; secret: string }): Record<string, string> {
  return { 'api-key': key.key, 'api-secret': key.secret };
}

export interface LoggerBody {
  id: string;
  name: string;
  owners: string[];
  api_keys: { id: string; name: string; created_at: string }[];
  usage: { bytes: number; lines: number };
  created_at: string;
}

export interface CreatedKey {
  id: string;
  name: string;
  key: string;
  secret: string;
  created_at: string;
}

export async function createLogger(service: TestService, owner: string, name = 'app'): Promise<LoggerBody> {
  return jsonOf<LoggerBody>(await call(service, 'POST', '/v1/loggers', as(owner), { name }), 201);
}

export async function createKey(
  service: TestService,
  loggerId: string,
  owner: string,
  name = 'ci',
): Promise<CreatedKey> {
  return jsonOf<CreatedKey>(await call(service, 'POST', `/v1/loggers/${loggerId}/apiKeys`, as(owner), { name }), 201);
}

/** An open HTTP stream: the text received so far, and a way to wait for some of it. */
export interface OpenStream {
  status: number;
  contentType: string;
  text(): string;
  waitFor(predicate: (text: string) => boolean, timeoutMs?: number): Promise<void>;
  /** Resolves when the server ends the response. */
  readonly ended: Promise<void>;
  /** Stops reading (the server's writes back up), and starts again. */
  pause(): void;
  resume(): void;
  close(): void;
}

export function openStream(port: number, path: string, headers: Record<string, string>): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers }, (res) => {
      let text = '';
      const waiters = new Set<() => void>();
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        for (const wake of waiters) wake();
      });
      res.on('error', () => undefined);
      const ended = new Promise<void>((done) => res.once('end', done));
      resolve({
        ended,
        pause: () => res.pause(),
        resume: () => res.resume(),
        status: res.statusCode ?? 0,
        contentType: String(res.headers['content-type']),
        text: () => text,
        waitFor: (predicate, timeoutMs = 5_000) =>
          new Promise((done, fail) => {
            if (predicate(text)) return done();
            const timer = setTimeout(() => {
              waiters.delete(check);
              fail(new Error(`timed out; received ${JSON.stringify(text.slice(-200))}`));
            }, timeoutMs);
            const check = () => {
              if (!predicate(text)) return;
              clearTimeout(timer);
              waiters.delete(check);
              done();
            };
            waiters.add(check);
          }),
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
  });
}
