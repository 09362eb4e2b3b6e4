// Platform API keys: create with scopes (the secret is shown once), list, revoke.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { platform } from '../session.ts';
import { listProjects } from './projects.ts';
import { ErrorBox, Loading, SecretPanel, Section, readOnly, useAction, useLoad, valueOf } from './common.ts';

interface Scope {
  projects: string[];
  host_rules: Record<string, string>;
}

interface ApiKey {
  key: string;
  name: string;
  scopes: Scope[];
}

interface ScopeDraft {
  project: string;
  hosts: string;
}

function describeScope(scope: Scope): string {
  const projects = scope.projects.length ? `projects ${scope.projects.join(', ')}` : 'any project';
  const hosts = Object.keys(scope.host_rules);
  return `${projects}; ${hosts.length ? `hosts ${hosts.join(', ')}` : 'any host'}`;
}

export function ApiKeysPage(): VNode {
  const keys = useLoad(() => platform().apikeys.keys.list(), []);
  const projects = useLoad(() => listProjects().catch(() => []), []);
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<ScopeDraft[]>([]);
  const [created, setCreated] = useState<(ApiKey & { secret: string }) | null>(null);
  const create = useAction();
  const revoke = useAction();

  const updateScope = (i: number, change: Partial<ScopeDraft>) =>
    setScopes(scopes.map((s, j) => (i === j ? { ...s, ...change } : s)));
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      const body = {
        name,
        scopes: scopes.map((s) => ({
          projects: s.project ? [s.project] : [],
          host_rules: Object.fromEntries(
            s.hosts
              .split(',')
              .map((h) => h.trim())
              .filter((h) => h !== '')
              .map((h) => [h, '{}']),
          ),
        })),
      };
      const key = await platform().apikeys.keys.create(body);
      setCreated(key);
      setName('');
      setScopes([]);
      keys.reload();
    });
  };
  const del = (k: ApiKey) => {
    if (!confirm(`Revoke the key ${k.name}? Clients using it stop working at once.`)) return;
    void revoke.run(async () => {
      await platform().apikeys.keys.revoke(k.key);
      keys.reload();
    });
  };

  return html`<div>
    <h1>API keys</h1>
    <p class="muted">An API key acts as you. Send it as <code>Api-Key</code> and <code>Api-Secret</code> headers.</p>
    ${
      created &&
      html`<${SecretPanel}
      title=${`Key "${created.name}" created`}
      entries=${[
        ['Key', created.key],
        ['Secret', created.secret],
      ]}
      onClose=${() => setCreated(null)}
    />`
    }
    <${Section} title="New API key">
      <form onSubmit=${submit} aria-label="New API key">
        <label>Name<input name="name" required maxLength=${200} value=${name} onInput=${(e: Event) => setName(valueOf(e))} /></label>
        <fieldset>
          <legend>Scopes</legend>
          ${scopes.length === 0 && html`<p class="muted">No scopes: the key is valid everywhere.</p>`}
          ${scopes.map(
            (s, i) => html`<div class="scope-row">
              <label>Project<select value=${s.project} onChange=${(e: Event) => updateScope(i, { project: valueOf(e) })}>
                <option value="">Any project</option>
                ${(projects.data ?? []).map((p) => html`<option value=${p.id}>${p.name} (${p.host})</option>`)}
              </select></label>
              <label>Hosts (comma-separated, empty = any)<input value=${s.hosts} placeholder="my-project.localhost" onInput=${(e: Event) => updateScope(i, { hosts: valueOf(e) })} /></label>
              <button type="button" onClick=${() => setScopes(scopes.filter((_, j) => j !== i))}>Remove scope</button>
            </div>`,
          )}
          <button type="button" onClick=${() => setScopes([...scopes, { project: '', hosts: '' }])}>Add scope</button>
        </fieldset>
        <button type="submit" class="primary" disabled=${create.busy || readOnly()}>Create key</button>
      </form>
      <${ErrorBox} error=${create.error} />
    <//>
    <${Section} title="Your keys">
      <${ErrorBox} error=${keys.error ?? revoke.error} />
      <${Loading} loading=${keys.loading && !keys.data} />
      ${keys.data && keys.data.length === 0 && html`<p class="muted">No keys yet.</p>`}
      ${
        keys.data &&
        keys.data.length > 0 &&
        html`<table data-testid="apikeys-table">
        <thead><tr><th>Name</th><th>Key</th><th>Scopes</th><th></th></tr></thead>
        <tbody>
          ${keys.data.map(
            (k) => html`<tr>
              <td>${k.name}</td><td><code>${k.key}</code></td>
              <td>${k.scopes.length === 0 ? 'everywhere' : html`<ul class="plain">${k.scopes.map((s) => html`<li>${describeScope(s)}</li>`)}</ul>`}</td>
              <td class="actions"><button type="button" class="danger" disabled=${readOnly()} onClick=${() => del(k)}>Revoke</button></td>
            </tr>`,
          )}
        </tbody>
      </table>`
      }
    <//>
  </div>`;
}
