import { validationError } from '../../../../core/errors.ts';
import { webOrigin } from '../../../../core/host.ts';
import { newId, rfc3339 } from '../../../../core/ids.ts';
import { ApikeysErrors } from '../../errors.ts';
import type { Project } from '../../repository.ts';
import type { ProjectBody } from '../../schemas.ts';
import { isReservedSlug, slugify, withRandomSuffix } from '../../slugs.ts';
import type { RouteDeps } from '../deps.ts';

/** Fresh suffixes tried for a generated slug before giving up (each collides with odds ~1 in 1.7 M). */
const GENERATED_SLUG_ATTEMPTS = 8;

/** A project as the routes answer it: with its host, `<slug>.<domain>`, computed when it is read. */
export function projectView({ domain }: RouteDeps, p: Project): ProjectBody {
  return {
    id: p.id,
    name: p.name,
    slug: p.slug,
    host: `${p.slug}.${domain}`,
    owners: p.owners,
    allowed_origins: p.allowed_origins,
    created_at: p.created_at,
  };
}

/** Stores the project under the given slug, or under the first free generated one (README: Slugs). */
export async function insertProject(
  { repository }: RouteDeps,
  owner: string,
  name: string,
  slug: string | undefined,
  allowed_origins: string[] = [],
): Promise<Project> {
  const base = { id: newId('project'), name, owners: [owner], allowed_origins, created_at: rfc3339() };
  if (slug !== undefined) {
    if (isReservedSlug(slug)) throw ApikeysErrors.slugReserved(slug);
    const project = { ...base, slug };
    if (!(await repository.createProject(project))) throw ApikeysErrors.slugTaken(slug);
    return project;
  }
  const plain = slugify(name);
  // The plain slug first when it is usable; on a clash (checked first, or lost to a concurrent
  // create at insert time) a random suffix, retried a few times.
  if (plain !== '' && !isReservedSlug(plain) && !(await repository.slugTaken(plain))) {
    const project = { ...base, slug: plain };
    if (await repository.createProject(project)) return project;
  }
  for (let attempt = 0; attempt < GENERATED_SLUG_ATTEMPTS; attempt++) {
    const project = { ...base, slug: withRandomSuffix(plain) };
    if (await repository.createProject(project)) return project;
  }
  throw ApikeysErrors.noFreeSlug(name);
}

/**
 * Allowed origins as stored: each written as the browser sends `Origin` (`webOrigin`), duplicates
 * dropped in order. A path, query, credentials or a wildcard is a 400 naming the item.
 */
export function normalizedOrigins(origins: readonly string[] | undefined): string[] | undefined {
  if (origins === undefined) return undefined;
  const out = new Set<string>();
  origins.forEach((item, index) => {
    const origin = webOrigin(item);
    if (origin === null)
      throw validationError(`body.allowed_origins.${index} "${item}" is not an origin (scheme://host[:port])`);
    out.add(origin);
  });
  return [...out];
}
