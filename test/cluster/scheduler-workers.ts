import http from 'node:http';
import { send, sleep, type Cluster, type FailedWrite, type TaskConsumer } from './cluster.ts';

/** One task handed to a worker by a reserve answered 200. */
export interface Delivery {
  id: string;
  leaseId: string;
  /** When the reserve was sent and answered (Date.now()): the claim happened in between. */
  sentAt: number;
  answeredAt: number;
  /** The lease's end as answered (whole seconds, truncated: at most this much earlier than the real end). */
  leaseExpiresAt: number;
  /** Whether the acknowledge (DELETE with the lease id) was answered 2xx. */
  acked: boolean;
}

export interface Workers extends TaskConsumer {
  readonly deliveries: readonly Delivery[];
  /** Reserves and acknowledges not answered 2xx (a reserve's 204 counts as answered). */
  readonly failed: readonly FailedWrite[];
  /** Requests sent (reserves and acknowledges). */
  sent(): number;
  /**
   * Deliveries that broke the lease: a task handed out again before its earlier lease had surely
   * ended, or after an acknowledge of it had succeeded. A redelivery after a lease ran out (a
   * worker whose reserve answer or acknowledge was lost with an instance) is at-least-once and fine.
   */
  violations(): string[];
  /** Stops reserving and waits for the reserves in flight (each waits at most the worktime). */
  stop(): Promise<void>;
}

/**
 * `concurrency` workers that reserve tasks of `scheduler` through the balancer under a lease of
 * `worktimeMs` and acknowledge each at once with its lease id, recording every delivery.
 */
export function startWorkers(options: {
  cluster: Cluster;
  scheduler: string;
  auth: Record<string, string>;
  concurrency: number;
  worktimeMs: number;
}): Workers {
  const { cluster, scheduler, auth, worktimeMs } = options;
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const deliveries: Delivery[] = [];
  const delivered = new Set<string>();
  const failed: FailedWrite[] = [];
  let sent = 0;
  let stopping = false;
  const request = async (what: string, method: string, path: string, body?: string) => {
    const startedAt = Date.now();
    sent++;
    try {
      const res = await send(cluster.balancerPort, {
        method,
        path,
        host: 'scheduler.localhost',
        headers: body ? { ...auth, 'content-type': 'application/json' } : auth,
        ...(body ? { body } : {}),
        agent,
        timeoutMs: worktimeMs + 10_000,
      });
      if (res.status >= 200 && res.status < 300) return res;
      failed.push({ key: what, reason: `${res.status} ${res.text.slice(0, 200)}`, startedAt, endedAt: Date.now() });
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      failed.push({ key: what, reason, startedAt, endedAt: Date.now() });
    }
    return undefined;
  };
  const worker = async () => {
    while (!stopping) {
      const sentAt = Date.now();
      const reserved = await request(
        'reserve',
        'POST',
        `/schedulers/${scheduler}/tasks/reserve`,
        JSON.stringify({ worktime: `${worktimeMs}ms` }),
      );
      const answeredAt = Date.now();
      if (!reserved) {
        await sleep(50); // an instance going away: do not spin on its errors
        continue;
      }
      if (reserved.status === 204) continue; // nothing came due within the wait
      const task = reserved.json<{ id: string; lease_id: string; lease_expires_at: string }>();
      const delivery: Delivery = {
        id: task.id,
        leaseId: task.lease_id,
        sentAt,
        answeredAt,
        leaseExpiresAt: Date.parse(task.lease_expires_at),
        acked: false,
      };
      deliveries.push(delivery);
      delivered.add(task.id);
      const ack = await request(
        `ack ${task.id}`,
        'DELETE',
        `/schedulers/${scheduler}/tasks/${encodeURIComponent(task.id)}?lease_id=${encodeURIComponent(task.lease_id)}`,
      );
      delivery.acked = ack !== undefined;
    }
  };
  const running = Array.from({ length: options.concurrency }, worker);
  return {
    deliveries,
    failed,
    sent: () => sent,
    async undelivered(ids) {
      // Workers may be behind the enqueues, and a task whose reserve answer was lost (its instance
      // killed) is leased to nobody until its lease ends, then handed out again: wait while tasks
      // keep coming, until none has for longer than a lease (and at most two minutes).
      const deadline = Date.now() + 120_000;
      let left = ids.filter((id) => !delivered.has(id));
      let progressAt = Date.now();
      while (left.length > 0 && Date.now() - progressAt < worktimeMs + 5_000 && Date.now() < deadline) {
        await sleep(100);
        const before = left.length;
        left = left.filter((id) => !delivered.has(id));
        if (left.length < before) progressAt = Date.now();
      }
      return left;
    },
    violations() {
      const byTask = new Map<string, Delivery[]>();
      for (const d of deliveries) byTask.set(d.id, [...(byTask.get(d.id) ?? []), d]);
      const problems: string[] = [];
      for (const [id, list] of byTask) {
        list.sort((a, b) => a.answeredAt - b.answeredAt);
        for (let i = 1; i < list.length; i++) {
          const earlier = list[i - 1]!;
          const later = list[i]!;
          // Both bounds are at or before the earlier lease's real end: the claim happened after
          // `sentAt` and the answer truncates the end to whole seconds.
          const surelyLeasedUntil = Math.max(earlier.sentAt + worktimeMs, earlier.leaseExpiresAt);
          if (earlier.acked)
            problems.push(`${id} handed out again at ${later.answeredAt} after its acknowledge succeeded`);
          else if (later.answeredAt < surelyLeasedUntil)
            problems.push(
              `${id} handed out again at ${later.answeredAt}, under the lease ${earlier.leaseId} until ${surelyLeasedUntil}`,
            );
        }
      }
      return problems;
    },
    async stop() {
      stopping = true;
      await Promise.all(running);
      agent.destroy();
    },
  };
}
