// The gateway: live traffic per host (a uPlot chart of `/v0/stats` read every 2 s), the health of
// every backend (`/v0/status`), the live instances (`/v0/instances`) and the virtual hosts
// (`/v0/virtualhosts`). The route table and its policies have no endpoint, so they are not shown.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import type { StatusRow } from '@stratus/client';
import { DEMO_UNAVAILABLE, platform } from '../session.ts';
import { ALL_HOSTS, NO_ROUTE } from '../stats-window.ts';
import { ErrorBox, Loading, Section, readOnly, useLoad } from './common.ts';
import { TRAFFIC_INTERVAL_MS, TRAFFIC_WINDOW_MS, TimeChart, formatRate, usePoll, useTraffic } from './charts.ts';

/** How often the health rows are read again (each read probes every service). */
export const STATUS_INTERVAL_MS = 10_000;

export type StatusKind = 'service' | 'project' | 'instance';

/** Which part of `/v0/status` a row is (gateway README, `/v0/status` and instances): services, then projects, then instances. */
export function statusKind(row: StatusRow): StatusKind {
  if (row.id.startsWith('instance-')) return 'instance';
  if (row.id === row.name && row.host.startsWith(`${row.id}.`)) return 'service';
  return 'project';
}

/** What a status means, in words (gateway README, `/v0/status` probe). */
function statusNote(status: number): string {
  if (status === 200) return '';
  if (status === 503) return 'not running anywhere known';
  if (status === 502) return 'unreachable';
  if (status === 504) return 'no answer within 2 s';
  return 'answered with an error';
}

export function StatusBadge({ row }: { row: StatusRow }): VNode {
  const ok = row.status >= 200 && row.status < 300;
  const note = statusNote(row.status);
  return html`<span class=${ok ? 'badge ok' : 'badge bad'} title=${note || undefined} data-testid="status-badge">${row.statusText}</span>${
    note && html` <span class="muted">${note}</span>`
  }`;
}

/** The `/v0/status` rows of one kind as a table. */
export function StatusTable({ rows, testId }: { rows: StatusRow[]; testId: string }): VNode {
  return html`<table data-testid=${testId}>
    <thead><tr><th>Name</th><th>Host</th><th>Status</th></tr></thead>
    <tbody>${rows.map(
      (r) =>
        html`<tr data-status-id=${r.id}><td>${r.name}</td><td><code>${r.host}</code></td><td><${StatusBadge} row=${r} /></td></tr>`,
    )}</tbody>
  </table>`;
}

/** `/v0/status` read now and every STATUS_INTERVAL_MS. */
export function useStatus() {
  return usePoll((signal) => platform().gateway.status({ signal }), STATUS_INTERVAL_MS);
}

export function GatewayPage(): VNode {
  if (readOnly()) return html`<div><h1>Gateway</h1><p class="notice">${DEMO_UNAVAILABLE}</p></div>`;
  return html`<${GatewayLive} />`;
}

function GatewayLive(): VNode {
  const traffic = useTraffic();
  const status = useStatus();
  const instances = useLoad(() => platform().gateway.instances(), []);
  const hosts = useLoad(() => platform().gateway.virtualHosts(), []);
  const routes = useLoad(() => platform().gateway.routes(), []);
  const { window } = traffic;
  const perHost = window.hosts.filter((h) => h !== ALL_HOSTS);
  const rows = traffic.rows ?? [];
  const statusRows = status.data ?? [];
  const byKind = (kind: StatusKind) => statusRows.filter((r) => statusKind(r) === kind);

  return html`<div>
    <h1>Gateway</h1>
    <p class="muted">The platform's front door: it routes by host and path, authenticates, and counts every request. Figures are the sum over the live instances.</p>
    <${Section} title="Live traffic">
      <${ErrorBox} error=${traffic.error} />
      ${
        !traffic.error || traffic.reads > 0
          ? html`
        <p class="muted">Requests per second by host: the change of <code>/v0/stats</code>' totals between reads every ${TRAFFIC_INTERVAL_MS / 1000} s, the last ${TRAFFIC_WINDOW_MS / 60_000} minutes. This page's own reads count too (${formatRate(1000 / TRAFFIC_INTERVAL_MS)}/s on its host); <code>-noroute-</code> is requests to a host the gateway does not know. Other instances publish their counts every 2 s, so their share arrives in steps.</p>
        <${TimeChart}
          testId="traffic-chart"
          times=${window.times}
          unit="req/s"
          series=${perHost.map((h) => ({ label: h, values: window.rate(h) }))}
        />
        ${window.times.length === 0 && html`<p class="muted" data-testid="traffic-waiting">The first rate comes with the second read…</p>`}`
          : null
      }
      ${
        rows.length > 0 &&
        html`<table data-testid="stats-table">
        <thead><tr><th>Host</th><th>Now (req/s)</th><th>Requests</th><th>Average latency</th><th>Serving time</th></tr></thead>
        <tbody>${rows.map(
          (r) => html`<tr data-host=${r.host}>
            <td><code>${r.host}</code>${r.host === ALL_HOSTS ? html` <span class="muted">every request</span>` : r.host === NO_ROUTE ? html` <span class="muted">unknown hosts</span>` : ''}</td>
            <td data-testid="host-rate">${formatRate(window.latest(r.host))}</td>
            <td data-testid="host-requests">${r.served_requests}</td>
            <td>${r.latency_avg}</td>
            <td>${r.serving_time}</td>
          </tr>`,
        )}</tbody>
      </table>
      <p class="muted">Since ${rows[0]?.start_timestamp ?? ''} (up ${rows[0]?.uptime ?? ''}, the longest-running live instance).</p>`
      }
    <//>
    <${Section} title="Backend health">
      <${ErrorBox} error=${status.error} />
      <${Loading} loading=${!status.data && !status.error} />
      ${
        status.data &&
        html`<p class="muted">Each service answers a probe of its API document (2 s limit), read every ${STATUS_INTERVAL_MS / 1000} s.</p>
        <${StatusTable} rows=${byKind('service')} testId="status-table" />
        ${
          byKind('project').length > 0 &&
          html`<h3>Your project hosts</h3>
          <p class="muted">A project host is served by the lambda service: its status is that service's.</p>
          <${StatusTable} rows=${byKind('project')} testId="project-status-table" />`
        }`
      }
    <//>
    <${Section} title="Instances">
      <${ErrorBox} error=${instances.error} />
      <${Loading} loading=${instances.loading && !instances.data} />
      ${
        instances.data &&
        html`<table data-testid="instances-table">
        <thead><tr><th>Instance</th><th>Host</th><th>Pid</th><th>Version</th><th>Services</th><th>Started</th><th>Last seen</th><th>Requests</th></tr></thead>
        <tbody>${instances.data.map(
          (i) => html`<tr>
            <td><code>${i.id}</code>${i.answering && html` <span class="badge" title="the instance that answered this page">this one</span>`}</td>
            <td>${i.host}</td><td>${i.pid}</td><td>${i.version}</td>
            <td>${i.services.join(', ')}</td><td>${i.started_at}</td><td>${i.last_seen}</td><td>${i.served_requests}</td>
          </tr>`,
        )}</tbody>
      </table>
      <div class="buttons"><button type="button" onClick=${instances.reload}>Refresh</button></div>`
      }
    <//>
    <${Section} title="Virtual hosts">
      <${ErrorBox} error=${hosts.error} />
      <${Loading} loading=${hosts.loading && !hosts.data} />
      ${
        hosts.data &&
        html`<p class="muted">The host names the gateway serves: the platform's, then your project hosts. Every service is also reached on the front door under <code>${'/services/<name>/'}</code>.</p>
        <ul class="hosts" data-testid="virtual-hosts">${hosts.data.map((h) => html`<li><code>${h}</code></li>`)}</ul>`
      }
    <//>
    <${Section} title="Routes and policies">
      <${ErrorBox} error=${routes.error} />
      <${Loading} loading=${routes.loading && !routes.data} />
      ${
        routes.data &&
        html`<p class="muted">Which routes need a credential at the gateway: the first rule whose host and path prefix match decides — the rules of <code>stratus.config.json</code> (<code>gateway.routes</code>) first, then the built-in ones. <code>optional</code> leaves the decision to the service.</p>
        <table data-testid="policy-table">
          <thead><tr><th>Host</th><th>Path prefix</th><th>Authentication</th><th>From</th></tr></thead>
          <tbody>${[
            ...routes.data.policies.configured.map((r) => ({ ...r, from: 'configured' })),
            ...routes.data.policies.defaults.map((r) => ({ ...r, from: 'built in' })),
          ].map(
            (r) => html`<tr><td><code>${r.host}</code></td><td><code>${r.prefix}</code></td>
              <td><span class=${r.auth === 'require' ? 'badge ok' : 'badge'}>${r.auth}</span></td><td class="muted">${r.from}</td></tr>`,
          )}</tbody>
        </table>
        <h3>The front door's paths</h3>
        <p class="muted">On <code>api.</code>, the bare domain and IP addresses, the longest prefix wins.</p>
        <table data-testid="prefix-table">
          <thead><tr><th>Path prefix</th><th>Service</th></tr></thead>
          <tbody>${routes.data.api_prefixes.map((p) => html`<tr><td><code>${p.prefix}</code></td><td>${p.service}</td></tr>`)}</tbody>
        </table>`
      }
    <//>
  </div>`;
}
