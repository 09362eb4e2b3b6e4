import { Type } from 'typebox';
import type { ServiceApp } from '../../../core/app.ts';
import { errorBody, presence } from '../schemas.ts';
import { parentLink, projectOf, roleOf, uptimeSeconds, type KvNode } from './common.ts';
import { SIGNED_IN } from '../../../core/openapi.ts';

const statusSchema = {
  tags: ['node'],
  operationId: 'getStatus',
  security: SIGNED_IN,
  summary: "Node, role, topology and per-collection figures of the request's project",
  description: presence,
  response: { 200: Type.Unknown(), 403: errorBody },
};

const metricsSchema = {
  tags: ['node'],
  operationId: 'getMetrics',
  security: SIGNED_IN,
  summary: 'Counters since the process started, and current totals',
  description: presence,
  response: { 200: Type.Unknown(), 403: errorBody },
};

/** `/v1/status` and `/v1/metrics`: what the node is and what it has done. */
export function registerStatusRoutes(app: ServiceApp, node: KvNode): void {
  const { repository, feed, counters } = node;

  app.get('/v1/status', { schema: statusSchema }, async (request) => {
    const project = projectOf(request);
    const [collections, state, link] = await Promise.all([
      repository.collectionStats(project),
      repository.state(),
      parentLink(node),
    ]);
    return {
      node: node.name,
      role: roleOf(node),
      parent: node.parentUrl ?? '',
      uptime_seconds: uptimeSeconds(node),
      children: feed.children,
      collections,
      // Enabled on a replica or on a node serving replicas.
      replication: {
        enabled: node.parentUrl !== undefined || feed.children > 0,
        parent_connected: link.connected,
        connected_replicas: feed.children,
        last_seq: state.lastSeq,
        following: node.lease?.following ?? false,
      },
    };
  });

  app.get('/v1/metrics', { schema: metricsSchema }, async () => {
    const [totals, link] = await Promise.all([repository.totals(), parentLink(node)]);
    return {
      writes_total: counters.writes,
      reads_total: counters.reads,
      replication_commands_sent_total: counters.commandsSent,
      replication_commands_received_total: counters.commandsReceived,
      children_connected: feed.children,
      parent_connected: link.connected,
      collections: totals.collections,
      keys_total: totals.keys,
      uptime_seconds: uptimeSeconds(node),
    };
  });
}
