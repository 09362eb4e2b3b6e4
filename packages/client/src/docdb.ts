import { segment, type CallOptions, type Transport } from './transport.ts';
import type { BodyOf, ResultOf } from './types.ts';

export type Database = ResultOf<'docdbGetDatabase', 200>;
export type DatabaseSummary = ResultOf<'docdbListDatabases', 200>[number];
export type Index = ResultOf<'docdbCreateIndex', 201>;
/**
 * A collection as the docdb README (Collections) describes it; written here because the
 * service's OpenAPI document does not describe the collection routes' answers.
 */
export interface Collection {
  name: string;
  /** Documents in the collection. */
  total: number;
  /** How many indexes it has (`listIndexes` gives them). */
  indexes: number;
  /** The defaults applied to inserted documents, or null for none. */
  defaults: Record<string, unknown> | null;
}
export type IndexDefinition = BodyOf<'docdbCreateIndex'>;
export type DatabaseApiKey = ResultOf<'docdbCreateDatabaseApiKey', 201>;
/** A stored document: a JSON object (`id` and the other defaults filled in by the collection). */
export type Document = Record<string, unknown>;

/** Where and how a traversal (find, patch, remove) reads; see the docdb README, Traversal. */
export interface TraversalOptions extends CallOptions {
  /** An index to traverse; none: a full scan in insertion order. */
  index?: string;
  /** Matching documents to skip. */
  skip?: number;
  /** Most documents selected. The client's default is no limit (the route's own default is 1). */
  limit?: number;
  /** A map index's key to look up. */
  value?: string;
  /** A btree index in descending order. */
  reverse?: boolean;
  /** btree pivots. */
  from?: Record<string, unknown>;
  to?: Record<string, unknown>;
}

/** The document database (`/services/docdb`). */
export class DocdbApi {
  readonly databases: DatabaseCalls;
  constructor(private readonly transport: Transport) {
    this.databases = new DatabaseCalls(transport);
  }

  /** One database's collections, documents, owners and keys. */
  database(id: string): DatabaseHandle {
    return new DatabaseHandle(this.transport, id);
  }
}

export class DatabaseCalls {
  constructor(private readonly transport: Transport) {}

  /** A database owned by the caller alone. */
  create(name: string, options: CallOptions = {}): Promise<Database> {
    return this.transport.json({ method: 'POST', service: 'docdb', path: '/v1/databases', json: { name }, ...options });
  }

  /** The caller's databases in creation order. */
  list(options: CallOptions = {}): Promise<DatabaseSummary[]> {
    return this.transport.json({ method: 'GET', service: 'docdb', path: '/v1/databases', ...options });
  }

  get(id: string, options: CallOptions = {}): Promise<Database> {
    return new DatabaseHandle(this.transport, id).get(options);
  }

  /** Deletes a database with everything in it. */
  delete(id: string, options: CallOptions = {}): Promise<ResultOf<'docdbDeleteDatabase', 200>> {
    return new DatabaseHandle(this.transport, id).delete(options);
  }
}

export class DatabaseHandle {
  constructor(
    private readonly transport: Transport,
    readonly id: string,
  ) {}

  private get path(): string {
    return `/v1/databases/${segment(this.id)}`;
  }

  get(options: CallOptions = {}): Promise<Database> {
    return this.transport.json({ method: 'GET', service: 'docdb', path: this.path, ...options });
  }

  delete(options: CallOptions = {}): Promise<ResultOf<'docdbDeleteDatabase', 200>> {
    return this.transport.json({ method: 'DELETE', service: 'docdb', path: this.path, ...options });
  }

  /** A key pair for this database only; the secret is in this answer only. */
  createApiKey(name: string, options: CallOptions = {}): Promise<DatabaseApiKey> {
    return this.transport.json({
      method: 'POST',
      service: 'docdb',
      path: `${this.path}:createApiKey`,
      json: { name },
      ...options,
    });
  }

  /** Revokes one of this database's keys (204). */
  deleteApiKey(key: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty({
      method: 'POST',
      service: 'docdb',
      path: `${this.path}:deleteApiKey`,
      json: { key },
      ...options,
    });
  }

  collections(options: CallOptions = {}): Promise<Collection[]> {
    return this.transport.json({ method: 'GET', service: 'docdb', path: `${this.path}/collections`, ...options });
  }

  /** A collection by name (created by its first insert, or explicitly with `create`). */
  collection<T extends Document = Document>(name: string): CollectionHandle<T> {
    return new CollectionHandle<T>(this.transport, this.id, name);
  }
}

export class CollectionHandle<T extends Document = Document> {
  constructor(
    private readonly transport: Transport,
    readonly databaseId: string,
    readonly name: string,
  ) {}

  private action(action: string): string {
    // The name is encoded whole, so a `:` in it is never read as an action.
    return `/v1/databases/${segment(this.databaseId)}/collections/${segment(this.name)}${action ? `:${action}` : ''}`;
  }

  /** Creates the collection; `defaults` null or absent: `{"id":"uuid()"}`. */
  create(defaults?: Record<string, unknown> | null, options: CallOptions = {}): Promise<Collection> {
    return this.transport.json({
      method: 'POST',
      service: 'docdb',
      path: `/v1/databases/${segment(this.databaseId)}/collections`,
      json: { name: this.name, ...(defaults === undefined ? {} : { defaults }) },
      ...options,
    });
  }

  get(options: CallOptions = {}): Promise<Collection> {
    return this.transport.json({ method: 'GET', service: 'docdb', path: this.action(''), ...options });
  }

  /**
   * Inserts documents and answers them as stored (defaults applied), in order. An array is sent
   * as one NDJSON body; an async iterable is streamed as it is produced (Node, or browsers that
   * stream request bodies). A failure after some documents were stored throws a StratusError;
   * the documents before it stay.
   */
  async insert(documents: Iterable<Partial<T>> | AsyncIterable<Partial<T>>, options: CallOptions = {}): Promise<T[]> {
    const stored: T[] = [];
    for await (const document of this.insertEach(documents, options)) stored.push(document);
    return stored;
  }

  /**
   * `insert`, with the stored documents streamed back as the service answers them instead of
   * gathered: for imports too large to hold (the `stratus db import` command uses it).
   */
  insertEach(
    documents: Iterable<Partial<T>> | AsyncIterable<Partial<T>>,
    options: CallOptions = {},
  ): AsyncGenerator<T, void, undefined> {
    const body =
      Symbol.asyncIterator in documents
        ? ndjsonBody(documents as AsyncIterable<unknown>)
        : Array.from(documents as Iterable<unknown>, (document) => `${JSON.stringify(document)}\n`).join('');
    return this.transport.ndjson<T>({
      method: 'POST',
      service: 'docdb',
      path: this.action('insert'),
      body,
      headers: { 'content-type': 'application/x-ndjson' },
      ...options,
    });
  }

  /**
   * The documents matching `filter` (the docdb filter language; `{}` matches all), streamed as
   * they are read. Leaving the loop or aborting `signal` ends the request.
   */
  find(filter: Record<string, unknown> = {}, options: TraversalOptions = {}): AsyncGenerator<T, void, undefined> {
    const { signal, ...traversal } = options;
    return this.transport.ndjson<T>({
      method: 'POST',
      service: 'docdb',
      path: this.action('find'),
      json: traversalBody(filter, traversal),
      signal,
    });
  }

  /** The first document matching `filter`, or null. */
  async findOne(filter: Record<string, unknown> = {}, options: TraversalOptions = {}): Promise<T | null> {
    for await (const document of this.find(filter, { ...options, limit: 1 })) return document;
    return null;
  }

  /** A document by its `id` (found through a map index on `id` when there is one); 404 when none. */
  async getDocument(id: string, options: CallOptions = {}): Promise<T> {
    // The route answers `{id, document, source}`; its OpenAPI document does not describe the body.
    const result = await this.transport.json<{ document: T }>({
      method: 'GET',
      service: 'docdb',
      path: `${this.action('')}/documents/${segment(id)}`,
      ...options,
    });
    return result.document;
  }

  /** Applies a JSON merge patch to each selected document; answers them after the patch. */
  patch(filter: Record<string, unknown>, patch: Record<string, unknown>, options: TraversalOptions = {}): Promise<T[]> {
    const { signal, ...traversal } = options;
    return collect(
      this.transport.ndjson<T>({
        method: 'POST',
        service: 'docdb',
        path: this.action('patch'),
        json: { ...traversalBody(filter, traversal), patch },
        signal,
      }),
    );
  }

  /** Deletes each selected document; answers them as they were. */
  remove(filter: Record<string, unknown>, options: TraversalOptions = {}): Promise<T[]> {
    const { signal, ...traversal } = options;
    return collect(
      this.transport.ndjson<T>({
        method: 'POST',
        service: 'docdb',
        path: this.action('remove'),
        json: traversalBody(filter, traversal),
        signal,
      }),
    );
  }

  createIndex(index: IndexDefinition, options: CallOptions = {}): Promise<Index> {
    return this.transport.json({
      method: 'POST',
      service: 'docdb',
      path: this.action('createIndex'),
      json: index,
      ...options,
    });
  }

  listIndexes(options: CallOptions = {}): Promise<Index[]> {
    return this.transport.json({
      method: 'POST',
      service: 'docdb',
      path: this.action('listIndexes'),
      json: {},
      ...options,
    });
  }

  dropIndex(name: string, options: CallOptions = {}): Promise<void> {
    return this.transport.empty({
      method: 'POST',
      service: 'docdb',
      path: this.action('dropIndex'),
      json: { name },
      ...options,
    });
  }

  /** Deletes the collection with its documents, indexes and defaults. */
  drop(options: CallOptions = {}): Promise<void> {
    return this.transport.empty({ method: 'POST', service: 'docdb', path: this.action('dropCollection'), ...options });
  }
}

function traversalBody(
  filter: Record<string, unknown>,
  options: Omit<TraversalOptions, 'signal'>,
): Record<string, unknown> {
  return { ...options, filter, limit: options.limit ?? -1 };
}

async function collect<T>(values: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const value of values) out.push(value);
  return out;
}

/** An async iterable's values as an NDJSON byte stream, pulled as the request body is sent. */
function ndjsonBody(values: AsyncIterable<unknown>): ReadableStream<Uint8Array> {
  const iterator = values[Symbol.asyncIterator]();
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await iterator.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(`${JSON.stringify(next.value)}\n`));
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}
