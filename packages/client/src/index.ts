export { createClient, type StratusClient } from './client.ts';
export { StratusError } from './errors.ts';
export {
  Transport,
  type CallOptions,
  type ClientOptions,
  type QueryValue,
  type RequestBody,
  type RetryOptions,
  type TransportRequest,
} from './transport.ts';
export type { ServerSentEvent } from './streams.ts';
export type { BodyOf, OperationId, QueryOf, ResultOf, Schemas } from './types.ts';
export type { components, operations, paths } from './generated/platform.ts';
export * from './auth.ts';
export * from './apikeys.ts';
export * from './docdb.ts';
export * from './files.ts';
export * from './logs.ts';
export * from './scheduler.ts';
export * from './kv.ts';
export * from './config.ts';
export * from './lambda.ts';
export * from './run.ts';
export * from './gateway.ts';
