import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { OpenApiDocument } from '../../src/core/openapi.ts';
import { mergeDocuments } from '../../src/gateway/openapi-merge.ts';

const error = { type: 'object', properties: { error: { type: 'object' } } };
const bearer = { type: 'http', scheme: 'bearer' };

/** A document as a service serves it; path items may carry `parameters` and `servers` beside operations. */
function doc(title: string, extra: Record<string, unknown>): OpenApiDocument {
  return { openapi: '3.0.3', info: { title, version: '1.0.0' }, paths: {}, ...extra } as OpenApiDocument;
}

describe('merged OpenAPI document', () => {
  const files = doc('Stratus files', {
    servers: [{ url: 'http://files.localhost' }],
    security: [{ bearer: [] }],
    paths: {
      '/v1/buckets': {
        get: {
          operationId: 'listBuckets',
          responses: { 200: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Bucket' } } } } },
        },
      },
      '/': { get: { operationId: 'root', security: [], responses: {} } },
    },
    components: {
      schemas: { Error: error, Bucket: { type: 'object', properties: { id: { type: 'string' } } } },
      securitySchemes: { bearer },
    },
  });
  const docdb = doc('Stratus docdb', {
    paths: {
      '/v1/databases/{id}': {
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        servers: [{ url: 'http://docdb.localhost' }],
        post: {
          operationId: 'createDatabase',
          tags: ['databases'],
          responses: { 400: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } },
        },
      },
    },
    components: {
      schemas: { Error: error, Bucket: { type: 'string' } },
      securitySchemes: { bearer },
    },
  });
  const merged = mergeDocuments(
    [
      { name: 'files', document: files },
      { name: 'docdb', document: docdb },
    ],
    { title: 'Stratus', version: '1.0.0' },
  );

  it('puts every path under /services/<name>, with the front door as its server', () => {
    assert.deepEqual(Object.keys(merged.paths ?? {}), [
      '/services/files/v1/buckets',
      '/services/files/',
      '/services/docdb/v1/databases/{id}',
    ]);
    assert.deepEqual(merged.servers, [
      { url: '/', description: 'The front door: every service under /services/<name>' },
    ]);
    assert.equal(merged.paths?.['/services/docdb/v1/databases/{id}']?.servers, undefined);
    assert.ok(merged.paths?.['/services/docdb/v1/databases/{id}']?.parameters, 'path-level parameters stay');
  });

  it('prefixes operation ids and tags each operation with its service', () => {
    const list = merged.paths?.['/services/files/v1/buckets']?.get as { operationId: string; tags: string[] };
    const create = merged.paths?.['/services/docdb/v1/databases/{id}']?.post as { operationId: string; tags: string[] };
    assert.equal(list.operationId, 'filesListBuckets');
    assert.equal(create.operationId, 'docdbCreateDatabase');
    assert.deepEqual(create.tags, ['docdb']);
    assert.deepEqual(
      (merged.tags as { name: string }[]).map((t) => t.name),
      ['files', 'docdb'],
    );
  });

  it("moves a document's security onto its operations, keeping an operation's own", () => {
    const list = merged.paths?.['/services/files/v1/buckets']?.get as { security: unknown };
    const root = merged.paths?.['/services/files/']?.get as { security: unknown };
    const create = merged.paths?.['/services/docdb/v1/databases/{id}']?.post as { security?: unknown };
    assert.deepEqual(list.security, [{ bearer: [] }]);
    assert.deepEqual(root.security, []);
    assert.equal(create.security, undefined);
  });

  it('keeps components defined alike once; of different definitions the most shared keeps the name, with the refs', () => {
    assert.deepEqual(Object.keys(merged.components?.schemas ?? {}).sort(), ['Bucket', 'DocdbBucket', 'Error']);
    assert.deepEqual(Object.keys(merged.components?.securitySchemes ?? {}), ['bearer']);
    const list = merged.paths?.['/services/files/v1/buckets']?.get as {
      responses: Record<string, { content: Record<string, { schema: { $ref: string } }> }>;
    };
    assert.equal(list.responses['200']?.content['application/json']?.schema.$ref, '#/components/schemas/Bucket');
    const create = merged.paths?.['/services/docdb/v1/databases/{id}']?.post as {
      responses: Record<string, { content: Record<string, { schema: { $ref: string } }> }>;
    };
    assert.equal(create.responses['400']?.content['application/json']?.schema.$ref, '#/components/schemas/Error');
  });

  it('leaves the parts unchanged', () => {
    assert.equal((files.paths?.['/v1/buckets']?.get as { operationId: string }).operationId, 'listBuckets');
    assert.ok(docdb.paths?.['/v1/databases/{id}']?.servers);
  });

  it('is OpenAPI 3.1 when any part is, carrying the 3.0 parts over', () => {
    const old = doc('old', { components: { schemas: { Name: { type: 'string', nullable: true } } } });
    const newer = { ...doc('newer', {}), openapi: '3.1.0' };
    const both = mergeDocuments(
      [
        { name: 'old', document: old },
        { name: 'newer', document: newer },
      ],
      { title: 'x', version: '1' },
    );
    assert.equal(both.openapi, '3.1.0');
    assert.deepEqual(both.components?.schemas?.Name, { type: ['string', 'null'] });
    assert.equal(mergeDocuments([{ name: 'old', document: old }], { title: 'x', version: '1' }).openapi, '3.0.3');
  });
});
