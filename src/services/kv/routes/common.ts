import type { FastifyReply, FastifyRequest } from 'fastify';
import { IDENTITY_HEADER, PROJECT_HEADER, parseIdentity } from '../../../core/identity.ts';
import { KvErrors } from '../errors.ts';
import type { ReplicationFeed } from '../feed.ts';
import type { FollowerLease, ParentLink } from '../lease.ts';
import type { KvRepository } from '../repository.ts';

export interface KvCounters {
  writes: number;
  reads: number;
  commandsSent: number;
  commandsReceived: number;
}

/** What every route of the node works with. */
export interface KvNode {
  name: string;
  parentUrl: string | undefined;
  parentHeaders: Record<string, string>;
  startedAt: number;
  repository: KvRepository;
  feed: ReplicationFeed;
  /** A replica's follower lease (it runs the follower on the instance that holds it). */
  lease: FollowerLease | undefined;
  counters: KvCounters;
}

const PROJECT_ID = /^[A-Za-z0-9_-]{1,64}$/;

export const roleOf = (node: KvNode) => (node.parentUrl ? 'replica' : 'primary');
/** A primary has no parent to lose, so it counts as connected and ready. */
export const parentLink = (node: KvNode): Promise<ParentLink> =>
  node.lease ? node.lease.link() : Promise.resolve({ connected: true, ready: true });
export const uptimeSeconds = (node: KvNode) => Math.floor((Date.now() - node.startedAt) / 1000);

const present = (value: string | string[] | undefined) => typeof value === 'string' && value.length > 0;

/** The internal port's rule: one accepted credential form present (empty values count as absent), else 403. */
export function requirePresence(request: FastifyRequest): void {
  const h = request.headers;
  if (
    present(h[IDENTITY_HEADER]) ||
    (present(h.apikey) && present(h.secret)) ||
    (present(h['api-key']) && present(h['api-secret']))
  )
    return;
  throw KvErrors.credentialsRequired();
}

/** Identity header text → its `project.id` ('' when none): callers send the same header again and again. */
const identityProjects = new Map<string, string>();
const MAX_IDENTITY_PROJECTS = 1_000;

function identityProject(header: string | string[] | undefined): string {
  if (typeof header !== 'string') return parseIdentity(header)?.project?.id ?? '';
  let project = identityProjects.get(header);
  if (project === undefined) {
    project = parseIdentity(header)?.project?.id ?? '';
    // Bounded: a flood of distinct identities only costs the parse each would have cost anyway.
    if (identityProjects.size >= MAX_IDENTITY_PROJECTS) identityProjects.clear();
    identityProjects.set(header, project);
  }
  return project;
}

/** The request's project: `X-Project-Id`, else the identity's `project.id`, else '' (the default one). */
export function projectOf(request: FastifyRequest): string {
  const header = request.headers[PROJECT_HEADER];
  const project =
    typeof header === 'string' && header !== '' ? header : identityProject(request.headers[IDENTITY_HEADER]);
  if (project !== '' && !PROJECT_ID.test(project)) throw KvErrors.invalidProject();
  return project;
}

/** The key: everything after `/keys/` in the raw path, percent-decoded, slashes included. */
export function keyOf(request: FastifyRequest): string {
  const url = request.raw.url ?? '';
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  const raw = path.slice(path.indexOf('/keys/', '/v1/collections/'.length) + '/keys/'.length);
  // Most keys have no escape: decoding them would give the same text back.
  let key = raw;
  if (raw.includes('%')) {
    try {
      key = decodeURIComponent(raw);
    } catch {
      throw KvErrors.keyNotPercentEncoded();
    }
  }
  if (key === '') throw KvErrors.emptyKey();
  return key;
}

/** Sends JSON text as it is: stored values are exact JSON text (integers beyond 2^53 included). */
export const json = (reply: FastifyReply, text: string, status = 200) =>
  reply.code(status).type('application/json; charset=utf-8').send(text);
