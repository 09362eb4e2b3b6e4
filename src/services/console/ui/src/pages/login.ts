// The sign-in page: email and password, one button per configured identity provider, and, when
// sign-up is open, a form to create an account.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { config } from '../session.ts';
import { login, signup, ssoLoginUrl, type User } from '../auth.ts';
import { ErrorBox, useAction, valueOf } from './common.ts';

export function LoginPage({
  onSignedIn,
  initialError,
}: {
  onSignedIn: (user: User) => void;
  initialError?: string | null;
}): VNode {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [nick, setNick] = useState('');
  const [creating, setCreating] = useState(false);
  const action = useAction();
  const providers = config().providers;
  const submit = (e: Event) => {
    e.preventDefault();
    void action.run(async () =>
      onSignedIn(creating ? await signup(email, password, nick.trim()) : await login(email, password)),
    );
  };
  if (creating) {
    return html`<main class="login">
      <form class="card" onSubmit=${submit} aria-label="Create account">
        <h1>Create your account</h1>
        <${ErrorBox} error=${action.error} />
        <label>Email<input name="email" type="email" autocomplete="username" required value=${email} onInput=${(e: Event) => setEmail(valueOf(e))} /></label>
        <label>Password<input name="password" type="password" autocomplete="new-password" required value=${password} onInput=${(e: Event) => setPassword(valueOf(e))} /></label>
        <label>Nickname (optional)<input name="nick" autocomplete="nickname" value=${nick} onInput=${(e: Event) => setNick(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${action.busy}>${action.busy ? 'Creating…' : 'Create account'}</button>
        <p class="muted"><a href="#" onClick=${(e: Event) => (e.preventDefault(), setCreating(false))}>I already have an account</a></p>
      </form>
    </main>`;
  }
  return html`<main class="login">
    <form class="card" onSubmit=${submit} aria-label="Sign in">
      <h1>Stratus console</h1>
      <p class="muted">Sign in to manage your projects and services.</p>
      <${ErrorBox} error=${action.error ?? initialError} />
      <label>Email<input name="email" type="email" autocomplete="username" required value=${email} onInput=${(e: Event) => setEmail(valueOf(e))} /></label>
      <label>Password<input name="password" type="password" autocomplete="current-password" required value=${password} onInput=${(e: Event) => setPassword(valueOf(e))} /></label>
      <button type="submit" class="primary" disabled=${action.busy}>${action.busy ? 'Signing in…' : 'Sign in'}</button>
      ${
        providers.length > 0 &&
        html`<div class="sso">
        <p class="muted">or continue with</p>
        ${providers.map((p) => html`<a class="button" href=${ssoLoginUrl(p.name)} data-provider=${p.name}>Sign in with ${p.name}</a>`)}
      </div>`
      }
      ${config().signup && html`<p class="muted">New here? <a href="#" onClick=${(e: Event) => (e.preventDefault(), setCreating(true))}>Create an account</a></p>`}
    </form>
  </main>`;
}
