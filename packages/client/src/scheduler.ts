import { segment, type CallOptions, type Transport, type TransportRequest } from './transport.ts';
import type { BodyOf, ResultOf, Schemas } from './types.ts';

export type Scheduler = Schemas['Scheduler'];
export type Reservation = Schemas['Reservation'];
export type TaskSnapshot = Schemas['TaskSnapshot'];
export type NewTask = BodyOf<'schedulerEnqueueTask'>;
export type EnqueuedTask = ResultOf<'schedulerEnqueueTask', 202>;
export type SchedulerChange = BodyOf<'schedulerUpdateScheduler'>;
export type DeadTaskList = Schemas['DeadTaskList'];
export type DeadTask = DeadTaskList['dead'][number];

/** One message of a scheduler's task stream: its event name and its data, parsed. */
export interface SchedulerStreamMessage {
  event: string;
  data: TaskSnapshot;
}

/**
 * Delayed tasks (`/services/scheduler`). Calls carry the client's `schedulerKey` as `X-API-Key`
 * when it has one, else its usual credentials.
 */
export class SchedulerApi {
  readonly schedulers: SchedulerCalls;
  constructor(private readonly transport: Transport) {
    this.schedulers = new SchedulerCalls(transport);
  }

  scheduler(id: string): SchedulerHandle {
    return new SchedulerHandle(this.transport, id);
  }
}

function keyed(transport: Transport, request: TransportRequest): TransportRequest {
  return transport.schedulerKey === undefined
    ? request
    : { ...request, credentials: { 'x-api-key': transport.schedulerKey } };
}

/**
 * The key and the client's platform credentials too: a lambda target needs a platform user beside
 * the scheduler key (the scheduler checks `X-API-Key`, the gateway ignores a bearer it does not know).
 */
function keyedAsUser(transport: Transport, request: TransportRequest): TransportRequest {
  return transport.schedulerKey === undefined
    ? request
    : { ...request, credentials: { ...transport.credentialHeaders(), 'x-api-key': transport.schedulerKey } };
}

export class SchedulerCalls {
  constructor(private readonly transport: Transport) {}

  /** Creates a scheduler; a `target` of `{lambda_id}` needs the client's platform user too (README). */
  async create(body: BodyOf<'schedulerCreateScheduler'>, options: CallOptions = {}): Promise<Scheduler> {
    const result = await this.transport.json<ResultOf<'schedulerCreateScheduler', 201>>(
      keyedAsUser(this.transport, {
        method: 'POST',
        service: 'scheduler',
        path: '/schedulers',
        json: body,
        ...options,
      }),
    );
    return result.scheduler;
  }

  /** One scheduler, with its `target` (a webhook's secret only as `secret_set`) and `retry` policy when set. */
  get(id: string, options: CallOptions = {}): Promise<Scheduler> {
    return this.transport.json(
      keyed(this.transport, { method: 'GET', service: 'scheduler', path: `/schedulers/${segment(id)}`, ...options }),
    );
  }

  /**
   * Changes the given fields (PATCH): `display_name`, `description`, `target` (null removes it),
   * `retry` (null restores the defaults). A `{lambda_id}` target needs the client's platform user too.
   */
  update(id: string, change: SchedulerChange, options: CallOptions = {}): Promise<Scheduler> {
    return this.transport.json(
      keyedAsUser(this.transport, {
        method: 'PATCH',
        service: 'scheduler',
        path: `/schedulers/${segment(id)}`,
        json: change,
        ...options,
      }),
    );
  }

  list(options: CallOptions & { search?: string } = {}): Promise<ResultOf<'schedulerListSchedulers', 200>> {
    return this.transport.json(
      keyed(this.transport, {
        method: 'GET',
        service: 'scheduler',
        path: '/schedulers',
        query: { search: options.search },
        signal: options.signal,
      }),
    );
  }

  delete(id: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty(
      keyed(this.transport, { method: 'DELETE', service: 'scheduler', path: `/schedulers/${segment(id)}`, ...options }),
    );
  }
}

export class SchedulerHandle {
  constructor(
    private readonly transport: Transport,
    readonly id: string,
  ) {}

  private request(request: Omit<TransportRequest, 'service'>): TransportRequest {
    return keyed(this.transport, {
      ...request,
      service: 'scheduler',
      path: `/schedulers/${segment(this.id)}${request.path}`,
    });
  }

  /** Adds a task, due after `delay` (Go duration) or at `future` (RFC 3339), else at once. */
  enqueue(task: NewTask, options: CallOptions = {}): Promise<EnqueuedTask> {
    return this.transport.json(this.request({ method: 'POST', path: '/tasks', json: task, ...options }));
  }

  /**
   * Leases the earliest due task for `worktime` (Go duration, default `30s`), waiting up to that
   * long (30 s at most) for one; null when none came.
   */
  async reserve(options: CallOptions & { worktime?: string } = {}): Promise<Reservation | null> {
    const result = await this.transport.json<Reservation | undefined>(
      this.request({
        method: 'POST',
        path: '/tasks/reserve',
        json: { worktime: options.worktime ?? '30s' },
        signal: options.signal,
      }),
    );
    return result ?? null;
  }

  /** Acknowledges (deletes) a task; with its `leaseId` only while that lease holds. */
  ack(taskId: string, leaseId?: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty(
      this.request({
        method: 'DELETE',
        path: `/tasks/${segment(taskId)}`,
        query: { lease_id: leaseId },
        ...options,
      }),
    );
  }

  /** Extends a live lease by `extension` (Go duration). */
  extend(
    taskId: string,
    leaseId: string,
    extension: string,
    options: CallOptions = {},
  ): Promise<ResultOf<'schedulerExtendLease', 200>> {
    return this.transport.json(
      this.request({
        method: 'POST',
        path: `/tasks/${segment(taskId)}/extend`,
        json: { lease_id: leaseId, extension },
        ...options,
      }),
    );
  }

  /** Tasks whose deliveries all failed, in the order they failed (no payloads); `perPage` 1–500, default 20. */
  dead(options: CallOptions & { page?: number; perPage?: number } = {}): Promise<DeadTaskList> {
    return this.transport.json(
      this.request({
        method: 'GET',
        path: '/dead',
        query: { page: options.page, per_page: options.perPage },
        signal: options.signal,
      }),
    );
  }

  /** Puts a dead task back, due now with no attempts; 409 when a task of that id exists. */
  retryDead(taskId: string, options: CallOptions = {}): Promise<ResultOf<'schedulerRetryDeadTask', 200>> {
    return this.transport.json(this.request({ method: 'POST', path: `/dead/${segment(taskId)}/retry`, ...options }));
  }

  /** Discards a dead task. */
  discardDead(taskId: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty(this.request({ method: 'DELETE', path: `/dead/${segment(taskId)}`, ...options }));
  }

  /**
   * The scheduler's tasks and health as Server-Sent Events: a snapshot now and after each change.
   * Leaving the loop or aborting `signal` closes the stream.
   */
  async *stream(
    options: CallOptions & { scheduledPerPage?: number; inflightPerPage?: number } = {},
  ): AsyncGenerator<SchedulerStreamMessage, void, undefined> {
    const { scheduledPerPage, inflightPerPage, ...call } = options;
    const query = { scheduled_per_page: scheduledPerPage, inflight_per_page: inflightPerPage };
    for await (const message of this.transport.events(
      this.request({ method: 'GET', path: '/tasks/stream', query, ...call }),
    ))
      yield { event: message.event, data: JSON.parse(message.data) as TaskSnapshot };
  }
}
