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

  async bySlug(slug: string): Promise<ProjectRef | null> {
    if (this.cache.has(slug)) {
      // Scaled out, a hit counts once the notifier has applied every change announced before it.
      const cached = (await caughtUp(this.notifier)) ? this.cache.get(slug) : undefined;
      if (cached !== undefined) return cached;
    }
    const generation = this.generation;
    const project = await findProjectBySlug(this.connection, slug);
    const ref = project ? { id: project.id, slug: project.slug } : null;
    if (generation === this.generation) {
      if (this.cache.size >= MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(slug, ref);
    }
    return ref;
  }

  /** Whether any project lists `origin` among its allowed origins (root README.md, CORS), cached like slugs. */
  async originListed(origin: string): Promise<boolean> {
    if (this.origins.has(origin)) {
      const cached = (await caughtUp(this.notifier)) ? this.origins.get(origin) : undefined;
      if (cached !== undefined) return cached;
    }
    const generation = this.generation;
    const listed = await originListed(this.connection, origin);
    if (generation === this.generation) {
      if (this.origins.size >= MAX_ENTRIES) this.origins.delete(this.origins.keys().next().value as string);
      this.origins.set(origin, listed);
    }
    return listed;
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
