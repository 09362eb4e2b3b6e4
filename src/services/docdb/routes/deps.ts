import type { DocdbAccess } from '../access.ts';
import type { DocumentFilters } from '../filtering.ts';
import type { DatabaseRepository, DocumentStore } from '../repository/index.ts';

/** What every route of docdb is given by index.ts. */
export interface RouteDeps {
  /** The platform version, answered by `/v1` and `/release`. */
  version: string;
  databases: DatabaseRepository;
  documents: DocumentStore;
  /** Who may touch a database: the access procedure (README: Access). */
  access: DocdbAccess;
  /** Where a filter is evaluated: on the event loop or in a worker thread. */
  filters: DocumentFilters;
}
