import type { SqlConnection } from '../store/db.ts';
import { first, run } from '../store/sql-work.ts';
/**
 * The owner-list rules shared by resources that several users own (docdb databases, loggers):
 * owners keep their order, the creator first; adding an owner twice changes nothing; the last
 * owner cannot be removed. Each returns the answer and, when the list changes, the list to store.
 */
export type DeleteOwnerResult =
  | { status: 'deleted'; owners: string[] }
  | { status: 'not_found' }
  | { status: 'not_owner' }
  | { status: 'last_owner' };

export interface OwnerChange<T> {
  result: T;
  /** The owners to store; absent when nothing changes. */
  owners?: string[];
}

export function addOwner(owners: string[], owner: string): OwnerChange<string[]> {
  if (owners.includes(owner)) return { result: owners };
  const added = [...owners, owner];
  return { result: added, owners: added };
}

export function removeOwner(owners: string[], owner: string): OwnerChange<DeleteOwnerResult> {
  if (!owners.includes(owner)) return { result: { status: 'not_owner' } };
  if (owners.length === 1) return { result: { status: 'last_owner' } };
  const remaining = owners.filter((o) => o !== owner);
  return { result: { status: 'deleted', owners: remaining }, owners: remaining };
}

/** Owners stored as a JSON text array; anything that is not a string is dropped. */
export function parseOwners(text: string): string[] {
  const value: unknown = JSON.parse(text);
  return Array.isArray(value) ? value.filter((owner): owner is string => typeof owner === 'string') : [];
}

/**
 * A LIKE pattern (escape character `!`) that narrows a scan to owner lists containing `userId`;
 * it may over-match, so callers test the parsed list exactly.
 */
export function ownersLikePattern(userId: string): string {
  return `%${JSON.stringify(userId).replace(/[!%_]/g, (c) => `!${c}`)}%`;
}

/**
 * Adds `owner` to the owners stored in `table` (a JSON text column `owners`, keyed by `id`) unless
 * it is one already: the owners after the call, or null when the row does not exist.
 */
export async function addStoredOwner(
  connection: SqlConnection,
  table: string,
  id: string,
  owner: string,
): Promise<string[] | null> {
  return (await changeStoredOwners(connection, table, id, (owners) => addOwner(owners, owner))) ?? null;
}

/** Removes `owner` from the owners stored in `table`; never the last one. */
export async function removeStoredOwner(
  connection: SqlConnection,
  table: string,
  id: string,
  owner: string,
): Promise<DeleteOwnerResult> {
  return (
    (await changeStoredOwners(connection, table, id, (owners) => removeOwner(owners, owner))) ?? { status: 'not_found' }
  );
}

/**
 * One read-modify-write of a row's owners in a transaction (the row locked on PostgreSQL, so two
 * concurrent changes cannot lose each other). Undefined when the row does not exist. `table` is
 * a constant of the calling repository, never user input.
 */
async function changeStoredOwners<T>(
  connection: SqlConnection,
  table: string,
  id: string,
  change: (owners: string[]) => OwnerChange<T>,
): Promise<T | undefined> {
  const { database } = connection;
  return database.write(function* () {
    const row = yield* first<{ owners: string }>(
      `select owners from ${table} where id = ?${database.syntax.forUpdate}`,
      id,
    );
    if (!row) return undefined;
    const outcome = change(parseOwners(row.owners));
    if (outcome.owners) yield* run(`update ${table} set owners = ? where id = ?`, JSON.stringify(outcome.owners), id);
    return outcome.result;
  });
}
