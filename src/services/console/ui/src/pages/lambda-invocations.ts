// A lambda's recent invocations (newest first): when, what started it, the answer's status, how
// long it took, its fetches and binding calls, its error, and its console lines on demand.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { LambdaInvocation } from '@stratus/client';
import { platform } from '../session.ts';
import { ErrorBox, Loading, Section, useLoad } from './common.ts';

/** How many the panel asks for (the platform keeps LAMBDA_INVOCATION_HISTORY, 100 by default). */
export const INVOCATIONS_SHOWN = 20;

const TRIGGERS: Record<LambdaInvocation['trigger'], string> = {
  invoke: 'test run',
  http: 'public /run',
  run: 'owner /api/v0/run',
  mux: 'mux',
  project: 'project host',
  cron: 'cron schedule',
  task: 'scheduler task',
};

function Row({
  invocation,
  open,
  onToggle,
}: {
  invocation: LambdaInvocation;
  open: boolean;
  onToggle: () => void;
}): VNode {
  const i = invocation;
  const failed = i.error !== null || i.status >= 400;
  const lines = i.logs.length;
  return html`<tr data-invocation=${i.id}>
      <td><time datetime=${i.started_at} title=${`invocation ${i.id}`}>${i.started_at}</time></td>
      <td title=${TRIGGERS[i.trigger]}>${i.trigger}</td>
      <td><span class=${failed ? 'badge bad' : 'badge ok'}>${i.status}</span></td>
      <td>${i.duration_ms.toFixed(1)} ms</td>
      <td>${i.fetches} / ${i.bindings}</td>
      <td>${i.error ? html`<span class="error-text"><code>${i.error.code}</code>: ${i.error.message}</span>` : html`<span class="muted">—</span>`}</td>
      <td class="actions">${
        lines === 0
          ? html`<span class="muted">none</span>`
          : html`<button type="button" class="small" aria-expanded=${open} onClick=${onToggle}>${open ? 'Hide' : 'Show'} ${lines} line${lines === 1 ? '' : 's'}</button>`
      }</td>
    </tr>
    ${
      open &&
      html`<tr class="invocation-logs">
      <td colspan="7">
        <p class="muted">Invocation <code>${i.id}</code></p>
        <pre data-testid="invocation-logs">${i.logs.map((line) => `[${line.level}] ${line.message}`).join('\n')}</pre>
      </td>
    </tr>`
    }`;
}

/** `version` changes when the page knows of a new run (a test run ended): the list is fetched again. */
export function Invocations({ id, version }: { id: string; version: number }): VNode {
  const list = useLoad(() => platform().lambda.invocations(id, { limit: INVOCATIONS_SHOWN }), [id, version]);
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  const toggle = (invocation: string) => {
    const next = new Set(open);
    if (!next.delete(invocation)) next.add(invocation);
    setOpen(next);
  };
  return html`<${Section} title="Invocations">
    <div class="buttons">
      <button type="button" onClick=${list.reload} disabled=${list.loading}>Refresh</button>
      <span class="muted">The last ${INVOCATIONS_SHOWN} runs, newest first, whatever started them.</span>
    </div>
    <${ErrorBox} error=${list.error} />
    <${Loading} loading=${list.loading && !list.data} />
    ${list.data && list.data.length === 0 && html`<p class="muted" data-testid="no-invocations">No invocations yet.</p>`}
    ${
      list.data &&
      list.data.length > 0 &&
      html`<table data-testid="invocations-table">
      <thead><tr><th>Started</th><th>Trigger</th><th>Status</th><th>Duration</th><th title="outbound fetches / platform binding calls">Fetches / bindings</th><th>Error</th><th>Console</th></tr></thead>
      <tbody>${list.data.map((i) => html`<${Row} key=${i.id} invocation=${i} open=${open.has(i.id)} onToggle=${() => toggle(i.id)} />`)}</tbody>
    </table>`
    }
  <//>`;
}
