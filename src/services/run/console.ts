import type { ServiceApp } from '../../core/app.ts';
import { HttpError, notFound, validationError } from '../../core/errors.ts';
import { requireIdentity } from '../../core/identity.ts';
import { rfc3339 } from '../../core/ids.ts';
import type { DesiredState, EnvVar, RuntimeDriver, Volume } from './driver.ts';
import { digestProblem, isRepositoryName, isTag } from './names.ts';
import type { RepositoryRow, RunRepository } from './repository.ts';
import { consoleData, envBody, errorBody, repositoryBody, repositoryQuery, targetBody, volumesBody } from './schemas.ts';

export interface ConsoleDeps {
  repository: RunRepository;
  driver: RuntimeDriver;
}

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The console API (run.md §4): identity required; another user's repository is not found. */
export function registerConsoleRoutes(app: ServiceApp, deps: ConsoleDeps): void {
  const { repository: repo, driver } = deps;
  const tags = ['console'];
  const security = [{ gatewayIdentity: [] }];
  const errors = { 400: errorBody, 401: errorBody, 404: errorBody, 502: errorBody };

  const owned = async (name: string, user: string): Promise<RepositoryRow> => {
    if (!isRepositoryName(name)) throw validationError(`invalid repository name '${name.slice(0, 300)}'`);
    const found = await repo.findRepository(name);
    // Another user's repository answers exactly like a missing one: names are not disclosed.
    if (!found || found.owner !== user) throw notFound(`repository '${name}' not found`);
    return found;
  };

  const answer = async (row: RepositoryRow) => ({ ...(await repo.consoleData(row)), actual: driver.status ? await driver.status(row.name) : null });

  /** The desired state is saved first (the durable record); the driver is then asked to follow it. */
  const apply = async (row: RepositoryRow): Promise<void> => {
    try {
      await driver.apply(row.name, { ...row.desired, env: row.env, volumes: row.volumes });
    } catch (error) {
      app.log.warn({ err: error, repository: row.name, driver: driver.name }, 'runtime driver failed to apply the desired state');
      throw new HttpError(502, 'driver_error', `the change was saved but the ${driver.name} driver failed to apply it: ${(error as Error).message ?? 'unknown error'}`);
    }
  };

  /** Resolves `reference` (a tag, to the digest it points at now) or `digest` (a manifest of this repository). */
  const target = async (row: RepositoryRow, body: { reference?: string | undefined; digest?: string | undefined }): Promise<DesiredState> => {
    const { reference, digest } = body;
    if ((reference === undefined) === (digest === undefined)) throw validationError('give exactly one of reference or digest');
    if (reference !== undefined) {
      if (!isTag(reference)) throw validationError(`invalid tag '${reference.slice(0, 200)}'`);
      const resolved = await repo.tagDigest(row.name, reference);
      if (!resolved) throw notFound(`reference '${reference}' not found in '${row.name}'`);
      return { state: 'running', reference, digest: resolved };
    }
    const problem = digestProblem(digest);
    if (problem) throw validationError(problem);
    if (!(await repo.manifest(row.name, digest!))) throw notFound(`manifest ${digest!} not found in '${row.name}'`);
    return { state: 'running', reference: null, digest: digest! };
  };

  app.get(
    '/api/console',
    { schema: { tags, security, summary: 'Console data of a repository', querystring: repositoryQuery, response: { 200: consoleData, ...errors } } },
    async (request) => {
      const user = requireIdentity(request).user.id;
      return answer(await owned(request.query.repository, user));
    },
  );

  for (const action of ['start', 'rollback'] as const) {
    app.post(
      `/api/console/${action}`,
      {
        schema: {
          tags,
          security,
          summary: action === 'start' ? 'Start a repository at a reference or digest' : 'Roll back a repository to a reference or digest',
          description: 'Exactly one of `reference` (a tag) or `digest`. Any reference or manifest of the repository is accepted.',
          body: targetBody,
          response: { 200: consoleData, ...errors },
        },
      },
      async (request) => {
        const user = requireIdentity(request).user.id;
        const row = await owned(request.body.repository, user);
        const desired = await target(row, request.body);
        const saved = await repo.setDesired(row.name, desired, { action, user, at: rfc3339() });
        if (!saved) throw notFound(`repository '${row.name}' not found`);
        await apply(saved);
        return answer(saved);
      },
    );
  }

  app.post(
    '/api/console/stop',
    { schema: { tags, security, summary: 'Stop a repository (reference and digest are kept)', body: repositoryBody, response: { 200: consoleData, ...errors } } },
    async (request) => {
      const user = requireIdentity(request).user.id;
      const row = await owned(request.body.repository, user);
      // Stopping a stopped repository records nothing new, but the driver is still asked (idempotent).
      const entry = row.desired.state === 'stopped' ? null : { action: 'stop' as const, user, at: rfc3339() };
      const saved = await repo.setDesired(row.name, { ...row.desired, state: 'stopped' }, entry);
      if (!saved) throw notFound(`repository '${row.name}' not found`);
      await apply(saved);
      return answer(saved);
    },
  );

  /** Saving env or volumes re-applies a running repository, so a container driver can restart it. */
  const saveConfig = async (name: string, user: string, column: 'env' | 'volumes', value: EnvVar[] | Volume[]) => {
    const row = await owned(name, user);
    const saved = await repo.setConfig(row.name, column, value);
    if (!saved) throw notFound(`repository '${row.name}' not found`);
    if (saved.desired.state === 'running') await apply(saved);
    return answer(saved);
  };

  app.put(
    '/api/console/env',
    {
      schema: {
        tags,
        security,
        summary: 'Replace the environment variables',
        description: 'Each key matches ^[A-Za-z_][A-Za-z0-9_]*$ and appears once; [] clears the list. Answers the console data.',
        body: envBody,
        response: { 200: consoleData, ...errors },
      },
    },
    async (request) => {
      const user = requireIdentity(request).user.id;
      const seen = new Set<string>();
      for (const [i, entry] of request.body.env.entries()) {
        if (!ENV_KEY.test(entry.key)) throw validationError(`body.env[${i}].key '${entry.key.slice(0, 200)}' must match ^[A-Za-z_][A-Za-z0-9_]*$`);
        if (seen.has(entry.key)) throw validationError(`body.env[${i}].key '${entry.key}' appears twice`);
        seen.add(entry.key);
      }
      const env = request.body.env.map((e) => ({ key: e.key, desired_value: e.desired_value }));
      return saveConfig(request.body.repository, user, 'env', env);
    },
  );

  app.put(
    '/api/console/volumes',
    {
      schema: {
        tags,
        security,
        summary: 'Replace the volumes',
        description: 'name non-empty and unique; target an absolute path; mode rw (default) or ro. Answers the console data.',
        body: volumesBody,
        response: { 200: consoleData, ...errors },
      },
    },
    async (request) => {
      const user = requireIdentity(request).user.id;
      const seen = new Set<string>();
      const volumes: Volume[] = [];
      for (const [i, entry] of request.body.volumes.entries()) {
        if (seen.has(entry.name)) throw validationError(`body.volumes[${i}].name '${entry.name}' appears twice`);
        seen.add(entry.name);
        if (!entry.target.startsWith('/')) throw validationError(`body.volumes[${i}].target '${entry.target.slice(0, 200)}' must be an absolute path`);
        volumes.push({ name: entry.name, target: entry.target, mode: entry.mode ?? 'rw' });
      }
      return saveConfig(request.body.repository, user, 'volumes', volumes);
    },
  );
}
