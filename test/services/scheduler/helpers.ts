import type { LightMyRequestResponse } from 'fastify';
import type { Settings } from '../../../src/config.ts';
import { schedulerService } from '../../../src/services/scheduler/index.ts';
import { startTestService, type TestService } from '../../helpers/service.ts';

export const KEY = 'test-scheduler-key';
export const OTHER_KEY = 'second-key';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface SchedulerHarness {
  service: TestService;
  /** A request with the test key in X-API-Key (`key: null` sends none). */
  call(
    method: Method,
    url: string,
    body?: unknown,
    options?: { key?: string | null; headers?: Record<string, string> },
  ): Promise<LightMyRequestResponse>;
  createScheduler(id: string, displayName?: string): Promise<void>;
  enqueue(
    schedulerId: string,
    body?: Record<string, unknown>,
  ): Promise<{ id: string; future: string; labels: string[] }>;
  close(): Promise<void>;
}

export async function startScheduler(overrides: Partial<Settings> = {}): Promise<SchedulerHarness> {
  const service = await startTestService(schedulerService, { schedulerApiKeys: [KEY, OTHER_KEY], ...overrides });
  const call: SchedulerHarness['call'] = (method, url, body, options = {}) => {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    const key = options.key === undefined ? KEY : options.key;
    if (key !== null) headers['x-api-key'] = key;
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    if (payload !== undefined) headers['content-type'] ??= 'application/json';
    return service.app.inject({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });
  };
  return {
    service,
    call,
    async createScheduler(id, displayName = id) {
      const res = await call('POST', '/schedulers', { id, display_name: displayName });
      if (res.statusCode !== 201) throw new Error(`create scheduler: ${res.statusCode} ${res.body}`);
    },
    async enqueue(schedulerId, body = {}) {
      const res = await call('POST', `/schedulers/${schedulerId}/tasks`, body);
      if (res.statusCode !== 202) throw new Error(`enqueue: ${res.statusCode} ${res.body}`);
      return res.json();
    },
    close: () => service.close(),
  };
}
