// The overview page: who is signed in, the platform's request rate, what can be said of its
// errors and latency (from `/v0/stats`, read every 2 s), the health of every service
// (`/v0/status`), and where each service lives.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { DEMO_UNAVAILABLE, config, platform } from '../session.ts';
import type { User } from '../auth.ts';
import { href } from '../router.ts';
import { ALL_HOSTS, NO_ROUTE } from '../stats-window.ts';
import { ErrorBox, Loading, Section, readOnly } from './common.ts';
import { TRAFFIC_INTERVAL_MS, TimeChart, formatRate, useTraffic } from './charts.ts';
import { StatusTable, statusKind, useStatus } from './gateway.ts';

const SERVICES = ['auth', 'apikeys', 'lambda', 'scheduler', 'docdb', 'kv', 'logs', 'files', 'run', 'config', 'gateway'];

function Traffic(): VNode {
  const traffic = useTraffic();
  const { window } = traffic;
  if (traffic.error && traffic.reads === 0) return html`<${ErrorBox} error=${traffic.error} />`;
  return html`<div>
    <${ErrorBox} error=${traffic.error} />
    <div class="chart-grid">
      <div>
        <h3>Requests/s <span class="muted" data-testid="rate-now">now ${formatRate(window.latest(ALL_HOSTS))}</span></h3>
        <${TimeChart} testId="rate-chart" times=${window.times} unit="req/s" height=${180}
          series=${[{ label: 'all hosts', values: window.rate(ALL_HOSTS) }]} />
      </div>
      <div>
        <h3>Errors/s <span class="muted" data-testid="errors-now">now ${formatRate(window.serverErrors.at(-1) ?? null)}</span>
          <span class="muted" data-testid="noroute-now">· unroutable ${formatRate(window.latest(NO_ROUTE))}</span></h3>
        <${TimeChart} testId="error-chart" times=${window.times} unit="req/s" height=${180}
          series=${[
            { label: 'server errors (5xx)', values: window.serverErrors, color: '#c92a2a' },
            { label: 'unknown host (404)', values: window.rate(NO_ROUTE), color: '#e67700' },
          ]} />
      </div>
      <div>
        <h3>Average latency</h3>
        <${TimeChart} testId="latency-chart" times=${window.times} unit="ms" height=${180}
          series=${[{ label: 'per request', values: window.latencyMs, color: '#0b7285' }]} />
      </div>
    </div>
    <p class="muted">From <code>/v0/stats</code> read every ${TRAFFIC_INTERVAL_MS / 1000} s (the last 5 minutes; this page's reads count too).
      Errors are the requests the platform answered with a 5xx status (every host), and apart from them the requests to a host the gateway does not know
      (404 <code>no_route</code>); other 4xx answers are the callers' mistakes and are not counted as errors. The latency is the serving time of the interval's requests over their number.
      Per host: <a href=${href('gateway')}>Gateway</a>.</p>
  </div>`;
}

function Health(): VNode {
  const status = useStatus();
  const services = (status.data ?? []).filter((r) => statusKind(r) === 'service');
  const down = services.filter((r) => r.status !== 200).length;
  return html`<div>
    <${ErrorBox} error=${status.error} />
    <${Loading} loading=${!status.data && !status.error} />
    ${
      status.data &&
      html`<p data-testid="health-summary" class=${down === 0 ? 'ok-text' : 'error-text'}>${
        down === 0 ? `All ${services.length} services answer.` : `${down} of ${services.length} services do not answer.`
      }</p>
      <${StatusTable} rows=${services} testId="health-table" />`
    }
  </div>`;
}

export function HomePage({ user }: { user: User }): VNode {
  const demo = readOnly();
  return html`<div>
    <h1>Welcome${user.nick ? `, ${user.nick}` : ''}</h1>
    <${Section} title="Traffic">
      ${demo ? html`<p class="notice">${DEMO_UNAVAILABLE}</p>` : html`<${Traffic} />`}
    <//>
    <${Section} title="Service health">
      ${demo ? html`<p class="notice">${DEMO_UNAVAILABLE}</p>` : html`<${Health} />`}
    <//>
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
