import type { SqlConnection } from '../store/db.ts';
import { caughtUp, type Notifier } from '../store/notifier/types.ts';
import { findProjectBySlug, originListed, PROJECTS_CHANGED_TOPIC } from '../services/apikeys/index.ts';

export interface ProjectRef {
  id: string;
  slug: string;
}

const MAX_ENTRIES = 10_000;

/**
 * Project hosts by slug, and whether some project allows an origin (CORS), cached (misses included,
 * so unknown hosts cost no query each time). A project created or deleted on any instance
 * invalidates its slug through the notifier, and any change drops the origins; after a
 * notifier reconnect everything is dropped, since changes may have been missed. Scaled out, a hit
 * is served after a notifier fence, so a project made through one instance is found on every other.
 */
export class ProjectDirectory {
  private readonly cache = new Map<string, ProjectRef | null>();
  /** Origin → whether a project lists it (the gateway's CORS check); any project change drops it all. */
  private readonly origins = new Map<string, boolean>();
  private readonly unsubscribe: (() => void)[] = [];
  /** Bumped on every invalidation, so a lookup that raced a change is not cached. */
  private generation = 0;

  constructor(
    private readonly connection: SqlConnection,
    private readonly notifier: Notifier,
  ) {
    this.unsubscribe.push(
      notifier.subscribe(PROJECTS_CHANGED_TOPIC, (message) => {
        this.clearOrigins();
        try {
          const { slug } = JSON.parse(message) as { slug?: unknown };
          if (typeof slug === 'string') this.invalidate(slug);
          else this.clear();
        } catch {
          this.clear();
        }
      }),
      notifier.onResync(() => this.clear()),
    );
  }

  bySlug(slug: string): Promise<ProjectRef | null> {
    return this.cached(this.cache, slug, async () => {
      const project = await findProjectBySlug(this.connection, slug);
      return project ? { id: project.id, slug: project.slug } : null;
    });
  }

  /** Whether any project lists `origin` among its allowed origins (root README.md, CORS), cached like slugs. */
  originListed(origin: string): Promise<boolean> {
    return this.cached(this.origins, origin, () => originListed(this.connection, origin));
  }

  /**
   * `map`'s answer for `key`, else `load`'s, kept unless an invalidation came while it loaded.
   * Scaled out, a hit counts once the notifier has applied every change announced before it.
   */
  private async cached<V>(map: Map<string, V>, key: string, load: () => Promise<V>): Promise<V> {
    if (map.has(key)) {
      const hit = (await caughtUp(this.notifier)) ? map.get(key) : undefined;
      if (hit !== undefined) return hit;
    }
    const generation = this.generation;
    const value = await load();
    if (generation === this.generation) {
      if (map.size >= MAX_ENTRIES) map.delete(map.keys().next().value as string);
      map.set(key, value);
    }
    return value;
  }

  private clearOrigins(): void {
    this.generation++;
    this.origins.clear();
  }

  invalidate(slug: string): void {
    this.generation++;
    this.cache.delete(slug);
  }

  clear(): void {
    this.generation++;
    this.cache.clear();
    this.origins.clear();
  }

  close(): void {
    for (const stop of this.unsubscribe) stop();
  }
}
