import type { FastifyBaseLogger } from 'fastify';
import { SettingsError, type ServiceName, type Settings } from '../config.ts';
import { EgressPolicy } from '../core/egress.ts';
import { secretsKeySource } from '../core/sealing.ts';
import type { PlatformInstance } from '../instances/index.ts';
import type { PlatformMetrics } from '../metrics/index.ts';
import type { Store } from '../store/index.ts';
import type { MigrationSet } from '../store/migrate.ts';
import type { ServiceApp } from '../core/app.ts';
import type { Identity } from '../core/identity.ts';
import type { PlatformTrigger } from '../core/trigger.ts';

/** What the platform hands a service when it builds it. */
export interface ServiceContext {
  readonly settings: Settings;
  readonly store: Store;
  readonly logger: FastifyBaseLogger;
  /** The Stratus version (package.json). */
  readonly version: string;
  /** This process in the platform's instance registry (src/instances/README.md); absent for a service built alone. */
  readonly instance?: PlatformInstance;
  /** This process's listening ports (public, internal), filled once they listen; absent for a service built alone. */
  readonly ports?: readonly number[];
  /** The platform's services as callers on a user's behalf reach them; absent for a service built alone. */
  readonly services?: ServiceCalls;
  /** This instance's metrics (README.md: Metrics); absent for a service built alone, which counts nothing. */
  readonly metrics?: PlatformMetrics;
}

/** A service: its migrations and a builder for its own Fastify app (never listening by itself). */
export interface ServiceDefinition {
  readonly name: ServiceName;
  readonly migrations: MigrationSet;
  build(context: ServiceContext): Promise<ServiceApp>;
}

/** A call of a platform service on a user's behalf (ServiceCalls). */
export interface ServiceCall {
  method: string;
  /** Path and query as the service's own routes see them (no `/services/<name>` prefix); see isSafeServicePath. */
  path: string;
  /** Request headers; identity, credential, routing and framing headers are dropped. */
  headers?: Record<string, string>;
  body?: Uint8Array | string;
  /** Who calls: the identity the service sees, as if the gateway had authenticated this user. */
  identity: Identity;
  /** `X-Project-Id` of the call, when it acts within a project. */
  project?: string;
  /** What started the run, for a lambda run the platform starts itself (a cron tick, a task). */
  trigger?: PlatformTrigger;
  signal?: AbortSignal;
  /** Largest answer body read; past it the call fails. */
  maxBodyBytes?: number;
  /** Told of each piece of the answer's body as it arrives; a throw fails the call with that error. */
  onBytes?: (bytes: number) => void;
}

/** The rule isSafeServicePath checks, for the errors of whoever refuses a path. */
export const SERVICE_PATH_RULE = 'the path must start with a single "/" and hold no backslash or control character';

/** A request target in origin form (RFC 9112, 3.2.1) that no URL parser reads as another host. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what it refuses
const SAFE_PATH = /^\/(?!\/)[^\\\u0000-\u001f\u007f]*$/;

/**
 * Whether a ServiceCall's path stays on its service: never `//host…` or a backslash, which URL
 * parsing would read as another host. Here, not in the gateway, so that the callers (the lambda
 * bindings) can refuse a path before they spend anything on it with the rule the gateway enforces.
 */
export function isSafeServicePath(path: string): boolean {
  return SAFE_PATH.test(path);
}

export interface ServiceAnswer {
  status: number;
  /** Lower-case names, a repeated header once per value. */
  headers: [string, string][];
  body: Buffer;
}

/** The platform's services, callable by another part of it as a given user (src/gateway/service-calls.ts). */
export interface ServiceCalls {
  /** Answers whatever the service answers (4xx and 5xx included); rejects when it cannot be reached or read. */
  call(service: ServiceName, call: ServiceCall): Promise<ServiceAnswer>;
}

/**
 * Where code the platform runs for users may connect (a lambda's fetch, a scheduler's webhooks;
 * core/egress.ts): public addresses, what LAMBDA_EGRESS_ALLOW opens, and never this process's
 * ports (read once they listen) nor its remote upstreams' internal ports. A bad allow list is a
 * SettingsError, reported at start.
 */
export function platformEgressPolicy({ settings, ports }: Pick<ServiceContext, 'settings' | 'ports'>): EgressPolicy {
  const upstreamPorts = Object.values(settings.upstreams).map((url) => {
    const { port, protocol } = new URL(url);
    return Number(port) || (protocol === 'https:' ? 443 : 80);
  });
  try {
    return new EgressPolicy({
      allow: settings.lambdaEgressAllow,
      ownPorts: () => [...(ports ?? []), ...upstreamPorts],
    });
  } catch (error) {
    throw new SettingsError((error as Error).message);
  }
}

/**
 * The platform's key for sealed secrets (lambda secrets, scheduler webhook secrets): the
 * `LAMBDA_SECRETS_KEY` setting, else the data directory's key file, read or made on first need
 * (src/services/lambda/README.md: Environment and secrets). Making the file is logged: as a
 * warning where other instances share the database, since they cannot open what it seals.
 */
export function platformSecretsKey(
  { settings, store, logger }: Pick<ServiceContext, 'settings' | 'store' | 'logger'>,
  secrets: string,
): Buffer | (() => Buffer) {
  return secretsKeySource(settings, (path) =>
    store.sql.database.soleWriter
      ? logger.info({ path }, `created the key of ${secrets}`)
      : logger.warn(
          { path },
          `created the key of ${secrets} in the data directory of this instance: other instances of this database cannot read them; give every instance the same LAMBDA_SECRETS_KEY`,
        ),
  );
}
