import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { createConfig, lintFromString, type Config } from '@redocly/openapi-core';
import type { ServiceName } from '../../src/config.ts';
import type { ServiceApp } from '../../src/core/app.ts';
import { OPERATION_METHODS, type OpenApiDocument } from '../../src/core/openapi.ts';
import { buildGatewayApp } from '../../src/gateway/app.ts';
import { GatewayStats } from '../../src/gateway/stats.ts';
import { AVAILABLE_SERVICES } from '../../src/services/index.ts';
import { openSqlite } from '../../src/store/db.ts';
import { startTestService } from '../helpers/service.ts';

// Issue 21, item 3: every service's own document is fit for client generators. Redocly's
// recommended rules report no error, every operation has a unique operationId, wildcard paths
// are a named parameter, and NDJSON streams say so.

/** The routes that stream NDJSON with `Content-Type: application/x-ndjson`, by document. */
const NDJSON_ROUTES: Partial<Record<string, [string, string][]>> = {
  logs: [['get', '/v1/loggers/{id}/events']],
  kv: [['post', '/v1/replicate']],
};

const documents = new Map<string, OpenApiDocument>();
let redocly: Config;

before(async () => {
  redocly = await createConfig({ extends: ['recommended'] });
  const services: Awaited<ReturnType<typeof startTestService>>[] = [];
  const apps = new Map<ServiceName, ServiceApp>();
  const connection = openSqlite(':memory:');
  try {
    for (const [name, definition] of AVAILABLE_SERVICES) {
      const service = await startTestService(definition, { schedulerApiKeys: ['test-scheduler-key'] });
      services.push(service);
      apps.set(name, service.app);
      const response = await service.app.inject({
        method: 'GET',
        url: '/openapi.json',
        headers: { host: `${name}.localhost:8080` },
      });
      assert.equal(response.statusCode, 200, `${name}: ${response.body}`);
      documents.set(name, response.json<OpenApiDocument>());
    }
    const gateway = await buildGatewayApp({
      version: 't',
      logger: pino({ level: 'silent' }),
      domain: 'localhost',
      connection,
      stats: new GatewayStats(),
      services: apps,
      upstreamUrls: {},
    });
    try {
      // The gateway's own document on its host, and the platform's merged one on the front door.
      for (const [name, host] of [
        ['gateway', 'gateway.localhost'],
        ['platform', 'localhost:8080'],
      ] as const) {
        const response = await gateway.inject({ method: 'GET', url: '/openapi.json', headers: { host } });
        assert.equal(response.statusCode, 200);
        documents.set(name, response.json<OpenApiDocument>());
      }
    } finally {
      await gateway.close();
    }
  } finally {
    await Promise.all(services.map((service) => service.close()));
    await connection.close();
  }
});

after(() => documents.clear());

function operationsOf(document: OpenApiDocument) {
  return Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.entries(operations)
      .filter(([method]) => OPERATION_METHODS.has(method))
      .map(([method, operation]) => ({ path, method, operation })),
  );
}

describe('OpenAPI documents of every service and the gateway', () => {
  it('builds a document for every service and the gateway', () => {
    assert.deepEqual([...documents.keys()].sort(), [...AVAILABLE_SERVICES.keys(), 'gateway', 'platform'].sort());
  });

  it("Redocly's recommended rules report no error (warnings are counted)", async () => {
    const report: string[] = [];
    for (const [name, document] of documents) {
      const problems = await lintFromString({
        source: JSON.stringify(document),
        absoluteRef: `/${name}/openapi.json`,
        config: redocly,
      });
      const errors = problems.filter((p) => p.severity === 'error');
      const warnings = problems.filter((p) => p.severity === 'warn');
      report.push(`${name}: ${errors.length} errors, ${warnings.length} warnings`);
      assert.deepEqual(
        errors.map((e) => `${e.ruleId}: ${e.message} at ${e.location[0]?.pointer ?? '?'}`),
        [],
        `${name} has lint errors`,
      );
    }
    console.log(`redocly lint (recommended): ${report.join('; ')}`);
  });

  it('every operation has an operationId, unique within its document, and declares its security', () => {
    for (const [name, document] of documents) {
      const seen = new Set<string>();
      for (const { path, method, operation } of operationsOf(document)) {
        const id = operation.operationId;
        assert.ok(id && /^[a-z][A-Za-z0-9]*$/.test(id), `${name} ${method} ${path}: operationId ${String(id)}`);
        assert.ok(!seen.has(id), `${name}: operationId ${id} is used twice`);
        seen.add(id);
        assert.ok(Array.isArray(operation.security), `${name} ${method} ${path}: no security`);
        assert.ok(
          !JSON.stringify(operation.security).includes('gatewayIdentity'),
          `${name} ${method} ${path}: the gateway's identity header is not a caller's credential`,
        );
      }
    }
  });

  it('wildcard paths are a named parameter that allows reserved characters, never {*}', () => {
    let wildcards = 0;
    for (const [name, document] of documents) {
      for (const { path, method, operation } of operationsOf(document)) {
        assert.ok(!path.includes('{*}'), `${name}: ${path}`);
        const named = operation.parameters?.find((p) => p.in === 'path' && p.name === 'path');
        if (path.includes('{path}')) {
          wildcards++;
          assert.equal(named?.allowReserved, true, `${name} ${method} ${path}`);
        }
      }
    }
    assert.ok(wildcards >= 6, 'files, kv and the lambda mux have wildcard routes');
    const files = documents.get('files')!;
    assert.ok(files.paths['/v1/buckets/{bucket_id}/files/{path}']?.put);
  });

  it('NDJSON streams declare application/x-ndjson; SSE and text are declared as served', () => {
    for (const [name, routes] of Object.entries(NDJSON_ROUTES)) {
      for (const [method, path] of routes ?? []) {
        const responses = documents.get(name)!.paths[path]?.[method]?.responses as
          Record<string, { content?: Record<string, unknown> }> | undefined;
        assert.deepEqual(Object.keys(responses?.['200']?.content ?? {}), ['application/x-ndjson'], `${name} ${path}`);
      }
    }
    const content = (name: string, path: string, method = 'get') =>
      Object.keys(
        (documents.get(name)!.paths[path]?.[method]?.responses as Record<string, { content?: object }>)['200']
          ?.content ?? {},
      );
    assert.deepEqual(content('scheduler', '/schedulers/{id}/tasks/stream'), ['text/event-stream']);
    assert.deepEqual(content('logs', '/v1/loggers/{id}/filter'), ['text/plain']);
    assert.deepEqual(content('gateway', '/version'), ['text/plain']);
  });

  it('raw bodies are declared: file uploads, log ingest, key-value values', () => {
    const body = (name: string, path: string, method: string) =>
      Object.keys(
        (documents.get(name)!.paths[path]?.[method]?.requestBody as { content?: object } | undefined)?.content ?? {},
      );
    assert.deepEqual(body('files', '/v1/buckets/{bucket_id}/files/{path}', 'put'), ['application/octet-stream']);
    assert.ok(body('logs', '/v1/loggers/{id}/ingest', 'post').includes('text/plain'));
    assert.ok(body('logs', '/v1/ingest/events', 'post').includes('application/x-ndjson'));
    assert.deepEqual(body('kv', '/v1/collections/{col}/keys/{path}', 'post'), ['application/json']);
  });

  it('declares the real credentials, named schemas and the servers a service is reachable at', () => {
    const files = documents.get('files')!;
    const schemes = files.components?.securitySchemes as Record<string, { name?: string; in?: string }>;
    assert.equal(schemes.apiKey?.name, 'Api-Key');
    assert.equal(schemes.apiSecret?.name, 'Api-Secret');
    assert.equal(schemes.session?.in, 'cookie');
    assert.ok(schemes.bearer);
    assert.equal(schemes.gatewayIdentity, undefined);
    assert.ok(documents.get('scheduler')!.components?.securitySchemes?.schedulerApiKey);
    for (const [name, document] of documents) {
      // The console's routes (static files, canned mock data) declare no error answer.
      if (name === 'console') continue;
      assert.ok(document.components?.schemas?.Error, `${name}: the error envelope is a named schema`);
    }
    assert.ok(files.components?.schemas?.Bucket && files.components.schemas.File);
    assert.deepEqual(
      files.servers?.map((s) => s.url),
      ['http://files.localhost:8080', 'http://localhost:8080/services/files'],
    );
  });
});
