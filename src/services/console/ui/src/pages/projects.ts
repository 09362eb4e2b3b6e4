// Projects: list, create (name and optional slug), delete.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { json } from '../api.ts';
import { ErrorBox, Loading, Section, readOnly, useAction, useLoad, valueOf } from './common.ts';

export interface Project {
  id: string;
  name: string;
  slug?: string;
  host: string;
  owners: string[];
  created_at?: string;
}

export function listProjects(): Promise<Project[]> {
  return json<Project[]>('apikeys', '/v0/projects').then((list) => list ?? []);
}

export function ProjectsPage(): VNode {
  const projects = useLoad(listProjects, []);
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const create = useAction();
  const remove = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      await json('apikeys', '/v0/projects', {
        method: 'POST',
        body: slug.trim() ? { name, slug: slug.trim() } : { name },
      });
      setName('');
      setSlug('');
      projects.reload();
    });
  };
  const del = (p: Project) => {
    if (!confirm(`Delete project ${p.name}?`)) return;
    void remove.run(async () => {
      await json('apikeys', `/v0/projects/${encodeURIComponent(p.id)}`, { method: 'DELETE' });
      projects.reload();
    });
  };
  return html`<div>
    <h1>Projects</h1>
    <${Section} title="New project">
      <form class="inline" onSubmit=${submit}>
        <label>Name<input name="name" required value=${name} onInput=${(e: Event) => setName(valueOf(e))} /></label>
        <label>Slug (optional)<input name="slug" placeholder="my-project" pattern="[a-z0-9]([a-z0-9\\-]*[a-z0-9])?" value=${slug} onInput=${(e: Event) => setSlug(valueOf(e))} /></label>
        <button type="submit" class="primary" disabled=${create.busy || readOnly()}>Create project</button>
      </form>
      <${ErrorBox} error=${create.error} />
    <//>
    <${Section} title="Your projects">
      <${ErrorBox} error=${projects.error ?? remove.error} />
      <${Loading} loading=${projects.loading && !projects.data} />
      ${projects.data && projects.data.length === 0 && html`<p class="muted">No projects yet.</p>`}
      ${
        projects.data &&
        projects.data.length > 0 &&
        html`<table>
        <thead><tr><th>Name</th><th>Host</th><th>Id</th><th></th></tr></thead>
        <tbody>
          ${projects.data.map(
            (p) => html`<tr>
              <td>${p.name}</td><td><code>${p.host}</code></td><td><code>${p.id}</code></td>
              <td class="actions"><button type="button" class="danger" disabled=${readOnly()} onClick=${() => del(p)}>Delete</button></td>
            </tr>`,
          )}
        </tbody>
      </table>`
      }
    <//>
  </div>`;
}
