import type { ConfigRepository } from '../repository.ts';

/** What every route of the config service is given by index.ts. */
export interface RouteDeps {
  repository: ConfigRepository;
  /** The Stratus version, answered by `GET /version`. */
  version: string;
}
