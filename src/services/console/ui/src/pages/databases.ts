// Document databases: databases, their keys, collections, documents (insert, find with a filter, remove) and indexes.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { platform } from '../session.ts';
import { href, navigate } from '../router.ts';
import {
  ErrorBox,
  Loading,
  SecretPanel,
  Section,
  checkedOf,
  pretty,
  readOnly,
  useAction,
  useLoad,
  valueOf,
} from './common.ts';

type Doc = Record<string, unknown>;

const db = (id: string) => platform().docdb.database(id);
const col = (id: string, name: string) => db(id).collection(name);

function parseObject(text: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`${what} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new Error(`${what} must be a JSON object.`);
  return value as Record<string, unknown>;
}

export function DatabasesPage(): VNode {
  const list = useLoad(() => platform().docdb.databases.list(), []);
  const [name, setName] = useState('');
  const create = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      const created = await platform().docdb.databases.create(name);
      navigate('databases', created.id);
    });
  };
  return html`<div>
    <h1>Databases</h1>
    <${Section} title="New database">
      <form class="inline" onSubmit=${submit} aria-label="New database">
        <label>Name<input name="name" required value=${name} onInput=${(e: Event) => setName(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${create.busy || readOnly()}>Create database</button>
      </form>
      <${ErrorBox} error=${create.error} />
    <//>
    <${Section} title="Your databases">
      <${ErrorBox} error=${list.error} />
      <${Loading} loading=${list.loading && !list.data} />
      ${list.data && list.data.length === 0 && html`<p class="muted">No databases yet.</p>`}
      ${
        list.data &&
        list.data.length > 0 &&
        html`<table data-testid="databases-table">
        <thead><tr><th>Name</th><th>Id</th><th>Owners</th><th>Created</th></tr></thead>
        <tbody>${list.data.map((d) => html`<tr><td><a href=${href('databases', d.id)}>${d.name}</a></td><td><code>${d.id}</code></td><td>${d.owners_length ?? ''}</td><td>${d.creation_date ?? ''}</td></tr>`)}</tbody>
      </table>`
      }
    <//>
  </div>`;
}

export function DatabasePage({ id }: { id: string }): VNode {
  const record = useLoad(() => (readOnly() ? Promise.resolve(null) : db(id).get()), [id]);
  const collections = useLoad(() => db(id).collections(), [id]);
  const [colName, setColName] = useState('');
  const [keyName, setKeyName] = useState('');
  const [secret, setSecret] = useState<{ name: string; key: string; secret: string } | null>(null);
  const createCol = useAction();
  const keys = useAction();
  const remove = useAction();
  const addCollection = (e: Event) => {
    e.preventDefault();
    void createCol.run(async () => {
      await col(id, colName).create();
      setColName('');
      collections.reload();
    });
  };
  const addKey = (e: Event) => {
    e.preventDefault();
    void keys.run(async () => {
      setSecret(await db(id).createApiKey(keyName));
      setKeyName('');
      record.reload();
    });
  };
  const deleteKey = (key: string) => {
    if (!confirm('Delete this database key?')) return;
    void keys.run(async () => {
      // The client has no method for this action: the route through its transport.
      await db(id).deleteApiKey(key);
      record.reload();
    });
  };
  const deleteDb = () => {
    if (!confirm('Delete this database with all its collections and documents?')) return;
    void remove.run(async () => {
      await db(id).delete();
      navigate('databases');
    });
  };
  return html`<div>
    <p><a href=${href('databases')}>← Databases</a></p>
    <h1>${record.data?.name ?? 'Database'}</h1>
    <p class="muted">Id <code>${id}</code></p>
    <${ErrorBox} error=${record.error ?? remove.error} />
    <${Section} title="Collections">
      <${ErrorBox} error=${collections.error} />
      <${Loading} loading=${collections.loading && !collections.data} />
      ${collections.data && collections.data.length === 0 && html`<p class="muted">No collections yet. Inserting a document creates its collection.</p>`}
      ${
        collections.data &&
        collections.data.length > 0 &&
        html`<table data-testid="collections-table">
        <thead><tr><th>Name</th><th>Documents</th><th>Indexes</th><th>Defaults</th></tr></thead>
        <tbody>${collections.data.map((c) => html`<tr><td><a href=${href('databases', id, c.name)}>${c.name}</a></td><td>${c.total}</td><td>${c.indexes}</td><td><code>${c.defaults ? JSON.stringify(c.defaults) : '—'}</code></td></tr>`)}</tbody>
      </table>`
      }
      <form class="inline" onSubmit=${addCollection} aria-label="New collection">
        <label>New collection<input name="collection" required value=${colName} onInput=${(e: Event) => setColName(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${createCol.busy || readOnly()}>Create collection</button>
      </form>
      <${ErrorBox} error=${createCol.error} />
    <//>
    ${
      !readOnly() &&
      html`<${Section} title="Database API keys">
      <p class="muted">Keys of this database only, sent as <code>Api-Key</code> and <code>Api-Secret</code>.</p>
      ${
        secret &&
        html`<${SecretPanel} title=${`Database key "${secret.name}" created`} entries=${[
          ['Key', secret.key],
          ['Secret', secret.secret],
        ]} onClose=${() => setSecret(null)} />`
      }
      ${record.data && record.data.api_keys.length === 0 && html`<p class="muted">No keys.</p>`}
      ${
        record.data &&
        record.data.api_keys.length > 0 &&
        html`<ul class="plain">${record.data.api_keys.map((k) => html`<li><code>${k}</code> <button type="button" class="danger small" onClick=${() => deleteKey(k)}>Delete</button></li>`)}</ul>`
      }
      <form class="inline" onSubmit=${addKey} aria-label="New database key">
        <label>Key name<input name="key-name" required value=${keyName} onInput=${(e: Event) => setKeyName(valueOf(e))} /></label>
        <button type="submit" disabled=${keys.busy}>Create key</button>
      </form>
      <${ErrorBox} error=${keys.error} />
    <//>
    <div class="buttons"><button type="button" class="danger" onClick=${deleteDb}>Delete database</button></div>`
    }
  </div>`;
}

function Indexes({ databaseId, collection }: { databaseId: string; collection: string }): VNode {
  const list = useLoad(() => col(databaseId, collection).listIndexes(), [databaseId, collection]);
  const [name, setName] = useState('');
  const [type, setType] = useState<'map' | 'btree'>('map');
  const [fields, setFields] = useState('');
  const [unique, setUnique] = useState(true);
  const [sparse, setSparse] = useState(false);
  const action = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void action.run(async () => {
      const names = fields
        .split(',')
        .map((f) => f.trim())
        .filter((f) => f !== '');
      const body =
        type === 'map'
          ? { name, type, field: names[0] ?? '', unique, sparse }
          : { name, type, fields: names, unique, sparse };
      await col(databaseId, collection).createIndex(body);
      setName('');
      setFields('');
      list.reload();
    });
  };
  const drop = (index: string) => {
    if (!confirm(`Drop the index ${index}?`)) return;
    void action.run(async () => {
      await col(databaseId, collection).dropIndex(index);
      list.reload();
    });
  };
  return html`<${Section} title="Indexes">
    <${ErrorBox} error=${list.error} />
    ${list.data && list.data.length === 0 && html`<p class="muted">No indexes.</p>`}
    ${
      list.data &&
      list.data.length > 0 &&
      html`<table data-testid="indexes-table">
      <thead><tr><th>Name</th><th>Type</th><th>Fields</th><th>Unique</th><th>Sparse</th><th></th></tr></thead>
      <tbody>${list.data.map((i) => html`<tr><td>${i.name}</td><td>${i.type}</td><td><code>${i.field ?? (i.fields ?? []).join(', ')}</code></td><td>${i.unique ? 'yes' : 'no'}</td><td>${i.sparse ? 'yes' : 'no'}</td><td class="actions"><button type="button" class="danger small" onClick=${() => drop(i.name)}>Drop</button></td></tr>`)}</tbody>
    </table>`
    }
    <form class="inline" onSubmit=${submit} aria-label="New index">
      <label>Name<input name="index-name" required value=${name} onInput=${(e: Event) => setName(valueOf(e))} /></label>
      <label>Type<select name="index-type" value=${type} onChange=${(e: Event) => {
        const t = valueOf(e) === 'btree' ? 'btree' : 'map';
        setType(t);
        setUnique(t === 'map');
      }}><option value="map">map</option><option value="btree">btree</option></select></label>
      <label>${type === 'map' ? 'Field' : 'Fields (comma-separated, -field = descending)'}<input name="index-fields" required value=${fields} onInput=${(e: Event) => setFields(valueOf(e))} /></label>
      <label class="check"><input type="checkbox" checked=${unique} onChange=${(e: Event) => setUnique(checkedOf(e))} /> Unique</label>
      <label class="check"><input type="checkbox" checked=${sparse} onChange=${(e: Event) => setSparse(checkedOf(e))} /> Sparse</label>
      <button type="submit" disabled=${action.busy}>Create index</button>
    </form>
    <${ErrorBox} error=${action.error} />
  <//>`;
}

export function CollectionPage({ databaseId, collection }: { databaseId: string; collection: string }): VNode {
  const [filter, setFilter] = useState('{}');
  const [limit, setLimit] = useState('20');
  const [skip, setSkip] = useState('0');
  const [docs, setDocs] = useState<Doc[] | null>(null);
  const [doc, setDoc] = useState('{\n  "name": "Ada"\n}');
  const [inserted, setInserted] = useState<string | null>(null);
  const find = useAction();
  const insert = useAction();
  const runFind = (e?: Event) => {
    e?.preventDefault();
    void find.run(async () => {
      const found: Doc[] = [];
      const options = { limit: Number.parseInt(limit, 10) || 0, skip: Number.parseInt(skip, 10) || 0 };
      for await (const d of col(databaseId, collection).find(parseObject(filter, 'The filter'), options)) found.push(d);
      setDocs(found);
    });
  };
  // browsing: the first documents are shown when the page opens
  useEffect(() => runFind(), [databaseId, collection]);
  const runInsert = (e: Event) => {
    e.preventDefault();
    setInserted(null);
    void insert.run(async () => {
      const stored = await col(databaseId, collection).insert([parseObject(doc, 'The document')]);
      setInserted(stored.map((d) => JSON.stringify(d)).join('\n'));
    });
  };
  const removeDoc = (d: Doc) => {
    if (!confirm('Remove this document?')) return;
    void find.run(async () => {
      await col(databaseId, collection).remove('id' in d ? { id: d.id } : d, { limit: 1 });
      setDocs((docs ?? []).filter((x) => x !== d));
    });
  };
  return html`<div>
    <p><a href=${href('databases', databaseId)}>← Database</a></p>
    <h1>Collection ${collection}</h1>
    <${Section} title="Find documents">
      <form onSubmit=${runFind} aria-label="Find documents">
        <label><span>Filter (JSON, e.g. <code>{"name":"Ada"}</code> or <code>{"n":{"$gt":1}}</code>)</span><textarea name="filter" class="code" rows="3" value=${filter} onInput=${(e: Event) => setFilter(valueOf(e))}></textarea></label>
        <div class="inline">
          <label>Limit<input name="limit" type="number" value=${limit} onInput=${(e: Event) => setLimit(valueOf(e))} /></label>
          <label>Skip<input name="skip" type="number" min="0" value=${skip} onInput=${(e: Event) => setSkip(valueOf(e))} /></label>
          <button type="submit" class="primary" disabled=${find.busy}>Find</button>
        </div>
      </form>
      <${ErrorBox} error=${find.error} />
      ${docs && html`<p class="muted" data-testid="find-count">${docs.length} document${docs.length === 1 ? '' : 's'}</p>`}
      ${
        docs &&
        html`<ul class="docs" data-testid="find-results">
        ${docs.map((d) => html`<li><pre>${pretty(d)}</pre><button type="button" class="danger small" disabled=${readOnly()} onClick=${() => removeDoc(d)}>Remove</button></li>`)}
      </ul>`
      }
    <//>
    <${Section} title="Insert a document">
      <form onSubmit=${runInsert} aria-label="Insert a document">
        <label><span>Document (JSON object; defaults such as a generated <code>id</code> are applied)</span><textarea name="document" class="code" rows="6" value=${doc} onInput=${(e: Event) => setDoc(valueOf(e))}></textarea></label>
        <button type="submit" class="primary" disabled=${insert.busy || readOnly()}>Insert</button>
      </form>
      <${ErrorBox} error=${insert.error} />
      ${inserted && html`<p class="ok-text">Inserted:</p><pre data-testid="inserted">${inserted}</pre>`}
    <//>
    <${Indexes} databaseId=${databaseId} collection=${collection} />
  </div>`;
}
