// Container output into the repository's logger (service README: Container logs): one
// `podman logs --follow --timestamps` per running container, its lines handed to a sink as they
// come. A follower that ends while its container still runs (the engine restarted it) follows
// again from the last line it saw.
import { spawn, type ChildProcess } from 'node:child_process';

/** Where a repository's output lines go (each ends in a line break); never throws, never waits. */
export type OutputSink = (repository: string, text: string) => void;

/** The engine's answer about a container when its follower ends: whether to follow it again. */
export type StillRunning = (containerId: string) => Promise<boolean>;

interface Follower {
  containerId: string;
  child: ChildProcess | undefined;
  /** Where following starts (`--since`): the caller's, then the last line's. */
  since: string | undefined;
  /** The latest timestamp of a line seen, as the engine wrote it (both streams). */
  lastSeen: string | undefined;
  /** Following again from `lastSeen`: lines at or before it were seen already. */
  resumedFrom: string | undefined;
  stopped: boolean;
}

/** `podman logs --timestamps` puts the time, then a space, before each line. */
const STAMPED = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) (.*)$/;

export interface ContainerLogsOptions {
  binary: string;
  env?: NodeJS.ProcessEnv;
  sink: OutputSink;
  stillRunning: StillRunning;
  /** Wait before following again after a follower ended (default 1 s). */
  retryMs?: number;
}

export class ContainerLogs {
  private readonly followers = new Map<string, Follower>();

  constructor(private readonly options: ContainerLogsOptions) {}

  /** The container a repository's output is followed from, or undefined. */
  following(repository: string): string | undefined {
    return this.followers.get(repository)?.containerId;
  }

  /**
   * Follows `containerId` for `repository`, replacing any earlier follower of it. `since`
   * (RFC 3339) leaves out older lines: a container adopted after a platform restart does not
   * send its whole past again.
   */
  follow(repository: string, containerId: string, since?: string): void {
    const current = this.followers.get(repository);
    if (current?.containerId === containerId && !current.stopped) return;
    this.unfollow(repository);
    const follower: Follower = {
      containerId,
      child: undefined,
      since,
      lastSeen: undefined,
      resumedFrom: undefined,
      stopped: false,
    };
    this.followers.set(repository, follower);
    this.start(repository, follower);
  }

  unfollow(repository: string): void {
    const follower = this.followers.get(repository);
    if (!follower) return;
    follower.stopped = true;
    follower.child?.kill('SIGKILL');
    this.followers.delete(repository);
  }

  close(): void {
    for (const repository of [...this.followers.keys()]) this.unfollow(repository);
  }

  private start(repository: string, follower: Follower): void {
    const args = ['logs', '--follow', '--timestamps'];
    follower.resumedFrom = follower.lastSeen;
    const since = follower.lastSeen ?? follower.since;
    if (since) args.push('--since', since);
    args.push(follower.containerId);
    const child = spawn(this.options.binary, args, {
      env: this.options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    follower.child = child;
    // stdout and stderr are the container's two streams, each split into whole lines.
    for (const stream of [child.stdout, child.stderr]) {
      let partial = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        this.emit(repository, follower, lines);
      });
      stream.on('end', () => {
        if (partial !== '') this.emit(repository, follower, [partial]);
        partial = '';
      });
    }
    child.once('error', () => undefined);
    child.once('close', () => {
      if (follower.stopped || this.followers.get(repository) !== follower) return;
      setTimeout(() => {
        if (follower.stopped || this.followers.get(repository) !== follower) return;
        void this.options.stillRunning(follower.containerId).then(
          (running) => {
            if (follower.stopped || this.followers.get(repository) !== follower) return;
            if (running) this.start(repository, follower);
            else this.followers.delete(repository);
          },
          () => this.followers.delete(repository),
        );
      }, this.options.retryMs ?? 1000).unref();
    });
  }

  private emit(repository: string, follower: Follower, lines: string[]): void {
    let text = '';
    for (const line of lines) {
      const stamped = STAMPED.exec(line);
      // Following again from `--since` repeats what was seen up to it: left out.
      if (stamped) {
        const at = stamped[1]!;
        if (follower.resumedFrom !== undefined && at <= follower.resumedFrom) continue;
        if (follower.lastSeen === undefined || at > follower.lastSeen) follower.lastSeen = at;
        text += `${stamped[2]}\n`;
      } else if (line !== '') {
        text += `${line}\n`;
      }
    }
    if (text !== '') this.options.sink(repository, text);
  }
}
