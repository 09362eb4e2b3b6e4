import type { FastifyBaseLogger } from 'fastify';
import { coalesced } from './coalesce.ts';
import type { ParentFollower } from './follower.ts';
import type { KvRepository } from './repository.ts';

/** How often the holder renews the lease, and how long a lease lasts without renewal. */
const RENEW_MS = 2_000;
const TTL_MS = 10_000;

export interface ParentLink {
  connected: boolean;
  ready: boolean;
}

/**
 * Several instances serving one replica node (on one PostgreSQL database) must not all follow the
 * parent: each would log every command again, and children would see them twice and out of order.
 * The instances share a lease (`kv_follower`): its holder runs the follower and records whether it
 * is connected and ready; the others read that for their health answers and take over when the
 * lease runs out (a holder that stops gives it up at once). With one instance (SQLite) the lease
 * is always its own.
 */
export class FollowerLease {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly repository: KvRepository,
    private readonly holder: string,
    private readonly follower: ParentFollower,
    private readonly logger: FastifyBaseLogger,
    /** True where this process is the database's only user: a lease left by a crash is taken at once. */
    private readonly soleInstance: boolean,
  ) {
    follower.onChange = () => void this.tick();
  }

  start(): Promise<void> {
    const first = this.tick();
    this.timer = setInterval(() => void this.tick(), RENEW_MS);
    this.timer.unref();
    return first;
  }

  /** True on the instance that holds the lease and follows the parent. */
  get following(): boolean {
    return this.follower.running;
  }

  /** The parent link as this node knows it: the local follower's, or the holder's record. */
  async link(): Promise<ParentLink> {
    if (this.follower.running) return { connected: this.follower.connected, ready: this.follower.ready };
    const row = await this.repository.lease();
    const live = row.holder !== '' && row.expiresAt > Date.now();
    return { connected: live && row.connected, ready: live && row.ready };
  }

  /** Renews now (coalesced with a renewal in progress); a stopped instance never claims again. */
  private tick(): Promise<void> {
    return this.stopped ? Promise.resolve() : this.renew.run();
  }

  private readonly renew = coalesced(async () => {
    if (this.stopped) return;
    const now = Date.now();
    try {
      const mine = await this.repository.claimLease(
        this.holder,
        this.soleInstance ? Number.MAX_SAFE_INTEGER : now,
        now + TTL_MS,
        {
          connected: this.follower.connected,
          ready: this.follower.ready,
        },
      );
      if (this.stopped) return;
      if (mine && !this.follower.running) {
        this.logger.info('kv follower lease taken: this instance follows the parent');
        this.follower.start();
      } else if (!mine && this.follower.running) {
        this.logger.info('kv follower lease held by another instance; not following here');
        this.follower.stop();
      }
    } catch (error) {
      this.logger.warn({ err: error }, 'kv follower lease not renewed');
    }
  });

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    const wasRunning = this.follower.running;
    this.follower.stop();
    await this.renew.idle();
    if (wasRunning) await this.repository.releaseLease(this.holder).catch(() => {});
  }
}
