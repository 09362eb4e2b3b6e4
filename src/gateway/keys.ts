import type { SqlConnection } from '../store/db.ts';
import type { Notifier } from '../store/notifier/types.ts';
import { findApiKey, KEY_REVOKED_TOPIC, type Scope } from '../services/apikeys/index.ts';
import { findUserById } from '../services/auth/index.ts';
import { CredentialChecker, type CredentialCheck } from '../core/credentials.ts';
import type { Identity } from '../core/identity.ts';

export interface VerifiedKey {
  key: string;
  owner: string;
  scopes: Scope[];
  /** The owner as the identity JSON shows it (looked up once per verification). */
  user: Identity['user'];
  /** The identity JSON for requests outside projects when no host rule applies, built once. */
  plainIdentityJson?: string;
}

export type KeyCheck = { status: 'unknown' } | { status: 'wrong_secret' } | { status: 'ok'; key: VerifiedKey };

type StoredKey = Pick<VerifiedKey, 'key' | 'owner' | 'scopes'>;

const MAX_ENTRIES = 10_000;
/**
 * How long a key found nowhere is taken as unknown without a lookup. Such keys are mostly other
 * services' own (a docdb database key, sent on every call to it). Platform keys are
 * `crypto.randomUUID()` made at creation (apikeys README: Keys), so a key looked up before it
 * existed could only be created later by a collision; the bound keeps even that window short.
 */
const UNKNOWN_TTL_MS = 10_000;

/**
 * Checks `Api-Key` + `Api-Secret` pairs (root README.md, Signing in) with the shared checker
 * (`core/credentials.ts`): the key is looked up, the secret compared with bcrypt off the event
 * loop, and a success cached for at most `ttlMs` under a SHA-256 of key and secret; failures never
 * are, a burst of one pair costs one bcrypt, and a revocation published on the notifier (from any
 * instance) evicts the key at once — everything after a notifier reconnect. Here: the owner is
 * looked up once per verification and the verified key built with it.
 */
export class ApiKeyVerifier {
  private readonly checker: CredentialChecker<VerifiedKey, StoredKey>;
  /** Keys a lookup did not find, with when that stops counting (insertion order: oldest first). */
  private readonly unknownKeys = new Map<string, number>();
  private readonly stopResync: () => void;

  constructor(
    private readonly connection: SqlConnection,
    notifier: Notifier,
    ttlMs = 60_000,
  ) {
    this.stopResync = notifier.onResync(() => this.unknownKeys.clear());
    this.checker = new CredentialChecker<VerifiedKey, StoredKey>(notifier, {
      lookup: async (key) => {
        const stored = await findApiKey(this.connection, key);
        return (
          stored && {
            secretHash: stored.secretHash,
            value: { key: stored.key, owner: stored.owner, scopes: stored.scopes },
          }
        );
      },
      resolve: (stored) => this.withOwner(stored),
      ttlMs,
      maxEntries: MAX_ENTRIES,
      topic: KEY_REVOKED_TOPIC,
    });
  }

  /** Number of bcrypt comparisons run (for tests and stats). */
  get verifications(): number {
    return this.checker.verifications;
  }

  /** The cache key of a pair: a SHA-256 of key and secret, never the secret itself. */
  static pairHash(key: string, secret: string): string {
    return CredentialChecker.pairHash(key, secret);
  }

  /** A cached success for the pair, synchronously, or undefined (then `check` it). */
  cached(hash: string): VerifiedKey | undefined {
    return this.checker.cached(hash);
  }

  /** A cached success known to be current (after a notifier fence where other instances revoke too). */
  confirmed(hash: string): Promise<VerifiedKey | undefined> {
    return this.checker.confirmed(hash);
  }

  /** The verification of this pair already under way, if any (joining it costs no bcrypt). */
  pending(hash: string): Promise<KeyCheck> | undefined {
    return this.checker.pending(hash)?.then(toKeyCheck);
  }

  async check(key: string, secret: string, hash = ApiKeyVerifier.pairHash(key, secret)): Promise<KeyCheck> {
    const check = toKeyCheck(await this.checker.check(key, secret, hash));
    if (check.status === 'unknown') this.rememberUnknown(key);
    return check;
  }

  /**
   * True when a lookup found no such key within the last few seconds: the caller treats it as
   * unknown again without a lookup (nor a bcrypt, which an unknown key never costs).
   */
  knownUnknown(key: string): boolean {
    const until = this.unknownKeys.get(key);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.unknownKeys.delete(key);
    return false;
  }

  private rememberUnknown(key: string): void {
    this.unknownKeys.delete(key);
    if (this.unknownKeys.size >= MAX_ENTRIES) this.unknownKeys.delete(this.unknownKeys.keys().next().value!);
    this.unknownKeys.set(key, Date.now() + UNKNOWN_TTL_MS);
  }

  private async withOwner(stored: StoredKey): Promise<VerifiedKey> {
    const owner = await findUserById(this.connection, stored.owner);
    const user: Identity['user'] = { id: stored.owner };
    if (owner?.nick) user.nick = owner.nick;
    if (owner?.email) user.email = owner.email;
    if (owner?.picture) user.picture = owner.picture;
    return { key: stored.key, owner: stored.owner, scopes: stored.scopes, user };
  }

  /** Forgets every cached success of `key` (it was revoked). */
  evict(key: string): void {
    this.checker.forgetKey(key);
  }

  clear(): void {
    this.checker.forgetAll();
    this.unknownKeys.clear();
  }

  close(): void {
    this.checker.close();
    this.stopResync();
  }
}

function toKeyCheck(check: CredentialCheck<VerifiedKey>): KeyCheck {
  if (check.status === 'ok') return { status: 'ok', key: check.value };
  return check.status === 'wrong_secret' ? { status: 'wrong_secret' } : { status: 'unknown' };
}

/** Whether a verified key may be used for this request (src/services/apikeys/README.md, Scopes), and the host metadata. */
export function matchScopes(
  scopes: readonly Scope[],
  host: string,
  projectId: string | null,
): { ok: boolean; hostMetadata?: string } {
  if (scopes.length === 0) return { ok: true };
  for (const scope of scopes) {
    const projectOk = scope.projects.length === 0 || (projectId !== null && scope.projects.includes(projectId));
    if (!projectOk) continue;
    const rules = Object.entries(scope.host_rules);
    if (rules.length === 0) return { ok: true };
    const rule = rules.find(([ruleHost]) => ruleHost.toLowerCase() === host);
    if (rule) return { ok: true, hostMetadata: rule[1] };
  }
  return { ok: false };
}
