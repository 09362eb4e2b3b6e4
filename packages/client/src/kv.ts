import { segment, slashPath, type CallOptions, type Transport } from './transport.ts';
import type { ResultOf, Schemas } from './types.ts';

export type Entry = Schemas['Entry'];
export type WriteResult = Schemas['WriteResult'];
export type KeyPage = ResultOf<'kvListKeys', 200>;

/**
 * `GET /v1/status` (the node's schema leaves it open; kv README, Decisions: `/v1/status`): the
 * node, its role and parent, and the collections of the caller's namespace with their figures.
 */
export interface KvStatus {
  node: string;
  role: 'primary' | 'replica';
  /** The parent's URL on a replica, else empty. */
  parent: string;
  uptime_seconds: number;
  /** Replicas following this node now. */
  children: number;
  /** The caller's collections, in creation order: live keys and the seq of the newest write. */
  collections: Record<string, { keys: number; lastSeq: number }>;
  replication: {
    /** True on a replica or on a node serving replicas. */
    enabled: boolean;
    /** Whether the node's follower is connected to its parent (always true on a primary). */
    parent_connected: boolean;
    connected_replicas: number;
    /** The node's newest seq (every namespace's writes). */
    last_seq: number;
    /** True on the instance that follows the parent. */
    following: boolean;
  };
}

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

  /** The node's role, replication and the caller's collections with their key counts. */
  status(options: CallOptions = {}): Promise<KvStatus> {
    return this.transport.json({ method: 'GET', service: 'kv', path: '/v1/status', ...options });
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
