import type { ServiceApp } from '../../../../core/app.ts';
import { onDrain } from '../../../../core/drain.ts';
import { openSse } from '../../../../core/stream.ts';
import { listQuery, publicErrors, schedulerParams, snapshot } from '../../schemas.ts';
import { formatTime } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';
import { listing, requireScheduler, type ListQuery } from './common.ts';
import { ANONYMOUS } from '../../../../core/openapi.ts';

/** Streams send at most 4 snapshots a second (README: stream coalescing). */
const SNAPSHOT_INTERVAL_MS = 250;

export const taskStreamSchema = {
  tags: ['tasks'],
  operationId: 'streamTasks',
  security: ANONYMOUS,
  summary: 'Server-sent events: a `snapshot` event on connect and after every change (at most 4 per second)',
  params: schedulerParams,
  querystring: listQuery,
  response: {
    200: {
      description: 'text/event-stream of `event: snapshot` frames',
      content: { 'text/event-stream': { schema: snapshot } },
    },
    ...publicErrors,
  },
};

/** `GET /schedulers/:id/tasks/stream`: the task list and health as a snapshot on connect and after every change. */
export function registerTaskStream(app: ServiceApp, deps: RouteDeps): void {
  const { repository, events, now } = deps;
  app.get('/schedulers/:id/tasks/stream', { schema: taskStreamSchema }, async (request, reply) => {
    const schedulerId = request.params.id;
    const query = request.query as ListQuery;
    await requireScheduler(deps, schedulerId);
    const build = async () => {
      const list = await listing(deps, schedulerId, query);
      const counts = await repository.counts(schedulerId, now());
      return {
        scheduler_id: schedulerId,
        generated_at: formatTime(now()),
        ...list,
        health: {
          status: 'ok',
          ready: true,
          scheduled: counts.scheduled,
          inflight: counts.inflight,
          scheduler_id: schedulerId,
        },
      };
    };
    const first = await build();
    reply.hijack();
    // Connection is left to Node (keep-alive by default, `close` once the instance drains).
    const writer = openSse(reply.raw);
    let dirty = false;
    let sending = false;
    let lastSent = 0;
    let timer: NodeJS.Timeout | undefined;
    let expiryTimer: NodeJS.Timeout | undefined;

    const armExpiry = async () => {
      clearTimeout(expiryTimer);
      const next = await repository.nextExpiry(schedulerId, now());
      // Expiry needs no write, so no notification announces it: the stream sets its own timer.
      if (next !== undefined && !writer.closed)
        expiryTimer = setTimeout(() => requestSnapshot(), Math.min(next - now() + 5, 2_147_000_000));
    };
    const send = async () => {
      timer = undefined;
      if (writer.closed || sending) return;
      sending = true;
      dirty = false;
      try {
        if (!(await repository.exists(schedulerId))) return writer.end();
        const data = await build();
        lastSent = Date.now();
        await writer.send({ event: 'snapshot', data });
        await armExpiry();
      } catch {
        writer.end();
      } finally {
        sending = false;
        if (dirty && !writer.closed) requestSnapshot();
      }
    };
    // Coalesced: at most one snapshot per 250 ms, and a change always gets one after it.
    const requestSnapshot = () => {
      dirty = true;
      if (timer || sending || writer.closed) return;
      timer = setTimeout(() => void send(), Math.max(0, lastSent + SNAPSHOT_INTERVAL_MS - Date.now()));
    };
    const unlisten = events.listen(schedulerId, (change) => {
      if (change.deleted) writer.end();
      else requestSnapshot();
    });
    // A draining instance ends the stream cleanly; the client reconnects (EventSource does so by
    // itself) and its first frame is again the whole current snapshot (README: Reconnecting).
    const stopDrain = onDrain(request.raw, () => writer.end());
    writer.signal.addEventListener('abort', () => {
      stopDrain();
      unlisten();
      clearTimeout(timer);
      clearTimeout(expiryTimer);
    });
    lastSent = Date.now();
    try {
      await writer.send({ event: 'snapshot', data: first });
      await armExpiry();
    } catch {
      writer.end();
    }
  });
}
