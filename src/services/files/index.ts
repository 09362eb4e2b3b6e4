import { createServiceApp } from '../../core/app.ts';
import type { ServiceDefinition } from '../context.ts';
import { BlobRefs, type BlobRefsOptions } from '../../store/blob/refs.ts';
import { filesMigrations } from './migrations.ts';
import { BucketRepository, FileRepository } from './repository.ts';
import { registerFilesRoutes } from './routes/index.ts';
import { createNanoClock, type NanoClock } from './timestamps.ts';

export interface FilesServiceOptions {
  /** Upload limit in bytes; default the `FILES_MAX_UPLOAD_BYTES` setting (10 GiB). */
  maxUploadBytes?: number;
  /** Blob reference sweeper settings (grace period, interval); tests shorten them. */
  blobRefs?: Pick<BlobRefsOptions, 'graceMs' | 'sweepIntervalMs' | 'now'>;
  /** Nanosecond clock for timestamps (tests). */
  clock?: NanoClock;
}

/** The file-bucket service (README.md). */
export function createFilesService(options: FilesServiceOptions = {}): ServiceDefinition {
  return {
    name: 'files',
    migrations: filesMigrations,
    async build({ settings, store, logger, version, metrics }) {
      const maxUploadBytes = options.maxUploadBytes ?? settings.filesMaxUploadBytes;
      const app = await createServiceApp({
        name: 'files',
        domain: settings.domain,
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
      const files = new FileRepository(work, refs, clock, {
        onBatchRedone: (error) =>
          logger.debug({ err: error }, 'a batch of upload commits failed; committing each alone'),
      });
      // The sweeper runs while the app does: from ready to close.
      app.addHook('onReady', async () => refs.start());
      app.addHook('onClose', async () => {
        await refs.stop();
      });
      await registerFilesRoutes(app, {
        buckets,
        files,
        blobs: store.blobs,
        refs,
        maxUploadBytes,
        ...(metrics ? { metrics } : {}),
      });
      return app;
    },
  };
}

export const filesService: ServiceDefinition = createFilesService();
