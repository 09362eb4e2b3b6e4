// Projects: list, create (name and optional slug), the origins allowed CORS, delete.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { platform } from '../session.ts';
import { ErrorBox, Loading, Section, readOnly, useAction, useLoad, valueOf } from './common.ts';

export interface Project {
  id: string;
  name: string;
  slug?: string;
  host: string;
  owners: string[];
  /** Origins whose apps may call the platform (plain CORS; root README: CORS). */
  allowed_origins?: string[];
  created_at?: string;
}

/** Origins as typed: separated by commas, spaces or new lines. */
function originsOf(text: string): string[] {
  return text.split(/[\s,]+/).filter((origin) => origin !== '');
}

export function listProjects(): Promise<Project[]> {
  return platform().apikeys.projects.list();
}

export function ProjectsPage(): VNode {
  const projects = useLoad(listProjects, []);
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const create = useAction();
  const remove = useAction();
  const saveOrigins = useAction();
  /** The project whose origins are being edited, and the text typed so far. */
  const [editing, setEditing] = useState<{ id: string; text: string } | null>(null);
  const save = (e: Event) => {
    e.preventDefault();
    if (!editing) return;
    void saveOrigins.run(async () => {
      await platform().apikeys.projects.update(editing.id, { allowed_origins: originsOf(editing.text) });
      setEditing(null);
      projects.reload();
    });
  };
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run(async () => {
      await platform().apikeys.projects.create(slug.trim() ? { name, slug: slug.trim() } : { name });
      setName('');
      setSlug('');
      projects.reload();
    });
  };
  const del = (p: Project) => {
    if (!confirm(`Delete project ${p.name}?`)) return;
    void remove.run(async () => {
      await platform().apikeys.projects.delete(p.id);
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
      <${ErrorBox} error=${projects.error ?? remove.error ?? saveOrigins.error} />
      <${Loading} loading=${projects.loading && !projects.data} />
      ${projects.data && projects.data.length === 0 && html`<p class="muted">No projects yet.</p>`}
      ${
        projects.data &&
        projects.data.length > 0 &&
        html`<table>
        <thead><tr><th>Name</th><th>Host</th><th>Id</th><th>Allowed origins</th><th></th></tr></thead>
        <tbody>
          ${projects.data.map(
            (p) => html`<tr>
              <td>${p.name}</td><td><code>${p.host}</code></td><td><code>${p.id}</code></td>
              <td>${
                editing?.id === p.id
                  ? html`<form class="inline" onSubmit=${save}>
                      <label>Origins<input name="origins" placeholder="https://app.example.com" value=${editing.text}
                        onInput=${(e: Event) => setEditing({ id: p.id, text: valueOf(e) })} /></label>
                      <button type="submit" class="primary" disabled=${saveOrigins.busy}>Save origins</button>
                      <button type="button" onClick=${() => setEditing(null)}>Cancel</button>
                    </form>`
                  : html`${(p.allowed_origins ?? []).map((o) => html`<code>${o}</code> `)}
                      <button type="button" disabled=${readOnly()}
                        onClick=${() => setEditing({ id: p.id, text: (p.allowed_origins ?? []).join(' ') })}>Edit origins</button>`
              }</td>
              <td class="actions"><button type="button" class="danger" disabled=${readOnly()} onClick=${() => del(p)}>Delete</button></td>
            </tr>`,
          )}
        </tbody>
      </table>`
      }
    <//>
  </div>`;
}
