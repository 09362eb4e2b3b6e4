// The sign-in page: email and password, and one button per configured identity provider.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { config } from '../api.ts';
import { login, ssoLoginUrl, type User } from '../auth.ts';
import { ErrorBox, useAction, valueOf } from './common.ts';

export function LoginPage({ onSignedIn, initialError }: { onSignedIn: (user: User) => void; initialError?: string | null }): VNode {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction();
  const providers = config().providers;
  const submit = (e: Event) => {
    e.preventDefault();
    void action.run(async () => onSignedIn(await login(email, password)));
  };
  return html`<main class="login">
    <form class="card" onSubmit=${submit} aria-label="Sign in">
      <h1>Stratus console</h1>
      <p class="muted">Sign in to manage your projects and services.</p>
      <${ErrorBox} error=${action.error ?? initialError} />
      <label>Email<input name="email" type="email" autocomplete="username" required value=${email} onInput=${(e: Event) => setEmail(valueOf(e))} /></label>
      <label>Password<input name="password" type="password" autocomplete="current-password" required value=${password} onInput=${(e: Event) => setPassword(valueOf(e))} /></label>
      <button type="submit" class="primary" disabled=${action.busy}>${action.busy ? 'Signing in…' : 'Sign in'}</button>
      ${providers.length > 0 &&
      html`<div class="sso">
        <p class="muted">or continue with</p>
        ${providers.map((p) => html`<a class="button" href=${ssoLoginUrl(p.name)} data-provider=${p.name}>Sign in with ${p.name}</a>`)}
      </div>`}
    </form>
  </main>`;
}
