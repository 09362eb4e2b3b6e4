// The overview page: who is signed in and where each service lives.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { config, platform } from '../session.ts';
import type { User } from '../auth.ts';
import { Section } from './common.ts';

const SERVICES = ['auth', 'apikeys', 'lambda', 'scheduler', 'docdb', 'logs', 'files', 'run', 'config'];

export function HomePage({ user }: { user: User }): VNode {
  return html`<div>
    <h1>Welcome${user.nick ? `, ${user.nick}` : ''}</h1>
    <${Section} title="Your account">
      <dl class="props">
        <dt>User id</dt><dd><code>${user.id}</code></dd>
        ${user.email && html`<dt>Email</dt><dd data-testid="user-email">${user.email}</dd>`}
        ${user.created_at && html`<dt>Created</dt><dd>${user.created_at}</dd>`}
      </dl>
    <//>
    <${Section} title="Service endpoints">
      <table>
        <thead><tr><th>Service</th><th>Base URL</th></tr></thead>
        <tbody>${SERVICES.map((s) => html`<tr><td>${s}</td><td><code>${platform().transport.url(s, '')}</code></td></tr>`)}</tbody>
      </table>
      <p class="muted">Stratus ${config().version}</p>
    <//>
  </div>`;
}
