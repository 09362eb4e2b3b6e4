/**
 * docdb's storage: the only modules that read or write its tables (migrations.ts creates them).
 * `DatabaseRepository` holds databases, owners and database API keys; `DocumentStore` holds
 * collections, their defaults and indexes, and documents. Everything else in the service reaches
 * storage through these two.
 */
export {
  DatabaseRepository,
  type DatabaseKey,
  type DatabaseRecord,
  type DeleteOwnerResult,
  type NewDatabaseKey,
} from './databases.ts';
export {
  DEFAULT_DEFAULTS,
  DocumentStore,
  indexRecord,
  type CollectionInfo,
  type CollectionRecord,
  type IndexInfo,
  type IndexRecord,
  type Source,
  type StoredDocument,
  type WriteOutcome,
} from './documents.ts';
