// Lambdas: list, create, edit code, environment, secrets, logger and cron schedule, invoke and see
// the answer, and the history of runs.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { Lambda, NewLambda } from '@stratus/client';
import { messageOf, platform } from '../session.ts';
import { href, navigate } from '../router.ts';
import { draftOf, lambdaChange, type LambdaDraft, type LambdaFields } from '../lambda-change.ts';
import { ErrorBox, Loading, Section, readOnly, useAction, useLoad, valueOf } from './common.ts';
import { Invocations } from './lambda-invocations.ts';
import { EnvFieldset, LoggerField, NextRun, ScheduleFieldset, SecretsFieldset } from './lambda-settings.ts';

const LANGUAGES = ['javascript', 'static-html', 'static-css', 'static-js'] as const;
const METHODS = ['ANY', 'GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const SAMPLE = `export default (req) => {
  console.log('called with', req.method, req.path);
  return { body: { message: 'Hello, World!', query: req.query } };
};
`;

function LambdaForm<D extends LambdaFields>({ draft, onChange }: { draft: D; onChange: (d: D) => void }): VNode {
  const set = (field: keyof LambdaFields) => (e: Event) => onChange({ ...draft, [field]: valueOf(e) });
  return html`<div class="form-grid">
    <label>Name<input name="name" required value=${draft.name} onInput=${set('name')} /></label>
    <label>Language<select name="language" value=${draft.language} onChange=${set('language')}>${LANGUAGES.map((l) => html`<option value=${l}>${l}</option>`)}</select></label>
    <label>Method<select name="method" value=${draft.method} onChange=${set('method')}>${METHODS.map((m) => html`<option value=${m}>${m}</option>`)}</select></label>
    <label>Path (optional)<input name="path" placeholder=${'/' + (draft.name || 'name')} value=${draft.path} onInput=${set('path')} /></label>
    <label class="wide">Code<textarea name="code" class="code" rows="14" spellcheck=${false} value=${draft.code} onInput=${set('code')}></textarea></label>
  </div>`;
}

function bodyOf(d: LambdaFields): NewLambda {
  const language = LANGUAGES.find((l) => l === d.language);
  const body: NewLambda = { name: d.name, language, method: d.method, code: d.code };
  if (d.path.trim()) body.path = d.path.trim();
  return body;
}

export function LambdasPage(): VNode {
  const lambdas = useLoad(() => platform().lambda.list(), []);
  const [draft, setDraft] = useState<LambdaFields>({
    name: '',
    language: 'javascript',
    method: 'ANY',
    path: '',
    code: SAMPLE,
  });
  const create = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      const created = await platform().lambda.create(bodyOf(draft));
      navigate('lambdas', created.id);
    });
  };
  return html`<div>
    <h1>Lambdas</h1>
    <${Section} title="Your lambdas">
      <${ErrorBox} error=${lambdas.error} />
      <${Loading} loading=${lambdas.loading && !lambdas.data} />
      ${lambdas.data && lambdas.data.length === 0 && html`<p class="muted">No lambdas yet.</p>`}
      ${
        lambdas.data &&
        lambdas.data.length > 0 &&
        html`<table data-testid="lambdas-table">
        <thead><tr><th>Name</th><th>Method</th><th>Path</th><th>Id</th><th>Next run (UTC)</th></tr></thead>
        <tbody>
          ${lambdas.data.map(
            (l) => html`<tr>
              <td><a href=${href('lambdas', l.id)}>${l.name}</a></td><td>${l.method}</td><td><code>${l.path}</code></td><td><code>${l.id}</code></td>
              <td data-testid="lambda-next-run">${l.next_run_at ? html`<${NextRun} lambda=${l} />` : html`<span class="muted">—</span>`}</td>
            </tr>`,
          )}
        </tbody>
      </table>`
      }
    <//>
    <${Section} title="New lambda">
      <form onSubmit=${submit} aria-label="New lambda">
        <${LambdaForm} draft=${draft} onChange=${setDraft} />
        <button type="submit" class="primary" disabled=${create.busy || readOnly()}>Create lambda</button>
      </form>
      <${ErrorBox} error=${create.error} />
    <//>
  </div>`;
}

interface Invocation {
  status: number;
  contentType: string;
  body: string;
  ms: number;
}

interface LogLine {
  level: string;
  message: string;
}

/** A test run; `onDone` is told when one ended (it is in the lambda's history then). */
function Invoke({ lambda, onDone }: { lambda: Lambda; onDone: () => void }): VNode {
  const [method, setMethod] = useState(lambda.method === 'ANY' ? 'GET' : lambda.method);
  const [query, setQuery] = useState('');
  const [body, setBody] = useState('');
  const [result, setResult] = useState<Invocation | null>(null);
  const [logs, setLogs] = useState<LogLine[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setResult(null);
    setLogs([]);
    const hasBody = body !== '' && method !== 'GET' && method !== 'HEAD';
    let sent: unknown = undefined;
    let headers: Record<string, string> = {};
    if (hasBody) {
      try {
        sent = JSON.parse(body);
        headers = { 'content-type': 'application/json' };
      } catch {
        sent = body;
        headers = { 'content-type': 'text/plain' };
      }
    }
    const queryObject: Record<string, string | string[]> = {};
    for (const [k, v] of new URLSearchParams(query.trim().replace(/^\?/, ''))) {
      const prev = queryObject[k];
      queryObject[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    try {
      // The test-run endpoint answers the lambda's response and its console lines as data.
      const out = await platform().lambda.invoke(lambda.id, {
        method,
        query: queryObject,
        headers,
        ...(hasBody ? { body: sent } : {}),
      });
      setResult({
        status: out.status,
        contentType: out.headers['content-type'] ?? '',
        body: out.body,
        ms: out.duration_ms,
      });
      setLogs(out.logs);
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
      onDone();
    }
  };
  let shown = result?.body ?? '';
  if (result && result.contentType.includes('json')) {
    try {
      shown = JSON.stringify(JSON.parse(result.body), null, 2);
    } catch {
      // keep as text
    }
  }
  return html`<${Section} title="Invoke">
    <form class="inline" onSubmit=${run} aria-label="Invoke">
      <label>Method<select name="invoke-method" value=${method} onChange=${(e: Event) => setMethod(valueOf(e))}>${METHODS.filter((m) => m !== 'ANY').map((m) => html`<option value=${m}>${m}</option>`)}</select></label>
      <label>Query<input name="query" placeholder="a=1&b=2" value=${query} onInput=${(e: Event) => setQuery(valueOf(e))} /></label>
      <label class="wide">Body (JSON or text; not sent with GET)<textarea name="invoke-body" class="code" rows="3" value=${body} onInput=${(e: Event) => setBody(valueOf(e))}></textarea></label>
      <button type="submit" class="primary" disabled=${busy || readOnly()}>${busy ? 'Running…' : 'Invoke'}</button>
    </form>
    <${ErrorBox} error=${error} />
    ${
      result &&
      html`<div class="result" data-testid="invoke-result">
      <p><span class=${result.status < 400 ? 'badge ok' : 'badge bad'}>${result.status}</span> <code>${result.contentType}</code> <span class="muted">${result.ms.toFixed(0)} ms</span></p>
      <h3>Output</h3>
      <pre data-testid="invoke-output">${shown}</pre>
      <h3>Console</h3>
      ${
        logs.length === 0
          ? html`<p class="muted" data-testid="invoke-logs">No console output.</p>`
          : html`<pre data-testid="invoke-logs">${logs.map((line) => `[${line.level}] ${line.message}`).join('\n')}</pre>`
      }
    </div>`
    }
    <p class="muted">Public URL: <code>/run/${lambda.id}</code> on the lambda host. Console lines also go to the server log.</p>
  <//>`;
}

export function LambdaPage({ id }: { id: string }): VNode {
  const lambda = useLoad(() => platform().lambda.get(id), [id]);
  const loggers = useLoad(() => platform().logs.loggers.list(), []);
  const [draft, setDraft] = useState<LambdaDraft | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [runs, setRuns] = useState(0);
  const save = useAction();
  const remove = useAction();
  useEffect(() => {
    if (lambda.data) setDraft(draftOf(lambda.data));
  }, [lambda.data]);
  const edit = (d: LambdaDraft) => {
    setSaved(null);
    setDraft(d);
  };
  const submit = (e: Event) => {
    e.preventDefault();
    if (!draft) return;
    setSaved(null);
    void save.run(async () => {
      const change = lambdaChange(draft);
      if (change === null) {
        setSaved('Nothing to save.');
        return;
      }
      const updated = await platform().lambda.update(id, change);
      // The form starts again from the answer: secret values typed in it are gone from the page.
      setDraft(draftOf(updated));
      setSaved('Saved.');
      lambda.reload();
    });
  };
  const del = () => {
    if (!confirm('Delete this lambda?')) return;
    void remove.run(async () => {
      await platform().lambda.delete(id);
      navigate('lambdas');
    });
  };
  return html`<div>
    <p><a href=${href('lambdas')}>← Lambdas</a></p>
    <h1>${lambda.data?.name ?? 'Lambda'}</h1>
    <${ErrorBox} error=${lambda.error ?? remove.error} />
    <${Loading} loading=${lambda.loading && !lambda.data} />
    ${
      lambda.data &&
      html`<p class="muted">Id <code>${lambda.data.id}</code>${
        lambda.data.schedule !== null &&
        html` · on schedule <code>${lambda.data.schedule}</code>${lambda.data.schedule_tz ? ` (${lambda.data.schedule_tz})` : ''}, next run <span data-testid="next-run"><${NextRun} lambda=${lambda.data} /></span>`
      }</p>`
    }
    ${lambda.data && html`<${Invoke} lambda=${lambda.data} onDone=${() => setRuns((n) => n + 1)} />`}
    ${lambda.data && html`<${Invocations} id=${id} version=${runs} />`}
    ${
      draft &&
      html`<${Section} title="Code and settings">
      <form onSubmit=${submit} aria-label="Edit lambda" autocomplete="off">
        <${LambdaForm} draft=${draft} onChange=${edit} />
        <${EnvFieldset} rows=${draft.env} onChange=${(env: LambdaDraft['env']) => edit({ ...draft, env })} />
        <${SecretsFieldset} rows=${draft.secrets} onChange=${(secrets: LambdaDraft['secrets']) => edit({ ...draft, secrets })} />
        <${LoggerField} value=${draft.logger} loggers=${loggers.data} error=${loggers.error} onChange=${(logger: string) => edit({ ...draft, logger })} />
        <${ScheduleFieldset} lambda=${draft.base} schedule=${draft.schedule} scheduleTz=${draft.scheduleTz} onChange=${(schedule: string, scheduleTz: string) => edit({ ...draft, schedule, scheduleTz })} />
        <div class="buttons">
          <button type="submit" class="primary" disabled=${save.busy || readOnly()}>Save</button>
          <button type="button" class="danger" disabled=${readOnly()} onClick=${del}>Delete lambda</button>
          ${saved && html`<span class=${saved === 'Saved.' ? 'ok-text' : 'muted'} data-testid="save-state">${saved}</span>`}
        </div>
      </form>
      <${ErrorBox} error=${save.error} />
      <p class="muted">Saving sends only what changed; a secret's value is sent once and never shown again.</p>
    <//>`
    }
  </div>`;
}
