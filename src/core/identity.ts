import type { FastifyRequest } from 'fastify';
import { unauthorized } from './errors.ts';

export const IDENTITY_HEADER = 'x-gateway-authentication';
export const PROJECT_HEADER = 'x-project-id';

/** The identity JSON the gateway injects (README: Signing in and calling the API). Only `user.id` is guaranteed. */
export interface Identity {
  user: { id: string; nick?: string; email?: string; picture?: string };
  session?: { id: string };
  auth?: { method: 'session' | 'api_key' | 'bearer'; key?: string; host_metadata?: string };
  project?: { id: string; slug?: string };
}

/** Parses the header value; null when missing, not JSON, or without a string `user.id`. */
export function parseIdentity(value: string | string[] | undefined): Identity | null {
  if (typeof value !== 'string' || value.length === 0) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null) return null;
  const user = (parsed as { user?: unknown }).user;
  if (typeof user !== 'object' || user === null) return null;
  const id = (user as { id?: unknown }).id;
  if (typeof id !== 'string' || id.length === 0) return null;
  return parsed as Identity;
}

export function identityOf(request: FastifyRequest): Identity | null {
  return parseIdentity(request.headers[IDENTITY_HEADER]);
}

/** The caller's identity, or a 401 `unauthorized` when there is no usable one. */
export function requireIdentity(request: FastifyRequest): Identity {
  const identity = identityOf(request);
  if (!identity) throw unauthorized('missing or invalid X-Gateway-Authentication');
  return identity;
}

/**
 * First steps of the owner-or-key procedure of resources that users own and keys open (docdb
 * databases, loggers): no identity and no `Api-Key` → 401; an identity header that is present but
 * unusable → 401. Returns the identity (null when absent) and the raw `Api-Key` header.
 */
export function ownerOrKeyCredentials(request: FastifyRequest): {
  identity: Identity | null;
  apiKey: string | string[] | undefined;
} {
  const identityHeader = request.headers[IDENTITY_HEADER];
  const apiKey = request.headers['api-key'];
  if (identityHeader === undefined && apiKey === undefined) {
    throw unauthorized('credentials required: X-Gateway-Authentication, or Api-Key and Api-Secret');
  }
  const identity = identityHeader === undefined ? null : parseIdentity(identityHeader);
  if (identityHeader !== undefined && identity === null) throw unauthorized('invalid X-Gateway-Authentication');
  return { identity, apiKey };
}
