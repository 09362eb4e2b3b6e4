import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import { Agent, request, type Dispatcher } from 'undici';
import type { ServiceName } from '../config.ts';
import type { ServiceApp } from '../core/app.ts';
import { IDENTITY_HEADER, PROJECT_HEADER } from '../core/identity.ts';
import { TRIGGER_HEADER } from '../core/trigger.ts';
import {
  isSafeServicePath,
  SERVICE_PATH_RULE,
  type ServiceAnswer,
  type ServiceCall,
  type ServiceCalls,
} from '../services/context.ts';
import { hopByHopHeaderNames } from './headers.ts';

/**
 * Calls of a platform service by another part of the platform on a user's behalf (a lambda's
 * bindings, issue 22): the request reaches the service as if the gateway had authenticated that
 * user, in process (`inject`, no socket) when the service runs here, else on its remote upstream's
 * internal port, which trusts the identity header as it does the gateway's (README: Remote
 * upstream URL). The caller chooses the identity; nothing the request carries can change it.
 */

/** Request headers a call may not set: the identity, credentials, routing and framing are the platform's. */
const CONTROLLED = new Set([
  IDENTITY_HEADER,
  PROJECT_HEADER,
  TRIGGER_HEADER,
  'host',
  'authorization',
  'cookie',
  'api-key',
  'api-secret',
  'apikey',
  'secret',
  'content-length',
  'x-api-key',
  'proxy-authorization',
  'x-request-id',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-prefix',
]);

/** Thrown when a call cannot be made or its answer cannot be read (never for a 4xx/5xx answer). */
export class ServiceCallFailed extends Error {
  override readonly name = 'ServiceCallFailed';
}

export interface ServiceCallsOptions {
  /** The platform domain: the Host a service is called with is `<service>.<domain>`. */
  domain: string;
  /** The services running in this process (read at call time: the map fills as they are built). */
  apps: ReadonlyMap<ServiceName, ServiceApp>;
  /** The services in other processes: name → their internal port's URL. */
  upstreamUrls: Partial<Record<ServiceName, string>>;
}

export class PlatformServiceCalls implements ServiceCalls {
  private agent: Agent | undefined;

  constructor(private readonly options: ServiceCallsOptions) {}

  async close(): Promise<void> {
    await this.agent?.close();
  }

  async call(service: ServiceName, call: ServiceCall): Promise<ServiceAnswer> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(call.headers ?? {})) {
      const lower = name.toLowerCase();
      if (!CONTROLLED.has(lower)) headers[lower] = value;
    }
    for (const name of hopByHopHeaderNames(headers)) delete headers[name];
    headers.host = `${service}.${this.options.domain}`;
    headers[IDENTITY_HEADER] = JSON.stringify(call.identity);
    if (call.project) headers[PROJECT_HEADER] = call.project;
    if (call.trigger) headers[TRIGGER_HEADER] = JSON.stringify(call.trigger);
    // A path only: never `//host…` or a backslash, which URL parsing would read as another host.
    if (!isSafeServicePath(call.path)) throw new ServiceCallFailed(SERVICE_PATH_RULE);
    const body = call.body === undefined ? undefined : Buffer.from(call.body);
    const app = this.options.apps.get(service);
    if (app) {
      const injected = app.inject({
        method: call.method as 'GET',
        url: call.path,
        headers,
        payload: body,
        // No `signal` here: light-my-request ties it to both streams with addAbortSignal, which
        // costs more than the call itself (measured ~130 µs); the answer is stopped here instead,
        // by closing the injected response (the service sees its 'close', as for a client gone).
        payloadAsStream: true,
      });
      const answer = call.signal ? await abortable(injected, call.signal, service) : await injected;
      const close = () => (answer.raw.res as ServerResponse).destroy();
      return {
        status: answer.statusCode,
        headers: headerPairs(answer.headers),
        body: await readCapped(answer.stream(), call, service, close),
      };
    }
    const base = this.options.upstreamUrls[service];
    if (base === undefined) throw new ServiceCallFailed(`the ${service} service is not running anywhere known`);
    this.agent ??= new Agent({ connections: 64 });
    let answer: Dispatcher.ResponseData;
    try {
      const origin = new URL(base).origin;
      const url = new URL(origin + call.path);
      if (url.origin !== origin) throw new Error('the path leaves the service');
      answer = await request(url, {
        method: call.method as Dispatcher.HttpMethod,
        headers,
        body,
        signal: call.signal,
        dispatcher: this.agent,
      });
    } catch (error) {
      throw new ServiceCallFailed(`the ${service} service could not be reached: ${(error as Error).message}`);
    }
    return {
      status: answer.statusCode,
      headers: headerPairs(answer.headers),
      body: await readCapped(answer.body, call, service),
    };
  }
}

/** Response headers as [name, value] pairs, a repeated header once per value. */
function headerPairs(headers: Record<string, string | string[] | number | undefined>): [string, string][] {
  const pairs: [string, string][] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) pairs.push([name, String(one)]);
  }
  return pairs;
}

const ignore = (): void => {};

/**
 * The injected answer, or ServiceCallFailed as soon as `signal` aborts; an answer that arrives
 * after that is closed at once.
 */
function abortable(
  injected: Promise<LightMyRequestResponse>,
  signal: AbortSignal,
  service: string,
): Promise<LightMyRequestResponse> {
  const cut = () => new ServiceCallFailed(`the call of the ${service} service was cut short`);
  if (signal.aborted) {
    injected.then((late) => (late.raw.res as ServerResponse).destroy(), ignore);
    return Promise.reject(cut());
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      injected.then((late) => (late.raw.res as ServerResponse).destroy(), ignore);
      reject(cut());
    };
    signal.addEventListener('abort', onAbort, { once: true });
    injected.then(
      (answer) => {
        signal.removeEventListener('abort', onAbort);
        resolve(answer);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * The whole body, or a failure past `call.maxBodyBytes`, when `call.onBytes` throws (the error is
 * the call's), or when `call.signal` aborts; `close` (and the stream) are destroyed then. Read with
 * events rather than an async iterator: this is on every binding call's path.
 */
function readCapped(stream: Readable, call: ServiceCall, service: string, close?: () => void): Promise<Buffer> {
  const { maxBodyBytes: max, onBytes, signal } = call;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (error?: Error) => {
      signal?.removeEventListener('abort', abort);
      stream.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      if (error) {
        // A destroyed body may still emit its own abort error (undici's does): nobody waits for it.
        stream.on('error', ignore);
        stream.destroy();
        close?.();
        reject(error);
      } else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    const abort = () => done(new ServiceCallFailed(`the call of the ${service} service was cut short`));
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (max !== undefined && size > max)
        return done(new ServiceCallFailed(`the ${service} service's answer is over ${max} bytes`));
      try {
        onBytes?.(chunk.byteLength);
      } catch (error) {
        return done(error as Error);
      }
      chunks.push(chunk);
    };
    const onEnd = () => done();
    const onError = (error: Error) =>
      done(new ServiceCallFailed(`the ${service} service's answer could not be read: ${error.message}`));
    const onClose = () => done(new ServiceCallFailed(`the ${service} service's answer ended early`));
    if (signal?.aborted) return abort();
    signal?.addEventListener('abort', abort, { once: true });
    stream.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}
