import type { FastifyBaseLogger } from 'fastify';
import type { Notifier } from '../../store/notifier/types.ts';

/** Published when a key is deleted, so every gateway drops its cached checks of that key at once. */
export const KEY_REVOKED_TOPIC = 'apikeys.revoked';
/** Published when a project is created, changed or deleted, so every gateway refreshes its slug → project map and its CORS origins. */
export const PROJECTS_CHANGED_TOPIC = 'projects.changed';

export interface KeyRevokedEvent {
  key: string;
}

export interface ProjectChangedEvent {
  id: string;
  slug: string;
  op: 'created' | 'updated' | 'deleted';
}

export interface ApikeysEvents {
  keyRevoked(event: KeyRevokedEvent): Promise<void>;
  projectChanged(event: ProjectChangedEvent): Promise<void>;
}

/**
 * Publishing happens after the change is committed. A failed publish is logged, not answered as an
 * error: the change is already durable (a retry would only get 404), gateways cache key checks for
 * at most 60 s, and the notifier asks subscribers to resync after it reconnects.
 */
export function createEvents(notifier: Notifier, logger: FastifyBaseLogger): ApikeysEvents {
  const publish = async (topic: string, event: object) => {
    try {
      await notifier.publish(topic, JSON.stringify(event));
    } catch (error) {
      logger.error({ err: error, topic }, 'could not publish apikeys event');
    }
  };
  return {
    keyRevoked: (event) => publish(KEY_REVOKED_TOPIC, event),
    projectChanged: (event) => publish(PROJECTS_CHANGED_TOPIC, event),
  };
}
