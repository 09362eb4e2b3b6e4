import type { PlatformMetrics } from '../../../metrics/index.ts';
import type { BlobRefs } from '../../../store/blob/refs.ts';
import type { BlobStore } from '../../../store/blob/types.ts';
import type { BucketRepository, FileRepository } from '../repository.ts';

/** What every route of the files service is given by index.ts. */
export interface RouteDeps {
  buckets: BucketRepository;
  files: FileRepository;
  blobs: BlobStore;
  refs: BlobRefs;
  /** Upload limit in bytes. */
  maxUploadBytes: number;
  /** Content bytes in and out (README.md: Metrics); absent when built alone. */
  metrics?: Pick<PlatformMetrics, 'files'>;
}
