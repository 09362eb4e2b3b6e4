// Container output to the logger its repository names (service README: Container logs), as the
// repository's owner, through the shared logger ingest (off the request path, bounded, ordered).
import type { LoggerTextIngest } from '../logger-ingest.ts';
import type { RunRepository } from './repository.ts';

/** A repository's logger is read again after this long, so a change applies within it. */
const LOGGER_TTL_MS = 2000;

interface Destination {
  owner: string;
  loggerId: string | null;
}

/** Hands each repository's output lines to its logger, in order; never throws, never waits. */
export class RepositoryOutput {
  private readonly destinations = new Map<string, { at: number; destination: Destination | null }>();
  /** Per repository, the lookup lines wait for while the destination is read: lines keep their order. */
  private readonly pending = new Map<string, Promise<void>>();

  constructor(
    private readonly repository: Pick<RunRepository, 'findRepository'>,
    private readonly ingest: Pick<LoggerTextIngest, 'ingest'>,
  ) {}

  readonly sink = (name: string, text: string): void => {
    const previous = this.pending.get(name);
    const cached = this.destinations.get(name);
    if (!previous && cached && Date.now() - cached.at < LOGGER_TTL_MS) {
      this.send(name, cached.destination, text);
      return;
    }
    const next = (previous ?? Promise.resolve())
      .then(() => this.destination(name))
      .then(
        (destination) => this.send(name, destination, text),
        () => undefined,
      );
    this.pending.set(name, next);
    void next.then(() => {
      if (this.pending.get(name) === next) this.pending.delete(name);
    });
  };

  private async destination(name: string): Promise<Destination | null> {
    const cached = this.destinations.get(name);
    if (cached && Date.now() - cached.at < LOGGER_TTL_MS) return cached.destination;
    const row = await this.repository.findRepository(name);
    const destination = row ? { owner: row.owner, loggerId: row.loggerId } : null;
    if (this.destinations.size > 10_000) this.destinations.clear();
    this.destinations.set(name, { at: Date.now(), destination });
    return destination;
  }

  private send(name: string, destination: Destination | null, text: string): void {
    if (!destination?.loggerId) return;
    this.ingest.ingest({
      source: { repository: name },
      what: 'container output',
      owner: destination.owner,
      loggerId: destination.loggerId,
      text,
    });
  }
}
