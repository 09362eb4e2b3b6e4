import { hash, verify } from '@node-rs/bcrypt';
import { AuthErrors } from './errors.ts';

/** bcrypt cost for passwords (README: Passwords): ~50 ms per hash, off the event loop. */
export const PASSWORD_HASH_COST = 10;

export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 1024;
/** The longest address SMTP can deliver to (RFC 5321 path limit minus the angle brackets). */
export const EMAIL_MAX_LENGTH = 254;

/**
 * A sanity check, not RFC 5322: one `@`, a non-empty local part, and a domain of non-empty
 * dot-separated labels, with no whitespace or control characters anywhere. A dotless domain is
 * allowed so that `admin@localhost` works on a self-hosted install.
 */
const EMAIL_PATTERN = /^[^\s@\p{Cc}]+@[^\s@.\p{Cc}]+(\.[^\s@.\p{Cc}]+)*$/u;

/** How an email is stored and compared: trimmed, Unicode NFC, lower-cased. */
export function normaliseEmail(email: string): string {
  return email.trim().normalize('NFC').toLowerCase();
}

/** The normalised email, or a 400 `validation_error` naming `field` when it is not usable. */
export function checkEmail(email: string, field = 'email'): string {
  const normalised = normaliseEmail(email);
  if (normalised.length === 0) throw AuthErrors.emailEmpty(field);
  if (normalised.length > EMAIL_MAX_LENGTH) throw AuthErrors.emailTooLong(field, EMAIL_MAX_LENGTH);
  if (!EMAIL_PATTERN.test(normalised)) throw AuthErrors.emailInvalid(field);
  return normalised;
}

/** Length in Unicode code points, as JSON Schema's maxLength counts (and as users count). */
export function characterCount(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

/** Throws a 400 `validation_error` (never containing the password) when the rule is not met. */
export function checkPassword(password: string, field = 'password'): void {
  const length = characterCount(password);
  if (length < PASSWORD_MIN_LENGTH || length > PASSWORD_MAX_LENGTH) {
    throw AuthErrors.passwordLength(field, PASSWORD_MIN_LENGTH, PASSWORD_MAX_LENGTH);
  }
}

export function hashPassword(password: string): Promise<string> {
  return hash(password, PASSWORD_HASH_COST);
}

/**
 * A bcrypt hash (cost 10) of a random value nobody knows. Verifying against it costs what a real
 * check costs, so an unknown email or a user without a password answers as slowly as a wrong
 * password does.
 */
const DUMMY_HASH = '$2b$10$SRCRRvVVj6z5pIHNapGTe.MVnmxc6YNhSx3lb..6nHhFBvu1XegVC';

/**
 * True only when `storedHash` is a hash of `password`. With no hash (unknown user, SSO-only user)
 * a dummy hash is checked instead and the answer is always false.
 */
export async function verifyPassword(password: string, storedHash: string | null | undefined): Promise<boolean> {
  if (!storedHash) {
    await verify(password, DUMMY_HASH).catch(() => false);
    return false;
  }
  try {
    return await verify(password, storedHash);
  } catch {
    return false;
  }
}
