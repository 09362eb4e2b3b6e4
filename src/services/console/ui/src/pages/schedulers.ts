// Schedulers: list and create schedulers; tasks by state, live through the SSE stream; enqueue and
// cancel; the delivery target, retries and dead letters (scheduler-delivery.ts).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { TaskSnapshot } from '@stratus/client';
import { messageOf, platform, withSchedulerKey } from '../session.ts';
import { href, navigate } from '../router.ts';
import { ErrorBox, Loading, Section, readOnly, useAction, useLoad, valueOf } from './common.ts';
import { DeadLetters, TargetSection } from './scheduler-delivery.ts';

/** Delivery state of a listed task: present only once the platform has tried to deliver it. */
interface Tried {
  attempt?: number;
  last_error?: string | null;
}

/** Attempt and last error columns, for lists where some task has been tried. */
function triedHeaders(tasks: Tried[]): VNode | null {
  return tasks.some((t) => t.attempt !== undefined) ? html`<th>Attempt</th><th>Last error</th>` : null;
}
function triedCells(tasks: Tried[], task: Tried): VNode | null {
  if (!tasks.some((t) => t.attempt !== undefined)) return null;
  return html`<td data-testid="task-attempt">${task.attempt ?? ''}</td><td data-testid="task-error">${task.last_error ?? ''}</td>`;
}

const KEY = 'stratus.console.schedulerKey';

/** Writes need a scheduler API key (not a platform key); it is kept for this browser tab only. */
function useSchedulerKey(): [string, (k: string) => void] {
  const [key, setKey] = useState(() => sessionStorage.getItem(KEY) ?? '');
  return [
    key,
    (k: string) => {
      sessionStorage.setItem(KEY, k);
      setKey(k);
    },
  ];
}

function KeyField({ value, onChange }: { value: string; onChange: (k: string) => void }): VNode {
  return html`<label>Scheduler API key (for changes)<input name="scheduler-key" type="password" autocomplete="off" value=${value} onInput=${(e: Event) => onChange(valueOf(e))} /></label>`;
}

export function SchedulersPage(): VNode {
  const list = useLoad(
    () =>
      platform()
        .scheduler.schedulers.list()
        .then((r) => r.schedulers),
    [],
  );
  const [key, setKey] = useSchedulerKey();
  const [name, setName] = useState('');
  const create = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      const scheduler = await withSchedulerKey(key).scheduler.schedulers.create({ display_name: name });
      navigate('schedulers', scheduler.id);
    });
  };
  return html`<div>
    <h1>Schedulers</h1>
    <${Section} title="Schedulers">
      <${ErrorBox} error=${list.error} />
      <${Loading} loading=${list.loading && !list.data} />
      ${list.data && list.data.length === 0 && html`<p class="muted">No schedulers yet.</p>`}
      ${
        list.data &&
        list.data.length > 0 &&
        html`<table data-testid="schedulers-table">
        <thead><tr><th>Name</th><th>Id</th><th>Scheduled</th><th>In flight</th><th>Created</th></tr></thead>
        <tbody>${list.data.map((s) => html`<tr><td><a href=${href('schedulers', s.id)}>${s.display_name}</a></td><td><code>${s.id}</code></td><td>${s.scheduled}</td><td>${s.inflight}</td><td>${s.created_at}</td></tr>`)}</tbody>
      </table>`
      }
    <//>
    <${Section} title="New scheduler">
      <form class="inline" onSubmit=${submit} aria-label="New scheduler">
        <label>Display name<input name="display_name" required value=${name} onInput=${(e: Event) => setName(valueOf(e))} /></label>
        <${KeyField} value=${key} onChange=${setKey} />
        <button type="submit" class="primary" disabled=${create.busy || readOnly()}>Create scheduler</button>
      </form>
      <${ErrorBox} error=${create.error} />
      <p class="muted">Scheduler keys come from <code>SCHEDULER_API_KEYS</code> or the key printed at first start.</p>
    <//>
  </div>`;
}

export function SchedulerPage({ id }: { id: string }): VNode {
  const [snapshot, setSnapshot] = useState<TaskSnapshot | null>(null);
  /** Counts snapshots: each follows a change, after which the dead list is read again. */
  const [version, setVersion] = useState(0);
  const [live, setLive] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [key, setKey] = useSchedulerKey();
  const [payload, setPayload] = useState('{"hello":"world"}');
  const [delay, setDelay] = useState('');
  const [labels, setLabels] = useState('');
  const action = useAction();

  useEffect(() => {
    const abort = new AbortController();
    let retry: ReturnType<typeof setTimeout> | undefined;
    const connect = () => {
      setLive(true);
      const events = platform()
        .scheduler.scheduler(id)
        .stream({ scheduledPerPage: 100, inflightPerPage: 100, signal: abort.signal });
      (async () => {
        for await (const { event, data } of events) {
          if (event !== 'snapshot') continue;
          setSnapshot(data);
          setVersion((v) => v + 1);
          setError(null);
        }
      })()
        .catch((err: unknown) => {
          if (!abort.signal.aborted) setError(messageOf(err));
        })
        .finally(() => {
          setLive(false);
          if (!abort.signal.aborted) retry = setTimeout(connect, 3000);
        });
    };
    connect();
    return () => {
      abort.abort();
      if (retry) clearTimeout(retry);
    };
  }, [id]);

  const enqueue = (e: Event) => {
    e.preventDefault();
    void action.run(async () => {
      let parsed: unknown = null;
      if (payload.trim()) {
        try {
          parsed = JSON.parse(payload);
        } catch {
          throw new Error('The payload is not valid JSON.');
        }
      }
      const body: Record<string, unknown> = { payload: parsed };
      if (delay.trim()) body.delay = delay.trim();
      const l = labels
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
      if (l.length) body.labels = l;
      await withSchedulerKey(key).scheduler.scheduler(id).enqueue(body);
    });
  };
  const cancel = (task: string) => {
    void action.run(async () => {
      await withSchedulerKey(key).scheduler.scheduler(id).ack(task);
    });
  };
  const deleteScheduler = () => {
    if (!confirm('Delete this scheduler and all its tasks?')) return;
    void action.run(async () => {
      await withSchedulerKey(key).scheduler.schedulers.delete(id);
      navigate('schedulers');
    });
  };

  return html`<div>
    <p><a href=${href('schedulers')}>← Schedulers</a></p>
    <h1>Scheduler <code>${id}</code></h1>
    <p><span class=${live ? 'badge ok' : 'badge'} data-testid="live">${live ? '● live' : 'disconnected'}</span>
      ${snapshot && html` <span class="muted">updated ${snapshot.generated_at}</span>`}</p>
    <${ErrorBox} error=${error} />
    <div class="inline"><${KeyField} value=${key} onChange=${setKey} /></div>
    ${
      snapshot &&
      html`<div class="stats">
      <div class="stat"><strong>${snapshot.health.scheduled}</strong><span>scheduled</span></div>
      <div class="stat"><strong>${snapshot.health.inflight}</strong><span>in flight</span></div>
    </div>`
    }
    <${Section} title="Scheduled (waiting or due)">
      ${snapshot && snapshot.scheduled.length === 0 && html`<p class="muted">None.</p>`}
      ${
        snapshot &&
        snapshot.scheduled.length > 0 &&
        html`<table data-testid="scheduled-table"><thead><tr><th>Task</th><th>Due</th><th>Labels</th>${triedHeaders(snapshot.scheduled)}<th></th></tr></thead>
        <tbody>${snapshot.scheduled.map((t) => html`<tr data-task=${t.id}><td><code>${t.id}</code></td><td>${t.future}</td><td>${t.labels.join(', ')}</td>${triedCells(snapshot.scheduled, t)}<td class="actions"><button type="button" class="danger small" disabled=${readOnly()} onClick=${() => cancel(t.id)}>Cancel</button></td></tr>`)}</tbody></table>`
      }
      ${snapshot && snapshot.scheduled_meta.total > snapshot.scheduled.length && html`<p class="muted">Showing ${snapshot.scheduled.length} of ${snapshot.scheduled_meta.total}.</p>`}
    <//>
    <${Section} title="In flight (leased)">
      ${snapshot && snapshot.inflight.length === 0 && html`<p class="muted">None.</p>`}
      ${
        snapshot &&
        snapshot.inflight.length > 0 &&
        html`<table data-testid="inflight-table"><thead><tr><th>Task</th><th>Lease expires</th><th>Labels</th>${triedHeaders(snapshot.inflight)}</tr></thead>
        <tbody>${snapshot.inflight.map((t) => html`<tr data-task=${t.id}><td><code>${t.id}</code></td><td>${t.lease_expires_at}</td><td>${t.labels.join(', ')}</td>${triedCells(snapshot.inflight, t)}</tr>`)}</tbody></table>`
      }
      ${snapshot && snapshot.inflight_meta.total > snapshot.inflight.length && html`<p class="muted">Showing ${snapshot.inflight.length} of ${snapshot.inflight_meta.total}.</p>`}
    <//>
    <${DeadLetters} id=${id} schedulerKey=${key} version=${version} />
    <${Section} title="Enqueue a task">
      <form onSubmit=${enqueue} aria-label="Enqueue a task">
        <label>Payload (JSON)<textarea name="payload" class="code" rows="3" value=${payload} onInput=${(e: Event) => setPayload(valueOf(e))}></textarea></label>
        <div class="inline">
          <label>Delay (e.g. 30s, 5m; empty = now)<input name="delay" value=${delay} onInput=${(e: Event) => setDelay(valueOf(e))} /></label>
          <label>Labels (key:value, comma-separated)<input name="labels" value=${labels} onInput=${(e: Event) => setLabels(valueOf(e))} /></label>
          <button type="submit" class="primary" disabled=${action.busy || readOnly()}>Enqueue</button>
        </div>
      </form>
      <${ErrorBox} error=${action.error} />
    <//>
    <${TargetSection} id=${id} schedulerKey=${key} />
    <div class="buttons"><button type="button" class="danger" disabled=${readOnly()} onClick=${deleteScheduler}>Delete scheduler</button></div>
  </div>`;
}
