import { Type } from 'typebox';
import { errorBody } from '../../core/schemas.ts';

export { errorBody };

const nullableString = Type.Union([Type.String(), Type.Null()]);

export const envVar = Type.Object(
  { key: Type.String(), desired_value: Type.String() },
  { additionalProperties: false },
);
export const volume = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    target: Type.String({ description: 'absolute path inside the container' }),
    mode: Type.Optional(Type.Union([Type.Literal('rw'), Type.Literal('ro')], { description: 'rw (default) or ro' })),
  },
  { additionalProperties: false },
);

export const desiredState = Type.Object({
  state: Type.Union([Type.Literal('running'), Type.Literal('stopped')]),
  reference: nullableString,
  digest: nullableString,
});

export const actualState = Type.Union(
  [
    Type.Object({
      state: Type.Union(
        [
          Type.Literal('running'),
          Type.Literal('starting'),
          Type.Literal('restarting'),
          Type.Literal('exited'),
          Type.Literal('stopped'),
          Type.Literal('failed'),
          Type.Literal('unknown'),
        ],
        { description: 'what the engine reports; unknown when the driver cannot tell (the recording driver)' },
      ),
      reference: nullableString,
      digest: nullableString,
      applied_at: Type.String(),
      exit_code: Type.Optional(Type.Integer({ description: 'the exit code, when exited' })),
      message: Type.Optional(Type.String({ description: "why the last change failed: the engine's message" })),
    }),
    Type.Null(),
  ],
  { description: 'what the runtime driver reports it has applied (null: nothing yet, or the driver cannot tell)' },
);

export const consoleData = Type.Object({
  repository: Type.String(),
  host: Type.Union([Type.String(), Type.Null()], {
    description:
      'where it answers HTTP through the gateway (<slug>.run.<domain>), given at its first start; null before',
  }),
  logger_id: Type.Union([Type.String(), Type.Null()], {
    description: "the logger the container's output goes to (a logger of the owner), or null",
  }),
  driver: Type.String({ description: 'the runtime driver: recording (runs nothing) or podman' }),
  references: Type.Array(Type.String(), { description: 'pushed tags in first-push order' }),
  env: Type.Array(Type.Object({ key: Type.String(), desired_value: Type.String() })),
  volumes: Type.Array(Type.Object({ name: Type.String(), target: Type.String(), mode: Type.String() })),
  desired: desiredState,
  history: Type.Array(
    Type.Object({
      action: Type.String({ description: 'start, stop or rollback' }),
      reference: nullableString,
      digest: nullableString,
      user: Type.String(),
      at: Type.String({ description: 'RFC 3339 UTC' }),
    }),
  ),
  actual: actualState,
});

const repository = Type.String({ description: 'repository name, e.g. my-project/my-app' });

export const repositoryQuery = Type.Object({
  repository: Type.String({ minLength: 1, description: 'repository name' }),
});
export const repositoryBody = Type.Object({ repository }, { additionalProperties: false });
export const targetBody = Type.Object(
  {
    repository,
    reference: Type.Optional(Type.String({ description: 'tag (exactly one of reference, digest)' })),
    digest: Type.Optional(Type.String({ description: 'manifest digest (exactly one of reference, digest)' })),
  },
  { additionalProperties: false },
);
export const loggerBody = Type.Object(
  {
    repository,
    logger_id: Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()], {
      description: 'a logger of yours, or null for none',
    }),
  },
  { additionalProperties: false },
);
export const envBody = Type.Object({ repository, env: Type.Array(envVar) }, { additionalProperties: false });
export const volumesBody = Type.Object({ repository, volumes: Type.Array(volume) }, { additionalProperties: false });
