// The scheduler page's delivery sections: its target (a lambda or a webhook, whose secret is typed
// into a password field and never shown) with the retry policy, and the dead-letter list.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { Lambda, Scheduler } from '@stratus/client';
import { platform, withSchedulerKey } from '../session.ts';
import { href } from '../router.ts';
import {
  deliveryChange,
  deliveryDraftOf,
  describeRetry,
  type DeliveryDraft,
  type TargetKind,
} from '../scheduler-change.ts';
import { ErrorBox, Loading, Section, readOnly, useAction, useLoad, valueOf } from './common.ts';

const DEAD_PER_PAGE = 100;

function lambdaName(id: string, lambdas: Lambda[] | undefined): string {
  return lambdas?.find((l) => l.id === id)?.name ?? id;
}

/** The stored target in words: never a secret, only that one is set. */
function CurrentTarget({ scheduler, lambdas }: { scheduler: Scheduler; lambdas: Lambda[] | undefined }): VNode {
  const target = scheduler.target;
  let shown: VNode;
  if (target === undefined) shown = html`<span>none</span> <span class="muted">(workers reserve the tasks)</span>`;
  else if ('lambda_id' in target)
    shown = html`lambda <a href=${href('lambdas', target.lambda_id)}>${lambdaName(target.lambda_id, lambdas)}</a>`;
  else shown = html`webhook <code>${target.url}</code> <span class="badge">secret set</span>`;
  return html`<dl class="props" data-testid="current-target" style="margin-bottom: 0.75rem">
    <dt>Target</dt><dd data-testid="target">${shown}</dd>
    <dt>Retries</dt><dd data-testid="retry">${describeRetry(scheduler.retry)}</dd>
  </dl>`;
}

function LambdaSelect({
  value,
  lambdas,
  onChange,
}: {
  value: string;
  lambdas: Lambda[] | undefined;
  onChange: (id: string) => void;
}): VNode {
  const known = lambdas?.some((l) => l.id === value) ?? false;
  return html`<label>Lambda (runs as you)<select name="target-lambda" value=${value} onChange=${(e: Event) => onChange(valueOf(e))}>
    <option value="">choose…</option>
    ${(lambdas ?? []).map((l) => html`<option value=${l.id}>${l.name}</option>`)}
    ${value !== '' && !known && html`<option value=${value}>${lambdas ? `lambda ${value} (not yours)` : value}</option>`}
  </select></label>`;
}

/** The target and retry policy: what is stored, and a form that PATCHes what changed. */
export function TargetSection({ id, schedulerKey }: { id: string; schedulerKey: string }): VNode {
  const scheduler = useLoad(() => platform().scheduler.schedulers.get(id), [id]);
  const lambdas = useLoad(() => platform().lambda.list(), []);
  const [draft, setDraft] = useState<DeliveryDraft | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const save = useAction();
  useEffect(() => {
    if (scheduler.data) setDraft(deliveryDraftOf(scheduler.data));
  }, [scheduler.data]);
  const edit = (change: Partial<DeliveryDraft>) => {
    setSaved(null);
    setDraft((d) => (d ? { ...d, ...change } : d));
  };
  const submit = (e: Event) => {
    e.preventDefault();
    const stored = scheduler.data;
    if (!draft || !stored) return;
    setSaved(null);
    void save.run(async () => {
      const change = deliveryChange(draft, stored);
      if (change === null) {
        setSaved('Nothing to save.');
        return;
      }
      const updated = await withSchedulerKey(schedulerKey).scheduler.schedulers.update(id, change);
      // The form starts again from the answer, so a typed secret leaves the page.
      setDraft(deliveryDraftOf(updated));
      setSaved('Saved.');
      scheduler.reload();
    });
  };
  const set = (field: keyof DeliveryDraft) => (e: Event) => edit({ [field]: valueOf(e) });
  return html`<${Section} title="Target">
    <${ErrorBox} error=${scheduler.error} />
    <${Loading} loading=${scheduler.loading && !scheduler.data} />
    ${scheduler.data && html`<${CurrentTarget} scheduler=${scheduler.data} lambdas=${lambdas.data} />`}
    ${
      draft &&
      html`<form onSubmit=${submit} aria-label="Target" autocomplete="off">
      <div class="inline">
        <label>Deliver due tasks to<select name="target-kind" value=${draft.kind} onChange=${(e: Event) => edit({ kind: valueOf(e) as TargetKind })}>
          <option value="none">none (workers reserve them)</option>
          <option value="lambda">a lambda</option>
          <option value="webhook">a webhook</option>
        </select></label>
        ${draft.kind === 'lambda' && html`<${LambdaSelect} value=${draft.lambdaId} lambdas=${lambdas.data} onChange=${(lambdaId: string) => edit({ lambdaId })} />`}
        ${
          draft.kind === 'webhook' &&
          html`<label class="grow">Webhook URL<input name="target-url" type="url" class="code" spellcheck=${false} placeholder="https://example.com/hook" value=${draft.url} onInput=${set('url')} /></label>
          <label>Signing secret (16+ characters)<input name="target-secret" type="password" autocomplete="new-password" spellcheck=${false} placeholder=${scheduler.data?.target && 'url' in scheduler.data.target ? 'set (type to replace)' : ''} value=${draft.secret} onInput=${set('secret')} /></label>`
        }
      </div>
      ${draft.kind === 'lambda' && html`<${ErrorBox} error=${lambdas.error} />`}
      <fieldset>
        <legend>Retries (empty: the platform's default)</legend>
        <div class="inline">
          <label>Max attempts<input name="retry-max-attempts" inputmode="numeric" size="4" value=${draft.maxAttempts} onInput=${set('maxAttempts')} /></label>
          <label>First wait<input name="retry-base" class="code" size="6" placeholder="5s" value=${draft.base} onInput=${set('base')} /></label>
          <label>Factor<input name="retry-factor" inputmode="decimal" size="4" value=${draft.factor} onInput=${set('factor')} /></label>
          <label>Longest wait<input name="retry-cap" class="code" size="6" placeholder="15m" value=${draft.cap} onInput=${set('cap')} /></label>
        </div>
      </fieldset>
      <div class="buttons">
        <button type="submit" class="primary" disabled=${save.busy || readOnly()}>Save target</button>
        ${saved && html`<span class=${saved === 'Saved.' ? 'ok-text' : 'muted'} data-testid="target-save-state">${saved}</span>`}
      </div>
    </form>`
    }
    <${ErrorBox} error=${save.error} />
    <p class="muted">With a target the platform reserves due tasks itself and POSTs each payload to it; a failed delivery is tried again after a growing wait, and after the last attempt the task moves to the dead letters. A lambda runs as you (you must be able to run it). A webhook request is signed with the secret (<code>Stratus-Signature</code>), which is write-only. Changes need the scheduler key.</p>
  <//>`;
}

/**
 * Tasks whose deliveries all failed. `version` changes with every stream snapshot (the stream
 * sends one after each change), which loads the list again.
 */
export function DeadLetters({
  id,
  schedulerKey,
  version,
}: {
  id: string;
  schedulerKey: string;
  version: number;
}): VNode {
  const dead = useLoad(() => platform().scheduler.scheduler(id).dead({ perPage: DEAD_PER_PAGE }), [id, version]);
  const action = useAction();
  const [done, setDone] = useState<string | null>(null);
  const retry = (task: string) => {
    setDone(null);
    void action.run(async () => {
      const back = await withSchedulerKey(schedulerKey).scheduler.scheduler(id).retryDead(task);
      setDone(`Task ${back.id} is due again (${back.future}).`);
      dead.reload();
    });
  };
  const discard = (task: string) => {
    if (!confirm(`Discard the dead task ${task}? Its payload is lost.`)) return;
    setDone(null);
    void action.run(async () => {
      await withSchedulerKey(schedulerKey).scheduler.scheduler(id).discardDead(task);
      setDone(`Task ${task} discarded.`);
      dead.reload();
    });
  };
  const list = dead.data;
  return html`<${Section} title="Dead letters">
    <${ErrorBox} error=${dead.error} />
    <${Loading} loading=${dead.loading && !list} />
    ${list && list.dead.length === 0 && html`<p class="muted" data-testid="no-dead">None.</p>`}
    ${
      list &&
      list.dead.length > 0 &&
      html`<table data-testid="dead-table"><thead><tr><th>Task</th><th>Labels</th><th>Attempts</th><th>Last error</th><th>Failed at</th><th></th></tr></thead>
      <tbody>${list.dead.map(
        (
          t,
        ) => html`<tr data-task=${t.id}><td><code>${t.id}</code></td><td>${t.labels.join(', ')}</td><td>${t.attempts}</td><td data-testid="dead-error">${t.last_error ?? html`<span class="muted">—</span>`}</td><td>${t.failed_at}</td>
          <td class="actions"><button type="button" class="small" aria-label=${`Retry ${t.id}`} disabled=${action.busy || readOnly()} onClick=${() => retry(t.id)}>Retry</button><button type="button" class="small danger" aria-label=${`Discard ${t.id}`} disabled=${action.busy || readOnly()} onClick=${() => discard(t.id)}>Discard</button></td></tr>`,
      )}</tbody></table>`
    }
    ${list && list.meta.total > list.dead.length && html`<p class="muted">Showing the first ${list.dead.length} of ${list.meta.total}.</p>`}
    <${ErrorBox} error=${action.error} />
    ${done && html`<p class="muted" data-testid="dead-action">${done}</p>`}
    <p class="muted">Retry puts a task back, due now with no attempts (its payload was kept); Discard deletes it. Both need the scheduler key.</p>
  <//>`;
}
