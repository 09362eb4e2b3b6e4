import type { CallOptions, Transport } from './transport.ts';
import type { ResultOf } from './types.ts';

export type StatsRow = ResultOf<'gatewayGetStats', 200>[number];
export type StatusRow = ResultOf<'gatewayGetStatus', 200>[number];
export type Instance = ResultOf<'gatewayListInstances', 200>['instances'][number];
export type RouteTable = ResultOf<'gatewayListRoutes', 200>;

/** The gateway's own endpoints (`/services/gateway`): version, traffic, health and instances. */
export class GatewayApi {
  constructor(private readonly transport: Transport) {}

  /** The running Stratus version. */
  async version(options: CallOptions = {}): Promise<string> {
    const response = await this.transport.send({ method: 'GET', service: 'gateway', path: '/version', ...options });
    return response.text();
  }

  /** Requests served per host, summed over every live instance. */
  stats(options: CallOptions = {}): Promise<StatsRow[]> {
    return this.transport.json({ method: 'GET', service: 'gateway', path: '/v0/stats', ...options });
  }

  /** The health of every service (and, signed in, of your project hosts and the live instances). */
  status(options: CallOptions = {}): Promise<StatusRow[]> {
    return this.transport.json({ method: 'GET', service: 'gateway', path: '/v0/status', ...options });
  }

  /** The host names the gateway serves: the platform's, then your project hosts (signed in). */
  virtualHosts(options: CallOptions = {}): Promise<string[]> {
    return this.transport.json({ method: 'GET', service: 'gateway', path: '/v0/virtualhosts', ...options });
  }

  /** The front door's path prefixes and the route policy rules, in the order they apply (signed in). */
  routes(options: CallOptions = {}): Promise<RouteTable> {
    return this.transport.json({ method: 'GET', service: 'gateway', path: '/v0/routes', ...options });
  }

  /** The live instances of the platform (signed in). */
  async instances(options: CallOptions = {}): Promise<Instance[]> {
    const result = await this.transport.json<ResultOf<'gatewayListInstances', 200>>({
      method: 'GET',
      service: 'gateway',
      path: '/v0/instances',
      ...options,
    });
    return result.instances;
  }
}
