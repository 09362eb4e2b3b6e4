import { createHash } from 'node:crypto';
import pg from 'pg';
import { reachable } from '../unreachable.ts';
import {
  decodeEnvelope,
  encodeEnvelope,
  reportHandlerError,
  TopicRegistry,
  type Notifier,
  type NotifierOptions,
} from './types.ts';

export interface PostgresNotifierOptions extends NotifierOptions {
  /** The one LISTEN channel every topic travels on; see `notifierChannel`. At most 63 bytes. */
  channel: string;
  /** First reconnect delay after the listening connection is lost; doubles per failed attempt. */
  reconnectDelayMs?: number;
  /** Upper bound of the reconnect delay. */
  maxReconnectDelayMs?: number;
}

/** PostgreSQL truncates identifiers past 63 bytes and `pg_notify` rejects longer channel names. */
const MAX_CHANNEL_BYTES = 63;

/** Connections that publish; while all are busy, further publishes gather into one statement. */
const PUBLISHING_CONNECTIONS = 2;
/** At most this many messages in one publishing statement (each at most `MAX_NOTIFY_BYTES`). */
const MAX_PUBLISH_BATCH = 256;

interface PendingPublish {
  payload: string;
  resolve(): void;
  reject(error: unknown): void;
}

/** How long a fence waits for its answer before it gives up (the caller reads the database instead). */
const FENCE_TIMEOUT_MS = 5_000;

/**
 * The channel for a database schema: `stratus` for `public`, `stratus_<schema>` otherwise, so that
 * deployments (and test schemas) sharing one PostgreSQL database never see each other's traffic.
 * A name that would be too long is shortened with a hash suffix to stay unique.
 */
export function notifierChannel(schema: string): string {
  if (schema === 'public') return 'stratus';
  const name = `stratus_${schema}`;
  if (Buffer.byteLength(name, 'utf8') <= MAX_CHANNEL_BYTES) return name;
  const digest = createHash('sha256').update(schema).digest('hex').slice(0, 16);
  return `stratus_${schema.replace(/[^A-Za-z0-9_]/g, '_').slice(0, MAX_CHANNEL_BYTES - 8 - 17)}_${digest}`;
}

/**
 * Cross-instance notifications over PostgreSQL LISTEN/NOTIFY. One dedicated connection listens on
 * one channel for all topics (payload `{"t":topic,"m":message}`); publishing goes through a small
 * separate pool so it keeps working while the listener reconnects. When the listener's connection
 * drops, notifications sent meanwhile are lost for good, so after reconnecting it calls every
 * `onResync` handler and subscribers reload what they cache.
 *
 * A fence is a round trip on the listening connection (an empty statement). A committed NOTIFY
 * signals every listening backend before its sender is told of the commit, and a backend sends the
 * notifications it was signalled about before it answers the next statement (PostgreSQL's
 * `PostgresMain` processes a pending notify interrupt before `ReadyForQuery`, and at once while
 * idle; see the notes on delivery at the top of its `commands/async.c`). So once the fence is
 * answered, every message whose publish settled before it was sent has been delivered here.
 * Fences asked for while one is on its way share the next one, so a busy instance sends about one
 * per round trip.
 *
 * Resolves once the first LISTEN is in place; rejects when the database cannot be reached then.
 */
export async function createPostgresNotifier(
  config: pg.ClientConfig | pg.PoolConfig,
  options: PostgresNotifierOptions,
): Promise<Notifier> {
  const { channel } = options;
  if (
    typeof channel !== 'string' ||
    channel === '' ||
    channel.includes('\0') ||
    Buffer.byteLength(channel, 'utf8') > MAX_CHANNEL_BYTES
  ) {
    throw new TypeError(`notifier channel must be 1 to ${MAX_CHANNEL_BYTES} bytes without NUL`);
  }
  const initialDelay = options.reconnectDelayMs ?? 200;
  const maxDelay = Math.max(options.maxReconnectDelayMs ?? 5000, initialDelay);
  const listenSql = `LISTEN ${quoteIdentifier(channel)}`;
  const registry = new TopicRegistry(options.onHandlerError ?? reportHandlerError);

  // `allowExitOnIdle`: an idle publishing connection must not keep the process alive on its own.
  const publisher = new pg.Pool({
    ...config,
    max: PUBLISHING_CONNECTIONS,
    idleTimeoutMillis: 10_000,
    allowExitOnIdle: true,
  });
  publisher.on('error', () => {}); // an idle client that dies is replaced on next use

  // Publishes wait here while every publishing connection is busy, and go out together: one
  // statement and one commit for all of them, where each alone cost a commit (a WAL flush).
  // PostgreSQL delivers identical messages of one transaction once; every message is a signal
  // ("this changed"), so a duplicate carries nothing more.
  const waiting: PendingPublish[] = [];
  let sending = 0;
  const sendWaiting = (): void => {
    while (sending < PUBLISHING_CONNECTIONS && waiting.length > 0) {
      const batch = waiting.splice(0, MAX_PUBLISH_BATCH);
      sending++;
      const sent =
        batch.length === 1
          ? publisher.query('select pg_notify($1, $2)', [channel, batch[0]!.payload])
          : // `unnest` yields the array in order, so the messages are queued in the order published.
            publisher.query('select pg_notify($1, payload) from unnest(cast($2 as text[])) as m (payload)', [
              channel,
              batch.map((pending) => pending.payload),
            ]);
      void sent
        .then(
          () => batch.forEach((pending) => pending.resolve()),
          (error: unknown) => batch.forEach((pending) => pending.reject(error)),
        )
        .finally(() => {
          sending--;
          sendWaiting();
        });
    }
  };

  let listener: pg.Client | null = null;
  let closed = false;
  let closing: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let connecting: Promise<void> | undefined;
  let delay = initialDelay;
  let fenceOnItsWay: Promise<void> | undefined;
  let nextFence: Promise<void> | undefined;

  const sendFence = (): Promise<void> => {
    const client = listener;
    if (closed) return Promise.reject(new Error('notifier is closed'));
    if (!client) return Promise.reject(new Error('the notifier is reconnecting'));
    let giveUp: NodeJS.Timeout | undefined;
    const back = Promise.race([
      // An empty statement: the cheapest round trip there is (no parse, no plan, no transaction id).
      client.query(';').then(() => undefined),
      new Promise<never>((_, reject) => {
        giveUp = setTimeout(() => reject(new Error(`no fence answer within ${FENCE_TIMEOUT_MS} ms`)), FENCE_TIMEOUT_MS);
      }),
    ]).finally(() => clearTimeout(giveUp));
    fenceOnItsWay = back;
    const done = () => {
      if (fenceOnItsWay === back) fenceOnItsWay = undefined;
    };
    back.then(done, done);
    return back;
  };

  const connectListener = async (): Promise<pg.Client> => {
    // Keepalive so a silently dead peer (network partition) is noticed instead of waiting forever.
    const client = new pg.Client({ ...config, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
    // Always handled: an 'error' event without a listener would crash the process.
    client.on('error', () => lost(client));
    client.on('end', () => lost(client));
    client.on('notification', (notification) => {
      if (closed || notification.channel !== channel) return;
      const envelope = decodeEnvelope(notification.payload ?? '');
      if (envelope) registry.deliver(envelope.topic, envelope.message);
    });
    try {
      await client.connect();
      await client.query(listenSql);
    } catch (error) {
      client.removeAllListeners('notification');
      await client.end().catch(() => {});
      throw error;
    }
    return client;
  };

  // Reacts once per connection: only the current listener's loss schedules a reconnect.
  const lost = (client: pg.Client) => {
    if (client !== listener || closed) return;
    listener = null;
    client.removeAllListeners('notification');
    client.end().catch(() => {});
    scheduleReconnect();
  };

  const scheduleReconnect = () => {
    if (closed || timer !== undefined || connecting !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      connecting = (async () => {
        try {
          const client = await connectListener();
          if (closed) {
            client.removeAllListeners('notification');
            await client.end().catch(() => {});
            return;
          }
          listener = client;
          delay = initialDelay;
          registry.resync();
        } catch {
          delay = Math.min(delay * 2, maxDelay);
          connecting = undefined;
          scheduleReconnect();
        } finally {
          connecting = undefined;
        }
      })();
    }, delay);
    // A process with nothing else to do may exit while waiting to reconnect.
    timer.unref();
  };

  try {
    listener = await connectListener();
  } catch (error) {
    await publisher.end().catch(() => {});
    throw error;
  }

  return {
    async publish(topic, message) {
      if (closed) throw new Error('notifier is closed');
      const payload = encodeEnvelope(topic, message);
      await reachable(
        new Promise<void>((resolve, reject) => {
          waiting.push({ payload, resolve, reject });
          sendWaiting();
        }),
      );
    },
    subscribe(topic, handler) {
      if (closed) return () => {};
      return registry.subscribe(topic, handler);
    },
    crossInstance: true,
    fence() {
      // One fence on its way covers only what committed before it was sent: later callers share the next.
      if (nextFence) return nextFence;
      if (!fenceOnItsWay) return sendFence();
      const next = fenceOnItsWay
        .then(
          () => undefined,
          () => undefined,
        )
        .then(() => {
          if (nextFence === next) nextFence = undefined;
          return sendFence();
        });
      nextFence = next;
      return next;
    },
    onResync(handler) {
      if (closed) return () => {};
      return registry.onResync(handler);
    },
    close() {
      closing ??= (async () => {
        closed = true;
        if (timer !== undefined) clearTimeout(timer);
        timer = undefined;
        await connecting;
        const client = listener;
        listener = null;
        if (client) {
          client.removeAllListeners('notification');
          await client.end().catch(() => {});
        }
        await publisher.end().catch(() => {});
        registry.clear();
      })();
      return closing;
    },
  };
}

function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
