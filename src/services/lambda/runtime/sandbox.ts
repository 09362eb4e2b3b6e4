import { createHash } from 'node:crypto';
import ivm from 'isolated-vm';
import { hostUtility } from './host-utils.ts';
import { preludeSource, type PreludeLimits } from './prelude.ts';

/** What the host hands to a lambda as `req` (README: Invocation). Must be JSON-serialisable. */
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

export type LambdaErrorCode = 'lambda_error' | 'lambda_timeout' | 'lambda_memory' | 'lambda_response_too_large';

/**
 * The outcome of one invocation; never throws for anything the user's code does. Everything in it
 * has been checked by the host: a `response` has a status from 200 to 599, header names that are
 * RFC 9110 tokens (lower case) with values free of CR, LF, NUL and other control characters, a body
 * within `maxResponseBytes` (a Buffer when the code returned bytes), and `logs` within the caps.
 */
export type InvokeResult =
  | { kind: 'json'; json: string; logs: LogLine[] }
  | { kind: 'text'; text: string; logs: LogLine[] }
  | { kind: 'response'; status: number; headers: [string, string][]; body: string | Buffer; logs: LogLine[] }
  | { kind: 'error'; code: LambdaErrorCode; message: string; logs: LogLine[] };

/**
 * The host side of one invocation's `fetch` and platform bindings (bridge.ts): `op` is `fetch` or
 * `platform`, `meta` the request as JSON, `body` its text or bytes; answers [response meta JSON,
 * body], the body as a string when it is UTF-8 text (the sandbox then need not decode it).
 * A rejection's message reaches the lambda as `<ErrorName>: <message>` (a TypeError without one).
 */
export interface InvocationHost {
  /** The run has its isolate and its wall-clock limit starts: it ends at `deadline` (Date.now() ms). */
  start?(deadline: number): void;
  call(op: string, meta: string, body: ArrayBuffer | string | undefined): Promise<HostAnswer>;
}

/** [response meta JSON, body as a string (UTF-8 text) or bytes]. */
export type HostAnswer = [string, ArrayBuffer | string];

/** What the handler's `ctx` is made of (besides the bindings): must be JSON-serialisable. */
export interface InvocationContextData {
  invocation_id: string;
  lambda: { id: string; name: string };
  /** The lambda's env with its secrets merged in. */
  env: Record<string, string>;
  /** What started the run (`ctx.trigger`): `{type}` of an HTTP run, or a cron tick's or a task's data. */
  trigger?: Record<string, unknown>;
}

export interface InvokeOptions {
  /**
   * Whose module state this call may see: a module's evaluated context is kept per key and code
   * version and reused by the next call with the same key (the service passes the lambda id).
   * Without a key the call gets a fresh context that nobody else sees.
   */
  contextKey?: string;
  /** Performs this invocation's fetch and bindings; without it they fail inside the lambda. */
  host?: InvocationHost;
  /** The handler's `ctx` data; without it `ctx.env` is empty. */
  ctx?: InvocationContextData;
}

/**
 * A sandbox context and the door to its host calls: the slot names the invocation that may use
 * them now, and is emptied when it ends, so code left running in a warm context (a promise that
 * settles later) can never act for another invocation.
 */
interface SandboxContext {
  context: ivm.Context;
  slot: { host: InvocationHost | null; utilityChars: number };
  calls: ivm.Reference;
  utilities: ivm.Reference;
  /**
   * `__stratus.callModule`, taken before any user code ran (null until then): a warm call is one
   * apply, with no closure source to compile as an evalClosure would.
   */
  callModule: ivm.Reference | null;
}

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
  /** An idle isolate beyond the prewarmed ones is disposed after this long unused (default 10 s). */
  idleRetireMs?: number;
  /** An isolate is retired after this many invocations to bound slow heap growth (default 2000). */
  maxUsesPerIsolate?: number;
  /** Largest response body in bytes (default 6 MiB); above → `lambda_response_too_large`. */
  maxResponseBytes?: number;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
/**
 * A burst leaves up to maxIsolates warm isolates, each a V8 heap of its own with its native state
 * (bench/memory.ts's 30 extra after its lambda load held ~14 MiB of RSS); the ones a steady load
 * does not reuse go.
 */
export const DEFAULT_IDLE_RETIRE_MS = 10_000;
export const DEFAULT_MEMORY_LIMIT_MIB = 128;
export const DEFAULT_MAX_RESPONSE_BYTES = 6 * 1024 * 1024;
/** Console output per invocation: characters of all lines together, and lines. */
export const MAX_LOG_CHARS = 65_536;
export const MAX_LOG_LINES = 1000;
/** Characters of an error message a lambda produces. */
export const MAX_MESSAGE_CHARS = 4096;
/** Headers of a returned Response, and characters of their names and values together. */
export const MAX_RESPONSE_HEADERS = 100;
export const MAX_HEADER_CHARS = 65_536;
/** The outcome's metadata (logs, headers, message) can never be longer than this once encoded. */
const MAX_META_CHARS = 2 * 1024 * 1024;
const LOG_LEVELS = new Set(['log', 'info', 'debug', 'warn', 'error', 'trace']);
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// What Node's http module accepts in a header value (it throws on anything else): no CR, LF, NUL.
const BAD_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
// Any UTF-16 code unit above 0xFF (surrogates included): not one byte.
const NOT_LATIN1 = /[\u0100-\uffff]/;
const COMPILE_CACHE_MAX = 1000;
const SCRIPT_CACHE_PER_ISOLATE = 64;
const MODULE_CONTEXTS_PER_ISOLATE = 16;
/** Input of one web-utility call (URL, text, base64, crypto), and of all of one run's calls together. */
const MAX_UTILITY_INPUT = 16 * 1024 * 1024;
const MAX_UTILITY_INPUT_PER_RUN = 64 * 1024 * 1024;
/** Characters of code whose version is remembered (versionOf). */
const VERSION_CHARS_REMEMBERED = 32 * 1024 * 1024;

interface Compiled {
  form: 'module' | 'script';
  cachedData?: ivm.ExternalCopy<ArrayBuffer>;
}

interface Worker {
  isolate: ivm.Isolate;
  prelude: ivm.Script;
  scripts: Map<string, ivm.Script>;
  /** Evaluated module contexts by lambda (context key) and code version, least recently used first. */
  modules: Map<string, SandboxContext>;
  uses: number;
  /** When it last went back to the idle pool (performance.now()). */
  idleSince: number;
}

class TimeoutSignal extends Error {}

/** One invocation in flight: its worker, the context it runs in, and its wall-clock deadline. */
interface Call {
  worker: Worker;
  sandbox: SandboxContext | undefined;
  /** The context stays warm for the lambda's next call (it is not released when this one ends). */
  keep: boolean;
  timedOut: boolean;
  /** Rejects the deadline the run races against. */
  reject: ((reason: unknown) => void) | undefined;
}

/** The wall-clock limit of a call ran out: its isolate goes, which aborts whatever runs there. */
function expire(call: Call): void {
  call.timedOut = true;
  disposeQuietly(call.worker.isolate);
  call.reject?.(new TimeoutSignal());
}

const ignore = (): undefined => undefined;

/**
 * Runs untrusted JavaScript in isolated-vm isolates (never node:vm). Each invocation gets an
 * isolate from a warm pool; a script gets a fresh context, a module the evaluated context of its
 * own lambda and code version (never another lambda's). Compiled code is cached per code version
 * (V8 cached data, shared by every isolate). The async API runs user code on isolated-vm's own
 * threads, so an endless loop never blocks the Node event loop. What comes back from the sandbox
 * is checked here as untrusted input (decodeOutcome).
 */
export class LambdaRuntime {
  readonly timeoutMs: number;
  readonly memoryLimitMiB: number;
  readonly maxResponseBytes: number;
  private readonly prelude: string;
  private readonly maxIdle: number;
  private readonly maxIsolates: number;
  private readonly maxUses: number;
  private readonly idleRetireMs: number;
  /** Idle isolates kept however long they wait: the prewarmed count. */
  private readonly floor: number;
  private retirer: NodeJS.Timeout | undefined;
  /** Warm isolates, the longest idle first: calls take the last, so a steady load keeps reusing the same few. */
  private readonly idle: Worker[] = [];
  /** Calls waiting for an isolate when maxIsolates are busy, first come first served. */
  private readonly waiting: ((w: Worker) => void)[] = [];
  private live = 0;
  private readonly compiled = new Map<string, Compiled>();
  /** Code → its version (versionOf); keys are the code strings the lambda cache already holds. */
  private readonly versions = new Map<string, string>();
  private versionChars = 0;
  private closed = false;

  constructor(options: RuntimeOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.memoryLimitMiB = options.memoryLimitMiB ?? DEFAULT_MEMORY_LIMIT_MIB;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const limits: PreludeLimits = {
      maxBody: this.maxResponseBytes,
      maxLogChars: MAX_LOG_CHARS,
      maxLogLines: MAX_LOG_LINES,
      maxMessage: MAX_MESSAGE_CHARS,
      maxHeaders: MAX_RESPONSE_HEADERS,
      maxHeaderChars: MAX_HEADER_CHARS,
    };
    this.prelude = preludeSource(limits);
    this.maxIsolates = Math.max(1, options.maxIsolates ?? 32);
    this.maxIdle = Math.min(options.maxIdle ?? this.maxIsolates, this.maxIsolates);
    this.maxUses = options.maxUsesPerIsolate ?? 2000;
    this.idleRetireMs = options.idleRetireMs ?? DEFAULT_IDLE_RETIRE_MS;
    this.floor = Math.min(options.prewarm ?? 2, this.maxIdle);
    for (let i = 0; i < this.floor; i++) this.idle.push(this.createWorker());
  }

  /** Number of warm isolates waiting (for tests and metrics). */
  get idleCount(): number {
    return this.idle.length;
  }

  /** The pool now (metrics): warm isolates waiting, isolates running an invocation, calls waiting for one. */
  poolState(): { idle: number; busy: number; waiting: number } {
    const idle = this.idle.length;
    return { idle, busy: Math.max(0, this.live - idle), waiting: this.waiting.length };
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retirer);
    for (const w of this.idle.splice(0)) disposeWorker(w);
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
    const key = this.versionOf(code);
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

  async invoke(code: string, request: LambdaRequest, options: InvokeOptions = {}): Promise<InvokeResult> {
    if (this.closed) throw new Error('lambda runtime is closed');
    const key = this.versionOf(code);
    const worker = await this.acquire();
    options.host?.start?.(Date.now() + this.timeoutMs);
    let discard = false;
    // Host-side wall clock: covers awaits inside the sandbox (a promise that never settles) that
    // isolated-vm's own `timeout` option does not; disposing the isolate aborts whatever runs.
    // One state object and module-level callbacks: no closures made per call on this path.
    const call: Call = { worker, sandbox: undefined, keep: false, timedOut: false, reject: undefined };
    const deadline = new Promise<never>((_, reject) => (call.reject = reject));
    const timer = setTimeout(expire, this.timeoutMs, call);
    try {
      const run = this.run(call, key, code, request, options);
      run.catch(ignore); // settled by the race below; avoid an unhandled rejection
      const raw = await Promise.race([run, deadline]);
      return decodeOutcome(raw, this.maxResponseBytes);
    } catch (err) {
      discard = true;
      if (call.timedOut || err instanceof TimeoutSignal || isTimeoutError(err)) {
        return {
          kind: 'error',
          code: 'lambda_timeout',
          message: `wall-clock limit of ${this.timeoutMs} ms exceeded`,
          logs: [],
        };
      }
      if (worker.isolate.isDisposed || isMemoryError(err)) {
        // Only a memory-limit kill disposes an isolate we did not dispose ourselves.
        return {
          kind: 'error',
          code: 'lambda_memory',
          message: `memory limit of ${this.memoryLimitMiB} MiB exceeded`,
          logs: [],
        };
      }
      // A compile or load failure, or a throw from a script or a module's top level: the isolate
      // is still healthy. The message is the user's, so it is bounded like any other output.
      discard = false;
      return { kind: 'error', code: 'lambda_error', message: clip(errorMessage(err), MAX_MESSAGE_CHARS), logs: [] };
    } finally {
      clearTimeout(timer);
      const { sandbox } = call;
      if (sandbox) {
        sandbox.slot.host = null;
        if (!call.keep) releaseSandbox(sandbox);
      }
      this.release(worker, discard);
    }
  }

  /** The run in its isolate; `call` learns the context it used and whether that is kept warm. */
  private async run(
    call: Call,
    key: string,
    code: string,
    request: LambdaRequest,
    options: InvokeOptions,
  ): Promise<unknown> {
    const { worker } = call;
    const { isolate } = worker;
    const timeout = this.timeoutMs;
    const reqJson = JSON.stringify(request);
    const ctxJson = options.ctx === undefined ? undefined : JSON.stringify(options.ctx);
    const host = options.host ?? null;
    // Module state belongs to one lambda: contexts are kept per lambda and code version.
    const moduleKey = options.contextKey === undefined ? undefined : `${options.contextKey}\u0000${key}`;
    const warm = moduleKey === undefined ? undefined : worker.modules.get(moduleKey);
    if (moduleKey !== undefined && warm?.callModule) {
      // Module state lives on between calls of the same lambda and code version in this isolate,
      // as in a warm container; the request, output buffers and logs are per call.
      worker.modules.delete(moduleKey);
      worker.modules.set(moduleKey, warm);
      call.sandbox = warm;
      call.keep = true;
      warm.slot.host = host;
      warm.slot.utilityChars = 0;
      return await warm.callModule.apply(undefined, [reqJson, ctxJson], { timeout, result: { promise: true } });
    }
    const context = await isolate.createContext();
    const slot: SandboxContext['slot'] = { host, utilityChars: 0 };
    // The web utilities run on the Node thread: each call and each run get a bounded share of it.
    const utilities = new ivm.Reference((op: unknown, a: unknown, b: unknown, c: unknown, d: unknown) => {
      const size = inputSize(a) + inputSize(b);
      if (size > MAX_UTILITY_INPUT)
        throw new Error(`RangeError: at most ${MAX_UTILITY_INPUT} bytes or characters of input per call`);
      slot.utilityChars += size;
      if (slot.utilityChars > MAX_UTILITY_INPUT_PER_RUN)
        throw new Error(
          `RangeError: URL, text, base64 and crypto calls took more than ${MAX_UTILITY_INPUT_PER_RUN} bytes or characters of input in this invocation`,
        );
      return hostUtility(op, a, b, c, d);
    });
    // Never a rejected promise across the boundary: a failure is answered as ["!<message>", empty].
    const calls = new ivm.Reference(async (op: unknown, meta: unknown, body: unknown): Promise<HostAnswer> => {
      const current = slot.host;
      if (current === null) return ['!TypeError: this invocation has ended', new ArrayBuffer(0)];
      if (
        typeof op !== 'string' ||
        typeof meta !== 'string' ||
        !(body === undefined || typeof body === 'string' || body instanceof ArrayBuffer)
      )
        return ['!TypeError: malformed host call', new ArrayBuffer(0)];
      try {
        return await current.call(op, meta, body);
      } catch (error) {
        return [`!${error instanceof Error ? error.message : String(error)}`, new ArrayBuffer(0)];
      }
    });
    const sandbox: SandboxContext = { context, slot, calls, utilities, callModule: null };
    call.sandbox = sandbox;
    await worker.prelude.run(context, { timeout });
    sandbox.callModule = await context.evalClosure(
      '__stratus.connect($0, $1); return __stratus.callModule',
      [utilities, calls],
      { timeout, result: { reference: true } },
    );
    await context.evalClosure('__stratus.install($0, $1)', [reqJson, ctxJson], { timeout });

    const compiled = this.compiled.get(key) ?? (await this.compile(isolate, key, code));
    if (compiled.form === 'module') {
      const mod = await isolate.compileModule(code, { cachedData: compiled.cachedData, filename: 'lambda.mjs' });
      try {
        await mod.instantiate(context, (specifier) => {
          throw new Error(`import of "${specifier}" is not available in lambdas`);
        });
        await mod.evaluate({ timeout });
        // Handed over as an argument, never through a global the module could have trapped.
        await context.evalClosure('__stratus.bindModule($0)', [mod.namespace.derefInto()], { timeout });
      } finally {
        mod.release();
      }
      if (moduleKey !== undefined) {
        // Keep the evaluated context for this lambda's next call (the caller must not release it).
        call.keep = true;
        if (worker.modules.size >= MODULE_CONTEXTS_PER_ISOLATE) {
          const oldest = worker.modules.keys().next().value;
          if (oldest !== undefined) {
            const evicted = worker.modules.get(oldest);
            if (evicted) releaseSandbox(evicted);
            worker.modules.delete(oldest);
          }
        }
        worker.modules.set(moduleKey, sandbox);
      }
      return await context.eval('__stratus.runModule()', { timeout, promise: true });
    }
    let script = worker.scripts.get(key);
    if (!script) {
      script = await isolate.compileScript(code, { cachedData: compiled.cachedData, filename: 'lambda.js' });
      if (worker.scripts.size >= SCRIPT_CACHE_PER_ISOLATE) {
        const oldest = worker.scripts.keys().next().value;
        if (oldest !== undefined) {
          worker.scripts.get(oldest)?.release();
          worker.scripts.delete(oldest);
        }
      }
      worker.scripts.set(key, script);
    }
    // The completion value stays in the isolate (a reference) and is finished there.
    const ref = await script.run(context, { timeout, reference: true });
    try {
      return await context.evalClosure('return __stratus.finishScript($0)', [ref.derefInto()], {
        timeout,
        result: { promise: true },
      });
    } finally {
      ref.release();
    }
  }

  /**
   * The code version: SHA-256 of the code, remembered for the last code strings seen, so a warm
   * invocation does not hash its code again (1 MiB of code takes milliseconds to hash).
   */
  private versionOf(code: string): string {
    let key = this.versions.get(code);
    if (key === undefined) {
      key = createHash('sha256').update(code).digest('base64');
      this.versionChars += code.length;
      // Bounded by the characters of code held, as the lambda cache is (oldest first out).
      for (const oldest of this.versions.keys()) {
        if (this.versionChars <= VERSION_CHARS_REMEMBERED) break;
        this.versions.delete(oldest);
        this.versionChars -= oldest.length;
      }
    } else this.versions.delete(code);
    // Most recently used last.
    this.versions.set(code, key);
    return key;
  }

  /** Decides module vs script once per code version and produces V8 cached data for it. */
  private async compile(isolate: ivm.Isolate, key: string, code: string): Promise<Compiled> {
    let compiled: Compiled;
    try {
      // A source with `export`/`import` statements is not a valid script; that is the module form.
      const script = (await isolate.compileScript(code, {
        produceCachedData: true,
        filename: 'lambda.js',
      })) as ivm.Script & ivm.CachedDataResult;
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
      if (oldest !== undefined) {
        this.compiled.get(oldest)?.cachedData?.release();
        this.compiled.delete(oldest);
      }
    }
    this.compiled.set(key, compiled);
    return compiled;
  }

  private createWorker(): Worker {
    this.live++;
    const isolate = new ivm.Isolate({ memoryLimit: this.memoryLimitMiB });
    const prelude = isolate.compileScriptSync(this.prelude, { filename: 'stratus-prelude.js' });
    return { isolate, prelude, scripts: new Map(), modules: new Map(), uses: 0, idleSince: performance.now() };
  }

  private acquire(): Promise<Worker> | Worker {
    const ready = this.idle.pop() ?? (this.live < this.maxIsolates ? this.createWorker() : undefined);
    if (ready) {
      ready.uses++;
      return ready;
    }
    return new Promise((resolve) =>
      this.waiting.push((w) => {
        w.uses++;
        resolve(w);
      }),
    );
  }

  private release(w: Worker, discard: boolean): void {
    if (discard || this.closed || w.isolate.isDisposed || w.uses >= this.maxUses) {
      disposeWorker(w);
      this.live--;
      // Replace a discarded isolate off the request path so the next call is still warm.
      if (!this.closed) {
        setImmediate(() => {
          if (this.closed || this.live >= this.maxIsolates) return;
          const next = this.waiting.shift();
          if (next) next(this.createWorker());
          else if (this.idle.length < this.maxIdle) this.makeIdle(this.createWorker());
        });
      }
      return;
    }
    const next = this.waiting.shift();
    if (next) return next(w);
    if (this.idle.length >= this.maxIdle) {
      disposeWorker(w);
      this.live--;
      return;
    }
    this.makeIdle(w);
  }

  private makeIdle(w: Worker): void {
    w.idleSince = performance.now();
    this.idle.push(w);
    this.retireLater();
  }

  /** Disposes the isolates beyond the floor once they have been idle idleRetireMs, oldest first. */
  private retireLater(): void {
    if (this.retirer || this.closed || this.idle.length <= this.floor) return;
    this.retirer = setTimeout(
      () => {
        this.retirer = undefined;
        const cutoff = performance.now() - this.idleRetireMs;
        while (this.idle.length > this.floor && this.idle[0]!.idleSince <= cutoff) {
          disposeWorker(this.idle.shift()!);
          this.live--;
        }
        this.retireLater();
      },
      Math.max(0, this.idle[0]!.idleSince + this.idleRetireMs - performance.now()),
    );
    this.retirer.unref();
  }
}

/**
 * Turns what the sandbox returned into an InvokeResult, trusting none of it: the prelude builds
 * `<meta length>\n<meta JSON><body>` from intrinsics user code cannot replace, but this check is
 * written as if it could. Anything malformed is a `lambda_error`; an oversized body is
 * `lambda_response_too_large`; console lines are capped again.
 */
export function decodeOutcome(raw: unknown, maxResponseBytes: number): InvokeResult {
  if (typeof raw !== 'string') return invalid('not a string');
  if (raw.length > maxResponseBytes + MAX_META_CHARS + 16) return tooLarge(maxResponseBytes, []);
  const newline = raw.indexOf('\n');
  const head = newline > 0 && newline <= 8 ? raw.slice(0, newline) : '';
  if (!/^\d+$/.test(head)) return invalid('no metadata');
  const metaEnd = newline + 1 + Number(head);
  if (metaEnd > raw.length || Number(head) > MAX_META_CHARS) return invalid('truncated metadata');
  const metaText = raw.slice(newline + 1, metaEnd);
  // The common outcome, a JSON value and no console lines: its metadata is this very text (the
  // prelude's encode), so the answer is what the general path below makes of it, without parsing.
  if (metaText === QUIET_JSON_META) {
    const json = raw.slice(metaEnd);
    return textTooLarge(json, maxResponseBytes) ? tooLarge(maxResponseBytes, []) : { kind: 'json', json, logs: [] };
  }
  let meta: unknown;
  try {
    meta = JSON.parse(metaText);
  } catch {
    return invalid('metadata is not JSON');
  }
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return invalid('metadata is not an object');
  const m = meta as Record<string, unknown>;
  const logs = cleanLogs(m.logs);
  const body = raw.slice(metaEnd);
  switch (m.kind) {
    case 'too_large':
      return tooLarge(maxResponseBytes, logs);
    case 'error': {
      const message =
        typeof m.message === 'string' && m.message !== '' ? clip(m.message, MAX_MESSAGE_CHARS) : 'lambda failed';
      return { kind: 'error', code: 'lambda_error', message, logs };
    }
    case 'json':
      return textTooLarge(body, maxResponseBytes)
        ? tooLarge(maxResponseBytes, logs)
        : { kind: 'json', json: body, logs };
    case 'text':
      return textTooLarge(body, maxResponseBytes)
        ? tooLarge(maxResponseBytes, logs)
        : { kind: 'text', text: body, logs };
    case 'response': {
      const status = m.status;
      if (typeof status !== 'number' || !Number.isInteger(status) || status < 200 || status > 599)
        return invalid(
          `status ${clip(JSON.stringify(status) ?? 'undefined', 40)} is not an integer from 200 to 599`,
          logs,
        );
      const headers = checkHeaders(m.headers);
      if (typeof headers === 'string') return invalid(headers, logs);
      if (m.binary === true) {
        if (body.length > maxResponseBytes) return tooLarge(maxResponseBytes, logs);
        if (NOT_LATIN1.test(body)) return invalid('a byte body holds characters beyond one byte', logs);
        return { kind: 'response', status, headers, body: Buffer.from(body, 'latin1'), logs };
      }
      if (m.binary !== false && m.binary !== undefined) return invalid('malformed body flag', logs);
      return textTooLarge(body, maxResponseBytes)
        ? tooLarge(maxResponseBytes, logs)
        : { kind: 'response', status, headers, body, logs };
    }
    default:
      return invalid('unknown kind', logs);
  }
}

function invalid(why: string, logs: LogLine[] = []): InvokeResult {
  return { kind: 'error', code: 'lambda_error', message: `the lambda produced an invalid response: ${why}`, logs };
}

function tooLarge(maxResponseBytes: number, logs: LogLine[]): InvokeResult {
  return {
    kind: 'error',
    code: 'lambda_response_too_large',
    message: `the response body exceeds the limit of ${maxResponseBytes} bytes`,
    logs,
  };
}

/** The metadata of a JSON outcome without console lines, as the prelude encodes it. */
const QUIET_JSON_META = '{"kind":"json","logs":[]}';

/** Whether a text body is over the limit, in characters or in UTF-8 bytes. */
function textTooLarge(text: string, maxResponseBytes: number): boolean {
  return text.length > maxResponseBytes || Buffer.byteLength(text, 'utf8') > maxResponseBytes;
}

/** Header pairs as [lower-case name, value]; a message when any is not a valid header. */
function checkHeaders(value: unknown): [string, string][] | string {
  if (!Array.isArray(value)) return 'headers are not a list';
  if (value.length > MAX_RESPONSE_HEADERS) return `more than ${MAX_RESPONSE_HEADERS} headers`;
  const out: [string, string][] = [];
  let chars = 0;
  for (const pair of value as unknown[]) {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string')
      return 'a header is not a [name, value] pair of strings';
    const [name, text] = pair as [string, string];
    if (!HEADER_NAME.test(name)) return `header name ${clip(JSON.stringify(name), 100)} is not a token`;
    if (BAD_HEADER_VALUE.test(text))
      return `the value of header ${JSON.stringify(name)} holds CR, LF, NUL, a control character or a character beyond one byte`;
    chars += name.length + text.length;
    if (chars > MAX_HEADER_CHARS) return `headers longer than ${MAX_HEADER_CHARS} characters`;
    out.push([name.toLowerCase(), text]);
  }
  return out;
}

/** Console lines within the caps (64 KiB of text, 1,000 lines); malformed entries are dropped. */
function cleanLogs(value: unknown): LogLine[] {
  if (!Array.isArray(value)) return [];
  const out: LogLine[] = [];
  let room = MAX_LOG_CHARS;
  for (const entry of value as unknown[]) {
    if (out.length >= MAX_LOG_LINES || room <= 0) break;
    if (typeof entry !== 'object' || entry === null) continue;
    const { level, message } = entry as { level?: unknown; message?: unknown };
    if (typeof level !== 'string' || !LOG_LEVELS.has(level) || typeof message !== 'string') continue;
    const line = clip(message, room);
    room -= line.length;
    out.push({ level, message: line });
  }
  return out;
}

function clip(text: string, max: number): string {
  return text.length > max ? text.slice(0, max) : text;
}

/** Characters of a string or bytes of an ArrayBuffer handed to a utility; 0 for anything else. */
function inputSize(value: unknown): number {
  return typeof value === 'string' ? value.length : value instanceof ArrayBuffer ? value.byteLength : 0;
}

/** Releases a context and its host door (the isolate may already be gone). */
function releaseSandbox(sandbox: SandboxContext): void {
  sandbox.slot.host = null;
  try {
    sandbox.calls.release();
    sandbox.utilities.release();
    sandbox.callModule?.release();
    sandbox.context.release();
  } catch {
    /* isolate went away meanwhile */
  }
}

/**
 * Retires a worker: its warm contexts' references (the host functions they hold among them) are
 * released now rather than left to the garbage collector, which may only get to them while the
 * process exits, after isolated-vm's own environment is gone; then the isolate goes.
 */
function disposeWorker(w: Worker): void {
  for (const sandbox of w.modules.values()) releaseSandbox(sandbox);
  w.modules.clear();
  for (const script of w.scripts.values()) releaseQuietly(script);
  w.scripts.clear();
  releaseQuietly(w.prelude);
  disposeQuietly(w.isolate);
}

function releaseQuietly(handle: { release(): void }): void {
  try {
    handle.release();
  } catch {
    /* its isolate went away meanwhile */
  }
}

function disposeQuietly(isolate: ivm.Isolate): void {
  if (isolate.isDisposed) return;
  try {
    isolate.dispose();
  } catch {
    /* already gone */
  }
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
