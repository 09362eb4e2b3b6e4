import type { Identity } from '../../core/identity.ts';
import { ApikeysErrors } from './errors.ts';
import type { ApikeysRepository } from './repository.ts';

/**
 * Creating or deleting keys and projects with an API key is allowed only for an unscoped key
 * (stored `scopes` is `[]`): a key limited to some projects or hosts must not mint a key without
 * those limits, nor remove the projects its limits refer to. Sessions and bearer tokens are not
 * restricted. Reading (list, get) is open to every authenticated caller (README: Callers
 * authenticated by an API key).
 */
export async function assertMayManage(identity: Identity, repository: ApikeysRepository): Promise<void> {
  if (identity.auth?.method !== 'api_key') return;
  const keyId = identity.auth.key;
  const stored = typeof keyId === 'string' && keyId !== '' ? await repository.findKey(keyId) : null;
  // The gateway checked the key moments ago; a key that is gone or not the caller's is not trusted further.
  if (!stored || stored.owner !== identity.user.id) {
    throw ApikeysErrors.managingKeyUnknown();
  }
  if (stored.scopes.length > 0) {
    throw ApikeysErrors.managingKeyScoped();
  }
}
