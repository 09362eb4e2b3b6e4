import type { CallOptions, Transport } from './transport.ts';
import type { BodyOf, ResultOf } from './types.ts';

/** A repository's desired and actual state and its history (run README: Console API). */
export type RepositoryState = ResultOf<'runGetConsole', 200>;
/** What the runtime driver reports it runs (`state` `unknown` when it cannot tell, as the recording driver). */
export type ActualState = NonNullable<RepositoryState['actual']>;
/** The caller's repositories, and the runtime driver's name. */
export type RepositoryList = ResultOf<'runListRepositories', 200>;
export type RepositorySummary = RepositoryList['repositories'][number];
export type EnvVar = BodyOf<'runReplaceEnvironment'>['env'][number];
export type Volume = BodyOf<'runReplaceVolumes'>['volumes'][number];
/** What to run: a tag, or a manifest digest. */
export type Target = { reference: string } | { digest: string };

/**
 * Container repositories (`/services/run`): images are pushed with container tools (the registry
 * at `<url>/v2/`, the API key as credentials); this is the console API that starts, stops and
 * rolls them back and sets their environment and volumes.
 */
export class RunApi {
  constructor(private readonly transport: Transport) {}

  /** The caller's repositories by name, each with its tags, desired and actual state and host. */
  repositories(options: CallOptions = {}): Promise<RepositoryList> {
    return this.transport.json({ method: 'GET', service: 'run', path: '/api/console/repositories', ...options });
  }

  repository(name: string): RepositoryHandle {
    return new RepositoryHandle(this.transport, name);
  }
}

export class RepositoryHandle {
  constructor(
    private readonly transport: Transport,
    readonly name: string,
  ) {}

  private change(action: string, body: Record<string, unknown>, options: CallOptions): Promise<RepositoryState> {
    return this.transport.json({
      method: action === 'env' || action === 'volumes' || action === 'logger' ? 'PUT' : 'POST',
      service: 'run',
      path: `/api/console/${action}`,
      json: { repository: this.name, ...body },
      ...options,
    });
  }

  /** Desired state, what the driver last applied (`actual`), and the history. */
  get(options: CallOptions = {}): Promise<RepositoryState> {
    return this.transport.json({
      method: 'GET',
      service: 'run',
      path: '/api/console',
      query: { repository: this.name },
      ...options,
    });
  }

  /** Runs a tag or digest (the tag resolves to the digest it points at now). */
  start(target: Target, options: CallOptions = {}): Promise<RepositoryState> {
    return this.change('start', target, options);
  }

  stop(options: CallOptions = {}): Promise<RepositoryState> {
    return this.change('stop', {}, options);
  }

  /** Runs an earlier tag or digest again, recorded as a rollback. */
  rollBack(target: Target, options: CallOptions = {}): Promise<RepositoryState> {
    return this.change('rollback', target, options);
  }

  /** Replaces the environment (applied at once when the repository runs). */
  setEnv(env: readonly EnvVar[], options: CallOptions = {}): Promise<RepositoryState> {
    return this.change('env', { env }, options);
  }

  /** Replaces the volumes (applied at once when the repository runs). */
  setVolumes(volumes: readonly Volume[], options: CallOptions = {}): Promise<RepositoryState> {
    return this.change('volumes', { volumes }, options);
  }

  /** Sends the container's output to a logger of yours (checked: 400 otherwise), or nowhere (`null`). */
  setLogger(loggerId: string | null, options: CallOptions = {}): Promise<RepositoryState> {
    return this.change('logger', { logger_id: loggerId }, options);
  }
}
