import { randomInt } from 'node:crypto';
import { SERVICE_NAMES } from '../../config.ts';

/**
 * Platform host names a project may not take (README: Slugs): `<name>.<domain>` already belongs
 * to the platform. Derived from the service list so that a new service is reserved automatically.
 */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set<string>(['api', 'gateway', ...SERVICE_NAMES]);

export const SLUG_MAX = 63;
const SUFFIX_LENGTH = 4;
const SUFFIX_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

export function isReservedSlug(slug: string): boolean {
  return RESERVED_SLUGS.has(slug);
}

/**
 * The slug a name suggests: accents dropped, lower case, every run of other characters one
 * hyphen, no hyphen at either end, at most 63 characters. May be empty (a name with no letters
 * or digits).
 */
export function slugify(name: string): string {
  const ascii = name.normalize('NFKD').replace(/[\u0300-\u036f]/g, '');
  return trimHyphens(trimHyphens(ascii.toLowerCase().replace(/[^a-z0-9]+/g, '-')).slice(0, SLUG_MAX));
}

/** `base` with a short random suffix (`my-project-x7k2`), cut so the result stays a 63-character label. */
export function withRandomSuffix(base: string): string {
  let suffix = '';
  for (let i = 0; i < SUFFIX_LENGTH; i++) suffix += SUFFIX_ALPHABET[randomInt(SUFFIX_ALPHABET.length)];
  // An empty base still needs a letter-led, readable label.
  const head = trimHyphens((base === '' ? 'project' : base).slice(0, SLUG_MAX - SUFFIX_LENGTH - 1));
  return `${head}-${suffix}`;
}

function trimHyphens(text: string): string {
  return text.replace(/^-+|-+$/g, '');
}
