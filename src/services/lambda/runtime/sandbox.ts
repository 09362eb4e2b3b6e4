import { createHash } from 'node:crypto';
import ivm from 'isolated-vm';
import { PRELUDE } from './prelude.ts';

/** What the host hands to a lambda as `req` (lambda.md §4.1). Must be JSON-serialisable. */
export interface LambdaRequest {
  method: string;
  path: string;
  query: Record<string, string | string[]>;
  headers: Record<string, string>;
  body?: unknown;
}

export interface LogLine {
  level: string;
  message: string;
}

/** The outcome of one invocation; never throws for anything the user's code does. */
export type InvokeResult =
  | { kind: 'json'; json: string; logs: LogLine[] }
  | { kind: 'text'; text: string; logs: LogLine[] }
  | { kind: 'response'; status: number; headers: [string, string][]; body: string; logs: LogLine[] }
  | { kind: 'error'; code: 'lambda_error' | 'lambda_timeout' | 'lambda_memory'; message: string; logs: LogLine[] };

export interface RuntimeOptions {
  /** Wall-clock limit per invocation in milliseconds (default 10 s). */
  timeoutMs?: number;
  /** V8 heap limit per isolate in MiB (default 128). */
  memoryLimitMiB?: number;
  /** Isolates that may exist at once; further calls wait for one (default 32). */
  maxIsolates?: number;
  /** Idle isolates kept warm (default: maxIsolates). */
  maxIdle?: number;
  /** Isolates created at start so the first call does not pay for one (default 2). */
  prewarm?: number;
  /** An isolate is retired after this many invocations to bound slow heap growth (default 2000). */
  maxUsesPerIsolate?: number;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MEMORY_LIMIT_MIB = 128;
const COMPILE_CACHE_MAX = 1000;
const SCRIPT_CACHE_PER_ISOLATE = 64;
const MODULE_CONTEXTS_PER_ISOLATE = 16;

interface Compiled {
  form: 'module' | 'script';
  cachedData?: ivm.ExternalCopy<ArrayBuffer>;
}

interface Worker {
  isolate: ivm.Isolate;
  prelude: ivm.Script;
  scripts: Map<string, ivm.Script>;
  /** Evaluated module contexts by code version: a warm call is a single round trip. */
  modules: Map<string, ivm.Context>;
  uses: number;
}

class TimeoutSignal extends Error {}

/**
 * Runs untrusted JavaScript in isolated-vm isolates (never node:vm). Each invocation gets its own
 * isolate from a warm pool and a fresh context in it, so no state leaks between calls; compiled
 * code is cached per code version (V8 cached data, shared by every isolate). The async API runs
 * user code on isolated-vm's own threads, so an endless loop never blocks the Node event loop.
 */
export class LambdaRuntime {
  readonly timeoutMs: number;
  readonly memoryLimitMiB: number;
  private readonly maxIdle: number;
  private readonly maxIsolates: number;
  private readonly maxUses: number;
  private readonly idle: Worker[] = [];
  /** Calls waiting for an isolate when maxIsolates are busy, first come first served. */
  private readonly waiting: ((w: Worker) => void)[] = [];
  private live = 0;
  private readonly compiled = new Map<string, Compiled>();
  private closed = false;

  constructor(options: RuntimeOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.memoryLimitMiB = options.memoryLimitMiB ?? DEFAULT_MEMORY_LIMIT_MIB;
    this.maxIsolates = Math.max(1, options.maxIsolates ?? 32);
    this.maxIdle = Math.min(options.maxIdle ?? this.maxIsolates, this.maxIsolates);
    this.maxUses = options.maxUsesPerIsolate ?? 2000;
    const prewarm = Math.min(options.prewarm ?? 2, this.maxIdle);
    for (let i = 0; i < prewarm; i++) this.idle.push(this.createWorker());
  }

  /** Number of warm isolates waiting (for tests and metrics). */
  get idleCount(): number {
    return this.idle.length;
  }

  close(): void {
    this.closed = true;
    for (const w of this.idle.splice(0)) disposeQuietly(w.isolate);
    this.live = 0;
    for (const c of this.compiled.values()) c.cachedData?.release();
    this.compiled.clear();
  }

  /**
   * Compiles the code (script, else module) and returns the parser's message when it is neither,
   * else null. The result is cached, so the first call after create does not compile again.
   */
  async check(code: string): Promise<string | null> {
    if (this.closed) throw new Error('lambda runtime is closed');
    const key = createHash('sha256').update(code).digest('base64');
    if (this.compiled.has(key)) return null;
    const worker = await this.acquire();
    try {
      await this.compile(worker.isolate, key, code);
      return null;
    } catch (err) {
      return errorMessage(err);
    } finally {
      this.release(worker, false);
    }
  }

  async invoke(code: string, request: LambdaRequest): Promise<InvokeResult> {
    if (this.closed) throw new Error('lambda runtime is closed');
    const key = createHash('sha256').update(code).digest('base64');
    const worker = await this.acquire();
    let discard = false;
    let context: ivm.Context | undefined;
    let timer: NodeJS.Timeout | undefined;
    // Host-side wall clock: covers awaits inside the sandbox (a promise that never settles) that
    // isolated-vm's own `timeout` option does not; disposing the isolate aborts whatever runs.
    let timedOut = false;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        disposeQuietly(worker.isolate);
        reject(new TimeoutSignal());
      }, this.timeoutMs);
    });
    try {
      const run = this.run(worker, key, code, request, (c) => { context = c; });
      run.catch(() => undefined); // settled by the race below; avoid an unhandled rejection
      const raw = await Promise.race([run, deadline]);
      return parseOutcome(raw);
    } catch (err) {
      discard = true;
      if (timedOut || err instanceof TimeoutSignal || isTimeoutError(err)) {
        return { kind: 'error', code: 'lambda_timeout', message: `wall-clock limit of ${this.timeoutMs} ms exceeded`, logs: [] };
      }
      if (worker.isolate.isDisposed || isMemoryError(err)) {
        // Only a memory-limit kill disposes an isolate we did not dispose ourselves.
        return { kind: 'error', code: 'lambda_memory', message: `memory limit of ${this.memoryLimitMiB} MiB exceeded`, logs: [] };
      }
      // A compile or load failure: the isolate is still healthy.
      discard = false;
      return { kind: 'error', code: 'lambda_error', message: errorMessage(err), logs: [] };
    } finally {
      clearTimeout(timer);
      if (context && !worker.isolate.isDisposed) {
        try { context.release(); } catch { /* isolate went away meanwhile */ }
      }
      this.release(worker, discard);
    }
  }

  private async run(worker: Worker, key: string, code: string, request: LambdaRequest,
    onContext: (c: ivm.Context | undefined) => void): Promise<string> {
    const { isolate } = worker;
    const timeout = this.timeoutMs;
    const reqJson = JSON.stringify(request);
    const warm = worker.modules.get(key);
    if (warm) {
      // Module state lives on between calls of the same code version in this isolate, as in a
      // warm container; the request, output buffers and logs are per call.
      return await warm.evalClosure('return __stratus.call($0)', [reqJson], { timeout, result: { promise: true } }) as string;
    }
    const context = await isolate.createContext();
    onContext(context);
    await worker.prelude.run(context, { timeout });
    await context.evalClosure('__stratus.install($0)', [reqJson], { timeout });

    const compiled = this.compiled.get(key) ?? await this.compile(isolate, key, code);
    if (compiled.form === 'module') {
      const mod = await isolate.compileModule(code, { cachedData: compiled.cachedData, filename: 'lambda.mjs' });
      try {
        await mod.instantiate(context, (specifier) => {
          throw new Error(`import of "${specifier}" is not available in lambdas`);
        });
        await mod.evaluate({ timeout });
        await context.global.set('__stratus_ns', mod.namespace.derefInto());
      } finally {
        mod.release();
      }
      // Keep the evaluated context for the next call of this version (the caller must not release it).
      onContext(undefined);
      if (worker.modules.size >= MODULE_CONTEXTS_PER_ISOLATE) {
        const oldest = worker.modules.keys().next().value;
        if (oldest !== undefined) { worker.modules.get(oldest)?.release(); worker.modules.delete(oldest); }
      }
      worker.modules.set(key, context);
      return await context.eval('__stratus.runModule(globalThis.__stratus_ns)', { timeout, promise: true }) as string;
    }
    let script = worker.scripts.get(key);
    if (!script) {
      script = await isolate.compileScript(code, { cachedData: compiled.cachedData, filename: 'lambda.js' });
      if (worker.scripts.size >= SCRIPT_CACHE_PER_ISOLATE) {
        const oldest = worker.scripts.keys().next().value;
        if (oldest !== undefined) { worker.scripts.get(oldest)?.release(); worker.scripts.delete(oldest); }
      }
      worker.scripts.set(key, script);
    }
    let value: unknown;
    try {
      const ref = await script.run(context, { timeout, reference: true });
      await context.global.set('__stratus_value', ref.derefInto());
      value = await context.eval('__stratus.finishScript(globalThis.__stratus_value)', { timeout, promise: true });
    } catch (err) {
      if (isolate.isDisposed || isTimeoutError(err) || isMemoryError(err)) throw err;
      // A throw from a plain script is the user's error, reported like a module's.
      return JSON.stringify({ kind: 'error', message: errorMessage(err), logs: [] });
    }
    return value as string;
  }

  /** Decides module vs script once per code version and produces V8 cached data for it. */
  private async compile(isolate: ivm.Isolate, key: string, code: string): Promise<Compiled> {
    let compiled: Compiled;
    try {
      // A source with `export`/`import` statements is not a valid script; that is the module form.
      const script = await isolate.compileScript(code, { produceCachedData: true, filename: 'lambda.js' }) as ivm.Script & ivm.CachedDataResult;
      compiled = { form: 'script', cachedData: script.cachedData };
      script.release();
    } catch (scriptErr) {
      try {
        const mod = await isolate.compileModule(code, { filename: 'lambda.mjs' });
        mod.release();
        compiled = { form: 'module' };
      } catch {
        throw scriptErr;
      }
    }
    if (this.compiled.size >= COMPILE_CACHE_MAX) {
      const oldest = this.compiled.keys().next().value;
      if (oldest !== undefined) { this.compiled.get(oldest)?.cachedData?.release(); this.compiled.delete(oldest); }
    }
    this.compiled.set(key, compiled);
    return compiled;
  }

  private createWorker(): Worker {
    this.live++;
    const isolate = new ivm.Isolate({ memoryLimit: this.memoryLimitMiB });
    const prelude = isolate.compileScriptSync(PRELUDE, { filename: 'stratus-prelude.js' });
    return { isolate, prelude, scripts: new Map(), modules: new Map(), uses: 0 };
  }

  private acquire(): Promise<Worker> | Worker {
    const ready = this.idle.pop() ?? (this.live < this.maxIsolates ? this.createWorker() : undefined);
    if (ready) {
      ready.uses++;
      return ready;
    }
    return new Promise((resolve) => this.waiting.push((w) => {
      w.uses++;
      resolve(w);
    }));
  }

  private release(w: Worker, discard: boolean): void {
    if (discard || this.closed || w.isolate.isDisposed || w.uses >= this.maxUses) {
      disposeQuietly(w.isolate);
      this.live--;
      // Replace a discarded isolate off the request path so the next call is still warm.
      if (!this.closed) {
        setImmediate(() => {
          if (this.closed || this.live >= this.maxIsolates) return;
          const next = this.waiting.shift();
          if (next) next(this.createWorker());
          else if (this.idle.length < this.maxIdle) this.idle.push(this.createWorker());
        });
      }
      return;
    }
    const next = this.waiting.shift();
    if (next) return next(w);
    if (this.idle.length >= this.maxIdle) {
      disposeQuietly(w.isolate);
      this.live--;
      return;
    }
    this.idle.push(w);
  }
}

function parseOutcome(raw: string): InvokeResult {
  const o = JSON.parse(raw) as { kind: string; logs: LogLine[]; message?: string } & Record<string, unknown>;
  if (o.kind === 'error') return { kind: 'error', code: 'lambda_error', message: String(o.message), logs: o.logs };
  return o as unknown as InvokeResult;
}

function disposeQuietly(isolate: ivm.Isolate): void {
  if (isolate.isDisposed) return;
  try { isolate.dispose(); } catch { /* already gone */ }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function isTimeoutError(err: unknown): boolean {
  return err instanceof Error && /^Script execution timed out\.?$/.test(err.message);
}

function isMemoryError(err: unknown): boolean {
  return err instanceof Error && /^Isolate was disposed during execution due to memory limit/.test(err.message);
}
