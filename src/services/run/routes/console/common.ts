import type { FastifyRequest } from 'fastify';
import type { ServiceApp } from '../../../../core/app.ts';
import { requireIdentity } from '../../../../core/identity.ts';
import { rfc3339 } from '../../../../core/ids.ts';
import type { DesiredState, EnvVar, Volume } from '../../driver.ts';
import { RunErrors } from '../../errors.ts';
import { digestProblem, isRepositoryName, isTag } from '../../names.ts';
import type { HistoryEntry, RepositoryRow } from '../../repository.ts';
import { errorBody } from '../../schemas.ts';
import type { RouteDeps } from '../deps.ts';
import { SIGNED_IN } from '../../../../core/openapi.ts';

/**
 * What the console routes share. The console API (service README, "Console API"): identity
 * required; another user's repository is not found.
 */
export const consoleTags = ['console'];
export const consoleSecurity = SIGNED_IN;
export const consoleErrors = { 400: errorBody, 401: errorBody, 404: errorBody, 502: errorBody };

/** The caller's repository `name`: 400 for an invalid name, 404 when missing or another user's. */
export async function owned({ repository }: RouteDeps, name: string, user: string): Promise<RepositoryRow> {
  if (!isRepositoryName(name)) throw RunErrors.invalidRepositoryName(name);
  const found = await repository.findRepository(name);
  // Another user's repository answers exactly like a missing one: names are not disclosed.
  if (!found || found.owner !== user) throw RunErrors.repositoryNotFound(name);
  return found;
}

/** The console data of a repository, with what the driver reports it has applied. */
export async function answer({ repository, driver, domain }: RouteDeps, row: RepositoryRow) {
  const data = await repository.consoleData(row);
  const actual = driver.status ? await driver.status(row.name) : null;
  return { ...data, host: hostOf(row, domain), logger_id: row.loggerId, driver: driver.name, actual };
}

/** Where a repository answers HTTP (service README: Traffic), once it has been started. */
export function hostOf(row: RepositoryRow, domain: string): string | null {
  return row.slug === null ? null : `${row.slug}.run.${domain}`;
}

/** The desired state is saved first (the durable record); the driver is then asked to follow it. */
export async function apply(app: ServiceApp, { driver }: RouteDeps, row: RepositoryRow): Promise<void> {
  try {
    await driver.apply(row.name, { ...row.desired, env: row.env, volumes: row.volumes });
  } catch (error) {
    app.log.warn(
      { err: error, repository: row.name, driver: driver.name },
      'runtime driver failed to apply the desired state',
    );
    throw RunErrors.driverFailed(driver.name, (error as Error).message ?? 'unknown error');
  }
}

/** What a stop, start or rollback makes of a repository: its new desired state, the history action. */
interface Decision {
  desired: DesiredState;
  action: HistoryEntry['action'] | null;
}

/**
 * Stop, start and rollback: the caller's repository `name` (`owned`) is given the desired state
 * `decide` returns, recorded in its history as `action` (null: nothing recorded), then applied.
 */
export async function changeDesired(
  app: ServiceApp,
  deps: RouteDeps,
  request: FastifyRequest,
  name: string,
  decide: (row: RepositoryRow) => Decision | Promise<Decision>,
) {
  const user = requireIdentity(request).user.id;
  const row = await owned(deps, name, user);
  const { desired, action } = await decide(row);
  const entry = action === null ? null : { action, user, at: rfc3339() };
  const saved = await deps.repository.setDesired(row.name, desired, entry);
  if (!saved) throw RunErrors.repositoryNotFound(row.name);
  // Its host label is given at its first start, before the driver is asked.
  if (saved.desired.state === 'running' && saved.slug === null)
    saved.slug = await deps.repository.ensureSlug(saved.name);
  await apply(app, deps, saved);
  return answer(deps, saved);
}

/** Resolves `reference` (a tag, to the digest it points at now) or `digest` (a manifest of this repository). */
export async function target(
  { repository }: RouteDeps,
  row: RepositoryRow,
  body: { reference?: string | undefined; digest?: string | undefined },
): Promise<DesiredState> {
  const { reference, digest } = body;
  if ((reference === undefined) === (digest === undefined)) throw RunErrors.targetNotOne();
  if (reference !== undefined) {
    if (!isTag(reference)) throw RunErrors.invalidTag(reference);
    const resolved = await repository.tagDigest(row.name, reference);
    if (!resolved) throw RunErrors.referenceNotFound(reference, row.name);
    return { state: 'running', reference, digest: resolved };
  }
  const problem = digestProblem(digest);
  if (problem) throw RunErrors.invalidDigest(problem);
  if (!(await repository.manifest(row.name, digest!))) throw RunErrors.manifestNotFound(digest!, row.name);
  return { state: 'running', reference: null, digest: digest! };
}

/** Saving env or volumes re-applies a running repository, so a container driver can restart it. */
export async function saveConfig(
  app: ServiceApp,
  deps: RouteDeps,
  name: string,
  user: string,
  column: 'env' | 'volumes',
  value: EnvVar[] | Volume[],
) {
  const row = await owned(deps, name, user);
  const saved = await deps.repository.setConfig(row.name, column, value);
  if (!saved) throw RunErrors.repositoryNotFound(row.name);
  if (saved.desired.state === 'running') await apply(app, deps, saved);
  return answer(deps, saved);
}
