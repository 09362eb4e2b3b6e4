// File buckets: create and delete buckets; upload (with progress), download and delete files.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { platform } from '../session.ts';
import { href, navigate } from '../router.ts';
import { ErrorBox, Loading, Section, formatBytes, readOnly, useAction, useLoad, valueOf } from './common.ts';

interface FileItem {
  id: string;
  name: string;
  size: number;
  mime_type: string;
  updated_timestamp: number;
  hash_sha256: string;
}

export function BucketsPage(): VNode {
  const list = useLoad(() => platform().files.buckets.list(), []);
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const create = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      const bucket = await platform().files.buckets.create({ name, description });
      navigate('buckets', bucket.id);
    });
  };
  return html`<div>
    <h1>Buckets</h1>
    <${Section} title="New bucket">
      <form class="inline" onSubmit=${submit} aria-label="New bucket">
        <label>Name<input name="name" pattern="[A-Za-z0-9_\\-]{0,64}" title="letters, digits, _ and -" value=${name} onInput=${(e: Event) => setName(valueOf(e))} /></label>
        <label>Description<input name="description" value=${description} onInput=${(e: Event) => setDescription(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${create.busy || readOnly()}>Create bucket</button>
      </form>
      <${ErrorBox} error=${create.error} />
    <//>
    <${Section} title="Your buckets">
      <${ErrorBox} error=${list.error} />
      <${Loading} loading=${list.loading && !list.data} />
      ${list.data && list.data.length === 0 && html`<p class="muted">No buckets yet.</p>`}
      ${
        list.data &&
        list.data.length > 0 &&
        html`<table data-testid="buckets-table">
        <thead><tr><th>Name</th><th>Description</th><th>Created</th><th>Id</th></tr></thead>
        <tbody>${list.data.map((b) => html`<tr><td><a href=${href('buckets', b.id)}>${b.name}</a></td><td>${b.description}</td><td>${b.created_h ?? ''}</td><td><code>${b.id}</code></td></tr>`)}</tbody>
      </table>`
      }
    <//>
  </div>`;
}

export function BucketPage({ id }: { id: string }): VNode {
  const bucket = useLoad(() => platform().files.buckets.get(id), [id]);
  const files = useLoad(() => platform().files.bucket(id).list(), [id]);
  const input = useRef<HTMLInputElement>(null);
  const [path, setPath] = useState('');
  const [progress, setProgress] = useState<{ loaded: number; total: number } | null>(null);
  const [uploaded, setUploaded] = useState<string | null>(null);
  const up = useAction();
  const act = useAction();

  const submit = (e: Event) => {
    e.preventDefault();
    const file = input.current?.files?.[0];
    if (!file) return;
    const target = path.trim() || file.name;
    setUploaded(null);
    setProgress({ loaded: 0, total: file.size });
    void up.run(async () => {
      await platform()
        .files.bucket(id)
        .upload(target, file, { onProgress: ({ loaded, total }) => setProgress({ loaded, total }) });
      setUploaded(target);
      setPath('');
      if (input.current) input.current.value = '';
      files.reload();
    });
  };
  const download = (f: FileItem) => {
    void act.run(async () => {
      const blob = await platform().files.bucket(id).download(f.name);
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = f.name.split('/').pop() ?? f.name;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    });
  };
  const del = (f: FileItem) => {
    if (!confirm(`Delete ${f.name}?`)) return;
    void act.run(async () => {
      await platform().files.bucket(id).delete(f.name);
      files.reload();
    });
  };
  const deleteBucket = () => {
    if (!confirm('Delete this bucket and all its files?')) return;
    void act.run(async () => {
      await platform().files.buckets.delete(id);
      navigate('buckets');
    });
  };
  const percent =
    progress && progress.total > 0 ? Math.round((progress.loaded / progress.total) * 100) : progress ? 100 : 0;
  return html`<div>
    <p><a href=${href('buckets')}>← Buckets</a></p>
    <h1>Bucket ${bucket.data?.name ?? ''}</h1>
    <p class="muted">Id <code>${id}</code>${bucket.data?.description ? ` — ${bucket.data.description}` : ''}</p>
    <${ErrorBox} error=${bucket.error} />
    <${Section} title="Upload a file">
      <form class="inline" onSubmit=${submit} aria-label="Upload a file">
        <label>File<input name="file" type="file" ref=${input} required /></label>
        <label>Path in the bucket (optional)<input name="path" placeholder="notes/readme.txt" value=${path} onInput=${(e: Event) => setPath(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${up.busy || readOnly()}>Upload</button>
      </form>
      ${
        progress &&
        html`<div class="progress">
        <progress max="100" value=${percent} data-testid="upload-progress"></progress>
        <span data-testid="upload-percent">${percent} %</span>
        <span class="muted">${formatBytes(progress.loaded)} of ${formatBytes(progress.total)}</span>
      </div>`
      }
      ${uploaded && html`<p class="ok-text" data-testid="upload-done">Uploaded ${uploaded}.</p>`}
      <${ErrorBox} error=${up.error} />
    <//>
    <${Section} title="Files">
      <${ErrorBox} error=${files.error ?? act.error} />
      <${Loading} loading=${files.loading && !files.data} />
      ${files.data && files.data.length === 0 && html`<p class="muted">No files yet.</p>`}
      ${
        files.data &&
        files.data.length > 0 &&
        html`<table data-testid="files-table">
        <thead><tr><th>Path</th><th>Size</th><th>Type</th><th>Updated</th><th></th></tr></thead>
        <tbody>
          ${files.data.map(
            (f) => html`<tr>
              <td><code>${f.name}</code></td><td>${formatBytes(f.size)}</td><td>${f.mime_type}</td><td>${new Date(f.updated_timestamp / 1e6).toISOString()}</td>
              <td class="actions">
                <button type="button" onClick=${() => download(f)}>Download</button>
                <button type="button" class="danger small" disabled=${readOnly()} onClick=${() => del(f)}>Delete</button>
              </td>
            </tr>`,
          )}
        </tbody>
      </table>`
      }
    <//>
    <div class="buttons"><button type="button" class="danger" disabled=${readOnly()} onClick=${deleteBucket}>Delete bucket</button></div>
  </div>`;
}
