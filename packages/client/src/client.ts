import { ApiKeysApi } from './apikeys.ts';
import { AuthApi } from './auth.ts';
import { ConfigApi } from './config.ts';
import { DocdbApi } from './docdb.ts';
import { FilesApi } from './files.ts';
import { GatewayApi } from './gateway.ts';
import { KvApi } from './kv.ts';
import { LambdaApi } from './lambda.ts';
import { LogsApi } from './logs.ts';
import { RunApi } from './run.ts';
import { SchedulerApi } from './scheduler.ts';
import { Transport, type ClientOptions } from './transport.ts';

/** The platform, one namespace per service, over one base URL. */
export interface StratusClient {
  readonly auth: AuthApi;
  readonly apikeys: ApiKeysApi;
  readonly docdb: DocdbApi;
  readonly files: FilesApi;
  readonly logs: LogsApi;
  readonly scheduler: SchedulerApi;
  readonly kv: KvApi;
  readonly config: ConfigApi;
  readonly lambda: LambdaApi;
  readonly run: RunApi;
  readonly gateway: GatewayApi;
  /** The HTTP layer, for routes the namespaces do not wrap. */
  readonly transport: Transport;
}

/** A client for the platform at `options.url`. */
export function createClient(options: ClientOptions): StratusClient {
  const transport = new Transport(options);
  return {
    auth: new AuthApi(transport),
    apikeys: new ApiKeysApi(transport),
    docdb: new DocdbApi(transport),
    files: new FilesApi(transport),
    logs: new LogsApi(transport),
    scheduler: new SchedulerApi(transport),
    kv: new KvApi(transport),
    config: new ConfigApi(transport),
    lambda: new LambdaApi(transport),
    run: new RunApi(transport),
    gateway: new GatewayApi(transport),
    transport,
  };
}
