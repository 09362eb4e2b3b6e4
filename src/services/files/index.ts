import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../../core/service.ts';
import { BlobRefs, type BlobRefsOptions } from '../../store/blob/refs.ts';
import { BucketRepository } from './buckets.ts';
import { FileRepository } from './files.ts';
import { filesMigrations } from './migrations.ts';
import { registerBucketRoutes } from './routes/buckets.ts';
import { registerFileRoutes } from './routes/files.ts';
import { createNanoClock, type NanoClock } from './timestamps.ts';

export interface FilesServiceOptions {
  /** Upload limit in bytes; default the `FILES_MAX_UPLOAD_BYTES` setting (10 GiB). */
  maxUploadBytes?: number;
  /** Blob reference sweeper settings (grace period, interval); tests shorten them. */
  blobRefs?: Pick<BlobRefsOptions, 'graceMs' | 'sweepIntervalMs' | 'now'>;
  /** Nanosecond clock for timestamps (tests). */
  clock?: NanoClock;
}

/** The file-bucket service (files.md). */
export function createFilesService(options: FilesServiceOptions = {}): ServiceDefinition {
  return {
    name: 'files',
    migrations: filesMigrations,
    async build({ settings, store, logger, version }) {
      const maxUploadBytes = options.maxUploadBytes ?? settings.filesMaxUploadBytes;
      const app = await createServiceApp({
        name: 'files',
        title: 'Stratus files',
        version,
        logger,
        description: 'File buckets: buckets owned by users, files addressed by path, streamed uploads and downloads.',
        jsonForAnyContentType: true,
      });
      const work = store.sql.database;
      const clock = options.clock ?? createNanoClock();
      const refs = new BlobRefs(store.sql, store.blobs, {
        ...options.blobRefs,
        onError: (error) => logger.warn({ err: error }, 'blob sweep failed; retrying on the next interval'),
      });
      const buckets = new BucketRepository(work, refs, clock);
      const files = new FileRepository(work, refs, clock);
      // The sweeper runs while the app does: from ready to close.
      app.addHook('onReady', async () => refs.start());
      app.addHook('onClose', async () => {
        await refs.stop();
      });

      // Raw-body scope: no parser reads the body; the request stream is handed over untouched.
      await app.register(async (plain) => {
        const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
        scope.removeAllContentTypeParsers();
        scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
        // An answer sent before the body was read to its end (413, 404, 400, a failed upload)
        // closes the connection: the rest of the body must not be read as the next request.
        scope.addHook('onSend', async (request, reply) => {
          const hasBody = request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
          if (hasBody && !request.raw.readableEnded) reply.header('connection', 'close');
        });
        registerFileRoutes(scope, { files, blobs: store.blobs, refs, maxUploadBytes });
        registerBucketRoutes(app, scope, buckets);
      });
      return app;
    },
  };
}

export const filesService: ServiceDefinition = createFilesService();
