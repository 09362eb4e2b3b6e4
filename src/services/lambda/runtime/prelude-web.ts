/**
 * The part of the prelude (prelude.ts, inside its closure and after its Headers and Response) that
 * gives lambdas the web platform V8 lacks and the handler's `ctx` (README: Handler, ctx; Fetch):
 * URL, URLSearchParams, TextEncoder, TextDecoder, atob, btoa, crypto, Request, fetch, and
 * `ctx.env` / `ctx.platform`. Parsing, encoding and hashing are done by Node through one synchronous
 * host reference (host-utils.ts); fetch and the platform bindings through one asynchronous host
 * reference of the invocation (bridge.ts). Both take and return copied strings and ArrayBuffers
 * only. What the host answers is trusted no more than it needs to be: a bad answer fails the call.
 */
export const PRELUDE_WEB = String.raw`
  // ---- Host references (connected once by the runtime, before any user code runs)
  let utilRef = null, callRef = null, refApplySync = null, refApply = null;
  const SYNC_OPTIONS = { __proto__: null, arguments: { __proto__: null, copy: true }, result: { __proto__: null, copy: true } };
  const ASYNC_OPTIONS = { __proto__: null, arguments: { __proto__: null, copy: true }, result: { __proto__: null, promise: true, copy: true } };
  const strIndexOf = String.prototype.indexOf, strSplit = String.prototype.split;
  const symbolIterator = Symbol.iterator;

  class DOMException extends ErrorCtor {
    #name;
    constructor(message, name) { super(message === undefined ? '' : StringCtor(message)); this.#name = name === undefined ? 'Error' : StringCtor(name); }
    get name() { return this.#name; }
  }
  /** A host error ("<Kind>: <message>", see host-utils.ts) as that error class of the isolate. */
  function raise(e) {
    const m = messageOf(e);
    const at = apply(strIndexOf, m, [': ']);
    const kind = at > 0 ? slice(m, 0, at) : '';
    const text = at > 0 ? slice(m, at + 2) : m;
    if (kind === 'TypeError') return new TypeErrorCtor(text);
    if (kind === 'RangeError') return new RangeErrorCtor(text);
    if (slice(kind, 0, 13) === 'DOMException/') return new DOMException(text, slice(kind, 13));
    return new TypeErrorCtor(m);
  }
  util = function (op, a, b, c, d) {
    if (utilRef === null) throw new TypeErrorCtor(op + ' is not available');
    try { return apply(refApplySync, utilRef, [undefined, [op, a, b, c, d], SYNC_OPTIONS]); }
    catch (e) { throw raise(e); }
  };
  /** An asynchronous call of the invocation's host: resolves [metaJson, ArrayBuffer]. */
  async function hostCall(op, meta, body) {
    if (callRef === null) throw new TypeErrorCtor(op + ' is not available here');
    let answer;
    try { answer = await apply(refApply, callRef, [undefined, [op, stringify(meta), body], ASYNC_OPTIONS]); }
    catch (e) { throw raise(e); }
    // A failure comes back as ["!<message>", empty] (sandbox.ts).
    if (typeof answer[0] !== 'string') throw new TypeErrorCtor(op + ': malformed answer');
    if (answer[0][0] === '!') throw raise(slice(answer[0], 1));
    return answer;
  }
  function connect(utilities, calls) {
    if (refApplySync !== null) return;
    utilRef = utilities; refApplySync = utilities.applySync;
    callRef = calls; refApply = calls.apply;
  }

  // ---- URLSearchParams and URL (WHATWG URL, parsed and serialised by Node)
  let paramsList, paramsLink, paramsReplace;
  function isParams(v) { return paramsList(v) !== null; }
  function paramsText(v) { return util('params.serialize', stringify(paramsList(v))); }
  class URLSearchParams {
    #list = []; #url = null;
    constructor(init) {
      if (init === undefined || init === null) return;
      if (typeof init === 'object' || typeof init === 'function') {
        if (#list in init) { const l = init.#list; for (let i = 0; i < l.length; i++) this.#list.push([l[i][0], l[i][1]]); return; }
        if (typeof init[symbolIterator] === 'function') {
          for (const pair of init) {
            const p = [...pair];
            if (p.length !== 2) throw new TypeErrorCtor('URLSearchParams: each pair must have exactly two items');
            this.#list.push([StringCtor(p[0]), StringCtor(p[1])]);
          }
          return;
        }
        const keys = objectKeys(init);
        for (let i = 0; i < keys.length; i++) this.#list.push([keys[i], StringCtor(init[keys[i]])]);
        return;
      }
      let text = StringCtor(init);
      if (text[0] === '?') text = slice(text, 1);
      this.#list = parse(util('params.parse', text));
    }
    #changed() { if (this.#url !== null) urlSetSearch(this.#url, this.toString()); }
    get size() { return this.#list.length; }
    append(name, value) { this.#list.push([StringCtor(name), StringCtor(value)]); this.#changed(); }
    delete(name, value) {
      const n = StringCtor(name), v = value === undefined ? undefined : StringCtor(value);
      this.#list = this.#list.filter((p) => !(p[0] === n && (v === undefined || p[1] === v)));
      this.#changed();
    }
    get(name) { const n = StringCtor(name); for (const p of this.#list) if (p[0] === n) return p[1]; return null; }
    getAll(name) { const n = StringCtor(name); return this.#list.filter((p) => p[0] === n).map((p) => p[1]); }
    has(name, value) {
      const n = StringCtor(name), v = value === undefined ? undefined : StringCtor(value);
      return this.#list.some((p) => p[0] === n && (v === undefined || p[1] === v));
    }
    set(name, value) {
      const n = StringCtor(name), v = StringCtor(value);
      const at = this.#list.findIndex((p) => p[0] === n);
      if (at < 0) this.#list.push([n, v]);
      else { this.#list[at] = [n, v]; this.#list = this.#list.filter((p, i) => i <= at || p[0] !== n); }
      this.#changed();
    }
    sort() {
      // Stable, by UTF-16 code units of the names.
      const indexed = this.#list.map((p, i) => [p, i]);
      indexed.sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1]));
      this.#list = indexed.map((x) => x[0]);
      this.#changed();
    }
    forEach(fn, thisArg) { for (const p of [...this.#list]) apply(fn, thisArg, [p[1], p[0], this]); }
    *entries() { for (const p of [...this.#list]) yield [p[0], p[1]]; }
    *keys() { for (const p of [...this.#list]) yield p[0]; }
    *values() { for (const p of [...this.#list]) yield p[1]; }
    [Symbol.iterator]() { return this.entries(); }
    toString() { return util('params.serialize', stringify(this.#list)); }
    static {
      paramsList = (v) => (v !== null && typeof v === 'object' && #list in v ? v.#list : null);
      paramsLink = (params, url) => { params.#url = url; };
      paramsReplace = (params, search) => { params.#list = parse(util('params.parse', search[0] === '?' ? slice(search, 1) : search)); };
    }
  }

  let urlSetSearch, urlHref;
  class URL {
    #parts; #params = null;
    constructor(url, base) {
      this.#parts = parse(util('url.parse', StringCtor(url), base === undefined ? undefined : StringCtor(base)));
    }
    static canParse(url, base) { return util('url.canParse', StringCtor(url), base === undefined ? undefined : StringCtor(base)); }
    static parse(url, base) { try { return new URL(url, base); } catch (e) { return null; } }
    #set(name, value) {
      this.#parts = parse(util('url.set', this.#parts.href, name, StringCtor(value)));
      if (this.#params !== null) paramsReplace(this.#params, this.#parts.search);
    }
    get href() { return this.#parts.href; }
    set href(v) {
      this.#parts = parse(util('url.parse', StringCtor(v), undefined));
      if (this.#params !== null) paramsReplace(this.#params, this.#parts.search);
    }
    get origin() { return this.#parts.origin; }
    get protocol() { return this.#parts.protocol; }
    set protocol(v) { this.#set('protocol', v); }
    get username() { return this.#parts.username; }
    set username(v) { this.#set('username', v); }
    get password() { return this.#parts.password; }
    set password(v) { this.#set('password', v); }
    get host() { return this.#parts.host; }
    set host(v) { this.#set('host', v); }
    get hostname() { return this.#parts.hostname; }
    set hostname(v) { this.#set('hostname', v); }
    get port() { return this.#parts.port; }
    set port(v) { this.#set('port', v); }
    get pathname() { return this.#parts.pathname; }
    set pathname(v) { this.#set('pathname', v); }
    get search() { return this.#parts.search; }
    set search(v) { this.#set('search', v); }
    get hash() { return this.#parts.hash; }
    set hash(v) { this.#set('hash', v); }
    get searchParams() {
      if (this.#params === null) { this.#params = new URLSearchParams(this.#parts.search); paramsLink(this.#params, this); }
      return this.#params;
    }
    toString() { return this.#parts.href; }
    toJSON() { return this.#parts.href; }
    static {
      urlSetSearch = (url, search) => { url.#parts = parse(util('url.set', url.#parts.href, 'search', search)); };
      urlHref = (v) => (v !== null && typeof v === 'object' && #parts in v ? v.#parts.href : null);
    }
  }

  // ---- TextEncoder, TextDecoder (UTF-8 out; UTF-8, UTF-16LE and windows-1252 in)
  function viewBytes(input, what) {
    if (input === undefined) return new Uint8ArrayCtor(0);
    const bytes = bytesOf(input);
    if (bytes === null) throw new TypeErrorCtor(what + ': expected an ArrayBuffer or an ArrayBufferView');
    return bytes;
  }
  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(input) { return utf8Encode(input === undefined ? '' : StringCtor(input)); }
    encodeInto(source, destination) {
      const text = StringCtor(source);
      if (!(destination instanceof Uint8ArrayCtor)) throw new TypeErrorCtor('TextEncoder.encodeInto: the destination must be a Uint8Array');
      const room = destination.length;
      let read = 0, written = 0;
      while (read < text.length) {
        const c = apply(charCodeAt, text, [read]);
        const pair = c >= 0xd800 && c <= 0xdbff && read + 1 < text.length && (apply(charCodeAt, text, [read + 1]) & 0xfc00) === 0xdc00;
        const size = pair ? 4 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
        if (written + size > room) break;
        written += size;
        read += pair ? 2 : 1;
      }
      const bytes = utf8Encode(slice(text, 0, read));
      for (let i = 0; i < bytes.length; i++) destination[i] = bytes[i];
      return { read: read, written: bytes.length };
    }
  }
  class TextDecoder {
    #encoding; #fatal; #ignoreBOM; #pending = null; #streaming = false;
    constructor(label, options) {
      this.#encoding = util('text.decoder', label === undefined ? 'utf-8' : StringCtor(label));
      this.#fatal = options !== undefined && options !== null && options.fatal === true;
      this.#ignoreBOM = options !== undefined && options !== null && options.ignoreBOM === true;
    }
    get encoding() { return this.#encoding; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input, options) {
      let bytes = viewBytes(input, 'TextDecoder.decode');
      const stream = options !== undefined && options !== null && options.stream === true;
      if (this.#pending !== null) {
        const joined = new Uint8ArrayCtor(this.#pending.length + bytes.length);
        joined.set(this.#pending); joined.set(bytes, this.#pending.length);
        bytes = joined; this.#pending = null;
      }
      if (stream) {
        // Bytes of a character not yet complete wait for the next call.
        const keep = incompleteTail(bytes, this.#encoding);
        if (keep > 0) { this.#pending = bytes.slice(bytes.length - keep); bytes = bytes.subarray(0, bytes.length - keep); }
      }
      // A byte order mark is only looked for at the start of a stream.
      const text = util('text.decode', bytesCopy(bytes), this.#encoding, this.#fatal, this.#ignoreBOM || this.#streaming);
      this.#streaming = stream;
      return text;
    }
  }
  function incompleteTail(bytes, encoding) {
    const n = bytes.length;
    if (encoding === 'utf-8') {
      for (let back = 1; back <= 3 && back <= n; back++) {
        const b = bytes[n - back];
        if ((b & 0xc0) === 0x80) continue; // a continuation byte: look further back
        const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
        return need > back ? back : 0;
      }
      return 0;
    }
    if (encoding === 'utf-16le') {
      if (n % 2 === 1) return 1 + (n >= 3 && (bytes[n - 2] & 0xfc) === 0xd8 ? 2 : 0);
      return n >= 2 && (bytes[n - 1] & 0xfc) === 0xd8 ? 2 : 0;
    }
    return 0;
  }

  // ---- atob, btoa, crypto
  function btoa(data) { if (arguments.length === 0) throw new TypeErrorCtor('btoa: 1 argument required'); return util('base64.encode', StringCtor(data)); }
  function atob(data) { if (arguments.length === 0) throw new TypeErrorCtor('atob: 1 argument required'); return util('base64.decode', StringCtor(data)); }
  const INTEGER_ARRAYS = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, BigInt64Array, BigUint64Array];
  function bufferSource(data) {
    const bytes = bytesOf(data);
    if (bytes === null) throw new TypeErrorCtor('expected an ArrayBuffer or an ArrayBufferView');
    return bytesCopy(bytes);
  }
  const subtle = freeze({
    __proto__: null,
    digest(algorithm, data) {
      return new PromiseCtor((resolve, reject) => {
        try {
          const name = typeof algorithm === 'string' ? algorithm : algorithm !== null && typeof algorithm === 'object' ? StringCtor(algorithm.name) : '';
          resolve(util('crypto.digest', name, bufferSource(data)));
        } catch (e) { reject(e); }
      });
    },
  });
  const cryptoObj = freeze({
    __proto__: null,
    randomUUID() { return util('crypto.uuid'); },
    getRandomValues(array) {
      if (!INTEGER_ARRAYS.some((T) => array instanceof T)) throw new DOMException('getRandomValues: an integer typed array is required', 'TypeMismatchError');
      const target = new Uint8ArrayCtor(apply(taBuffer, array, []), apply(taOffset, array, []), apply(taLength, array, []));
      target.set(new Uint8ArrayCtor(util('crypto.random', target.length)));
      return array;
    },
    subtle: subtle,
  });

  // ---- Request and fetch (performed by the host, README: Fetch)
  /**
   * A body and the content type it implies (Fetch standard, extract a body): text stays a string
   * (it crosses to the host as one, and the host encodes it), anything else becomes bytes.
   */
  function extractBody(body) {
    if (body === undefined || body === null) return null;
    if (typeof body === 'string') return { __proto__: null, text: body, bytes: null, type: 'text/plain;charset=UTF-8' };
    if (isParams(body)) return { __proto__: null, text: paramsText(body), bytes: null, type: 'application/x-www-form-urlencoded;charset=UTF-8' };
    const bytes = bytesOf(body);
    if (bytes !== null) return { __proto__: null, text: null, bytes: new Uint8ArrayCtor(bytes), type: null };
    return { __proto__: null, text: StringCtor(body), bytes: null, type: 'text/plain;charset=UTF-8' };
  }
  /** What crosses to the host for a body: its string, a copy of its bytes, or undefined. */
  function bodyForHost(body) { return body === null ? undefined : body.text !== null ? body.text : bytesCopy(body.bytes); }
  const NORMALISED_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH'];
  function requestMethod(value) {
    const m = StringCtor(value);
    if (!matches(TOKEN, m)) throw new TypeErrorCtor('Request: ' + clip(stringify(m), 40) + ' is not a valid method');
    const upper = apply(String.prototype.toUpperCase, m, []);
    if (upper === 'CONNECT' || upper === 'TRACE' || upper === 'TRACK') throw new TypeErrorCtor('Request: method ' + upper + ' is forbidden');
    return NORMALISED_METHODS.includes(upper) ? upper : m;
  }
  let readRequest;
  class Request extends Body {
    #url; #method; #headers; #body; #redirect;
    constructor(input, init) {
      super();
      if (init === undefined || init === null) init = {};
      let from = null;
      if (input !== null && typeof input === 'object' && #url in input) from = input;
      const href = from !== null ? from.#url : urlHref(input) ?? StringCtor(input);
      let url;
      try { url = new URL(href); } catch (e) { throw new TypeErrorCtor('Request: invalid URL ' + clip(stringify(href), 200) + ' (a lambda has no base URL: give an absolute one)'); }
      if (url.username !== '' || url.password !== '') throw new TypeErrorCtor('Request: URLs with credentials are refused');
      this.#url = url.href;
      this.#method = init.method !== undefined ? requestMethod(init.method) : from !== null ? from.#method : 'GET';
      this.#headers = new Headers(init.headers !== undefined ? init.headers : from !== null ? from.#headers : undefined);
      const redirect = init.redirect !== undefined ? StringCtor(init.redirect) : from !== null ? from.#redirect : 'follow';
      if (redirect !== 'follow' && redirect !== 'manual' && redirect !== 'error') throw new TypeErrorCtor('Request: redirect must be follow, manual or error');
      this.#redirect = redirect;
      let body = null;
      if (init.body !== undefined && init.body !== null) {
        body = extractBody(init.body);
        if (body.type !== null) headersSetDefault(this.#headers, body.type);
      } else if (from !== null && from.#body !== null) {
        if (bodyState(from).used) throw new TypeErrorCtor('Request: the body of the given Request has already been consumed');
        body = from.#body;
      }
      if (body !== null && (this.#method === 'GET' || this.#method === 'HEAD')) throw new TypeErrorCtor('Request with GET/HEAD method cannot have body.');
      this.#body = body;
      if (body !== null && body.text !== null) setBodyState(this, 'text', body.text);
      else setBodyState(this, 'bytes', body === null ? new Uint8ArrayCtor(0) : body.bytes);
    }
    get url() { return this.#url; }
    get method() { return this.#method; }
    get headers() { return this.#headers; }
    get redirect() { return this.#redirect; }
    clone() {
      if (bodyState(this).used) throw new TypeErrorCtor('Request.clone: the body has already been consumed');
      return new Request(this);
    }
    static {
      readRequest = (r) => {
        const h = readHeaders(r.#headers);
        const pairs = [];
        for (let i = 0; i < h.names.length; i++) pairs.push([h.names[i], h.values[i]]);
        return { __proto__: null, url: r.#url, method: r.#method, headers: pairs, redirect: r.#redirect, body: bodyForHost(r.#body) };
      };
    }
  }
  /** What the host answered ([metaJson, body as a string or an ArrayBuffer]) as a Response. */
  function answered(answer) {
    const meta = parse(answer[0]);
    const headers = new Headers();
    for (let i = 0; i < meta.headers.length; i++) {
      try { headers.append(meta.headers[i][0], meta.headers[i][1]); } catch (e) { /* a header the web API cannot hold */ }
    }
    return fetchedResponse({ status: meta.status, statusText: meta.statusText, headers: headers, url: meta.url, redirected: meta.redirected }, typeof answer[1] === 'string' ? answer[1] : new Uint8ArrayCtor(answer[1]));
  }
  async function fetch(input, init) {
    const r = readRequest(new Request(input, init));
    return answered(await hostCall('fetch', { __proto__: null, url: r.url, method: r.method, headers: r.headers, redirect: r.redirect }, r.body));
  }

  // ---- ctx: env and the platform bindings (README: Bindings)
  class PlatformError extends ErrorCtor {
    constructor(message, status, code) { super(message); this.status = status; this.code = code; }
    get name() { return 'PlatformError'; }
  }
  const enc = encodeURIComponent;
  const slashPath = (path) => apply(strSplit, StringCtor(path), ['/']).map(enc).join('/');
  async function request(service, path, init) {
    if (init === undefined || init === null) init = {};
    const p = StringCtor(path);
    if (p[0] !== '/') throw new TypeErrorCtor('platform.request: the path must start with "/"');
    const method = init.method === undefined ? 'GET' : requestMethod(init.method);
    const headers = new Headers(init.headers);
    const extracted = extractBody(init.body);
    if (extracted !== null && extracted.type !== null) headersSetDefault(headers, extracted.type);
    const body = bodyForHost(extracted);
    const h = readHeaders(headers);
    const pairs = [];
    for (let i = 0; i < h.names.length; i++) pairs.push([h.names[i], h.values[i]]);
    return answered(await hostCall('platform', { __proto__: null, service: StringCtor(service), method: method, path: p, headers: pairs }, body));
  }
  /** The answer's body, or a PlatformError with the service's error envelope. */
  async function expectOk(service, method, path, response, what) {
    if (response.status >= 200 && response.status < 300) return what === 'json' ? (response.status === 204 ? null : response.json()) : what === 'lines' ? lines(await response.text()) : response;
    let code = 'error', message = '';
    try { const e = (await response.json()).error; code = StringCtor(e.code); message = StringCtor(e.message); } catch (x) { /* not an envelope */ }
    throw new PlatformError(service + ' ' + method + ' ' + path + ': ' + response.status + ' ' + code + (message === '' ? '' : ': ' + message), response.status, code);
  }
  /** NDJSON: one value a line; a line {"error":{status, code, message}} ends it with that error. */
  function lines(text) {
    const out = [];
    const parts = apply(strSplit, text, ['\n']);
    for (let i = 0; i < parts.length; i++) {
      if (parts[i] === '') continue;
      const v = parse(parts[i]);
      if (v !== null && typeof v === 'object' && objectKeys(v).length === 1 && v.error !== null && typeof v.error === 'object' && typeof v.error.code === 'string')
        throw new PlatformError('docdb: ' + v.error.code + ': ' + StringCtor(v.error.message) + ' (after ' + out.length + ' documents)', v.error.status, v.error.code);
      out.push(v);
    }
    return out;
  }
  async function call(service, method, path, init, what) {
    return expectOk(service, method, path, await request(service, path, { __proto__: null, method: method, headers: init && init.headers, body: init && init.body }), what);
  }
  const json = (value) => ({ __proto__: null, headers: { 'content-type': 'application/json' }, body: stringify(value) });
  function traversal(filter, options) {
    const o = options === undefined || options === null ? {} : options;
    const body = { filter: filter === undefined ? {} : filter, limit: o.limit === undefined ? -1 : o.limit };
    for (const k of ['index', 'skip', 'value', 'reverse', 'from', 'to']) if (o[k] !== undefined) body[k] = o[k];
    return body;
  }
  function ndjson(documents) {
    const list = isArray(documents) ? documents : [documents];
    let text = '';
    for (let i = 0; i < list.length; i++) text = text + stringify(list[i]) + '\n';
    return text;
  }
  const platform = freeze({
    __proto__: null,
    request: request,
    docdb(databaseId) {
      const base = '/v1/databases/' + enc(StringCtor(databaseId)) + '/collections/';
      return freeze({
        __proto__: null,
        collection(name) {
          const c = base + enc(StringCtor(name));
          return freeze({
            __proto__: null,
            find: (filter, options) => call('docdb', 'POST', c + ':find', json(traversal(filter, options)), 'lines'),
            findOne: async (filter, options) => (await call('docdb', 'POST', c + ':find', json({ ...traversal(filter, options), limit: 1 }), 'lines'))[0] ?? null,
            insert: async (documents) => {
              const text = ndjson(documents);
              return text === '' ? [] : call('docdb', 'POST', c + ':insert', { headers: { 'content-type': 'application/x-ndjson' }, body: text }, 'lines');
            },
            patch: (filter, patch, options) => call('docdb', 'POST', c + ':patch', json({ ...traversal(filter, options), patch: patch }), 'lines'),
            remove: (filter, options) => call('docdb', 'POST', c + ':remove', json(traversal(filter, options)), 'lines'),
            get: async (id) => (await call('docdb', 'GET', c + '/documents/' + enc(StringCtor(id)), undefined, 'json')).document,
          });
        },
      });
    },
    files(bucketId) {
      const base = '/v1/buckets/' + enc(StringCtor(bucketId));
      return freeze({
        __proto__: null,
        get: (path) => call('files', 'GET', base + '/files/' + slashPath(path), undefined, 'response'),
        put: (path, body, type) => call('files', 'PUT', base + '/files/' + slashPath(path), { headers: type === undefined ? undefined : { 'content-type': StringCtor(type) }, body: body }, 'json'),
        list: (prefix) => call('files', 'GET', prefix === undefined || prefix === '' ? base + '/list' : base + '/list/' + slashPath(prefix), undefined, 'json'),
        delete: (path) => call('files', 'DELETE', base + '/files/' + slashPath(path), undefined, 'json'),
      });
    },
    config: freeze({
      __proto__: null,
      get: async () => (await call('config', 'GET', '/v1/config', undefined, 'json')).entries,
      patch: async (entries) => (await call('config', 'PATCH', '/v1/config', json({ entries: entries }), 'json')).entries,
    }),
    kv(collection) {
      const base = '/v1/collections/' + enc(StringCtor(collection)) + '/keys/';
      return freeze({
        __proto__: null,
        async get(key) {
          const path = base + slashPath(key);
          const response = await request('kv', path);
          if (response.status === 404) return null;
          return (await expectOk('kv', 'GET', path, response, 'json')).value;
        },
        async set(key, value) {
          const path = base + slashPath(key);
          try {
            return await call('kv', 'POST', path, json({ value: value }), 'json');
          } catch (e) {
            // A collection is made by its first write, as docdb's are by their first insert.
            if (!(e instanceof PlatformError) || e.status !== 404 || e.code !== 'missing_collection') throw e;
          }
          await call('kv', 'POST', '/v1/collections', json({ name: StringCtor(collection) }), 'json');
          return call('kv', 'POST', path, json({ value: value }), 'json');
        },
        delete: (key) => call('kv', 'DELETE', base + slashPath(key), undefined, 'json'),
      });
    },
    logs(loggerId) {
      const path = '/v1/loggers/' + enc(StringCtor(loggerId)) + '/ingest';
      return freeze({
        __proto__: null,
        write: (line) => {
          const text = isArray(line) ? line.map((l) => StringCtor(l) + '\n').join('') : StringCtor(line) + '\n';
          return call('logs', 'POST', path, { headers: { 'content-type': 'text/plain; charset=utf-8' }, body: text }, 'json');
        },
      });
    },
  });
  /** The handler's second argument: the invocation, its lambda, env (secrets merged in) and the bindings. */
  // ctx.trigger arrived as JSON, so it is plain data of this context: frozen all the way down.
  function deepFreeze(value) {
    if (value !== null && typeof value === 'object') {
      const names = objectKeys(value);
      for (let i = 0; i < names.length; i++) deepFreeze(value[names[i]]);
      freeze(value);
    }
    return value;
  }

  function makeCtx(data) {
    const env = { __proto__: null };
    const given = data !== null && data.env !== null && typeof data.env === 'object' ? data.env : {};
    const names = objectKeys(given);
    for (let i = 0; i < names.length; i++) env[names[i]] = StringCtor(given[names[i]]);
    return freeze({
      invocation_id: data !== null ? data.invocation_id : undefined,
      lambda: data !== null && data.lambda ? freeze({ id: data.lambda.id, name: data.lambda.name }) : undefined,
      env: freeze(env),
      trigger: data !== null && data.trigger !== null && typeof data.trigger === 'object' ? deepFreeze(data.trigger) : undefined,
      platform: platform,
    });
  }

  function defineMissing(name, value) {
    if (getOwnPropertyDescriptor(g, name) === undefined) defineProperty(g, name, { value: value, writable: true, configurable: true });
  }
  defineMissing('DOMException', DOMException);
  defineMissing('URL', URL);
  defineMissing('URLSearchParams', URLSearchParams);
  defineMissing('TextEncoder', TextEncoder);
  defineMissing('TextDecoder', TextDecoder);
  defineMissing('atob', atob);
  defineMissing('btoa', btoa);
  defineMissing('crypto', cryptoObj);
  defineMissing('Request', Request);
  defineMissing('fetch', fetch);
`;
