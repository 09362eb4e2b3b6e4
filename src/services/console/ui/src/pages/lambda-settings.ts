// The lambda editor's environment: env variables (shown and edited), secrets (names only; a value
// is typed into a password field and sent once, never shown or prefilled), the logger and the cron
// schedule.
import { html } from 'htm/preact';
import type { ComponentChildren, VNode } from 'preact';
import type { Lambda, Logger } from '@stratus/client';
import { rowKey, type EnvRow, type SecretRow } from '../lambda-change.ts';
import { ErrorBox, valueOf } from './common.ts';

export function EnvFieldset({
  rows,
  onChange,
  hint = html`Your code reads them as <code>ctx.env.NAME</code>.`,
}: {
  rows: EnvRow[];
  onChange: (rows: EnvRow[]) => void;
  /** What the variables are for, under the rows (the container page says who can see them). */
  hint?: ComponentChildren;
}): VNode {
  const update = (key: number, change: Partial<EnvRow>) =>
    onChange(rows.map((row) => (row.key === key ? { ...row, ...change } : row)));
  return html`<fieldset data-testid="env-fields">
    <legend>Environment</legend>
    ${rows.length === 0 && html`<p class="muted">No variables.</p>`}
    ${rows.map(
      (row) => html`<div class="scope-row field-row" key=${row.key}>
        <label>Variable name<input name="env-name" class="code" spellcheck=${false} autocomplete="off" value=${row.name} onInput=${(e: Event) => update(row.key, { name: valueOf(e) })} /></label>
        <label class="grow">Variable value<input name="env-value" class="code" spellcheck=${false} autocomplete="off" value=${row.value} onInput=${(e: Event) => update(row.key, { value: valueOf(e) })} /></label>
        <button type="button" aria-label=${`Remove variable ${row.name}`.trim()} onClick=${() => onChange(rows.filter((r) => r.key !== row.key))}>Remove</button>
      </div>`,
    )}
    <button type="button" onClick=${() => onChange([...rows, { key: rowKey(), name: '', value: '' }])}>Add variable</button>
    <p class="muted">${hint}</p>
  </fieldset>`;
}

/** A password field that browsers neither fill nor offer to save. */
function secretInput(label: string, value: string, onInput: (value: string) => void): VNode {
  return html`<label>${label}<input type="password" name="secret-value" autocomplete="new-password" spellcheck=${false} value=${value} onInput=${(e: Event) => onInput(valueOf(e))} /></label>`;
}

function StoredSecret({
  row,
  onChange,
}: {
  row: Extract<SecretRow, { stored: true }>;
  onChange: (row: SecretRow) => void;
}): VNode {
  const set = (action: 'keep' | 'replace' | 'remove') => onChange({ ...row, action, value: '' });
  if (row.action === 'remove')
    return html`<div class="scope-row field-row secret-row" data-secret=${row.name}>
      <s><code>${row.name}</code></s><span class="muted">removed when you save</span>
      <button type="button" class="small" aria-label=${`Keep secret ${row.name}`} onClick=${() => set('keep')}>Undo</button>
    </div>`;
  if (row.action === 'replace')
    return html`<div class="scope-row field-row secret-row" data-secret=${row.name}>
      <code>${row.name}</code>
      ${secretInput(`New value of ${row.name}`, row.value, (value) => onChange({ ...row, value }))}
      <button type="button" class="small" aria-label=${`Keep the value of ${row.name}`} onClick=${() => set('keep')}>Cancel</button>
    </div>`;
  return html`<div class="scope-row field-row secret-row" data-secret=${row.name}>
    <code>${row.name}</code><span class="muted">value set (hidden)</span>
    <button type="button" class="small" aria-label=${`Replace the value of ${row.name}`} onClick=${() => set('replace')}>Replace value</button>
    <button type="button" class="small danger" aria-label=${`Remove secret ${row.name}`} onClick=${() => set('remove')}>Remove</button>
  </div>`;
}

export function SecretsFieldset({
  rows,
  onChange,
}: {
  rows: SecretRow[];
  onChange: (rows: SecretRow[]) => void;
}): VNode {
  const replace = (next: SecretRow) => onChange(rows.map((row) => (row.key === next.key ? next : row)));
  return html`<fieldset data-testid="secret-fields">
    <legend>Secrets</legend>
    ${rows.length === 0 && html`<p class="muted">No secrets.</p>`}
    ${rows.map((row) =>
      row.stored
        ? html`<${StoredSecret} key=${row.key} row=${row} onChange=${replace} />`
        : html`<div class="scope-row field-row" key=${row.key}>
            <label>Secret name<input name="secret-name" class="code" spellcheck=${false} autocomplete="off" value=${row.name} onInput=${(e: Event) => replace({ ...row, name: valueOf(e) })} /></label>
            ${secretInput('Secret value', row.value, (value) => replace({ ...row, value }))}
            <button type="button" aria-label=${`Remove new secret ${row.name}`.trim()} onClick=${() => onChange(rows.filter((r) => r.key !== row.key))}>Remove</button>
          </div>`,
    )}
    <button type="button" onClick=${() => onChange([...rows, { key: rowKey(), stored: false, name: '', value: '' }])}>Add secret</button>
    <p class="muted">Write-only: only their names are ever shown. Your code reads them as <code>ctx.env.NAME</code> too, and their values are masked as <code>***</code> in console lines and errors.</p>
  </fieldset>`;
}

export function LoggerField({
  value,
  loggers,
  error,
  onChange,
  label = "Logger (gets each run's console lines)",
}: {
  value: string;
  loggers: Logger[] | undefined;
  error: string | null;
  onChange: (id: string) => void;
  label?: string;
}): VNode {
  const known = loggers?.some((l) => l.id === value) ?? false;
  return html`<div>
    <div class="inline"><label>${label}<select name="logger_id" value=${value} onChange=${(e: Event) => onChange(valueOf(e))}>
      <option value="">none</option>
      ${(loggers ?? []).map((l) => html`<option value=${l.id}>${l.name}</option>`)}
      ${value !== '' && !known && html`<option value=${value}>${loggers ? `unknown logger ${value}` : value}</option>`}
    </select></label></div>
    <${ErrorBox} error=${error} />
  </div>`;
}

/** IANA zones the browser knows, offered as suggestions; the platform has the last word. */
function timeZones(): string[] {
  try {
    return Intl.supportedValuesOf('timeZone');
  } catch {
    return [];
  }
}

/** `iso` as wall-clock time in `zone`, for a title; '' when the browser cannot tell. */
function inZone(iso: string, zone: string): string {
  try {
    const local = new Intl.DateTimeFormat('en-CA', {
      timeZone: zone,
      dateStyle: 'short',
      timeStyle: 'medium',
      hourCycle: 'h23',
    }).format(new Date(iso));
    return `${local} ${zone}`;
  } catch {
    return '';
  }
}

/** When the stored schedule runs next (RFC 3339 UTC, as the platform answers it), or that it does not. */
export function NextRun({ lambda }: { lambda: Pick<Lambda, 'next_run_at' | 'schedule_tz'> }): VNode {
  const next = lambda.next_run_at;
  if (!next) return html`<span class="muted">no schedule</span>`;
  const title = lambda.schedule_tz ? inZone(next, lambda.schedule_tz) : '';
  return html`<time datetime=${next} title=${title || undefined}>${next}</time>`;
}

export function ScheduleFieldset({
  lambda,
  schedule,
  scheduleTz,
  onChange,
}: {
  /** The lambda as stored: its next run is shown, and whether the draft differs from it. */
  lambda: Lambda;
  schedule: string;
  scheduleTz: string;
  onChange: (schedule: string, scheduleTz: string) => void;
}): VNode {
  const edited = schedule.trim() !== (lambda.schedule ?? '') || scheduleTz.trim() !== (lambda.schedule_tz ?? '');
  return html`<fieldset data-testid="schedule-fields">
    <legend>Schedule</legend>
    <div class="scope-row field-row">
      <label class="grow">Cron expression<input name="schedule" class="code" spellcheck=${false} autocomplete="off" placeholder="none" value=${schedule} onInput=${(e: Event) => onChange(valueOf(e), scheduleTz)} /></label>
      <label>Time zone<input name="schedule_tz" class="code" spellcheck=${false} autocomplete="off" placeholder="UTC" list="time-zones" value=${scheduleTz} onInput=${(e: Event) => onChange(schedule, valueOf(e))} /></label>
      <datalist id="time-zones">${timeZones().map((z) => html`<option value=${z} />`)}</datalist>
      ${(schedule !== '' || scheduleTz !== '') && html`<button type="button" onClick=${() => onChange('', '')}>Remove schedule</button>`}
    </div>
    <p class="muted"><code>minute hour day-of-month month day-of-week</code>, e.g. <code>*/15 * * * *</code> or <code>0 9 * * MON-FRI</code>; a sixth field in front is seconds (<code>*/30 * * * * *</code>); or <code>@hourly</code>, <code>@daily</code>, <code>@weekly</code>, <code>@monthly</code>, <code>@yearly</code>. Read in the time zone (empty: UTC). Empty the expression to remove the schedule. A tick runs the code as a <code>POST</code> with <code>ctx.trigger.type</code> <code>"cron"</code>.</p>
    <p>Next run (UTC): <${NextRun} lambda=${lambda} />${edited && html` <span class="muted">(computed again when you save)</span>`}</p>
  </fieldset>`;
}
