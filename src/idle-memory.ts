import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';

const MiB = 1024 ** 2;

/** V8's `gc` with its options (node's expose-gc extension). */
type CollectGarbage = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * The `gc` function without starting node with --expose-gc: the flag is read when a context is
 * created, so a fresh context gets it, and the flag is cleared again at once so that no later
 * context (a `node:vm` one) sees it.
 */
function collector(): CollectGarbage {
  v8.setFlagsFromString('--expose-gc');
  try {
    return vm.runInNewContext('gc') as CollectGarbage;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

export interface IdleMemoryOptions {
  /** How often the process looks, and how long it must have been idle (default 5 s; 0 = never). */
  intervalMs?: number;
  /** Growth of the RSS since the last release that makes one worth its pause (default 32 MiB). */
  growthBytes?: number;
  /** Share of the interval the event loop may have been busy and still count as idle (default 1%). */
  idleUtilization?: number;
  /** For tests: the RSS, the event loop's busy share since the last look, the collection. */
  rss?: () => number;
  utilization?: () => number;
  collect?: () => void;
  /** Told of each release: the RSS before and after, and how long the collection paused. */
  onRelease?: (release: { rssBefore: number; rssAfter: number; pauseMs: number }) => void;
}

/**
 * Gives memory back once the process has gone idle after a burst. A heap that shrinks after a
 * burst keeps the pages it gave up in V8's page pool, resident, and V8 frees them (and shrinks the
 * young generation back) only in a memory-reducing collection, which an idle server was not seen
 * to get on its own: bench/memory.ts measured ~170 MiB of pooled pages still resident 45 s after
 * its workload. So when a whole interval passed with the event loop idle and the RSS has grown by
 * `growthBytes` since the last release, one last-resort collection (a few full collections in a
 * row: a pause of ~340 ms measured on a busy 2-core machine) runs. Under load it never runs: the
 * loop is not idle. The bursts after it ran at about half the throughput in the gateway bench, and
 * cost 2–4× the CPU per request in 3 s kv bursts: the heap growing back (young generation, old
 * generation limit) more than the compiled code it drops, as the same collection with bytecode
 * flushing off cost as much, and a regular major or a minor collection in its place 1.5–3×. So
 * `serve` turns it on only when asked (IDLE_MEMORY_RELEASE; bench/README.md, Memory). Returns the
 * stop.
 */
export function releaseMemoryWhenIdle(options: IdleMemoryOptions = {}): () => void {
  const intervalMs = options.intervalMs ?? 5_000;
  if (intervalMs <= 0) return () => {};
  const growth = options.growthBytes ?? 32 * MiB;
  const idleShare = options.idleUtilization ?? 0.01;
  const rss = options.rss ?? (() => process.memoryUsage.rss());
  let last = performance.eventLoopUtilization();
  const utilization =
    options.utilization ??
    (() => {
      const now = performance.eventLoopUtilization();
      const share = performance.eventLoopUtilization(now, last).utilization;
      last = now;
      return share;
    });
  let collect = options.collect;
  const lastResort = () => {
    const gc = collector();
    collect = () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    collect();
  };
  // Counted from nothing: the first idle interval after start gives back the start-up's garbage
  // (compiling the sources, migrations), ~70 MiB measured.
  let baseline = 0;
  const timer = setInterval(() => {
    const idle = utilization() <= idleShare;
    const now = rss();
    // Growth counts from the lowest RSS since the last release (or what that release left).
    if (now < baseline) baseline = now;
    if (!idle || now - baseline < growth) return;
    const started = performance.now();
    (collect ?? lastResort)();
    baseline = rss();
    options.onRelease?.({ rssBefore: now, rssAfter: baseline, pauseMs: performance.now() - started });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
