import type { ServiceCalls } from '../../context.ts';
import type { LambdaEnvironment } from '../environment.ts';
import type { InvocationHistory } from '../history.ts';
import type { Invoker } from '../invoke.ts';
import type { LambdaRepository } from '../repository.ts';
import type { LambdaRuntime } from '../runtime/sandbox.ts';
import type { LambdaSecrets } from '../secrets.ts';

/** What every route of the lambda service is given by index.ts. */
export interface RouteDeps {
  repository: LambdaRepository;
  /** The isolate pool: JavaScript is syntax-checked on it at create and patch. */
  runtime: LambdaRuntime;
  /** Runs lambdas for requests and test runs, and tracks the ongoing invocations. */
  invoker: Invoker;
  /** Seals the secrets of lambdas at create and patch (README: Environment and secrets). */
  secrets: LambdaSecrets;
  /** What an invocation gets as its environment: env and decrypted secrets. */
  environment: LambdaEnvironment;
  /** The platform's services, to check a lambda's logger_id with the logs service; absent when built alone. */
  services?: ServiceCalls;
  /** Every lambda's recent invocations (README: Invocation history and logs). */
  history: InvocationHistory;
  /** The time in epoch ms: a schedule's first tick is the first after it (the ticker's clock). */
  now: () => number;
  /** Tells this instance's cron ticker that a schedule was set or changed (cron.ts). */
  scheduleChanged: () => void;
}
