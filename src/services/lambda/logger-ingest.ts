import { LoggerTextIngest } from '../logger-ingest.ts';
import type { LogLine } from './runtime/sandbox.ts';

export type { IngestWarning, LoggerIngestOptions } from '../logger-ingest.ts';

/** The console lines of one invocation of a lambda that names a logger. */
export interface ConsoleLines {
  invocationId: string;
  lambdaId: string;
  /** The lambda's owner: the lines are ingested as this user. */
  owner: string;
  loggerId: string;
  logs: readonly LogLine[];
}

/** Where `Invoker.execute` hands the console lines of a lambda that names a logger (LoggerIngest). */
export interface ConsoleLineSink {
  /** Queues the lines; never throws and never waits. */
  send(lines: ConsoleLines): void;
}

/**
 * The ingest body of one invocation's console lines (README: Invocation history and logs): one
 * line per console line, `<invocation id> <level> <message>\n`; a message with line breaks gives
 * several lines, each with the same prefix.
 */
export function ingestText(invocationId: string, logs: readonly LogLine[]): string {
  let text = '';
  for (const { level, message } of logs)
    for (const line of message.split(/\r?\n/)) text += `${invocationId} ${level} ${line}\n`;
  return text;
}

/**
 * Lambdas' console lines into the logger their lambda names, as the lambda's owner (README:
 * Invocation history and logs), queued off the request path by the shared ingest.
 */
export class LoggerIngest extends LoggerTextIngest implements ConsoleLineSink {
  send(lines: ConsoleLines): void {
    if (lines.logs.length === 0) return;
    this.ingest({
      source: { lambda_id: lines.lambdaId },
      what: 'lambda console lines',
      owner: lines.owner,
      loggerId: lines.loggerId,
      text: ingestText(lines.invocationId, lines.logs),
    });
  }
}
