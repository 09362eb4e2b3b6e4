// Config entries: the signed-in user's entries map (GET/PATCH /v1/config).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { platform } from '../session.ts';
import { ErrorBox, Loading, Section, readOnly, useAction, useLoad, valueOf } from './common.ts';

type Entries = Record<string, unknown>;

export function ConfigPage(): VNode {
  const entries = useLoad(() => platform().config.get(), []);
  const [key, setKey] = useState('');
  const [value, setValue] = useState('');
  const action = useAction();
  const patch = (change: Entries) =>
    action.run(async () => {
      await platform().config.patch(change);
      entries.reload();
    });
  const submit = (e: Event) => {
    e.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      parsed = value; // not JSON: store the text as a string
    }
    void patch({ [key]: parsed }).then((ok) => {
      if (!ok) return;
      setKey('');
      setValue('');
    });
  };
  const edit = (k: string, v: unknown) => {
    setKey(k);
    setValue(JSON.stringify(v));
  };
  const del = (k: string) => {
    if (confirm(`Delete the entry ${k}?`)) void patch({ [k]: null });
  };
  const list = Object.entries(entries.data ?? {});
  return html`<div>
    <h1>Config</h1>
    <p class="muted">Your own entries: keys are free strings (dotted by convention), values any JSON.</p>
    <${Section} title="Entries">
      <${ErrorBox} error=${entries.error} />
      <${Loading} loading=${entries.loading && !entries.data} />
      ${entries.data && list.length === 0 && html`<p class="muted">No entries yet.</p>`}
      ${
        list.length > 0 &&
        html`<table data-testid="config-table">
        <thead><tr><th>Key</th><th>Value</th><th></th></tr></thead>
        <tbody>${list.map(([k, v]) => html`<tr><td><code>${k}</code></td><td><code>${JSON.stringify(v)}</code></td><td class="actions"><button type="button" onClick=${() => edit(k, v)}>Edit</button> <button type="button" class="danger small" disabled=${readOnly()} onClick=${() => del(k)}>Delete</button></td></tr>`)}</tbody>
      </table>`
      }
    <//>
    <${Section} title="Set an entry">
      <form class="inline" onSubmit=${submit} aria-label="Set an entry">
        <label>Key<input name="key" required placeholder="feature.newCheckout" value=${key} onInput=${(e: Event) => setKey(valueOf(e))} /></label>
        <label class="grow">Value (JSON; plain text is stored as a string)<input name="value" required placeholder="true" value=${value} onInput=${(e: Event) => setValue(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${action.busy || readOnly()}>Save</button>
      </form>
      <${ErrorBox} error=${action.error} />
    <//>
  </div>`;
}
