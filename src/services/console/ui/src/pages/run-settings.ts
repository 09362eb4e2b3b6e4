// The container page's settings — environment, volumes, the logger the output goes to — and the
// panel that follows that logger live. Each form sends its whole list (the run API replaces it).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { RepositoryHandle, RepositoryState } from '@stratus/client';
import { platform } from '../session.ts';
import { href } from '../router.ts';
import { envBody, envRowsOf, newVolumeRow, volumeRowsOf, volumesBody, type VolumeRow } from '../run-change.ts';
import type { EnvRow } from '../lambda-change.ts';
import { ErrorBox, readOnly, useAction, useLoad, valueOf } from './common.ts';
import { EnvFieldset, LoggerField } from './lambda-settings.ts';
import { useLogStream } from './log-follow.ts';

/** Runs a change of the repository and shows its answer on the page (pages/run.ts). */
export type ChangeRepository = (
  call: (repository: RepositoryHandle) => Promise<RepositoryState>,
) => Promise<RepositoryState>;

interface SettingProps {
  /** The state when the form was made: its rows start from it, and again from each saved answer. */
  state: RepositoryState;
  change: ChangeRepository;
}

/**
 * A settings form's value and its Save: the value starts from the page's state and again from each
 * saved answer; "Saved." shows until the value is edited again.
 */
function useSettingForm<T>(initial: () => T, send: (value: T) => Promise<T>) {
  const [value, setValue] = useState<T>(initial);
  const [saved, setSaved] = useState(false);
  const action = useAction();
  return {
    value,
    saved,
    busy: action.busy,
    error: action.error,
    edit(next: T) {
      setSaved(false);
      setValue(next);
    },
    submit(e: Event) {
      e.preventDefault();
      setSaved(false);
      void action.run(async () => {
        setValue(await send(value));
        setSaved(true);
      });
    },
  };
}

function SaveButtons({ label, busy, saved }: { label: string; busy: boolean; saved: boolean }): VNode {
  return html`<div class="buttons">
    <button type="submit" class="primary" disabled=${busy || readOnly()}>${busy ? 'Saving…' : label}</button>
    ${saved && html`<span class="ok-text" role="status">Saved.</span>`}
  </div>`;
}

export function EnvForm({ state, change }: SettingProps): VNode {
  const form = useSettingForm<EnvRow[]>(
    () => envRowsOf(state.env),
    async (rows) => {
      const env = envBody(rows);
      return envRowsOf((await change((r) => r.setEnv(env))).env);
    },
  );
  return html`<form onSubmit=${form.submit} aria-label="Environment" autocomplete="off" data-testid="run-env">
    <${EnvFieldset}
      rows=${form.value}
      onChange=${form.edit}
      hint=${html`Plain values, not secrets: <strong>visible to anyone who can sign in as you</strong>. The
        container gets them as its environment (<code>PORT</code> names the port it listens on); saving
        restarts a running container with them.`}
    />
    <${SaveButtons} label="Save environment" busy=${form.busy} saved=${form.saved} />
    <${ErrorBox} error=${form.error} />
  </form>`;
}

export function VolumesForm({ state, change }: SettingProps): VNode {
  const form = useSettingForm<VolumeRow[]>(
    () => volumeRowsOf(state.volumes),
    async (rows) => {
      const volumes = volumesBody(rows);
      return volumeRowsOf((await change((r) => r.setVolumes(volumes))).volumes);
    },
  );
  const rows = form.value;
  const edit = form.edit;
  const update = (key: number, patch: Partial<VolumeRow>) =>
    edit(rows.map((row) => (row.key === key ? { ...row, ...patch } : row)));
  return html`<form onSubmit=${form.submit} aria-label="Volumes" autocomplete="off" data-testid="run-volumes">
    <fieldset>
      <legend>Volumes</legend>
      ${rows.length === 0 && html`<p class="muted">No volumes.</p>`}
      ${rows.map(
        (row) => html`<div class="scope-row field-row" key=${row.key}>
          <label>Volume name<input name="volume-name" class="code" spellcheck=${false} value=${row.name} onInput=${(e: Event) => update(row.key, { name: valueOf(e) })} /></label>
          <label class="grow">Mounted at (path in the container)<input name="volume-target" class="code" spellcheck=${false} placeholder="/data" value=${row.target} onInput=${(e: Event) => update(row.key, { target: valueOf(e) })} /></label>
          <label>Mode<select name="volume-mode" value=${row.mode} onChange=${(e: Event) => update(row.key, { mode: valueOf(e) === 'ro' ? 'ro' : 'rw' })}>
            <option value="rw">read-write</option><option value="ro">read-only</option>
          </select></label>
          <button type="button" aria-label=${`Remove volume ${row.name}`.trim()} onClick=${() => edit(rows.filter((r) => r.key !== row.key))}>Remove</button>
        </div>`,
      )}
      <button type="button" onClick=${() => edit([...rows, newVolumeRow()])}>Add volume</button>
      <p class="muted">A volume's data is kept with the platform's own and survives stops, restarts and new references; saving restarts a running container with them.</p>
    </fieldset>
    <${SaveButtons} label="Save volumes" busy=${form.busy} saved=${form.saved} />
    <${ErrorBox} error=${form.error} />
  </form>`;
}

export function LoggerForm({ state, change }: SettingProps): VNode {
  const loggers = useLoad(() => platform().logs.loggers.list(), []);
  const form = useSettingForm<string>(
    () => state.logger_id ?? '',
    async (value) => (await change((r) => r.setLogger(value === '' ? null : value))).logger_id ?? '',
  );
  return html`<form onSubmit=${form.submit} aria-label="Logger" data-testid="run-logger">
    <${LoggerField}
      label="Logger (gets the container's output)"
      value=${form.value}
      loggers=${loggers.data}
      error=${loggers.error}
      onChange=${form.edit}
    />
    <${SaveButtons} label="Save logger" busy=${form.busy} saved=${form.saved} />
    <${ErrorBox} error=${form.error} />
  </form>`;
}

/** The chosen logger's lines, followed live while the page is open. */
export function LogsSection({ state }: { state: RepositoryState }): VNode {
  const id = state.logger_id;
  const stream = useLogStream(id);
  useEffect(() => {
    if (id) stream.start(true);
  }, [id]);
  const count = `${stream.lines.length} line${stream.lines.length === 1 ? '' : 's'}`;
  return html`<section class="card">
    <h2>Logs</h2>
    ${
      id === null
        ? html`<p class="muted" data-testid="run-no-logger">No logger: choose one under Settings to keep the container's output and follow it here.</p>`
        : html`<div class="inline">
            <p class=${stream.state === 'following' ? 'live-state on' : 'live-state muted'} data-testid="run-follow-state">${
              stream.state === 'following' ? '● Following live' : 'Stopped'
            } — ${count} of logger <a href=${href('loggers', id)}><code>${id}</code></a></p>
            ${
              stream.state === 'following'
                ? html`<button type="button" class="small" onClick=${stream.stop}>Stop following</button>`
                : html`<button type="button" class="small" onClick=${() => stream.start(true)}>Follow live</button>`
            }
          </div>
          <${ErrorBox} error=${stream.error} />
          <pre class="log" ref=${stream.output} data-testid="run-log-output">${stream.lines.join('\n')}</pre>`
    }
    ${state.driver === 'recording' && html`<p class="muted">The recording driver runs nothing, so no container output arrives.</p>`}
  </section>`;
}
