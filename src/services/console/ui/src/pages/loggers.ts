// Loggers: create and delete loggers, search or follow lines live with regular expressions, ingest a line.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { platform } from '../session.ts';
import { href, navigate } from '../router.ts';
import { ErrorBox, Loading, Section, formatBytes, readOnly, useAction, useLoad, valueOf } from './common.ts';
import { useLogStream } from './log-follow.ts';

export function LoggersPage(): VNode {
  const list = useLoad(() => platform().logs.loggers.list(), []);
  const [name, setName] = useState('');
  const create = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      const logger = await platform().logs.loggers.create({ name });
      navigate('loggers', logger.id);
    });
  };
  return html`<div>
    <h1>Loggers</h1>
    <${Section} title="New logger">
      <form class="inline" onSubmit=${submit} aria-label="New logger">
        <label>Name<input name="name" required maxLength=${200} value=${name} onInput=${(e: Event) => setName(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${create.busy || readOnly()}>Create logger</button>
      </form>
      <${ErrorBox} error=${create.error} />
    <//>
    <${Section} title="Your loggers">
      <${ErrorBox} error=${list.error} />
      <${Loading} loading=${list.loading && !list.data} />
      ${list.data && list.data.length === 0 && html`<p class="muted">No loggers yet.</p>`}
      ${
        list.data &&
        list.data.length > 0 &&
        html`<table data-testid="loggers-table">
        <thead><tr><th>Name</th><th>Lines</th><th>Size</th><th>Created</th></tr></thead>
        <tbody>${list.data.map((l) => html`<tr><td><a href=${href('loggers', l.id)}>${l.name}</a></td><td>${l.usage.lines}</td><td>${formatBytes(l.usage.bytes)}</td><td>${l.created_at}</td></tr>`)}</tbody>
      </table>`
      }
    <//>
  </div>`;
}

export function LoggerPage({ id }: { id: string }): VNode {
  const logger = useLoad(() => platform().logs.loggers.get(id), [id]);
  const [regex, setRegex] = useState('');
  const [ingestText, setIngestText] = useState('hello from the console');
  const [ingested, setIngested] = useState<string | null>(null);
  const stream = useLogStream(id);
  const { lines, state, stop } = stream;
  const ingest = useAction();
  const remove = useAction();

  const start = (follow: boolean) =>
    stream.start(
      follow,
      regex
        .split('\n')
        .map((r) => r.trim())
        .filter((r) => r !== ''),
    );

  const submitIngest = (e: Event) => {
    e.preventDefault();
    setIngested(null);
    void ingest.run(async () => {
      const text = ingestText.endsWith('\n') ? ingestText : ingestText + '\n';
      const answer = await platform().logs.logger(id).ingest(text);
      setIngested(`Ingested ${answer.n} bytes.`);
      logger.reload();
    });
  };
  const deleteLogger = () => {
    if (!confirm('Delete this logger and all its lines?')) return;
    void remove.run(async () => {
      stop();
      await platform().logs.loggers.delete(id);
      navigate('loggers');
    });
  };

  return html`<div>
    <p><a href=${href('loggers')}>← Loggers</a></p>
    <h1>Logger ${logger.data?.name ?? ''}</h1>
    <p class="muted">Id <code>${id}</code>${logger.data ? ` — ${logger.data.usage.lines} lines, ${formatBytes(logger.data.usage.bytes)}` : ''}</p>
    <${ErrorBox} error=${logger.error ?? remove.error} />
    <${Section} title="Lines">
      <form class="inline" onSubmit=${(e: Event) => {
        e.preventDefault();
        start(true);
      }} aria-label="Follow">
        <label class="grow">Regular expressions (RE2 syntax, one per line; a line must match all)<textarea name="regex" class="code" rows="2" placeholder="error|warn" value=${regex} onInput=${(e: Event) => setRegex(valueOf(e))}></textarea></label>
        <button type="submit" class="primary">${state === 'following' ? 'Restart follow' : 'Follow live'}</button>
        <button type="button" onClick=${() => start(false)}>Search</button>
        <button type="button" disabled=${state === 'idle'} onClick=${stop}>Stop</button>
      </form>
      <p class=${state === 'following' ? 'live-state on' : 'live-state muted'} data-testid="follow-state">${state === 'following' ? '● Following live' : state === 'searching' ? 'Searching…' : 'Stopped'} — ${lines.length} line${lines.length === 1 ? '' : 's'}</p>
      <${ErrorBox} error=${stream.error} />
      <pre class="log" ref=${stream.output} data-testid="log-output">${lines.join('\n')}</pre>
    <//>
    <${Section} title="Ingest a line">
      <form class="inline" onSubmit=${submitIngest} aria-label="Ingest">
        <label class="grow">Text<input name="ingest" value=${ingestText} onInput=${(e: Event) => setIngestText(valueOf(e))} /></label>
        <button type="submit" disabled=${ingest.busy || readOnly()}>Ingest</button>
      </form>
      ${ingested && html`<p class="ok-text">${ingested}</p>`}
      <${ErrorBox} error=${ingest.error} />
      <p class="muted">Programs ingest with <code>POST ${platform().transport.url('logs', `/v1/loggers/${encodeURIComponent(id)}/ingest`)}</code> and a logger key.</p>
    <//>
    <div class="buttons"><button type="button" class="danger" disabled=${readOnly()} onClick=${deleteLogger}>Delete logger</button></div>
  </div>`;
}
