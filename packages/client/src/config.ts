import { segment, type CallOptions, type Transport } from './transport.ts';
import type { BodyOf, ResultOf, Schemas } from './types.ts';

export type ConfigObject = Schemas['Config'];
export type ConfigEntries = Schemas['UserConfig']['entries'];

/**
 * The config store (`/services/config`): the caller's own map of entries, and named config
 * objects. A patch replaces each entry it names and deletes those it sets to null.
 */
export class ConfigApi {
  readonly objects: ConfigObjectCalls;
  constructor(private readonly transport: Transport) {
    this.objects = new ConfigObjectCalls(transport);
  }

  /** The caller's entries (`{}` before the first patch). */
  async get(options: CallOptions = {}): Promise<ConfigEntries> {
    const result = await this.transport.json<Schemas['UserConfig']>({
      method: 'GET',
      service: 'config',
      path: '/v1/config',
      ...options,
    });
    return result.entries;
  }

  /** Merges `entries` into the caller's map and answers the whole map after it. */
  async patch(entries: Record<string, unknown>, options: CallOptions = {}): Promise<ConfigEntries> {
    const result = await this.transport.json<Schemas['UserConfig']>({
      method: 'PATCH',
      service: 'config',
      path: '/v1/config',
      json: { entries },
      ...options,
    });
    return result.entries;
  }
}

export class ConfigObjectCalls {
  constructor(private readonly transport: Transport) {}

  create(body: BodyOf<'configCreateConfig'>, options: CallOptions = {}): Promise<ConfigObject> {
    return this.transport.json({ method: 'POST', service: 'config', path: '/v0/configs', json: body, ...options });
  }

  list(options: CallOptions = {}): Promise<ResultOf<'configListConfigs', 200>> {
    return this.transport.json({ method: 'GET', service: 'config', path: '/v0/configs', ...options });
  }

  get(id: string, options: CallOptions = {}): Promise<ConfigObject> {
    return this.transport.json({ method: 'GET', service: 'config', path: `/v0/configs/${segment(id)}`, ...options });
  }

  patch(id: string, entries: Record<string, unknown>, options: CallOptions = {}): Promise<ConfigObject> {
    return this.transport.json({
      method: 'PATCH',
      service: 'config',
      path: `/v0/configs/${segment(id)}`,
      json: { entries },
      ...options,
    });
  }

  delete(id: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty({
      method: 'DELETE',
      service: 'config',
      path: `/v0/configs/${segment(id)}`,
      ...options,
    });
  }
}
