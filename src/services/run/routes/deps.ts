import type { BlobRefs } from '../../../store/blob/refs.ts';
import type { BlobStore } from '../../../store/blob/types.ts';
import type { RuntimeDriver } from '../driver.ts';
import type { UploadFollowers } from '../registry/follower.ts';
import type { RunRepository } from '../repository.ts';
import type { ServiceCalls } from '../../context.ts';

/** What every route of the run service is given by index.ts. */
export interface RouteDeps {
  /** The service version, answered by `/version`. */
  version: string;
  /** The platform domain: a running repository answers on `<slug>.run.<domain>`. */
  domain: string;
  repository: RunRepository;
  driver: RuntimeDriver;
  blobs: BlobStore;
  refs: BlobRefs;
  /** Largest blob accepted (`RUN_MAX_BLOB_BYTES`). */
  maxBlobBytes: number;
  /** An upload idle this long is unknown (and swept). */
  uploadExpiryMs: number;
  now: () => number;
  /** The platform's services (the logs service checks a repository's logger); absent when built alone. */
  services: ServiceCalls | undefined;
  /** This instance's followers of chunked uploads (see registry/follower.ts). */
  followers: UploadFollowers;
  /** Told of the registry's bytes in as they are read (README.md: Metrics); absent when built alone. */
  received?: (bytes: number) => void;
}
