// Key-value: the node's status (role, replication, newest seq), the signed-in user's collections,
// and a collection's keys a page at a time with prefix search, a key's value, set and delete.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import type { KvStatus } from '@stratus/client';
import { DEMO_UNAVAILABLE, platform } from '../session.ts';
import { href, navigate } from '../router.ts';
import { ErrorBox, Loading, Section, pretty, readOnly, useAction, useLoad, valueOf } from './common.ts';
import { usePoll } from './charts.ts';

/** How often the node's status is read again. */
const STATUS_INTERVAL_MS = 5000;
const PAGE_SIZES = [20, 100, 1000];
/** Longest value text shown in the keys table. */
const PREVIEW = 80;

const kv = () => platform().kv;

function preview(value: unknown): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > PREVIEW ? `${text.slice(0, PREVIEW - 1)}…` : text;
}

function uptime(seconds: number): string {
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return d > 0 ? `${d}d ${h}h` : h > 0 ? `${h}h ${m}m` : m > 0 ? `${m}m ${s}s` : `${s}s`;
}

const yesNo = (v: boolean) => (v ? html`<span class="badge ok">yes</span>` : html`<span class="badge bad">no</span>`);

/** The node as `/v1/status` describes it (kv README, Decisions: `/v1/status`). */
function NodeStatus({ status }: { status: KvStatus }): VNode {
  const r = status.replication;
  const replica = status.role === 'replica';
  return html`<div data-testid="kv-node">
    <dl class="props">
      <dt>Node</dt><dd><code>${status.node}</code></dd>
      <dt>Role</dt><dd><span class="badge" data-testid="kv-role">${status.role}</span></dd>
      ${replica && html`<dt>Parent</dt><dd><code>${status.parent}</code></dd>`}
      ${replica && html`<dt>Connected to the parent</dt><dd>${yesNo(r.parent_connected)}</dd>`}
      ${replica && html`<dt>This instance follows the parent</dt><dd>${r.following ? 'yes' : 'no (another instance of the node does)'}</dd>`}
      <dt>Replicas connected</dt><dd data-testid="kv-replicas">${r.connected_replicas}</dd>
      <dt>Newest seq</dt><dd data-testid="kv-seq">${r.last_seq}</dd>
      <dt>Up</dt><dd>${uptime(status.uptime_seconds)}</dd>
    </dl>
    <p class="muted">
      ${replica ? 'A replica applies its parent’s writes in order and sends its own writes to the parent. ' : ''}
      The seq counts every write to the node, every namespace’s. The node reports no position of its replicas,
      and a replica does not report its parent’s seq, so replica lag cannot be shown here.
    </p>
  </div>`;
}

export function KvPage(): VNode {
  if (readOnly()) return html`<div><h1>Key-value</h1><p class="notice">${DEMO_UNAVAILABLE}</p></div>`;
  return html`<${KvCollections} />`;
}

function KvCollections(): VNode {
  const status = usePoll((signal) => kv().status({ signal }), STATUS_INTERVAL_MS);
  const list = useLoad(() => kv().listCollections(), []);
  const [name, setName] = useState('');
  const create = useAction();
  const remove = useAction();
  const figures = status.data?.collections ?? {};
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      await kv().createCollection(name.trim());
      navigate('kv', name.trim());
    });
  };
  const drop = (collection: string) => {
    if (!confirm(`Delete the collection ${collection} and all its keys?`)) return;
    void remove.run(async () => {
      await kv().deleteCollection(collection);
      list.reload();
    });
  };
  return html`<div>
    <h1>Key-value</h1>
    <p class="muted">Your own namespace: collections and keys no other user sees. Calls with your session, or with an API key of yours that is not bound to a project, reach it; a key bound to a project reaches that project's namespace instead, which the console does not show.</p>
    <${Section} title="Node">
      <${ErrorBox} error=${status.error} />
      <${Loading} loading=${!status.data && !status.error} />
      ${status.data && html`<${NodeStatus} status=${status.data} />`}
    <//>
    <${Section} title="New collection">
      <form class="inline" onSubmit=${submit} aria-label="New collection">
        <label>Name<input name="name" required maxLength=${128} title="1–128 characters, no /" value=${name} onInput=${(e: Event) => setName(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${create.busy}>Create collection</button>
      </form>
      <${ErrorBox} error=${create.error} />
    <//>
    <${Section} title="Your collections">
      <${ErrorBox} error=${list.error ?? remove.error} />
      <${Loading} loading=${list.loading && !list.data} />
      ${list.data && list.data.length === 0 && html`<p class="muted">No collections yet.</p>`}
      ${
        list.data &&
        list.data.length > 0 &&
        html`<table data-testid="kv-collections-table">
        <thead><tr><th>Name</th><th>Keys</th><th>Newest write (seq)</th><th></th></tr></thead>
        <tbody>${list.data.map(
          (c) => html`<tr data-collection=${c}>
            <td><a href=${href('kv', c)}>${c}</a></td>
            <td>${figures[c]?.keys ?? ''}</td>
            <td>${figures[c]?.lastSeq || ''}</td>
            <td class="actions"><button type="button" class="danger small" disabled=${remove.busy} onClick=${() => drop(c)}>Delete</button></td>
          </tr>`,
        )}</tbody>
      </table>`
      }
    <//>
  </div>`;
}

/** The value as typed: JSON, or text stored as a JSON string. */
function parseValue(text: string, as: 'json' | 'text'): unknown {
  if (as === 'text') return text;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(
      `The value is not valid JSON (${err instanceof Error ? err.message : String(err)}); choose "text" to store it as a string.`,
    );
  }
}

export function KvCollectionPage({ collection }: { collection: string }): VNode {
  if (readOnly()) return html`<div><h1>Collection ${collection}</h1><p class="notice">${DEMO_UNAVAILABLE}</p></div>`;
  return html`<${KvKeys} collection=${collection} />`;
}

function KvKeys({ collection }: { collection: string }): VNode {
  const col = () => kv().collection(collection);
  // The search as typed, and as applied to the list.
  const [prefixInput, setPrefixInput] = useState('');
  const [prefix, setPrefix] = useState('');
  const [limit, setLimit] = useState(PAGE_SIZES[0]!);
  // The page shown starts after `cursor`; `earlier` holds the cursors of the pages before it.
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [earlier, setEarlier] = useState<(string | undefined)[]>([]);
  const page = useLoad(() => col().list({ prefix, after: cursor, limit }), [collection, prefix, cursor, limit]);
  const [selected, setSelected] = useState<string | null>(null);
  const entry = useLoad(
    () => (selected === null ? Promise.resolve(null) : col().get(selected)),
    [collection, selected],
  );
  const [key, setKey] = useState('');
  const [value, setValue] = useState('');
  const [as, setAs] = useState<'json' | 'text'>('json');
  const [saved, setSaved] = useState<string | null>(null);
  const set = useAction();
  const remove = useAction();

  const firstPage = () => {
    setCursor(undefined);
    setEarlier([]);
  };
  const search = (e: Event) => {
    e.preventDefault();
    setPrefix(prefixInput);
    firstPage();
    page.reload();
  };
  const next = () => {
    if (!page.data?.next) return;
    setEarlier([...earlier, cursor]);
    setCursor(page.data.next);
  };
  const previous = () => {
    setCursor(earlier[earlier.length - 1]);
    setEarlier(earlier.slice(0, -1));
  };
  const submitSet = (e: Event) => {
    e.preventDefault();
    setSaved(null);
    void set.run(async () => {
      const written = await col().set(key, parseValue(value, as));
      setSaved(`Saved ${key}: version ${written.version}, seq ${written.seq}.`);
      setSelected(key);
      entry.reload();
      page.reload();
    });
  };
  const edit = (k: string, v: unknown) => {
    setKey(k);
    if (typeof v === 'string') {
      setAs('text');
      setValue(v);
    } else {
      setAs('json');
      setValue(JSON.stringify(v, null, 2));
    }
  };
  const del = (k: string) => {
    if (!confirm(`Delete the key ${k}?`)) return;
    void remove.run(async () => {
      await col().delete(k);
      if (selected === k) setSelected(null);
      page.reload();
    });
  };
  const dropCollection = () => {
    if (!confirm(`Delete the collection ${collection} and all its keys?`)) return;
    void remove.run(async () => {
      await kv().deleteCollection(collection);
      navigate('kv');
    });
  };
  const items = page.data?.items ?? [];
  const position = earlier.length * limit;

  return html`<div>
    <p><a href=${href('kv')}>← Key-value</a></p>
    <h1>Collection ${collection}</h1>
    <${Section} title="Keys">
      <form class="inline" onSubmit=${search} aria-label="Search keys">
        <label class="grow">Key prefix<input name="prefix" placeholder="user/42/" value=${prefixInput} onInput=${(e: Event) => setPrefixInput(valueOf(e))} /></label>
        <label>Per page<select name="limit" value=${String(limit)} onChange=${(e: Event) => {
          setLimit(Number(valueOf(e)));
          firstPage();
        }}>${PAGE_SIZES.map((n) => html`<option value=${String(n)}>${n}</option>`)}</select></label>
        <button type="submit" class="primary">Search</button>
      </form>
      <${ErrorBox} error=${page.error ?? remove.error} />
      <${Loading} loading=${page.loading && !page.data} />
      ${page.data && items.length === 0 && html`<p class="muted" data-testid="no-keys">${prefix ? `No keys starting with “${prefix}”${cursor !== undefined ? ' on this page' : ''}.` : 'No keys.'}</p>`}
      ${
        items.length > 0 &&
        html`<table data-testid="kv-keys-table">
        <thead><tr><th>Key</th><th>Value</th><th>Version</th><th>Updated</th><th></th></tr></thead>
        <tbody>${items.map(
          (i) => html`<tr data-key=${i.key} class=${i.key === selected ? 'selected' : ''}>
            <td><code>${i.key}</code></td>
            <td><code>${preview(i.value)}</code></td>
            <td>${i.version}</td>
            <td>${i.updatedAt}</td>
            <td class="actions">
              <button type="button" class="small" onClick=${() => setSelected(i.key)}>View</button>
              <button type="button" class="small" onClick=${() => edit(i.key, i.value)}>Edit</button>
              <button type="button" class="danger small" disabled=${remove.busy} onClick=${() => del(i.key)}>Delete</button>
            </td>
          </tr>`,
        )}</tbody>
      </table>`
      }
      ${
        page.data &&
        html`<div class="buttons">
        <button type="button" disabled=${earlier.length === 0} onClick=${previous}>Previous page</button>
        <button type="button" disabled=${!page.data.next} onClick=${next}>Next page</button>
        <span class="muted" data-testid="kv-page-info">${items.length > 0 ? `Keys ${position + 1}–${position + items.length}` : ''}${prefix ? ` starting with “${prefix}”` : ''}${page.data.next ? ', more follow' : ''}</span>
        <button type="button" onClick=${page.reload}>Refresh</button>
      </div>`
      }
    <//>
    ${
      selected !== null &&
      html`<${Section} title=${`Key ${selected}`}>
      <${ErrorBox} error=${entry.error} />
      ${
        entry.data &&
        html`<dl class="props">
          <dt>Version</dt><dd>${entry.data.version}</dd>
          <dt>Updated</dt><dd>${entry.data.updatedAt}</dd>
        </dl>
        <pre data-testid="kv-value">${pretty(entry.data.value)}</pre>
        <div class="buttons">
          <button type="button" onClick=${() => entry.data && edit(entry.data.key, entry.data.value)}>Edit</button>
          <button type="button" class="danger" onClick=${() => del(selected)}>Delete key</button>
          <button type="button" onClick=${() => setSelected(null)}>Close</button>
        </div>`
      }
    <//>`
    }
    <${Section} title="Set a key">
      <form onSubmit=${submitSet} aria-label="Set a key">
        <div class="inline">
          <label class="grow">Key (slashes allowed)<input name="key" required value=${key} onInput=${(e: Event) => setKey(valueOf(e))} /></label>
          <label>Value is<select name="as" value=${as} onChange=${(e: Event) => {
            setAs(valueOf(e) === 'text' ? 'text' : 'json');
            set.clear();
          }}>
            <option value="json">JSON</option><option value="text">text (stored as a string)</option>
          </select></label>
        </div>
        <label>Value<textarea name="value" class="code" rows="4" placeholder=${as === 'json' ? '{"theme": "dark"}' : 'any text'} value=${value} onInput=${(
          e: Event,
        ) => {
          setValue(valueOf(e));
          set.clear();
        }}></textarea></label>
        <button type="submit" class="primary" disabled=${set.busy}>Save key</button>
      </form>
      <${ErrorBox} error=${set.error} />
      ${saved && html`<p class="ok-text" data-testid="kv-saved">${saved}</p>`}
    <//>
    <div class="buttons"><button type="button" class="danger" disabled=${remove.busy} onClick=${dropCollection}>Delete collection</button></div>
  </div>`;
}
