import { segment, type CallOptions, type Transport } from './transport.ts';
import type { BodyOf, ResultOf, Schemas } from './types.ts';

export type Logger = Schemas['Logger'];
export type LoggerStats = Schemas['LoggerStats'];

/** A structured log event as the events stream answers it. */
export interface LogEvent {
  ts: string;
  project_id: string;
  metadata: Record<string, unknown>;
  message: string;
}

export interface StreamOptions extends CallOptions {
  /** RE2 patterns a line must all match. */
  regex?: string | readonly string[];
  /** Start after this cursor (the `x-logs-cursor` trailer of an earlier stream). */
  after?: string;
}

/** Loggers (`/services/logs`). */
export class LogsApi {
  readonly loggers: LoggerCalls;
  constructor(private readonly transport: Transport) {
    this.loggers = new LoggerCalls(transport);
  }

  logger(id: string): LoggerHandle {
    return new LoggerHandle(this.transport, id);
  }
}

export class LoggerCalls {
  constructor(private readonly transport: Transport) {}

  create(body: BodyOf<'logsCreateLogger'>, options: CallOptions = {}): Promise<Logger> {
    return this.transport.json({ method: 'POST', service: 'logs', path: '/v1/loggers', json: body, ...options });
  }

  list(options: CallOptions = {}): Promise<Logger[]> {
    return this.transport.json({ method: 'GET', service: 'logs', path: '/v1/loggers', ...options });
  }

  get(id: string, options: CallOptions = {}): Promise<Logger> {
    return this.transport.json({ method: 'GET', service: 'logs', path: `/v1/loggers/${segment(id)}`, ...options });
  }

  /** Deletes a logger with its data and keys; its open streams end. */
  delete(id: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty({ method: 'DELETE', service: 'logs', path: `/v1/loggers/${segment(id)}`, ...options });
  }
}

export class LoggerHandle {
  constructor(
    private readonly transport: Transport,
    readonly id: string,
  ) {}

  private get path(): string {
    return `/v1/loggers/${segment(this.id)}`;
  }

  /**
   * Stores raw lines (an array gets a `\n` after each; a string is sent as is) and answers the
   * bytes accepted, once they are durable.
   */
  ingest(lines: string | readonly string[], options: CallOptions = {}): Promise<ResultOf<'logsIngestLines', 200>> {
    const body = typeof lines === 'string' ? lines : lines.map((line) => `${line}\n`).join('');
    return this.transport.json({
      method: 'POST',
      service: 'logs',
      path: `${this.path}/ingest`,
      body,
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      ...options,
    });
  }

  /** The stored lines that match, then the stream ends. */
  lines(options: StreamOptions = {}): AsyncGenerator<string, void, undefined> {
    return this.transport.lines(this.streamRequest('filter', options, false));
  }

  /**
   * The stored lines that match, then each new match as it is stored, until the loop is left,
   * `signal` aborts, or the logger is deleted.
   */
  follow(options: StreamOptions = {}): AsyncGenerator<string, void, undefined> {
    return this.transport.lines(this.streamRequest('filter', options, true));
  }

  /** Structured events; `follow` keeps the stream open for new ones. */
  events(options: StreamOptions & { follow?: boolean } = {}): AsyncGenerator<LogEvent, void, undefined> {
    return this.transport.ndjson<LogEvent>(this.streamRequest('events', options, options.follow ?? false));
  }

  stats(options: CallOptions = {}): Promise<LoggerStats> {
    return this.transport.json({ method: 'GET', service: 'logs', path: `${this.path}/stats`, ...options });
  }

  private streamRequest(stream: 'filter' | 'events', options: StreamOptions, follow: boolean) {
    const regex =
      options.regex === undefined ? undefined : typeof options.regex === 'string' ? [options.regex] : options.regex;
    return {
      method: 'GET',
      service: 'logs',
      path: `${this.path}/${stream}`,
      // `follow` is a presence flag: any value, even `false`, turns it on, so it is left out to mean no.
      query: { regex, after: options.after, follow: follow ? '1' : undefined },
      signal: options.signal,
    };
  }
}
