import type { InvocationHistory } from '../history.ts';
import type { Invoker } from '../invoke.ts';
import type { LambdaRepository } from '../repository.ts';
import type { LambdaRuntime } from '../runtime/sandbox.ts';

/** What every route of the lambda service is given by index.ts. */
export interface RouteDeps {
  repository: LambdaRepository;
  /** The isolate pool: JavaScript is syntax-checked on it at create and patch. */
  runtime: LambdaRuntime;
  /** Runs lambdas for requests and test runs, and tracks the ongoing invocations. */
  invoker: Invoker;
  /** Every lambda's recent invocations (README: Invocation history and logs). */
  history: InvocationHistory;
}
