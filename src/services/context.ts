import type { FastifyBaseLogger } from 'fastify';
import type { ServiceName, Settings } from '../config.ts';
import type { PlatformInstance } from '../instances/index.ts';
import type { Store } from '../store/index.ts';
import type { MigrationSet } from '../store/migrate.ts';
import type { ServiceApp } from '../core/app.ts';

/** What the platform hands a service when it builds it. */
export interface ServiceContext {
  readonly settings: Settings;
  readonly store: Store;
  readonly logger: FastifyBaseLogger;
  /** The Stratus version (package.json). */
  readonly version: string;
  /** This process in the platform's instance registry (src/instances/README.md); absent for a service built alone. */
  readonly instance?: PlatformInstance;
}

/** A service: its migrations and a builder for its own Fastify app (never listening by itself). */
export interface ServiceDefinition {
  readonly name: ServiceName;
  readonly migrations: MigrationSet;
  build(context: ServiceContext): Promise<ServiceApp>;
}
