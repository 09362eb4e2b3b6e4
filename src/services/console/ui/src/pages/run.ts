// Containers (the run service): the signed-in user's repositories, how to push one, and a
// repository's page: desired beside actual state (read again every 3 s), its references to start
// or roll back, stop, the history, and the settings and logs (run-settings.ts).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { StratusError, type RepositoryHandle, type RepositoryState, type RepositorySummary } from '@stratus/client';
import { config, messageOf, platform, platformUrl } from '../session.ts';
import { href } from '../router.ts';
import { actualView, hostUrl, RECORDING_NOTE, shortDigest, targetText } from '../run-change.ts';
import { ErrorBox, Loading, Section, readOnly, useAction, useLoad } from './common.ts';
import { EnvForm, LoggerForm, LogsSection, VolumesForm, type ChangeRepository } from './run-settings.ts';

/** How often the repository page reads its state again while it is open. */
const REFRESH_MS = 3000;

function DriverNote({ driver }: { driver: string }): VNode {
  return html`<p class="muted" data-testid="run-driver">Runtime driver: <code>${driver}</code>${
    driver === 'recording' ? ` — ${RECORDING_NOTE}: it records what it is asked, and the actual state is unknown.` : ''
  }</p>`;
}

/** The actual state as a badge (and what it runs, when asked); why (the engine's message, or that nothing runs) under it. */
function ActualBadge({
  actual,
  driver,
  showTarget = false,
}: {
  actual: RepositoryState['actual'];
  driver: string;
  showTarget?: boolean;
}): VNode {
  const view = actualView(actual, driver);
  const tone = view.tone === 'plain' ? '' : ` ${view.tone}`;
  return html`<span class="state-with-note">
    <span><span class=${`badge${tone}`} title=${view.note ?? undefined} data-testid="actual-badge">${view.label}</span>${
      showTarget && actual && html` <code title=${actual.digest ?? undefined}>${targetText(actual)}</code>`
    }</span>
    ${view.note && html`<span class=${view.tone === 'bad' || view.tone === 'ok' ? 'state-note error-text' : 'state-note muted'} data-testid="actual-note">${view.note}</span>`}
  </span>`;
}

function DesiredBadge({ desired }: { desired: RepositoryState['desired'] }): VNode {
  return html`<span class=${desired.state === 'running' ? 'badge ok' : 'badge'} data-testid="desired-badge">${desired.state}</span>`;
}

/** The host as a link while something runs there; as text otherwise (it would answer 503). */
function HostLink({ host, running }: { host: string | null; running: boolean }): VNode {
  if (!host) return html`<span class="muted">given at the first start</span>`;
  if (!running) return html`<code>${host}</code>`;
  const url = hostUrl(host, location);
  return html`<a href=${url} target="_blank" rel="noopener noreferrer">${url}</a>`;
}

/** Pushing needs container tools and an API key: the registry is at the platform's front door. */
function PushHelp({ name = 'my/app' }: { name?: string }): VNode {
  const host = new URL(platformUrl()).host;
  const plain = location.protocol === 'http:';
  return html`<div data-testid="push-help">
    <p>A repository is created by your first push to its name. The registry takes a platform API key
      (<a href=${href('apikeys')}>API keys</a>): the key as the user name, its secret as the password.</p>
    <pre>${`echo <secret> | docker login ${host} -u <key> --password-stdin
docker tag my-image ${host}/${name}:v1
docker push ${host}/${name}:v1`}</pre>
    <p>or with skopeo:</p>
    <pre>${`skopeo copy${plain ? ' --dest-tls-verify=false' : ''} --dest-creds <key>:<secret> oci:./image:v1 docker://${host}/${name}:v1`}</pre>
    ${
      plain &&
      html`<p class="muted">
        The platform answers plain HTTP here: Docker pushes to it only when <code>${host}</code> is <code>localhost</code> or listed in its <code>insecure-registries</code>.
      </p>`
    }
  </div>`;
}

export function ContainersPage(): VNode {
  const list = useLoad(() => platform().run.repositories(), []);
  const rows: RepositorySummary[] = list.data?.repositories ?? [];
  const driver = list.data?.driver ?? '';
  return html`<div>
    <h1>Containers</h1>
    ${list.data && html`<${DriverNote} driver=${driver} />`}
    <${Section} title="Your repositories">
      <${ErrorBox} error=${list.error} />
      <${Loading} loading=${list.loading && !list.data} />
      ${list.data && rows.length === 0 && html`<p class="muted" data-testid="no-repositories">No repositories yet: push an image (below).</p>`}
      ${
        rows.length > 0 &&
        html`<table data-testid="repositories-table">
        <thead><tr><th>Repository</th><th>Current</th><th>Desired</th><th>Actual</th><th>Host</th></tr></thead>
        <tbody>${rows.map(
          (r) => html`<tr data-repository=${r.repository}>
            <td><a href=${href('containers', r.repository)}>${r.repository}</a></td>
            <td><code title=${r.desired.digest ?? undefined}>${targetText(r.desired)}</code></td>
            <td><${DesiredBadge} desired=${r.desired} /></td>
            <td><${ActualBadge} actual=${r.actual} driver=${driver} /></td>
            <td><${HostLink} host=${r.host} running=${r.actual?.state === 'running'} /></td>
          </tr>`,
        )}</tbody>
      </table>`
      }
    <//>
    ${!list.error && html`<${Section} title="Push an image"><${PushHelp} /><//>`}
  </div>`;
}

/**
 * A repository's console data, read now and every REFRESH_MS until the page goes away. Answers
 * are applied in the order their requests started, so a read that began before a change cannot
 * undo the change's answer on the page.
 */
function useRepositoryState(name: string): {
  data: RepositoryState | null;
  error: string | null;
  /** Runs a change and shows its answer; after a failure the state is read again (a 502 still saved it). */
  change: ChangeRepository;
} {
  const [data, setData] = useState<RepositoryState | null>(null);
  const [error, setError] = useState<string | null>(null);
  const started = useRef(0);
  const shown = useRef(0);
  const accept = (n: number, next: RepositoryState) => {
    if (n < shown.current) return;
    shown.current = n;
    setData(next);
  };
  const read = useCallback(
    async (signal?: AbortSignal): Promise<boolean> => {
      const n = ++started.current;
      try {
        accept(n, await platform().run.repository(name).get({ signal }));
        setError(null);
        return true;
      } catch (err) {
        if (signal?.aborted) return false;
        setError(messageOf(err));
        // A missing repository does not come back by asking again.
        return !(err instanceof StratusError && err.status === 404);
      }
    },
    [name],
  );

  useEffect(() => {
    setData(null);
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      const again = await read(abort.signal);
      // Demo mode has no run routes: one "not available" is enough.
      if (again && !abort.signal.aborted && !config().demo) timer = setTimeout(() => void poll(), REFRESH_MS);
    };
    void poll();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [read]);

  const change = async (call: (repository: RepositoryHandle) => Promise<RepositoryState>) => {
    const n = ++started.current;
    try {
      const next = await call(platform().run.repository(name));
      accept(n, next);
      return next;
    } catch (err) {
      void read();
      throw err;
    }
  };
  return { data, error, change };
}

export function ContainerPage({ name }: { name: string }): VNode {
  const { data, error, change } = useRepositoryState(name);
  const action = useAction();
  const run = (call: (repository: RepositoryHandle) => Promise<RepositoryState>) =>
    void action.run(async () => {
      await change(call);
    });
  const stop = () => {
    if (!confirm(`Stop ${name}?`)) return;
    run((r) => r.stop());
  };
  const ro = readOnly() || action.busy;
  const history = data ? [...data.history].reverse() : [];

  return html`<div>
    <p><a href=${href('containers')}>← Containers</a></p>
    <h1>${name}</h1>
    ${data && html`<${DriverNote} driver=${data.driver} />`}
    <${ErrorBox} error=${error} />
    <${Loading} loading=${!data && !error} />
    ${
      data &&
      html`<${Section} title="State">
      <dl class="props" data-testid="run-state">
        <dt>Desired</dt>
        <dd data-testid="desired-state"><${DesiredBadge} desired=${data.desired} /> <code title=${data.desired.digest ?? undefined}>${targetText(data.desired)}</code>
          ${data.desired.digest && data.desired.reference && html` <span class="muted">${shortDigest(data.desired.digest)}</span>`}</dd>
        <dt>Actual</dt>
        <dd data-testid="actual-state"><${ActualBadge} actual=${data.actual} driver=${data.driver} showTarget=${true} /></dd>
        ${data.actual?.exit_code !== undefined && html`<dt>Exit code</dt><dd data-testid="exit-code">${data.actual.exit_code}</dd>`}
        ${data.actual && html`<dt>Applied</dt><dd><time datetime=${data.actual.applied_at}>${data.actual.applied_at}</time></dd>`}
        <dt>Host</dt>
        <dd data-testid="run-host"><${HostLink} host=${data.host} running=${data.actual?.state === 'running'} /></dd>
      </dl>
      <div class="buttons">
        <button type="button" class="danger" disabled=${ro} onClick=${stop}>Stop</button>
        ${action.busy && html`<span class="muted">Waiting for the driver…</span>`}
      </div>
      <${ErrorBox} error=${action.error} />
      <h3>References</h3>
      ${data.references.length === 0 && html`<p class="muted">No tags pushed.</p>`}
      ${
        data.references.length > 0 &&
        html`<table data-testid="references-table">
        <thead><tr><th>Tag</th><th></th><th></th></tr></thead>
        <tbody>${data.references.map(
          (ref) => html`<tr data-reference=${ref}>
            <td><code>${ref}</code></td>
            <td>${ref === data.desired.reference && html`<span class="muted">${data.desired.state === 'running' ? 'running (desired)' : 'last run'}</span>`}</td>
            <td class="actions">
              <button type="button" class="small" disabled=${ro} aria-label=${`Start ${ref}`} onClick=${() => run((r) => r.start({ reference: ref }))}>Start</button>
              <button type="button" class="small" disabled=${ro} aria-label=${`Roll back to ${ref}`} onClick=${() => run((r) => r.rollBack({ reference: ref }))}>Roll back</button>
            </td>
          </tr>`,
        )}</tbody>
      </table>`
      }
      <p class="muted">Start and Roll back both run the tag at the image it points to now; they differ in the history only. Stop keeps the reference. The page reads the state again every ${REFRESH_MS / 1000} s.</p>
    <//>
    <${Section} title="History">
      ${history.length === 0 && html`<p class="muted">Nothing started yet.</p>`}
      ${
        history.length > 0 &&
        html`<table data-testid="history-table">
        <thead><tr><th>When (UTC)</th><th>Action</th><th>Reference</th><th>Digest</th><th>By</th><th></th></tr></thead>
        <tbody>${history.map(
          (h) => html`<tr>
            <td><time datetime=${h.at}>${h.at}</time></td><td>${h.action}</td><td><code>${h.reference ?? ''}</code></td>
            <td><code title=${h.digest ?? undefined}>${shortDigest(h.digest)}</code></td><td><code>${h.user}</code></td>
            <td class="actions">${
              h.action !== 'stop' &&
              h.digest &&
              html`<button type="button" class="small" disabled=${ro} aria-label=${`Roll back to ${shortDigest(h.digest)}`} onClick=${() => run((r) => r.rollBack({ digest: h.digest ?? '' }))}>Roll back to this image</button>`
            }</td>
          </tr>`,
        )}</tbody>
      </table>`
      }
      <p class="muted">Newest first. Rolling back to an image of the history runs its digest, even when its tag has moved since.</p>
    <//>
    <${Section} title="Settings">
      <${EnvForm} state=${data} change=${change} />
      <${VolumesForm} state=${data} change=${change} />
      <${LoggerForm} state=${data} change=${change} />
    <//>
    <${LogsSection} state=${data} />`
    }
    ${error && !data && !config().demo && html`<${Section} title="Push an image"><${PushHelp} name=${name} /><//>`}
  </div>`;
}
