import { randomUUID } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { hash } from '@node-rs/bcrypt';
import { Type } from 'typebox';
import type { FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../core/app.ts';
import { notFound, validationError } from '../../core/errors.ts';
import type { LogsAccess } from './access.ts';
import { Pacer } from '../../core/pacer.ts';
import { FilterTimeLimitError, type LogFilters } from './filters.ts';
import type { LoggerRepository } from './loggers.ts';
import { compilePatterns } from './patterns.ts';
import type { LogStats } from './stats.ts';
import { runStream, type FollowHub } from './streams.ts';

/** bcrypt cost for logger key secrets (logs.md §5.1). */
const SECRET_HASH_COST = 10;
const MAX_NAME_LENGTH = 200;
const MAX_OWNER_ID_LENGTH = 256;

export interface LogsLimits {
  /** Retention bound per logger, raw lines and events together. */
  maxBytes: number;
  /** Largest ingest body (raw or events); above → 413. */
  maxIngestBytes: number;
}

export interface LogsDeps {
  loggers: LoggerRepository;
  access: LogsAccess;
  hub: FollowHub;
  stats: LogStats;
  filters: LogFilters;
  limits: LogsLimits;
}

const errorBody = Type.Object({ error: Type.Object({ status: Type.Integer(), code: Type.String(), message: Type.String() }) });
const name = Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, pattern: '^[^\\u0000]*$', description: `1–${MAX_NAME_LENGTH} characters` });
const loggerRecord = Type.Object({
  id: Type.String({ description: 'UUID v4' }),
  name: Type.String(),
  owners: Type.Array(Type.String()),
  api_keys: Type.Array(Type.Object({ id: Type.String(), name: Type.String(), created_at: Type.String() })),
  usage: Type.Object({ bytes: Type.Integer(), lines: Type.Integer() }),
  created_at: Type.String(),
});
const idParams = Type.Object({ id: Type.String() });
const streamQuery = Type.Object({ regex: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])), follow: Type.Optional(Type.String()) });
const errors = { 400: errorBody, 401: errorBody, 403: errorBody, 404: errorBody };
const scoped = 'Access: the identity of an owner, or Api-Key + Api-Secret of a key of this logger.';

/** Newlines searched for between looks at the clock (a body of nothing but newlines is the slow case). */
const LINES_PER_LOOK = 1 << 16;

/**
 * A raw body's lines; a final segment without `\n` gets one (logs.md §4.5). A 64 MiB body of empty
 * lines is 64 million searches, so the count yields to the event loop as it goes.
 */
async function asLines(body: Buffer): Promise<{ data: Buffer; lines: number }> {
  const pacer = new Pacer();
  let lines = 0;
  for (let at = body.indexOf(10); at !== -1; at = body.indexOf(10, at + 1)) {
    if (++lines % LINES_PER_LOOK === 0) await pacer.pace();
  }
  if (body.length > 0 && body[body.length - 1] !== 10) return { data: Buffer.concat([body, Buffer.from('\n')]), lines: lines + 1 };
  return { data: body, lines };
}

function rawBody(request: FastifyRequest): Buffer {
  return Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
}

export function registerLogsRoutes(app: ServiceApp, deps: LogsDeps): void {
  const { loggers, access, hub, stats, filters, limits } = deps;
  const tags = ['loggers'];

  async function loadOr404(id: string) {
    const record = await loggers.get(id);
    if (!record) throw notFound('logger not found');
    return record;
  }

  app.get('/v1/loggers', { schema: { tags, summary: "List the caller's loggers in creation order", response: { 200: Type.Array(loggerRecord), 401: errorBody } } }, async (request) =>
    loggers.listOwnedBy(access.requireUser(request)),
  );

  app.post(
    '/v1/loggers',
    { schema: { tags, summary: 'Create a logger owned by the caller', body: Type.Object({ name }), response: { 201: loggerRecord, 400: errorBody, 401: errorBody } } },
    async (request, reply) => {
      const owner = access.requireUser(request);
      return reply.code(201).send(await loggers.create(request.body.name, owner));
    },
  );

  app.get('/v1/loggers/:id', { schema: { tags, summary: 'Get a logger', description: scoped, params: idParams, response: { 200: loggerRecord, ...errors } } }, async (request) => {
    await access.authorize(request, request.params.id);
    return loadOr404(request.params.id);
  });

  app.delete('/v1/loggers/:id', { schema: { tags, summary: 'Delete a logger, its data and its keys', description: scoped, params: idParams, response: { 204: Type.Null({ description: 'empty body' }), ...errors } } }, async (request, reply) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    if (!(await loggers.delete(loggerId))) throw notFound('logger not found');
    stats.forget(loggerId);
    // Open streams notice the deletion on their next wake-up; keys stop everywhere.
    await Promise.allSettled([access.revoke({ logger: loggerId }), hub.announce(loggerId)]);
    return reply.code(204).send(null);
  });

  app.get('/v1/loggers/:id/stats', {
    schema: {
      tags,
      summary: "This instance's counters for the logger since it started, and its retained data",
      description: scoped,
      params: idParams,
      response: {
        200: Type.Object({
          total_bytes_sent: Type.Integer(),
          total_bytes_received: Type.Integer(),
          total_bytes_filtered: Type.Integer(),
          last_regexps: Type.Array(Type.String()),
          concurrent_filters: Type.Integer(),
          concurrent_ingests: Type.Integer(),
          total_filters: Type.Integer(),
          total_ingests: Type.Integer(),
          block: Type.Object({ bytes: Type.Integer(), lines: Type.Integer(), events: Type.Integer(), max_bytes: Type.Integer() }),
        }),
        ...errors,
      },
    },
  }, async (request) => {
    const { loggerId } = await access.authorize(request, request.params.id);
    const c = stats.of(loggerId);
    const usage = await loggers.usageByKind(loggerId);
    return {
      total_bytes_sent: c.bytesSent,
      total_bytes_received: c.bytesReceived,
      total_bytes_filtered: c.bytesFiltered,
      last_regexps: [...c.lastRegexps],
      concurrent_filters: c.concurrentFilters,
      concurrent_ingests: c.concurrentIngests,
      total_filters: c.totalFilters,
      total_ingests: c.totalIngests,
      block: { bytes: usage.bytes, lines: usage.rawLines, events: usage.events, max_bytes: limits.maxBytes },
    };
  });

  app.post(
    '/v1/loggers/:id/apiKeys',
    {
      schema: {
        tags,
        summary: 'Create a logger API key; the secret is returned only here',
        description: scoped,
        params: idParams,
        body: Type.Object({ name }),
        response: { 201: Type.Object({ id: Type.String(), name: Type.String(), key: Type.String(), secret: Type.String(), created_at: Type.String() }), ...errors },
      },
    },
    async (request, reply) => {
      const { loggerId } = await access.authorize(request, request.params.id);
      const key = randomUUID();
      const secret = randomUUID();
      const view = await loggers.createKey(loggerId, request.body.name, key, await hash(secret, SECRET_HASH_COST));
      if (!view) throw notFound('logger not found');
      return reply.code(201).send({ id: view.id, name: view.name, key, secret, created_at: view.created_at });
    },
  );

  app.delete(
    '/v1/loggers/:id/apiKeys/:apiKey',
    { schema: { tags, summary: 'Delete a logger API key (by its id); it stops working at once', description: scoped, params: Type.Object({ id: Type.String(), apiKey: Type.String() }), response: { 204: Type.Null({ description: 'empty body' }), ...errors } } },
    async (request, reply) => {
      const { loggerId } = await access.authorize(request, request.params.id);
      const key = await loggers.deleteKey(loggerId, request.params.apiKey);
      if (key === null) throw notFound('API key not found');
      await access.revoke({ key }).catch((error: unknown) => request.log.warn({ err: error }, 'logs key revocation not published'));
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v1/loggers/:id/owners',
    {
      schema: {
        tags,
        summary: 'Add an owner (an existing owner is no change); returns the owners',
        description: scoped,
        params: idParams,
        body: Type.Object({ user_id: Type.String({ minLength: 1, maxLength: MAX_OWNER_ID_LENGTH, pattern: '^[^\\u0000]*$' }) }),
        response: { 200: Type.Array(Type.String()), ...errors },
      },
    },
    async (request) => {
      const { loggerId } = await access.authorize(request, request.params.id);
      const owners = await loggers.addOwner(loggerId, request.body.user_id);
      if (!owners) throw notFound('logger not found');
      return owners;
    },
  );

  app.delete(
    '/v1/loggers/:id/owners/:ownerId',
    {
      schema: {
        tags,
        summary: 'Remove an owner other than yourself; returns the owners',
        description: `${scoped} Removing yourself or the last owner → 400; a user who is not an owner → 404.`,
        params: Type.Object({ id: Type.String(), ownerId: Type.String() }),
        response: { 200: Type.Array(Type.String()), ...errors },
      },
    },
    async (request) => {
      const { loggerId, userId } = await access.authorize(request, request.params.id);
      const ownerId = request.params.ownerId;
      if (userId !== null && userId === ownerId) throw validationError('an owner cannot remove themselves');
      const result = await loggers.deleteOwner(loggerId, ownerId);
      if (result.status === 'deleted') return result.owners;
      if (result.status === 'last_owner') throw validationError('a logger keeps at least one owner');
      if (result.status === 'not_owner') throw notFound('not an owner of this logger');
      throw notFound('logger not found');
    },
  );

  for (const [path, kind] of [
    ['/v1/loggers/:id/filter', 'raw'],
    ['/v1/loggers/:id/events', 'event'],
  ] as const) {
    app.get(
      path,
      {
        schema: {
          tags: ['streams'],
          summary: kind === 'raw' ? 'Stream matching raw lines (text/plain); every regex must match; follow keeps the stream open' : 'Stream matching events (NDJSON); regex is tested on the message',
          description: scoped,
          params: idParams,
          querystring: streamQuery,
          response: { 200: Type.String(), ...errors },
        },
      },
      async (request, reply) => {
        // Access first (a stranger learns nothing), then every pattern compiles before streaming.
        const { loggerId } = await access.authorize(request, request.params.id);
        const patterns = compilePatterns(request.query.regex);
        const follow = request.query.follow !== undefined;
        reply.hijack();
        await runStream(reply.raw, { loggerId, kind, patterns, follow }, { loggers, hub, stats, filters }).catch((error: unknown) => {
          if (error instanceof FilterTimeLimitError) request.log.warn({ loggerId, patterns: patterns.map((p) => p.source) }, `logs stream cut off: ${error.message}`);
          else request.log.error({ err: error }, 'logs stream failed');
          reply.raw.destroy();
        });
      },
    );
  }

  // Raw and events bodies are bytes: parsed here, not by the app's JSON parser.
  app.register(async (plain) => {
    const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limits.maxIngestBytes }, (_request, body, done) => done(null, body));

    scope.post(
      '/v1/loggers/:id/ingest',
      { schema: { tags: ['ingest'], summary: 'Append the body bytes as lines; answers once durably stored', description: scoped, params: idParams, response: { 200: Type.Object({ n: Type.Integer() }), ...errors, 413: errorBody } } },
      async (request) => {
        const { loggerId } = await access.authorize(request, request.params.id);
        const body = rawBody(request);
        const counters = stats.of(loggerId);
        counters.totalIngests++;
        counters.bytesReceived += body.length;
        if (body.length === 0) return { n: 0 };
        counters.concurrentIngests++;
        try {
          const { data, lines } = await asLines(body);
          if ((await loggers.append(loggerId, 'raw', data, lines, limits.maxBytes)) === null) throw notFound('logger not found');
        } finally {
          counters.concurrentIngests--;
        }
        await hub.announce(loggerId).catch((error: unknown) => request.log.warn({ err: error }, 'logs append not announced'));
        return { n: body.length };
      },
    );

    scope.post(
      '/v1/ingest/events',
      { schema: { tags: ['ingest'], summary: "Ingest NDJSON or logframe events into the key's logger", response: { 200: Type.Object({ events: Type.Integer(), bytes: Type.Integer() }), 400: errorBody, 401: errorBody, 413: errorBody } } },
      async (request) => {
        const loggerId = await access.keyLogger(request);
        const body = rawBody(request);
        // Parsed off the event loop when large; all or nothing (a 4xx stores nothing).
        const { data, count } = await filters.parseEvents(body, request.headers['content-type'], new Date().toISOString());
        const counters = stats.of(loggerId);
        counters.totalIngests++;
        counters.bytesReceived += body.length;
        if (count === 0) return { events: 0, bytes: body.length };
        counters.concurrentIngests++;
        try {
          if ((await loggers.append(loggerId, 'event', data, count, limits.maxBytes)) === null) throw notFound('logger not found');
        } finally {
          counters.concurrentIngests--;
        }
        await hub.announce(loggerId).catch((error: unknown) => request.log.warn({ err: error }, 'logs append not announced'));
        return { events: count, bytes: body.length };
      },
    );
  });
}
