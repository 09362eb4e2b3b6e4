import type { ApikeysEvents } from '../events.ts';
import type { ApikeysRepository } from '../repository.ts';

/** What every route of the apikeys service is given by index.ts. */
export interface RouteDeps {
  repository: ApikeysRepository;
  events: ApikeysEvents;
  /** The platform domain: a project's host is `<slug>.<domain>`. */
  domain: string;
}
