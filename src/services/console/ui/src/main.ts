// The Stratus web console: loads its config, signs the user in, and shows one page per area.
import { render } from 'preact';
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { UNAUTHORIZED_EVENT, config, loadConfig, messageOf, setToken } from './session.ts';
import { finishSso, logout, me, type User } from './auth.ts';
import { href, useRoute } from './router.ts';
import { ApiKeysPage } from './pages/apikeys.ts';
import { BucketPage, BucketsPage } from './pages/buckets.ts';
import { ConfigPage } from './pages/config.ts';
import { CollectionPage, DatabasePage, DatabasesPage } from './pages/databases.ts';
import { GatewayPage } from './pages/gateway.ts';
import { HomePage } from './pages/home.ts';
import { KvCollectionPage, KvPage } from './pages/kv.ts';
import { LambdaPage, LambdasPage } from './pages/lambdas.ts';
import { LoggerPage, LoggersPage } from './pages/loggers.ts';
import { LoginPage } from './pages/login.ts';
import { ProjectsPage } from './pages/projects.ts';
import { ContainerPage, ContainersPage } from './pages/run.ts';
import { SchedulerPage, SchedulersPage } from './pages/schedulers.ts';

const NAV: [string, string][] = [
  ['', 'Overview'],
  ['projects', 'Projects'],
  ['apikeys', 'API keys'],
  ['lambdas', 'Lambdas'],
  ['databases', 'Databases'],
  ['kv', 'Key-value'],
  ['buckets', 'Buckets'],
  ['loggers', 'Loggers'],
  ['schedulers', 'Schedulers'],
  ['containers', 'Containers'],
  ['gateway', 'Gateway'],
  ['config', 'Config'],
];

function Page({ route, user }: { route: string[]; user: User }): VNode {
  const [area, a, b] = route;
  switch (area) {
    case undefined:
      return html`<${HomePage} user=${user} />`;
    case 'projects':
      return html`<${ProjectsPage} />`;
    case 'apikeys':
      return html`<${ApiKeysPage} />`;
    case 'lambdas':
      return a ? html`<${LambdaPage} key=${a} id=${a} />` : html`<${LambdasPage} />`;
    case 'databases':
      if (a && b) return html`<${CollectionPage} key=${a + '/' + b} databaseId=${a} collection=${b} />`;
      return a ? html`<${DatabasePage} key=${a} id=${a} />` : html`<${DatabasesPage} />`;
    case 'buckets':
      return a ? html`<${BucketPage} key=${a} id=${a} />` : html`<${BucketsPage} />`;
    case 'loggers':
      return a ? html`<${LoggerPage} key=${a} id=${a} />` : html`<${LoggersPage} />`;
    case 'schedulers':
      return a ? html`<${SchedulerPage} key=${a} id=${a} />` : html`<${SchedulersPage} />`;
    case 'containers':
      return a ? html`<${ContainerPage} key=${a} name=${a} />` : html`<${ContainersPage} />`;
    case 'kv':
      return a ? html`<${KvCollectionPage} key=${a} collection=${a} />` : html`<${KvPage} />`;
    case 'gateway':
      return html`<${GatewayPage} />`;
    case 'config':
      return html`<${ConfigPage} />`;
    default:
      return html`<div><h1>Not found</h1><p>There is no page <code>${route.join('/')}</code>. <a href="#/">Back to the overview</a>.</p></div>`;
  }
}

function Shell({ user, onSignOut }: { user: User; onSignOut: () => void }): VNode {
  const route = useRoute();
  const demo = config().demo;
  return html`<div class="shell">
    <aside class="nav">
      <div class="brand">Stratus</div>
      <nav aria-label="Areas">
        ${NAV.map(([path, label]) => html`<a href=${path ? href(path) : '#/'} class=${(route[0] ?? '') === path ? 'active' : ''}>${label}</a>`)}
      </nav>
      <div class="who">
        ${user.picture && html`<img src=${user.picture} alt="" width="28" height="28" onError=${(e: Event) => ((e.currentTarget as HTMLImageElement).style.display = 'none')} />`}
        <span data-testid="user">${user.email ?? user.nick ?? user.id}</span>
        ${!demo && html`<button type="button" onClick=${onSignOut}>Sign out</button>`}
      </div>
    </aside>
    <main class="content">
      ${demo && html`<div class="demo-banner" data-testid="demo-banner">Demo mode: sample data from the mock API; changes are disabled.</div>`}
      <${Page} route=${route} user=${user} />
    </main>
  </div>`;
}

function App(): VNode {
  const [phase, setPhase] = useState<'loading' | 'signed-out' | 'signed-in' | 'failed'>('loading');
  const [user, setUser] = useState<User | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    (async () => {
      await loadConfig();
      try {
        await finishSso();
      } catch (err) {
        setError(`Single sign-on failed: ${messageOf(err)}`);
      }
      const current = await me();
      setUser(current);
      setPhase(current ? 'signed-in' : 'signed-out');
    })().catch((err: unknown) => {
      setError(messageOf(err));
      setPhase('failed');
    });
  }, []);

  // A refused call may mean the session ended (expired, or signed out elsewhere): check, and if so
  // go back to the sign-in page.
  useEffect(() => {
    if (phase !== 'signed-in') return;
    let checking = false;
    const onUnauthorized = () => {
      if (checking) return;
      checking = true;
      me()
        .then((current) => {
          if (current) return;
          setToken(null);
          setUser(null);
          setError('Your session has ended. Please sign in again.');
          setPhase('signed-out');
        })
        .catch(() => undefined)
        .finally(() => {
          checking = false;
        });
    };
    window.addEventListener(UNAUTHORIZED_EVENT, onUnauthorized);
    return () => window.removeEventListener(UNAUTHORIZED_EVENT, onUnauthorized);
  }, [phase]);

  if (phase === 'loading') return html`<p class="splash">Loading…</p>`;
  if (phase === 'failed')
    return html`<main class="login"><div class="card"><h1>Stratus console</h1><div class="error" role="alert">The console could not start: ${error}</div></div></main>`;
  if (phase === 'signed-out' || !user) {
    return html`<${LoginPage}
      initialError=${error}
      onSignedIn=${(u: User) => {
        setError(null);
        // the login answer carries a short user; fetch the full record
        void me().then((full) => setUser(full ?? u));
        setUser(u);
        setPhase('signed-in');
      }}
    />`;
  }
  return html`<${Shell}
    user=${user}
    onSignOut=${() => {
      void logout()
        .catch(() => undefined)
        .then(() => {
          setUser(null);
          setPhase('signed-out');
          location.hash = '#/';
        });
    }}
  />`;
}

const root = document.getElementById('app');
if (root) render(html`<${App} />`, root);
