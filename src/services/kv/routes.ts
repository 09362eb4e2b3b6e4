import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../core/app.ts';
import { HttpError, badRequest, forbidden, notFound, validationError } from '../../core/errors.ts';
import { IDENTITY_HEADER, PROJECT_HEADER, parseIdentity } from '../../core/identity.ts';
import { isJsonObject, parseJson, stringifyJson, type JsonValue } from '../../core/json.ts';
import { encodeLine, isoSeconds, unixSeconds, type Command } from './commands.ts';
import type { ReplicationFeed } from './feed.ts';
import type { ParentFollower } from './follower.ts';
import { callParent } from './parent.ts';
import type { KvStorage } from './storage.ts';

/** Most items one list page returns (kv.md §6.5, open: 1,000). */
export const MAX_LIST_LIMIT = 1_000;
const DEFAULT_LIST_LIMIT = 100;
/** How long a replica waits for its parent to answer a forwarded write (kv.md §7.5, open: 10 s). */
const FORWARD_TIMEOUT_MS = 10_000;
const PROJECT_ID = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_COLLECTION_LENGTH = 128;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export interface KvCounters {
  writes: number;
  reads: number;
  commandsSent: number;
  commandsReceived: number;
}

export interface KvNode {
  name: string;
  parentUrl: string | undefined;
  parentHeaders: Record<string, string>;
  startedAt: number;
  storage: KvStorage;
  feed: ReplicationFeed;
  follower: ParentFollower | undefined;
  counters: KvCounters;
}

const errorBody = Type.Object({ error: Type.Object({ status: Type.Integer(), code: Type.String(), message: Type.String() }) });
const writeResult = Type.Object({ ok: Type.Boolean(), seq: Type.Integer(), version: Type.Integer() });
const collectionResult = Type.Object({ ok: Type.Boolean(), collection: Type.String() });
const entry = Type.Object({ key: Type.String(), value: Type.Unknown({ description: 'any JSON' }), version: Type.Integer(), updatedAt: Type.String() });
const health = Type.Object({ ok: Type.Boolean(), node: Type.String(), role: Type.String() });
const colParams = Type.Object({ col: Type.String() });
const keyParams = Type.Object({ col: Type.String(), '*': Type.String() });
const presence = 'Needs X-Gateway-Authentication, or apikey + secret, or Api-Key + Api-Secret (presence only; values are not checked here). 403 `forbidden` otherwise.';

const present = (value: string | string[] | undefined) => typeof value === 'string' && value.length > 0;

/** kv.md §2: one accepted credential form present (empty values count as absent), else 403. */
function requirePresence(request: FastifyRequest): void {
  const h = request.headers;
  if (present(h[IDENTITY_HEADER]) || (present(h.apikey) && present(h.secret)) || (present(h['api-key']) && present(h['api-secret']))) return;
  throw forbidden('credentials required: X-Gateway-Authentication, apikey + secret, or Api-Key + Api-Secret');
}

/** The request's project: `X-Project-Id`, else the identity's `project.id`, else '' (the default one). */
function projectOf(request: FastifyRequest): string {
  const header = request.headers[PROJECT_HEADER];
  const project = typeof header === 'string' && header !== '' ? header : (parseIdentity(request.headers[IDENTITY_HEADER])?.project?.id ?? '');
  if (project !== '' && !PROJECT_ID.test(project)) throw badRequest('invalid_project', 'project id must be 1–64 characters from A–Z a–z 0–9 _ -');
  return project;
}

/** The key: everything after `/keys/` in the raw path, percent-decoded, slashes included (kv.md §6.4). */
function keyOf(request: FastifyRequest): string {
  const path = (request.raw.url ?? '').split('?')[0]!;
  const at = path.indexOf('/keys/', '/v1/collections/'.length);
  let key: string;
  try {
    key = decodeURIComponent(path.slice(at + '/keys/'.length));
  } catch {
    throw badRequest('invalid_key', 'the key is not valid percent-encoding');
  }
  if (key === '') throw badRequest('invalid_key', 'the key must not be empty');
  return key;
}

function collectionName(body: JsonValue | undefined): string {
  if (body === undefined) throw badRequest('missing_collection', 'a collection name is required: {"name":"…"}');
  if (!isJsonObject(body)) throw badRequest('invalid_json', 'the body must be a JSON object');
  const raw = body.name !== undefined ? body.name : body.collection;
  if (raw === undefined || raw === null || raw === '') throw badRequest('missing_collection', 'a collection name is required: {"name":"…"}');
  if (typeof raw !== 'string') throw validationError('the collection name must be a string');
  if (raw.length > MAX_COLLECTION_LENGTH || raw.includes('/') || CONTROL.test(raw)) {
    throw validationError(`collection names are 1–${MAX_COLLECTION_LENGTH} characters without "/" or control characters`);
  }
  return raw;
}

function valueOf(body: JsonValue | undefined): string {
  if (!isJsonObject(body) || !Object.prototype.hasOwnProperty.call(body, 'value')) throw badRequest('invalid_json', 'the body must be a JSON object with a "value" member');
  return stringifyJson(body.value!);
}

const json = (reply: FastifyReply, text: string, status = 200) => reply.code(status).type('application/json; charset=utf-8').send(text);

function entryJson(e: { key: string; value: string; version: number; updatedAt: number }): string {
  return `{"key":${JSON.stringify(e.key)},"value":${e.value},"version":${e.version},"updatedAt":"${isoSeconds(e.updatedAt)}"}`;
}

export function registerKvRoutes(app: ServiceApp, node: KvNode): void {
  const { storage, feed, counters } = node;
  const role = node.parentUrl ? 'replica' : 'primary';
  const healthBody = () => ({ ok: true, node: node.name, role });
  const parentConnected = () => (node.follower ? node.follower.connected : true);
  const isReady = () => (node.follower ? node.follower.ready : true);

  const alive = (reply: FastifyReply) => {
    try {
      storage.totals();
    } catch {
      throw new HttpError(500, 'internal_error', 'the node cannot read its storage');
    }
    return reply.send(healthBody());
  };
  const healthSchema = (summary: string) => ({ tags: ['health'], summary, response: { 200: health, 500: errorBody } });
  app.get('/livez', { schema: healthSchema('Alive: the node can read its storage') }, async (_request, reply) => alive(reply));
  app.get('/healthz', { schema: healthSchema('Same as /livez') }, async (_request, reply) => alive(reply));
  app.get('/startupz', { schema: healthSchema('Started: local state is loaded (it is before the node listens)') }, async (_request, reply) => alive(reply));
  app.get(
    '/readyz',
    { schema: { tags: ['health'], summary: 'Ready: state loaded and, on a replica, connected with a complete baseline; 503 otherwise', response: { 200: Type.Unknown(), 503: Type.Unknown() } } },
    async (_request, reply) => {
      const ready = isReady();
      const connected = parentConnected();
      return reply.code(ready ? 200 : 503).send({
        ok: ready,
        node: node.name,
        role,
        ready,
        status: ready ? 'ok' : 'unavailable',
        parent_connected: connected,
        checks: { wal_replayed: true, parent_connected: connected },
      });
    },
  );

  app.register(async (plain) => {
    const v1 = plain.withTypeProvider<TypeBoxTypeProvider>();
    v1.addHook('preHandler', async (request) => requirePresence(request));

    v1.get('/v1/status', { schema: { tags: ['node'], summary: "Node, role, topology and per-collection figures of the request's project", description: presence, response: { 200: Type.Unknown(), 403: errorBody } } }, async (request) => ({
      node: node.name,
      role,
      parent: node.parentUrl ?? '',
      uptime_seconds: Math.floor((Date.now() - node.startedAt) / 1000),
      children: feed.children,
      collections: storage.collectionStats(projectOf(request)),
      replication: { enabled: node.parentUrl !== undefined || feed.children > 0, parent_connected: parentConnected(), connected_replicas: feed.children, last_seq: storage.lastSeq },
    }));

    v1.get('/v1/metrics', { schema: { tags: ['node'], summary: 'Counters since the process started, and current totals', description: presence, response: { 200: Type.Unknown(), 403: errorBody } } }, async () => {
      const totals = storage.totals();
      return {
        writes_total: counters.writes,
        reads_total: counters.reads,
        replication_commands_sent_total: counters.commandsSent,
        replication_commands_received_total: counters.commandsReceived,
        children_connected: feed.children,
        parent_connected: parentConnected(),
        collections: totals.collections,
        keys_total: totals.keys,
        uptime_seconds: Math.floor((Date.now() - node.startedAt) / 1000),
      };
    });

    v1.get('/v1/collections', { schema: { tags: ['collections'], summary: 'Collection names, in creation order', description: presence, response: { 200: Type.Object({ collections: Type.Array(Type.String()) }), 400: errorBody, 403: errorBody } } }, async (request) => ({
      collections: storage.collections(projectOf(request)),
    }));

    v1.post(
      '/v1/collections',
      {
        schema: {
          tags: ['collections'],
          summary: 'Create a collection (an existing one is no change)',
          description: `${presence} Body {"name":"…"} or {"collection":"…"}; name wins when both are given.`,
          response: { 200: collectionResult, 400: errorBody, 403: errorBody, 502: errorBody },
        },
      },
      async (request, reply) => {
        const project = projectOf(request);
        const name = collectionName(request.body as JsonValue | undefined);
        if (node.follower) return forward(request, reply, project, () => ({ type: 'CREATE_COLLECTION', project, collection: name, timestamp: unixSeconds() }));
        const logged = await storage.createCollection(project, name, unixSeconds());
        if (logged) feed.publish(logged.logId, encodeLine(logged.command));
        counters.writes++;
        return { ok: true, collection: name };
      },
    );

    v1.delete('/v1/collections/:col', { schema: { tags: ['collections'], summary: 'Delete a collection and all its keys', description: presence, params: colParams, response: { 200: collectionResult, 400: errorBody, 403: errorBody, 404: errorBody, 502: errorBody } } }, async (request, reply) => {
      const project = projectOf(request);
      const name = request.params.col;
      if (!storage.hasCollection(project, name)) throw notFound('collection does not exist');
      if (node.follower) return forward(request, reply, project, () => ({ type: 'DROP_COLLECTION', project, collection: name, timestamp: unixSeconds() }));
      const logged = await storage.dropCollection(project, name, unixSeconds());
      if (!logged) throw notFound('collection does not exist');
      feed.publish(logged.logId, encodeLine(logged.command));
      counters.writes++;
      return { ok: true, collection: name };
    });

    v1.get(
      '/v1/collections/:col/keys',
      {
        schema: {
          tags: ['keys'],
          summary: 'List keys in code-point order, a page at a time',
          description: `${presence} \`next\` is the last key returned when more follow (pass it as \`after\`), else null.`,
          params: colParams,
          querystring: Type.Object({ prefix: Type.Optional(Type.String()), limit: Type.Optional(Type.String()), after: Type.Optional(Type.String()) }),
          response: { 200: Type.Object({ items: Type.Array(entry), next: Type.Union([Type.String(), Type.Null()]) }), 400: errorBody, 403: errorBody, 404: errorBody },
        },
      },
      async (request, reply) => {
        const project = projectOf(request);
        const { prefix = '', after } = request.query;
        const limitText = request.query.limit;
        const limit = limitText === undefined ? DEFAULT_LIST_LIMIT : /^[1-9]\d*$/.test(limitText) ? Number(limitText) : NaN;
        if (!Number.isSafeInteger(limit) || limit > MAX_LIST_LIMIT) throw validationError(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}`);
        if (!storage.hasCollection(project, request.params.col)) throw notFound('collection does not exist');
        const rows = storage.list(project, request.params.col, { prefix, ...(after === undefined ? {} : { after }), limit: limit + 1 });
        const page = rows.slice(0, limit);
        const next = rows.length > limit ? page[page.length - 1]!.key : null;
        counters.reads++;
        return json(reply, `{"items":[${page.map(entryJson).join(',')}],"next":${JSON.stringify(next)}}`);
      },
    );

    v1.get(
      '/v1/collections/:col/keys/*',
      { schema: { tags: ['keys'], summary: 'Get a key (everything after /keys/, slashes included)', description: presence, params: keyParams, response: { 200: entry, 400: errorBody, 403: errorBody, 404: errorBody } } },
      async (request, reply) => {
        const project = projectOf(request);
        const key = keyOf(request);
        if (!storage.hasCollection(project, request.params.col)) throw notFound('collection does not exist');
        const found = storage.get(project, request.params.col, key);
        if (!found) throw notFound('key not found');
        counters.reads++;
        return json(reply, entryJson(found));
      },
    );

    v1.post(
      '/v1/collections/:col/keys/*',
      {
        schema: {
          tags: ['keys'],
          summary: 'Set a key to {"value": <any JSON>}',
          description: `${presence} On a replica the write goes to the parent first (502 parent_unavailable when it cannot).`,
          params: keyParams,
          response: { 200: writeResult, 400: errorBody, 403: errorBody, 404: errorBody, 413: errorBody, 502: errorBody },
        },
      },
      async (request, reply) => {
        const project = projectOf(request);
        const key = keyOf(request);
        const value = valueOf(request.body as JsonValue | undefined);
        const collection = request.params.col;
        if (node.follower) {
          if (!storage.hasCollection(project, collection)) throw new HttpError(404, 'missing_collection', 'collection does not exist');
          return forward(request, reply, project, (answer) => ({ type: 'SET', project, collection, key, value, seq: answer.seq, version: answer.version, timestamp: unixSeconds() }));
        }
        const outcome = await storage.set(project, collection, key, value, unixSeconds());
        if (outcome === 'missing_collection') throw new HttpError(404, 'missing_collection', 'collection does not exist');
        feed.publish(outcome.logId, encodeLine(outcome.command));
        counters.writes++;
        return json(reply, `{"ok":true,"seq":${outcome.seq},"version":${outcome.version}}`);
      },
    );

    v1.delete(
      '/v1/collections/:col/keys/*',
      { schema: { tags: ['keys'], summary: 'Delete a key (its version is remembered)', description: presence, params: keyParams, response: { 200: writeResult, 400: errorBody, 403: errorBody, 404: errorBody, 502: errorBody } } },
      async (request, reply) => {
        const project = projectOf(request);
        const key = keyOf(request);
        const collection = request.params.col;
        if (node.follower) {
          if (!storage.hasCollection(project, collection)) throw new HttpError(404, 'missing_collection', 'collection does not exist');
          if (!storage.get(project, collection, key)) throw notFound('key not found');
          return forward(request, reply, project, (answer) => ({ type: 'DELETE', project, collection, key, seq: answer.seq, version: answer.version, timestamp: unixSeconds() }));
        }
        const outcome = await storage.delete(project, collection, key, unixSeconds());
        if (outcome === 'missing_collection') throw new HttpError(404, 'missing_collection', 'collection does not exist');
        if (outcome === 'not_found') throw notFound('key not found');
        feed.publish(outcome.logId, encodeLine(outcome.command));
        counters.writes++;
        return json(reply, `{"ok":true,"seq":${outcome.seq},"version":${outcome.version}}`);
      },
    );

    v1.post(
      '/v1/replicate',
      {
        schema: {
          tags: ['replication'],
          summary: 'Subscribe to this node: NDJSON baseline, PING, then live commands; the stream does not end on its own',
          description: `${presence} \`since=<seq>\` (an extension) resumes after that seq without a baseline when this node's log still holds what follows (the answer then carries \`X-Kv-Resumed\`). \`X-Kv-Snapshot-Seq\` names the baseline's seq.`,
          querystring: Type.Object({ since: Type.Optional(Type.String({ pattern: '^\\d{1,15}$' })) }),
          response: { 200: Type.String({ description: 'application/x-ndjson' }), 403: errorBody },
        },
      },
      async (request, reply) => {
        const since = request.query.since === undefined ? undefined : Number(request.query.since);
        reply.hijack();
        await feed.serve(reply.raw, since, node.parentUrl !== undefined).catch((error: unknown) => {
          request.log.warn({ err: error }, 'kv replication stream failed');
          reply.raw.destroy();
        });
      },
    );
  });

  /**
   * kv.md §7.5: a replica sends the write to its parent as it came, passes a 4xx back unchanged,
   * answers 502 when the parent cannot be reached (or fails), and on success applies the change
   * locally with the parent's seq and version so a read here sees it at once.
   */
  async function forward(request: FastifyRequest, reply: FastifyReply, project: string, command: (answer: { seq: number; version: number }) => Command): Promise<FastifyReply> {
    const headers: Record<string, string> = { ...node.parentHeaders, 'content-type': 'application/json' };
    if (project !== '') headers[PROJECT_HEADER] = project;
    let status: number;
    let text: string;
    try {
      const body = request.body === undefined ? undefined : stringifyJson(request.body as JsonValue);
      ({ status, text } = await callParent(node.parentUrl!, request.method, request.raw.url ?? '/', headers, body, FORWARD_TIMEOUT_MS));
    } catch (error) {
      request.log.warn({ err: error, parent: node.parentUrl }, 'kv write not forwarded');
      throw new HttpError(502, 'parent_unavailable', 'the parent node cannot be reached');
    }
    if (status >= 500) throw new HttpError(502, 'parent_unavailable', `the parent node failed (${status})`);
    if (status >= 200 && status < 300) {
      let answer: JsonValue;
      try {
        answer = parseJson(text);
      } catch {
        throw new HttpError(502, 'parent_unavailable', 'the parent node answered something unreadable');
      }
      const seq = isJsonObject(answer) && typeof answer.seq === 'number' ? answer.seq : 0;
      const version = isJsonObject(answer) && typeof answer.version === 'number' ? answer.version : 0;
      await storage.applyForwarded(command({ seq, version }));
      counters.writes++;
    }
    return json(reply, text, status);
  }
}
