import { segment, slashPath, type CallOptions, type Transport } from './transport.ts';
import type { ResultOf, Schemas } from './types.ts';

export type Entry = Schemas['Entry'];
export type WriteResult = Schemas['WriteResult'];
export type KeyPage = ResultOf<'kvListKeys', 200>;

/** The key-value node (`/services/kv`): each caller sees its own collections. */
export class KvApi {
  constructor(private readonly transport: Transport) {}

  /** Creates a collection (idempotent). */
  createCollection(name: string, options: CallOptions = {}): Promise<ResultOf<'kvCreateCollection', 200>> {
    return this.transport.json({ method: 'POST', service: 'kv', path: '/v1/collections', json: { name }, ...options });
  }

  async listCollections(options: CallOptions = {}): Promise<string[]> {
    const result = await this.transport.json<ResultOf<'kvListCollections', 200>>({
      method: 'GET',
      service: 'kv',
      path: '/v1/collections',
      ...options,
    });
    return result.collections;
  }

  /** Drops a collection and its keys. */
  deleteCollection(name: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty({
      method: 'DELETE',
      service: 'kv',
      path: `/v1/collections/${segment(name)}`,
      ...options,
    });
  }

  collection(name: string): KvCollection {
    return new KvCollection(this.transport, name);
  }
}

export class KvCollection {
  constructor(
    private readonly transport: Transport,
    readonly name: string,
  ) {}

  private keyPath(key: string): string {
    return `/v1/collections/${segment(this.name)}/keys/${slashPath(key)}`;
  }

  /** A key's entry (value, version, seq); a missing key is a StratusError 404. */
  get(key: string, options: CallOptions = {}): Promise<Entry> {
    return this.transport.json({ method: 'GET', service: 'kv', path: this.keyPath(key), ...options });
  }

  set(key: string, value: unknown, options: CallOptions = {}): Promise<WriteResult> {
    return this.transport.json({ method: 'POST', service: 'kv', path: this.keyPath(key), json: { value }, ...options });
  }

  delete(key: string, options: CallOptions = {}): Promise<WriteResult> {
    return this.transport.json({ method: 'DELETE', service: 'kv', path: this.keyPath(key), ...options });
  }

  /** One page of keys in key order; pass `next` as `after` for the following page. */
  list(options: CallOptions & { prefix?: string; after?: string; limit?: number } = {}): Promise<KeyPage> {
    return this.transport.json({
      method: 'GET',
      service: 'kv',
      path: `/v1/collections/${segment(this.name)}/keys`,
      query: { prefix: options.prefix, after: options.after, limit: options.limit },
      signal: options.signal,
    });
  }
}
