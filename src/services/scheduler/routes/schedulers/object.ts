import { SchedulerErrors } from '../../errors.ts';
import type { SchedulerRow } from '../../repository.ts';
import { ID_REGEX } from '../../schemas.ts';
import { retryOf, targetObject } from '../../target.ts';
import { formatTime } from '../../time.ts';
import type { RouteDeps } from '../deps.ts';

/** The scheduler object of the API, from its row and counts. */
export function schedulerObject(row: SchedulerRow) {
  const total = Number(row.total);
  const inflight = Number(row.inflight);
  return {
    id: row.id,
    display_name: row.display_name,
    ready: true,
    scheduled: total - inflight,
    inflight,
    created_at: formatTime(Number(row.created_ms)),
    updated_at: formatTime(Number(row.updated_ms)),
    // Only on schedulers that deliver or have a policy, so the contract's objects keep their shape.
    ...(row.target !== null ? { target: targetObject(row.target) } : {}),
    ...(row.target !== null || row.retry !== null ? { retry: retryOf(row.retry) } : {}),
  };
}

/** The scheduler's row with its counts; 404 when there is none (or the id names none). */
export async function loadScheduler({ repository, now }: RouteDeps, id: string): Promise<SchedulerRow> {
  const row = ID_REGEX.test(id) ? await repository.getScheduler(id, now()) : undefined;
  if (!row) throw SchedulerErrors.schedulerNotFound(id);
  return row;
}
