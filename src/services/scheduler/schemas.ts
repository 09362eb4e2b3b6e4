import { Type } from 'typebox';
import { errorBody } from '../../core/schemas.ts';
import { named } from '../../core/openapi.ts';

export const ID_PATTERN = '^[A-Za-z0-9._-]{1,128}$';
export const ID_REGEX = new RegExp(ID_PATTERN);

const clientId = (what: string) =>
  Type.String({
    minLength: 1,
    maxLength: 128,
    pattern: ID_PATTERN,
    description: `${what} id: 1–128 characters from A–Z a–z 0–9 . _ -`,
  });

const duration = (description: string) =>
  Type.String({ description: `${description} (Go duration: 300ms, 1.5h, 2h45m)` });

/**
 * A target as given (README: Delivery): `{"lambda_id"}` (a lambda the calling platform user can
 * run) or `{"url","secret"}` (a webhook). One object with optional fields rather than a union, so
 * that a bad field gets its own message; the handler checks that exactly one kind is given.
 */
const targetInput = Type.Union(
  [
    Type.Object(
      {
        lambda_id: Type.Optional(
          Type.String({ minLength: 1, maxLength: 256, description: 'A lambda the calling user can run' }),
        ),
        url: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: 2048,
            description: 'Webhook: the http(s) URL the payload is POSTed to',
          }),
        ),
        secret: Type.Optional(
          Type.String({
            minLength: 16,
            maxLength: 1024,
            description: 'Webhook: the HMAC-SHA256 signing secret (16–1024 characters); write-only, never returned',
          }),
        ),
      },
      { additionalProperties: false },
    ),
    Type.Null(),
  ],
  {
    description:
      'Where the platform delivers due tasks: {"lambda_id"} (needs a signed-in platform user who can run it, beside the key) or {"url","secret"}; null removes it. Unchanged when absent.',
  },
);
const retryInput = Type.Union(
  [
    Type.Object(
      {
        max_attempts: Type.Optional(
          Type.Integer({ minimum: 1, maximum: 100, description: 'Deliveries before the task is dead (default 5)' }),
        ),
        base: Type.Optional(duration('First backoff, positive (default 5s)')),
        factor: Type.Optional(
          Type.Number({ minimum: 1, maximum: 10, description: 'Backoff multiplier per attempt (default 2)' }),
        ),
        cap: Type.Optional(duration('Longest backoff, at least base, at most 24h (default 15m)')),
      },
      { additionalProperties: false },
    ),
    Type.Null(),
  ],
  {
    description:
      'Retry policy of deliveries; absent fields take the defaults; null restores them. Unchanged when absent.',
  },
);

export const schedulerTarget = named(
  'SchedulerTarget',
  Type.Union([
    Type.Object({ lambda_id: Type.String() }),
    Type.Object({ url: Type.String(), secret_set: Type.Literal(true) }),
  ]),
);
export const retryPolicy = named(
  'RetryPolicy',
  Type.Object({ max_attempts: Type.Integer(), base: Type.String(), factor: Type.Number(), cap: Type.String() }),
);

export const scheduler = named(
  'Scheduler',
  Type.Object({
    id: Type.String(),
    display_name: Type.String(),
    ready: Type.Boolean(),
    scheduled: Type.Integer(),
    inflight: Type.Integer(),
    created_at: Type.String(),
    updated_at: Type.String(),
    target: Type.Optional(schedulerTarget),
    retry: Type.Optional(retryPolicy),
  }),
);

export const health = named(
  'SchedulerHealth',
  Type.Object({
    status: Type.Literal('ok'),
    ready: Type.Boolean(),
    scheduled: Type.Integer(),
    inflight: Type.Integer(),
    scheduler_id: Type.String(),
  }),
);

export const createSchedulerBody = Type.Object(
  {
    id: Type.Optional(clientId('scheduler')),
    display_name: Type.String({ minLength: 1 }),
    description: Type.Optional(Type.String()),
    target: Type.Optional(targetInput),
    retry: Type.Optional(retryInput),
  },
  { additionalProperties: false },
);
export const putSchedulerBody = Type.Object(
  {
    display_name: Type.String({ minLength: 1 }),
    description: Type.Optional(Type.String()),
    target: Type.Optional(targetInput),
    retry: Type.Optional(retryInput),
  },
  { additionalProperties: false },
);
export const patchSchedulerBody = Type.Object(
  {
    display_name: Type.Optional(Type.String({ minLength: 1 })),
    description: Type.Optional(Type.String()),
    target: Type.Optional(targetInput),
    retry: Type.Optional(retryInput),
  },
  { additionalProperties: false },
);

/** What any scheduler-changing body may say about delivery. */
export interface DeliveryChange {
  target?: { lambda_id?: string; url?: string; secret?: string } | null;
  retry?: { max_attempts?: number; base?: string; factor?: number; cap?: string } | null;
}

/** Most labels on one task, and the longest label (task lists return every label of every listed task). */
export const MAX_LABELS = 64;
export const MAX_LABEL_LENGTH = 256;
/** Longest `search` text, and most `label` filters, of one task list request. */
export const MAX_SEARCH_LENGTH = 256;
export const MAX_LABEL_FILTERS = 16;

const labels = Type.Array(
  Type.String({
    pattern: ':',
    maxLength: MAX_LABEL_LENGTH,
    description: `key:value, at most ${MAX_LABEL_LENGTH} characters`,
  }),
  {
    maxItems: MAX_LABELS,
    description: `Labels, each a string key:value; at most ${MAX_LABELS}`,
  },
);
const time = (description: string) => Type.String({ description: `${description} (RFC 3339)` });

export const enqueueBody = Type.Object(
  {
    id: Type.Optional(clientId('task')),
    payload: Type.Optional(Type.Unknown({ description: 'Any JSON; null when absent' })),
    delay: Type.Optional(duration('Due after this delay')),
    future: Type.Optional(time('Due at this time')),
    labels: Type.Optional(labels),
  },
  { additionalProperties: false },
);
export const enqueued = Type.Object({ id: Type.String(), future: Type.String(), labels: Type.Array(Type.String()) });

const perPage = Type.Integer({ minimum: 1, maximum: 500, default: 20 });
const page = Type.Integer({ minimum: 1, default: 1 });
export const listQuery = Type.Object(
  {
    scheduled_page: page,
    scheduled_per_page: perPage,
    inflight_page: page,
    inflight_per_page: perPage,
    search: Type.Optional(
      Type.String({
        maxLength: MAX_SEARCH_LENGTH,
        description: `Substring of the payload as compact JSON (case-sensitive), at most ${MAX_SEARCH_LENGTH} characters`,
      }),
    ),
    label: Type.Optional(
      Type.Array(Type.String({ pattern: ':', maxLength: MAX_LABEL_LENGTH }), {
        maxItems: MAX_LABEL_FILTERS,
        description: `Exact label; repeat to require several (at most ${MAX_LABEL_FILTERS})`,
      }),
    ),
  },
  { additionalProperties: true },
);

const pageMeta = Type.Object({
  total: Type.Integer(),
  page: Type.Integer(),
  per_page: Type.Integer(),
  total_pages: Type.Integer(),
});
/** On tasks the platform has tried to deliver only (README: Delivery): attempts so far, the last error. */
const deliveryState = {
  attempt: Type.Optional(Type.Integer({ description: 'Deliveries so far; present once the platform has tried one' })),
  last_error: Type.Optional(
    Type.Union([Type.String(), Type.Null()], { description: 'Why the last delivery failed; with `attempt`' }),
  ),
};
const scheduledItem = Type.Object({
  id: Type.String(),
  future: Type.String(),
  labels: Type.Array(Type.String()),
  ...deliveryState,
});
const inflightItem = Type.Object({
  id: Type.String(),
  lease_expires_at: Type.String(),
  labels: Type.Array(Type.String()),
  ...deliveryState,
});
export const taskList = named(
  'TaskList',
  Type.Object({
    scheduled: Type.Array(scheduledItem),
    inflight: Type.Array(inflightItem),
    scheduled_meta: pageMeta,
    inflight_meta: pageMeta,
  }),
);
export const snapshot = named(
  'TaskSnapshot',
  Type.Object({
    scheduler_id: Type.String(),
    generated_at: Type.String(),
    ...taskList.properties,
    health,
  }),
);

export const reserveBody = Type.Object(
  { worktime: duration('Lease length, positive, at most 24h') },
  { additionalProperties: false },
);
export const reservation = named(
  'Reservation',
  Type.Object({
    id: Type.String(),
    payload: Type.Unknown(),
    lease_expires_at: Type.String(),
    labels: Type.Array(Type.String()),
    lease_id: Type.String(),
  }),
);

export const leaseQuery = Type.Object({ lease_id: Type.Optional(Type.String()) }, { additionalProperties: true });
export const ackBody = Type.Object({ lease_id: Type.Optional(Type.String()) }, { additionalProperties: false });
export const extendBody = Type.Object(
  { extension: duration('Added to the current lease expiry'), lease_id: Type.Optional(Type.String()) },
  { additionalProperties: false },
);
export const extended = Type.Object({ lease_expires_at: Type.String() });
export const rescheduleBody = Type.Object(
  { delay: Type.Optional(duration('New due time from now')), future: Type.Optional(time('New due time')) },
  { additionalProperties: false },
);
export const rescheduled = Type.Object({ id: Type.String(), future: Type.String() });

export const deadQuery = Type.Object({ page, per_page: perPage }, { additionalProperties: true });
export const deadList = named(
  'DeadTaskList',
  Type.Object({
    dead: Type.Array(
      Type.Object({
        id: Type.String(),
        labels: Type.Array(Type.String()),
        attempts: Type.Integer(),
        last_error: Type.Union([Type.String(), Type.Null()]),
        failed_at: Type.String(),
      }),
    ),
    meta: pageMeta,
  }),
);
export const deadRetried = Type.Object({ id: Type.String(), future: Type.String() });

export const schedulerParams = Type.Object({ id: Type.String() });
export const taskParams = Type.Object({ id: Type.String(), task: Type.String() });
export const searchQuery = Type.Object(
  { search: Type.Optional(Type.String()), q: Type.Optional(Type.String()) },
  { additionalProperties: true },
);

export const privateErrors = { 400: errorBody, 401: errorBody, 404: errorBody, 409: errorBody } as const;
export const publicErrors = { 400: errorBody, 404: errorBody } as const;
