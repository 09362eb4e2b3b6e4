import { Type } from 'typebox';
import { errorBody } from '../../core/schemas.ts';
import { ENV_NAME_PATTERN, MAX_ENV_NAMES, MAX_ENV_TOTAL_LENGTH, MAX_ENV_VALUE_LENGTH } from './environment.ts';
import { LANGUAGES } from './repository.ts';
import { named } from '../../core/openapi.ts';
import { MAX_SCHEDULE_LENGTH, MAX_SCHEDULE_TZ_LENGTH } from './cron.ts';

export { errorBody };

export const MAX_NAME = 200;
export const MAX_CODE = 1024 * 1024;

const name = Type.String({ minLength: 1, maxLength: MAX_NAME, description: "Unique among the caller's lambdas" });
const code = Type.String({ maxLength: MAX_CODE, description: 'Source code or static content (at most 1 MiB)' });
const language = Type.Union(
  LANGUAGES.map((l) => Type.Literal(l)),
  { description: 'Default javascript' },
);
const method = Type.String({
  pattern: '^[A-Za-z]{1,20}$',
  description: 'HTTP method or ANY (stored upper case); default ANY',
});
const path = Type.String({ pattern: '^/', maxLength: 2048, description: 'Mux route path; default / + name' });

const envRules = `names match ${ENV_NAME_PATTERN.source}; at most ${MAX_ENV_NAMES} names in env and secrets together, each value at most ${MAX_ENV_VALUE_LENGTH} characters, ${MAX_ENV_TOTAL_LENGTH} characters of names and values in all; a name is in env or in secrets, not both`;
const envValue = Type.String({ maxLength: MAX_ENV_VALUE_LENGTH });
const env = Type.Record(Type.String(), envValue, {
  maxProperties: MAX_ENV_NAMES,
  description: `Environment of the code, shown to the owner: name → value (${envRules})`,
});
const secrets = Type.Record(Type.String(), envValue, {
  maxProperties: MAX_ENV_NAMES,
  description: `Write-only environment of the code: name → value, encrypted at rest, never answered (${envRules})`,
});
const nullableEnvValue = Type.Union([envValue, Type.Null()]);
const envPatch = Type.Record(Type.String(), nullableEnvValue, {
  maxProperties: MAX_ENV_NAMES,
  description: 'Merged into env: a named value is set, null deletes it, unnamed ones are kept',
});
const secretsPatch = Type.Record(Type.String(), nullableEnvValue, {
  maxProperties: MAX_ENV_NAMES,
  description: 'Merged into secrets: a named value is set, null deletes it, unnamed ones are kept',
});
const schedule = Type.Union(
  [
    Type.String({
      minLength: 1,
      maxLength: MAX_SCHEDULE_LENGTH,
      description:
        'Cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with a leading seconds field, or @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly',
    }),
    Type.Null(),
  ],
  { description: 'When the lambda runs by itself (a POST to its path, ctx.trigger.type "cron"); null for never' },
);
const scheduleTz = Type.Union(
  [
    Type.String({ minLength: 1, maxLength: MAX_SCHEDULE_TZ_LENGTH, description: 'IANA time zone, e.g. Europe/Paris' }),
    Type.Null(),
  ],
  { description: "The schedule's time zone (needs a schedule); null or absent is UTC" },
);
const loggerId = Type.Union([Type.String({ minLength: 1, maxLength: 256 }), Type.Null()], {
  description: "A logger of the lambda's owner that gets its output, or null for none",
});

export const lambdaObject = named(
  'Lambda',
  Type.Object({
    id: Type.String(),
    created_timestamp: Type.Integer(),
    owner: Type.String(),
    project_id: Type.String(),
    name: Type.String(),
    language: Type.String(),
    code: Type.String(),
    method: Type.String(),
    path: Type.String(),
    env: Type.Record(Type.String(), Type.String(), { description: 'Environment of the code' }),
    secrets: Type.Array(Type.String(), { description: 'Names of the secrets, sorted; values are never answered' }),
    logger_id: Type.Union([Type.String(), Type.Null()], { description: "The logger of the lambda's output, or null" }),
    schedule: Type.Union([Type.String(), Type.Null()], { description: 'The cron schedule, or null' }),
    schedule_tz: Type.Union([Type.String(), Type.Null()], {
      description: "The schedule's IANA time zone; null is UTC",
    }),
    next_run_at: Type.Union([Type.String(), Type.Null()], {
      description: 'The next tick of the schedule (RFC 3339 UTC), or null without a schedule',
    }),
  }),
);

export const createBody = Type.Object(
  {
    name,
    code,
    language: Type.Optional(language),
    runtime: Type.Optional(Type.String({ description: 'Alias of language: js or javascript; never stored' })),
    method: Type.Optional(method),
    path: Type.Optional(path),
    env: Type.Optional(env),
    secrets: Type.Optional(secrets),
    logger_id: Type.Optional(loggerId),
    schedule: Type.Optional(schedule),
    schedule_tz: Type.Optional(scheduleTz),
  },
  { additionalProperties: false },
);

export const patchBody = Type.Object(
  {
    name: Type.Optional(name),
    code: Type.Optional(code),
    language: Type.Optional(language),
    method: Type.Optional(method),
    path: Type.Optional(path),
    env: Type.Optional(envPatch),
    secrets: Type.Optional(secretsPatch),
    logger_id: Type.Optional(loggerId),
    schedule: Type.Optional(schedule),
    schedule_tz: Type.Optional(scheduleTz),
  },
  { additionalProperties: false },
);

export const lambdaParams = Type.Object({ lambda_id: Type.String() });

export const ongoingItem = named(
  'OngoingInvocation',
  Type.Object({
    id: Type.String(),
    lambda_id: Type.String(),
    lambda_name: Type.String(),
    started_at: Type.String(),
    method: Type.String(),
    path: Type.String(),
  }),
);

export const meObject = named(
  'User',
  Type.Object({
    id: Type.String(),
    email: Type.Optional(Type.String()),
    nick: Type.Optional(Type.String()),
    picture: Type.Optional(Type.String()),
  }),
);

export const errors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, errorBody]));

/** The caller's lambdas, in creation order. */
export const lambdaList = Type.Array(lambdaObject, { description: 'List of lambdas' });

export const deletedLambda = Type.Object({ id: Type.String() });

/** The request of a test run (README: Test runs); defaults are the lambda's method and path. */
export const testInvocationBody = Type.Object(
  {
    method: Type.Optional(Type.String({ minLength: 1, maxLength: 16 })),
    path: Type.Optional(Type.String({ pattern: '^/', maxLength: 2048 })),
    query: Type.Optional(Type.Record(Type.String(), Type.Union([Type.String(), Type.Array(Type.String())]))),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
    body: Type.Optional(
      Type.Unknown({ description: 'the request body the lambda sees as req.body (JSON value or text)' }),
    ),
  },
  { additionalProperties: false },
);

/** What a test run answers: the response the lambda made, as data, and its console lines. */
export const testInvocationResult = named(
  'TestInvocationResult',
  Type.Object({
    status: Type.Integer(),
    headers: Type.Record(Type.String(), Type.String()),
    body: Type.String(),
    logs: Type.Array(Type.Object({ level: Type.String(), message: Type.String() })),
    duration_ms: Type.Number(),
  }),
);

export const ownerParams = Type.Object({ owner_id: Type.String() });

export const ownerPathParams = Type.Object({ owner_id: Type.String(), '*': Type.String() });

/** A console line of a run. */
const logLine = Type.Object({ level: Type.String(), message: Type.String() });

/** One recorded invocation (README: Invocation history and logs). */
export const invocationItem = named(
  'LambdaInvocation',
  Type.Object({
    id: Type.String({ description: 'The invocation id (as /ongoing and the logger lines name it)' }),
    lambda_id: Type.String(),
    started_at: Type.String({ description: 'RFC 3339' }),
    duration_ms: Type.Number(),
    trigger: Type.Union(
      [
        Type.Literal('invoke'),
        Type.Literal('http'),
        Type.Literal('run'),
        Type.Literal('mux'),
        Type.Literal('project'),
        Type.Literal('cron'),
        Type.Literal('task'),
      ],
      {
        description:
          "invoke: a test run; http: /run/{id}; run: /api/v0/run/{id}; mux: the owner router; project: a project host; cron: a tick of the lambda's schedule; task: a scheduler's task delivered to it",
      },
    ),
    status: Type.Integer({ description: 'The HTTP status answered (500 for an error)' }),
    error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()], {
      description: 'null when the run succeeded',
    }),
    logs: Type.Array(logLine, { description: 'The console lines of the run' }),
    fetches: Type.Integer({ description: 'Outbound fetch requests made' }),
    bindings: Type.Integer({ description: 'Platform binding calls made' }),
  }),
);

/** The newest invocations of a lambda, newest first. */
export const invocationList = named('LambdaInvocationList', Type.Object({ invocations: Type.Array(invocationItem) }));

/** `?limit=` of the history: 1 to the invocations kept per lambda; default 20 (or fewer if fewer are kept). */
export const invocationsQuery = (kept: number) =>
  Type.Object({
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: kept,
        default: Math.min(20, kept),
        description:
          'How many, newest first: 1 to the number kept (LAMBDA_INVOCATION_HISTORY, default 100); default 20',
      }),
    ),
  });
