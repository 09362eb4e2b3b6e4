// Hash routing: `#/lambdas/<id>` → ['lambdas', '<id>'].
import { useEffect, useState } from 'preact/hooks';

export function parseHash(hash: string): string[] {
  const path = hash.replace(/^#\/?/, '').split('?')[0] ?? '';
  return path
    .split('/')
    .filter((s) => s !== '')
    .map((s) => decodeURIComponent(s));
}

/** The current route's segments; re-renders on every hash change. */
export function useRoute(): string[] {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseHash(location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

/** A link target for route segments. */
export function href(...segments: string[]): string {
  return '#/' + segments.map((s) => encodeURIComponent(s)).join('/');
}

export function navigate(...segments: string[]): void {
  location.hash = href(...segments).slice(1);
}
