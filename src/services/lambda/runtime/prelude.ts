import { PRELUDE_WEB } from './prelude-web.ts';

/** Limits the prelude enforces inside the isolate; the host checks the same ones again. */
export interface PreludeLimits {
  /** Largest response body, in UTF-16 code units for text (bytes for binary bodies). */
  maxBody: number;
  /** Characters of console output per invocation, all lines together. */
  maxLogChars: number;
  /** Console lines per invocation. */
  maxLogLines: number;
  /** Characters of an error message. */
  maxMessage: number;
  /** Headers of a returned Response. */
  maxHeaders: number;
  /** Characters of a returned Response's header names and values together. */
  maxHeaderChars: number;
}

/**
 * JavaScript that runs inside every fresh sandbox context before the user's code. It defines the
 * globals lambdas may use (console, write, Response, Headers, req/body/query/headers) and the
 * finishing step that turns a handler's result into one string for the host.
 *
 * User code runs in the same context afterwards and may replace any global or prototype method
 * (`JSON.stringify`, `Array.prototype.push`, `Promise.prototype.then`, `Response[Symbol.hasInstance]`
 * …). So the prelude captures every intrinsic it needs while the context is still pristine, calls
 * methods only through the captured `Reflect.apply`, keeps its state in closures and private class
 * fields, builds what it hands to the host from null-prototype objects and arrays (nothing for
 * `toJSON`, setters or iterators to hook) and awaits with `await` (no `then` or species lookup on
 * native promises). What crosses the boundary is a single primitive string:
 * `<meta length>\n<meta JSON><body>`, where the body is never longer than `maxBody`. The host still
 * validates all of it (runtime/sandbox.ts), as if the prelude had been subverted.
 */
export function preludeSource(limits: PreludeLimits): string {
  return `(function (LIMITS) {\n${PRELUDE_BODY}\n})(${JSON.stringify(limits)});`;
}

const PRELUDE_BODY = String.raw`
  'use strict';
  const g = globalThis;
  const MAX_BODY = LIMITS.maxBody, MAX_LOG = LIMITS.maxLogChars, MAX_LINES = LIMITS.maxLogLines;
  const MAX_MESSAGE = LIMITS.maxMessage, MAX_HEADERS = LIMITS.maxHeaders, MAX_HEADER_CHARS = LIMITS.maxHeaderChars;

  // Intrinsics, captured before any user code can replace them.
  const apply = Reflect.apply;
  const defineProperty = Object.defineProperty, freeze = Object.freeze, setPrototypeOf = Object.setPrototypeOf;
  const getPrototypeOf = Object.getPrototypeOf, getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor, objectKeys = Object.keys;
  const isArray = Array.isArray, stringify = JSON.stringify, parse = JSON.parse;
  const StringCtor = String, NumberCtor = Number, isInteger = Number.isInteger, fromCharCode = String.fromCharCode;
  const toLowerCase = String.prototype.toLowerCase, charCodeAt = String.prototype.charCodeAt, strSlice = String.prototype.slice;
  const regexpExec = RegExp.prototype.exec;
  const PromiseCtor = Promise, ErrorCtor = Error, TypeErrorCtor = TypeError, RangeErrorCtor = RangeError;
  const Uint8ArrayCtor = Uint8Array, isView = ArrayBuffer.isView;
  const getter = (proto, name) => getOwnPropertyDescriptor(proto, name).get;
  const abByteLength = getter(ArrayBuffer.prototype, 'byteLength');
  const typedArrayProto = getPrototypeOf(Uint8Array.prototype);
  const taBuffer = getter(typedArrayProto, 'buffer'), taOffset = getter(typedArrayProto, 'byteOffset'), taLength = getter(typedArrayProto, 'byteLength');
  const dvBuffer = getter(DataView.prototype, 'buffer'), dvOffset = getter(DataView.prototype, 'byteOffset'), dvLength = getter(DataView.prototype, 'byteLength');
  const TOKEN = /^[!#$%&'*+\-.^_${'`'}|~0-9A-Za-z]+$/;
  const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

  // Null-prototype arrays: index writes and JSON.stringify never consult a prototype.
  const list = () => { const a = []; setPrototypeOf(a, null); return a; };
  const lower = (s) => apply(toLowerCase, s, []);
  const slice = (s, from, to) => apply(strSlice, s, [from, to]);
  const matches = (re, s) => apply(regexpExec, re, [s]) !== null;

  // Per-call state, reset by install().
  let logs = list(), logSize = 0, logCount = 0;
  let written = '', wroteAny = false, writtenTooLarge = false;
  let currentReq, currentCtx, moduleNs;

  function fmt(v) {
    if (typeof v === 'string') return v;
    try { const s = stringify(v); if (typeof s === 'string') return s; } catch (e) { /* fall through */ }
    try { return StringCtor(v); } catch (e) { return '[value that cannot be shown]'; }
  }
  function clip(s, max) { return s.length > max ? slice(s, 0, max) : s; }
  function messageOf(e) {
    let s;
    try {
      s = e !== null && typeof e === 'object' && e instanceof ErrorCtor ? e.message : e;
      s = typeof s === 'string' ? s : fmt(s);
    } catch (x) { s = 'lambda threw a value that cannot be shown'; }
    return clip(s, MAX_MESSAGE);
  }

  function log(level) {
    return function () {
      if (logCount >= MAX_LINES || logSize >= MAX_LOG) return;
      const n = arguments.length;
      let line = '';
      for (let i = 0; i < n; i++) {
        const piece = fmt(arguments[i]);
        line = i === 0 ? piece : line + ' ' + piece;
        if (line.length >= MAX_LOG - logSize) break;
      }
      line = clip(line, MAX_LOG - logSize);
      logSize += line.length;
      logs[logCount] = { __proto__: null, level: level, message: line };
      logCount++;
    };
  }
  const consoleObj = { log: log('log'), info: log('info'), debug: log('debug'), warn: log('warn'), error: log('error'), trace: log('trace') };

  function write(text) {
    wroteAny = true;
    let s;
    if (typeof text === 'string') s = text;
    else if (text === undefined || text === null) s = '';
    else if (typeof text === 'object') s = fmt(text);
    else s = StringCtor(text);
    if (writtenTooLarge) return;
    if (written.length + s.length > MAX_BODY) { writtenTooLarge = true; written = ''; return; }
    written = written + s;
  }

  function headerName(name) {
    const n = StringCtor(name);
    if (!matches(TOKEN, n)) throw new TypeErrorCtor('invalid header name: ' + clip(stringify(n), 200));
    return lower(n);
  }
  function isHttpSpace(c) { return c === 9 || c === 10 || c === 13 || c === 32; }
  function headerValue(value) {
    const v = StringCtor(value);
    let start = 0, end = v.length;
    while (start < end && isHttpSpace(apply(charCodeAt, v, [start]))) start++;
    while (end > start && isHttpSpace(apply(charCodeAt, v, [end - 1]))) end--;
    const trimmed = start === 0 && end === v.length ? v : slice(v, start, end);
    if (matches(BAD_VALUE, trimmed)) throw new TypeErrorCtor('invalid header value (CR, LF, NUL, control characters and characters beyond one byte are not allowed)');
    return trimmed;
  }

  let readHeaders, headersSet, headersHas;
  class Headers {
    #names = list();
    #values = list();
    constructor(init) {
      if (init === undefined || init === null) return;
      if (typeof init !== 'object' && typeof init !== 'function') throw new TypeErrorCtor('Headers: init must be an object, an array of pairs or a Headers');
      if (#names in init) {
        const n = init.#names, v = init.#values;
        for (let i = 0; i < n.length; i++) this.#add(n[i], v[i], false);
      } else if (isArray(init)) {
        const length = init.length;
        for (let i = 0; i < length; i++) {
          const pair = init[i];
          if (pair === null || typeof pair !== 'object' || pair.length !== 2) throw new TypeErrorCtor('Headers: each pair must be [name, value]');
          this.#add(headerName(pair[0]), headerValue(pair[1]), false);
        }
      } else {
        const keys = objectKeys(init);
        for (let i = 0; i < keys.length; i++) this.#add(headerName(keys[i]), headerValue(init[keys[i]]), false);
      }
    }
    #find(name) { const n = this.#names; for (let i = 0; i < n.length; i++) if (n[i] === name) return i; return -1; }
    #remove(name) {
      const n = list(), v = list();
      for (let i = 0; i < this.#names.length; i++) if (this.#names[i] !== name) { n[n.length] = this.#names[i]; v[v.length] = this.#values[i]; }
      this.#names = n; this.#values = v;
    }
    #add(name, value, replace) {
      if (replace) this.#remove(name);
      const i = name === 'set-cookie' ? -1 : this.#find(name);
      if (i >= 0) { this.#values[i] = this.#values[i] + ', ' + value; return; }
      const at = this.#names.length;
      this.#names[at] = name; this.#values[at] = value;
    }
    append(name, value) { this.#add(headerName(name), headerValue(value), false); }
    set(name, value) { this.#add(headerName(name), headerValue(value), true); }
    delete(name) { this.#remove(headerName(name)); }
    has(name) { return this.#find(headerName(name)) >= 0; }
    get(name) {
      const n = headerName(name);
      let out = null;
      for (let i = 0; i < this.#names.length; i++) if (this.#names[i] === n) out = out === null ? this.#values[i] : out + ', ' + this.#values[i];
      return out;
    }
    getSetCookie() {
      const out = [];
      for (let i = 0; i < this.#names.length; i++) if (this.#names[i] === 'set-cookie') out.push(this.#values[i]);
      return out;
    }
    forEach(fn, thisArg) {
      const n = this.#names, v = this.#values;
      for (let i = 0; i < n.length; i++) apply(fn, thisArg, [v[i], n[i], this]);
    }
    *entries() { const n = this.#names, v = this.#values; for (let i = 0; i < n.length; i++) yield [n[i], v[i]]; }
    *keys() { const n = this.#names; for (let i = 0; i < n.length; i++) yield n[i]; }
    *values() { const v = this.#values; for (let i = 0; i < v.length; i++) yield v[i]; }
    [Symbol.iterator]() { return this.entries(); }
    static {
      readHeaders = (h) => ({ __proto__: null, names: h.#names, values: h.#values });
      headersSet = (h, name, value) => h.#add(name, value, true);
      headersHas = (h, name) => h.#find(name) >= 0;
    }
  }

  function headersSetDefault(h, type) { if (!headersHas(h, 'content-type')) headersSet(h, 'content-type', type); }

  function bytesOf(body) {
    try { apply(abByteLength, body, []); return new Uint8ArrayCtor(body); } catch (e) { /* not an ArrayBuffer */ }
    if (!isView(body)) return null;
    try { return new Uint8ArrayCtor(apply(taBuffer, body, []), apply(taOffset, body, []), apply(taLength, body, [])); } catch (e) { /* a DataView */ }
    try { return new Uint8ArrayCtor(apply(dvBuffer, body, []), apply(dvOffset, body, []), apply(dvLength, body, [])); } catch (e) { return null; }
  }
  /** Bytes as a string of one char per byte (the host sends it as latin1), or null when too large. */
  function latin1(bytes) {
    const length = apply(taLength, bytes, []);
    if (length > MAX_BODY) return null;
    let out = '';
    const chunk = list();
    for (let i = 0; i < length; i += 8192) {
      const end = i + 8192 < length ? i + 8192 : length;
      chunk.length = 0;
      for (let j = i; j < end; j++) chunk[j - i] = bytes[j];
      out = out + apply(fromCharCode, undefined, chunk);
    }
    return out;
  }

  // Set once by __stratus.connect (below, and prelude-web.ts): the host's utilities and calls.
  let util = null;
  function utf8Decode(bytes) { return util('text.decode', bytesCopy(bytes), 'utf-8', false, false); }
  function utf8Encode(text) { return new Uint8ArrayCtor(util('text.encode', text)); }
  /** A fresh ArrayBuffer holding the bytes of a Uint8Array (what crosses to the host is copied). */
  function bytesCopy(bytes) { return apply(taBuffer, new Uint8ArrayCtor(bytes), []); }
  function latin1Bytes(text) {
    const out = new Uint8ArrayCtor(text.length);
    for (let i = 0; i < text.length; i++) out[i] = apply(charCodeAt, text, [i]);
    return out;
  }

  // A body read once, as the Fetch standard's Body mixin: text(), json(), arrayBuffer(), bodyUsed.
  // kind: 'text' (a string), 'latin1' (bytes held one char per byte), 'bytes' (a Uint8Array).
  function consume(state) {
    if (state.used) throw new TypeErrorCtor('Body has already been consumed');
    state.used = true;
  }
  function bodyText(state) {
    if (state.kind === 'bytes') return utf8Decode(state.value);
    if (state.kind === 'latin1') return utf8Decode(latin1Bytes(state.value));
    return state.value === null ? '' : state.value;
  }
  function bodyBuffer(state) {
    if (state.kind === 'bytes') return bytesCopy(state.value);
    if (state.kind === 'latin1') return bytesCopy(latin1Bytes(state.value));
    return bytesCopy(utf8Encode(state.value === null ? '' : state.value));
  }
  function readBody(state, how) {
    return new PromiseCtor((resolve, reject) => {
      try {
        consume(state);
        resolve(how === 'buffer' ? bodyBuffer(state) : how === 'json' ? parse(bodyText(state)) : bodyText(state));
      } catch (e) { reject(e); }
    });
  }

  // The Fetch standard's Body mixin, shared by Response and Request (prelude-web.ts).
  let bodyState, setBodyState;
  class Body {
    #state = null;
    get body() { return null; }
    get bodyUsed() { return this.#state.used; }
    text() { return readBody(this.#state, 'text'); }
    json() { return readBody(this.#state, 'json'); }
    arrayBuffer() { return readBody(this.#state, 'buffer'); }
    static {
      bodyState = (o) => o.#state;
      setBodyState = (o, kind, value) => { o.#state = { __proto__: null, kind: kind, value: value, used: false }; };
    }
  }

  const FETCHED = {};
  let readResponse, fetchedResponse;
  class Response extends Body {
    #status; #statusText; #headers; #body; #binary = false; #url = ''; #redirected = false;
    constructor(body, init) {
      super();
      if (body === FETCHED) {
        // An answer from the host (fetch, platform bindings): any status, the body as bytes.
        this.#status = init.status; this.#statusText = init.statusText; this.#headers = init.headers;
        this.#url = init.url; this.#redirected = init.redirected;
        // The host sends a UTF-8 text body as a string (no decoding here), other bodies as bytes.
        if (typeof init.body === 'string') {
          this.#body = init.body.length > MAX_BODY ? null : init.body;
          setBodyState(this, 'text', init.body);
        } else setBodyState(this, 'bytes', init.body);
        return;
      }
      if (init === undefined || init === null) init = {};
      const status = init.status === undefined ? 200 : NumberCtor(init.status);
      if (!isInteger(status) || status < 200 || status > 599) throw new RangeErrorCtor('Response status must be an integer from 200 to 599');
      this.#status = status;
      this.#statusText = init.statusText === undefined ? '' : StringCtor(init.statusText);
      this.#headers = new Headers(init.headers);
      let text = null;
      if (body === undefined || body === null) text = '';
      else if (typeof body === 'string') text = body.length > MAX_BODY ? null : body;
      else if (isParams(body)) { text = paramsText(body); headersSetDefault(this.#headers, 'application/x-www-form-urlencoded;charset=UTF-8'); }
      else {
        const bytes = bytesOf(body);
        if (bytes !== null) { this.#binary = true; text = latin1(bytes); }
        else { const s = StringCtor(body); text = s.length > MAX_BODY ? null : s; }
      }
      // null: over the size limit; finish() answers lambda_response_too_large.
      this.#body = text;
      setBodyState(this, this.#binary ? 'latin1' : 'text', text);
      if (typeof body === 'string' && !headersHas(this.#headers, 'content-type')) headersSet(this.#headers, 'content-type', 'text/plain; charset=utf-8');
    }
    get status() { return this.#status; }
    get statusText() { return this.#statusText; }
    get headers() { return this.#headers; }
    get ok() { return this.#status >= 200 && this.#status < 300; }
    get redirected() { return this.#redirected; }
    get url() { return this.#url; }
    get type() { return 'default'; }
    clone() {
      const state = bodyState(this);
      if (state.used) throw new TypeErrorCtor('Response.clone: the body has already been consumed');
      const copy = new Response(FETCHED, { status: this.#status, statusText: this.#statusText, headers: new Headers(this.#headers), url: this.#url, redirected: this.#redirected, body: null });
      copy.#body = this.#body; copy.#binary = this.#binary;
      setBodyState(copy, state.kind, state.value);
      return copy;
    }
    static json(data, init) {
      const s = stringify(data);
      if (typeof s !== 'string') throw new TypeErrorCtor('Response.json: the value is not representable as JSON');
      const r = new Response(s, init);
      headersSet(r.#headers, 'content-type', 'application/json; charset=utf-8');
      return r;
    }
    static redirect(url, status) {
      const code = status === undefined ? 302 : NumberCtor(status);
      if (code !== 301 && code !== 302 && code !== 303 && code !== 307 && code !== 308) throw new RangeErrorCtor('Response.redirect: status must be 301, 302, 303, 307 or 308');
      const r = new Response(null, { status: code });
      headersSet(r.#headers, 'location', headerValue(url));
      return r;
    }
    static {
      readResponse = (v) => {
        if (v === null || typeof v !== 'object' || !(#body in v)) return null;
        // A fetched answer handed back as the lambda's own: its bytes, one char per byte.
        const state = bodyState(v);
        if (state.kind === 'bytes') {
          const body = state.value === null ? '' : latin1(state.value);
          return { __proto__: null, status: v.#status, headers: v.#headers, body: body, binary: true };
        }
        return { __proto__: null, status: v.#status, headers: v.#headers, body: v.#body, binary: v.#binary };
      };
      fetchedResponse = (meta, body) => new Response(FETCHED, { status: meta.status, statusText: meta.statusText, headers: meta.headers, url: meta.url, redirected: meta.redirected, body: body });
    }
  }

  // What crosses to the host: "<meta length>\n<meta JSON><body>", built from null-prototype data.
  function encode(meta, body) {
    meta.logs = logs;
    const text = stringify(meta);
    return text.length + '\n' + text + body;
  }
  function tooLarge() { return encode({ __proto__: null, kind: 'too_large' }, ''); }
  function fail(e) {
    const message = messageOf(e);
    return encode({ __proto__: null, kind: 'error', message: message === '' ? 'lambda failed' : message }, '');
  }
  function finish(value) {
    if (wroteAny) return writtenTooLarge ? tooLarge() : encode({ __proto__: null, kind: 'text' }, written);
    const r = readResponse(value);
    if (r !== null) {
      if (r.body === null) return tooLarge();
      const h = readHeaders(r.headers);
      const count = h.names.length;
      if (count > MAX_HEADERS) return fail(new ErrorCtor('a Response may have at most ' + MAX_HEADERS + ' headers'));
      const pairs = list();
      let chars = 0;
      for (let i = 0; i < count; i++) {
        const pair = list();
        pair[0] = h.names[i]; pair[1] = h.values[i];
        chars += pair[0].length + pair[1].length;
        pairs[i] = pair;
      }
      if (chars > MAX_HEADER_CHARS) return fail(new ErrorCtor('the headers of a Response may have at most ' + MAX_HEADER_CHARS + ' characters'));
      return encode({ __proto__: null, kind: 'response', status: r.status, headers: pairs, binary: r.binary }, r.body);
    }
    let json;
    try { json = stringify(value === undefined ? null : value); }
    catch (e) { return fail(new ErrorCtor('return value is not representable as JSON: ' + messageOf(e))); }
    if (typeof json !== 'string') json = 'null';
    if (json.length > MAX_BODY) return tooLarge();
    return encode({ __proto__: null, kind: 'json' }, json);
  }
  async function settle(value) {
    let resolved;
    try { resolved = await value; } catch (e) { return fail(e); }
    try { return finish(resolved); } catch (e) { return fail(e); }
  }
  // Async functions here only ever return primitive strings: resolving their promise with another
  // promise would look up its (replaceable) 'then'. The host awaits them natively.
  let installError = null;
  async function runModule() {
    if (installError !== null) { const e = installError; installError = null; return fail(e); }
    let handler;
    try { handler = moduleNs === undefined || moduleNs === null ? undefined : moduleNs.default; } catch (e) { return fail(e); }
    if (typeof handler !== 'function') return fail(new TypeErrorCtor('the default export is not a function'));
    let value;
    try { value = handler(currentReq, currentCtx); } catch (e) { return fail(e); }
    try { value = await value; } catch (e) { return fail(e); }
    try { return finish(value); } catch (e) { return fail(e); }
  }
  function install(reqJson, ctxJson) {
    // A warm module context serves many calls in turn: each starts with empty output buffers.
    logs = list(); logSize = 0; logCount = 0;
    written = ''; wroteAny = false; writtenTooLarge = false;
    const req = parse(reqJson);
    currentReq = req;
    currentCtx = makeCtx(ctxJson === undefined ? null : parse(ctxJson));
    g.req = req; g.body = req.body; g.query = req.query; g.headers = req.headers; g.ctx = currentCtx;
  }

${PRELUDE_WEB}

  defineProperty(g, 'console', { value: consoleObj, writable: true, configurable: true });
  defineProperty(g, 'Headers', { value: Headers, writable: true, configurable: true });
  defineProperty(g, 'Response', { value: Response, writable: true, configurable: true });
  defineProperty(g, 'write', { value: write, writable: true, configurable: true });

  // The host's entry points: a frozen, non-writable, non-configurable global (a script cannot even
  // shadow it with a global let). User code may call them, which only affects its own result.
  defineProperty(g, '__stratus', {
    value: freeze({
      __proto__: null,
      install: install,
      bindModule: function (ns) { moduleNs = ns; },
      runModule: runModule,
      callModule: function (reqJson, ctxJson) {
        try { install(reqJson, ctxJson); } catch (e) { installError = e; }
        return runModule();
      },
      connect: connect,
      finishScript: settle,
    }),
    enumerable: false, writable: false, configurable: false,
  });
`;
