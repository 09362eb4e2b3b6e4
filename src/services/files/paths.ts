import { validationError } from '../../core/errors.ts';

/** Longest file path accepted, in UTF-8 bytes (a common object-store limit; README). */
export const MAX_PATH_BYTES = 1024;

/**
 * Checks a decoded file path: non-empty, at most 1024 UTF-8 bytes, no NUL, no
 * empty segment (`a//b`, leading or trailing `/`), no `.` or `..` segment. Throws a 400
 * `validation_error` naming the rule; returns the path unchanged (paths are stored exactly).
 */
export function checkFilePath(path: string): string {
  if (path.length === 0) throw validationError('file path must not be empty');
  if (path.includes('\u0000')) throw validationError('file path must not contain NUL');
  if (Buffer.byteLength(path, 'utf8') > MAX_PATH_BYTES)
    throw validationError(`file path must be at most ${MAX_PATH_BYTES} bytes`);
  for (const segment of path.split('/')) {
    if (segment === '') throw validationError('file path must not have empty segments (leading, trailing or double /)');
    if (segment === '.' || segment === '..') throw validationError(`file path must not have '${segment}' segments`);
  }
  return path;
}

/**
 * The prefix of a file listing: everything after `/list/`, one trailing `*`
 * stripped (`list/*` = every file, `list/notes/*` = `list/notes/`). NUL is refused (no name can
 * contain it, and PostgreSQL text cannot hold it); so is a prefix longer than any path.
 */
export function listPrefix(raw: string): string {
  const prefix = raw.endsWith('*') ? raw.slice(0, -1) : raw;
  if (prefix.includes('\u0000')) throw validationError('list prefix must not contain NUL');
  if (Buffer.byteLength(prefix, 'utf8') > MAX_PATH_BYTES)
    throw validationError(`list prefix must be at most ${MAX_PATH_BYTES} bytes`);
  return prefix;
}
