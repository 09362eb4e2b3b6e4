// Helpers that read results and bodies out of the generated types, so the hand-written layer
// follows the routes' schemas (and breaks the build when they change).
import type { components, operations } from './generated/platform.ts';

export type Schemas = components['schemas'];
export type OperationId = keyof operations;

type JsonContent<T> = T extends { content: { 'application/json': infer Body } } ? Body : never;

/** The JSON answer of an operation for one status. */
export type ResultOf<Id extends OperationId, Status extends keyof operations[Id]['responses']> = JsonContent<
  operations[Id]['responses'][Status]
>;

/** The JSON request body of an operation. */
export type BodyOf<Id extends OperationId> = operations[Id] extends { requestBody?: infer Body }
  ? JsonContent<NonNullable<Body>>
  : never;

/** The query parameters of an operation. */
export type QueryOf<Id extends OperationId> = operations[Id]['parameters'] extends { query?: infer Query }
  ? NonNullable<Query>
  : never;
