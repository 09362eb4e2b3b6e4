// Small building blocks shared by the pages.
import { html } from 'htm/preact';
import type { ComponentChildren, VNode } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { DEMO_READ_ONLY, DEMO_UNAVAILABLE, config, messageOf } from '../session.ts';

export interface Loaded<T> {
  data: T | undefined;
  error: string | null;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` on mount and whenever `deps` change; `reload()` runs it again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    load()
      .then((value) => {
        if (!live) return;
        setData(value);
        setError(null);
      })
      .catch((err: unknown) => {
        if (live) setError(messageOf(err));
      })
      .finally(() => {
        if (live) setLoading(false);
      });
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}

/** Runs an action, keeping its error and busy state for a form. */
export function useAction(): {
  busy: boolean;
  error: string | null;
  run: (action: () => Promise<void>) => Promise<boolean>;
  clear: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async (action: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
      return true;
    } catch (err) {
      setError(messageOf(err));
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(null) };
}

export function ErrorBox({ error }: { error: string | null | undefined }): VNode | null {
  if (!error) return null;
  if (error === DEMO_UNAVAILABLE || error === DEMO_READ_ONLY) return html`<p class="notice">${error}</p>`;
  return html`<div class="error" role="alert">${error}</div>`;
}

export function Loading({ loading }: { loading: boolean }): VNode | null {
  return loading ? html`<p class="muted">Loading…</p>` : null;
}

export function Section({ title, children }: { title: string; children?: ComponentChildren }): VNode {
  return html`<section class="card"><h2>${title}</h2>${children}</section>`;
}

/** A secret shown once, right after it was created. */
export function SecretPanel({
  title,
  entries,
  onClose,
}: {
  title: string;
  entries: [string, string][];
  onClose: () => void;
}): VNode {
  return html`<div class="secret" data-testid="secret-panel">
    <strong>${title}</strong>
    <p>Copy the secret now: it is shown only once and cannot be recovered.</p>
    <dl>
      ${entries.map(([k, v]) => html`<dt>${k}</dt><dd><code data-field=${k.toLowerCase()}>${v}</code></dd>`)}
    </dl>
    <button type="button" onClick=${onClose}>I have copied it</button>
  </div>`;
}

export function readOnly(): boolean {
  return config().demo;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 * 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 / 1024 / 1024).toFixed(2)} GiB`;
}

/** Value of an input/textarea/select from its event. */
export function valueOf(e: Event): string {
  return (e.currentTarget as HTMLInputElement).value;
}

export function checkedOf(e: Event): boolean {
  return (e.currentTarget as HTMLInputElement).checked;
}

export function pretty(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
