// What the container page sends and shows: env and volume lists from the editor's rows (said
// before sending when a row cannot be right), and how a desired or actual state reads. Pure
// functions without the DOM, so they are tested on their own (test/services/console/run-change.test.ts).
import type { ActualState, EnvVar, RepositoryState, Volume } from '@stratus/client';
import { DraftError, rowKey, type EnvRow } from './lambda-change.ts';

export { DraftError, type EnvRow };

export interface VolumeRow {
  key: number;
  name: string;
  target: string;
  mode: 'rw' | 'ro';
}

/** The run service's key grammar (run README: Env and volumes). */
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function envRowsOf(env: readonly EnvVar[]): EnvRow[] {
  return env.map((v) => ({ key: rowKey(), name: v.key, value: v.desired_value }));
}

/** The whole list a `PUT env` replaces the environment with, in the rows' order. */
export function envBody(rows: readonly EnvRow[]): EnvVar[] {
  const seen = new Set<string>();
  return rows.map((row) => {
    const key = row.name.trim();
    if (key === '') throw new DraftError('Give every environment variable a name, or remove its row.');
    if (!ENV_KEY.test(key))
      throw new DraftError(`${key}: a variable name is letters, digits and _, and does not start with a digit.`);
    if (seen.has(key)) throw new DraftError(`The environment variable ${key} is listed twice.`);
    seen.add(key);
    return { key, desired_value: row.value };
  });
}

export function volumeRowsOf(volumes: RepositoryState['volumes']): VolumeRow[] {
  return volumes.map((v) => ({ key: rowKey(), name: v.name, target: v.target, mode: v.mode === 'ro' ? 'ro' : 'rw' }));
}

export function newVolumeRow(): VolumeRow {
  return { key: rowKey(), name: '', target: '', mode: 'rw' };
}

/** The whole list a `PUT volumes` replaces the volumes with. */
export function volumesBody(rows: readonly VolumeRow[]): Volume[] {
  const seen = new Set<string>();
  return rows.map((row) => {
    const name = row.name.trim();
    const target = row.target.trim();
    if (name === '') throw new DraftError('Give every volume a name, or remove its row.');
    if (seen.has(name)) throw new DraftError(`The volume ${name} is listed twice.`);
    if (!target.startsWith('/'))
      throw new DraftError(`Volume ${name}: the target is an absolute path in the container (it starts with /).`);
    seen.add(name);
    return { name, target, mode: row.mode };
  });
}

/** `sha256:` and the first 12 hex digits: enough to tell images apart on a page. */
export function shortDigest(digest: string | null): string {
  if (!digest) return '';
  const [algorithm, hex = ''] = digest.split(':');
  return `${algorithm}:${hex.slice(0, 12)}`;
}

/** What runs or should run: the tag, else the short digest, else '—'. */
export function targetText(state: { reference: string | null; digest: string | null }): string {
  return state.reference ?? (state.digest ? shortDigest(state.digest) : '—');
}

export const RECORDING_NOTE = 'the recording driver runs nothing';

export interface StateView {
  label: string;
  /** The badge's look: ok (running), bad (failed, exited), muted (cannot tell), plain. */
  tone: 'ok' | 'bad' | 'muted' | 'plain';
  /** Why, when there is something to say: the engine's message, or that the driver runs nothing. */
  note: string | null;
}

export function actualView(actual: ActualState | null, driver: string): StateView {
  if (actual === null)
    return { label: 'nothing applied', tone: 'muted', note: driver === 'recording' ? RECORDING_NOTE : null };
  const message = actual.message ?? null;
  switch (actual.state) {
    case 'running':
      // A change that failed while the old container kept serving: running, with why.
      return { label: 'running', tone: 'ok', note: message };
    case 'failed':
      return { label: 'failed', tone: 'bad', note: message };
    case 'exited':
      return {
        label: actual.exit_code === undefined ? 'exited' : `exited (code ${actual.exit_code})`,
        tone: 'bad',
        note: message,
      };
    case 'unknown':
      return { label: 'unknown', tone: 'muted', note: message ?? (driver === 'recording' ? RECORDING_NOTE : null) };
    default:
      return { label: actual.state, tone: 'plain', note: message };
  }
}

/** The URL a repository answers on: its host, with the page's scheme and port (the gateway's). */
export function hostUrl(host: string, page: { protocol: string; port: string }): string {
  return `${page.protocol}//${host}${page.port ? `:${page.port}` : ''}/`;
}
