import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { registerBucketRoutes } from './buckets.ts';
import { closeIfBodyUnread } from './common.ts';
import type { RouteDeps } from './deps.ts';
import { registerDeleteFile } from './delete.ts';
import { registerDownload } from './download.ts';
import { registerList } from './list.ts';
import { methodNotAllowed } from './method-not-allowed.ts';
import { registerUpload } from './upload.ts';

/**
 * Every route of the service. File routes (and PATCH of a bucket) live in a scope without body
 * parsers: an upload's body is the raw request stream, consumed by the handler (never buffered,
 * never cut by Fastify's bodyLimit; the upload limit is enforced by the handler). The other bucket
 * routes take JSON through the app's parser.
 */
export async function registerFilesRoutes(app: ServiceApp, deps: RouteDeps): Promise<void> {
  await app.register(async (plain) => {
    const raw = plain.withTypeProvider<TypeBoxTypeProvider>();
    // Raw-body scope: no parser reads the body; the request stream is handed over untouched.
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    raw.addHook('onSend', async (request, reply) => closeIfBodyUnread(request, reply));

    registerDownload(raw, deps);
    registerUpload(raw, deps);
    registerDeleteFile(raw, deps);
    registerList(raw, deps);
    methodNotAllowed(raw, '/v1/buckets/:bucket_id/files/*', ['GET', 'PUT', 'DELETE']);
    methodNotAllowed(raw, '/v1/buckets/:bucket_id/list/*', ['GET']);
    methodNotAllowed(raw, '/v1/buckets/:bucket_id/list', ['GET']);
    registerBucketRoutes(app, raw, deps);
  });
}
